# Sourced by the benchmarks that drive a running appliance through dpuctl while it forwards
# (bench/live_change_bench.sh, bench/flows_view_bench.sh): their shared options and start-up.
# The sourcing script sets HERE (its directory) and ROOT first, and its own defaults after.
#   live_arg OPTION VALUE   the options they all take: -o OUTDIR, -l LCORES, --appliance BIN,
#                           --dpuctl BIN (returns 1 for any other option)
#   live_setup NAME         OUTDIR made absolute (without -o: a temporary directory, removed
#                           at exit), the binaries checked, STATE (state dir), SOCK, ctl()
#   live_start TAG CONFIG MBUFS [run options...]
#                           dpu-appliance run with CONFIG on LCORES, net_pcap reading
#                           OUTDIR/t64.pcap in a loop -> net_null, EAL file prefix TAG<pid>
#                           (tracked with eal_dirs.sh); APID; returns once it forwards
#   live_stop               stops the appliance (SIGINT, then waits) and removes its EAL
#                           runtime directory
#   live_cleanup            live_stop, and the temporary OUTDIR: call it from the EXIT trap
#   live_usage SCRIPT       prints the script's header comment
source "$HERE/eal_dirs.sh"
OUTDIR="" LCORES=0,1 APID="" LIVE_TMP=""
APP=$ROOT/build/control/dpu-appliance
CTL=$ROOT/build/control/dpuctl

live_arg() {
  case $1 in
    -o) OUTDIR=$2 ;;
    -l) LCORES=$2 ;;
    --appliance) APP=$2 ;;
    --dpuctl) CTL=$2 ;;
    *) return 1 ;;
  esac
}

live_setup() {
  local name=$1
  if [[ -z $OUTDIR ]]; then
    OUTDIR=$(mktemp -d "/tmp/$name.XXXXXX")
    LIVE_TMP=$OUTDIR
  fi
  mkdir -p "$OUTDIR"
  OUTDIR=$(cd "$OUTDIR" && pwd)
  [[ -x $APP && -x $CTL ]] || { echo "$name: build first (ninja -C build)" >&2; exit 2; }
  STATE=$OUTDIR/state
  rm -rf "$STATE"
  mkdir -p "$STATE"
  SOCK=unix:$STATE/api.sock
}

live_usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$1"; }

ctl() { "$CTL" --server "$SOCK" "$@"; }

live_start() {
  local tag=$1$$ config=$2 mbufs=$3
  shift 3
  eal_dirs_track "$tag"  # removed at exit, also when the appliance had to be killed
  stdbuf -oL -eL "$APP" run --state-dir "$STATE" --config "$config" --mbufs "$mbufs" "$@" -- \
    -l "$LCORES" --no-huge --no-pci --no-shconf -m 2048 --file-prefix "$tag" \
    --vdev "net_pcap0,rx_pcap=$OUTDIR/t64.pcap,infinite_rx=1" --vdev net_null0,no-rx=1 \
    >"$OUTDIR/appliance.out" 2>"$OUTDIR/appliance.err" &
  APID=$!
  for _ in $(seq 1 240); do
    grep -q '^dpu-appliance: forwarding' "$OUTDIR/appliance.err" 2>/dev/null && return 0
    kill -0 "$APID" 2>/dev/null || { cat "$OUTDIR/appliance.err" >&2; exit 1; }
    sleep 0.5
  done
  echo "live_start: the appliance did not start forwarding in 120 s" >&2
  exit 1
}

live_stop() {
  if [[ -n $APID ]]; then
    kill -INT "$APID" 2>/dev/null || true
    wait "$APID" 2>/dev/null || true
    APID=""
  fi
  eal_dirs_cleanup
}

live_cleanup() {
  live_stop
  [[ -n $LIVE_TMP ]] && rm -rf "$LIVE_TMP"
  return 0
}
