#!/usr/bin/env bash
# Flows view cost (issue #19 item 7): does `dpuctl flows` stall the data path? The appliance
# runs live on one worker core (net_pcap,infinite_rx=1 -> net_null, FLOWS flows of 64 B
# frames from gen_traffic.py, no rules: the fastest path, where a stall shows most), and the
# worker's table holds all FLOWS flows. Alternating windows of WINDOW seconds:
#
#   quiet    nothing but the traffic
#   listing  a loop of `dpuctl flows --sort packets --limit 10` back to back (every call
#            makes the worker walk its whole table: FLOWS flows copied, sorted, 10 sent)
#
# Per window: packets received per second (rx of side A over the window, from GetStats); for
# the listing windows the listings done and their mean wall time. The summary is the ratio of
# the median listing-window rate to the median quiet-window rate.
#
# usage: bench/flows_view_bench.sh [-o OUTDIR] [-f FLOWS] [-w WINDOW] [-r ROUNDS] [-l LCORES]
#                                  [--appliance BIN] [--dpuctl BIN]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
PY=/usr/bin/python3
OUTDIR="" FLOWS=100000 WINDOW=5 ROUNDS=3 LCORES=0,1
APP=$ROOT/build/control/dpu-appliance
CTL=$ROOT/build/control/dpuctl
while [[ $# -gt 0 ]]; do
  case $1 in
    -o) OUTDIR=$2; shift 2 ;;
    -f) FLOWS=$2; shift 2 ;;
    -w) WINDOW=$2; shift 2 ;;
    -r) ROUNDS=$2; shift 2 ;;
    -l) LCORES=$2; shift 2 ;;
    --appliance) APP=$2; shift 2 ;;
    --dpuctl) CTL=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "flows_view_bench: unknown argument $1" >&2; exit 2 ;;
  esac
done
OUTDIR=${OUTDIR:-$(mktemp -d /tmp/flows_view.XXXXXX)}
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
[[ -x $APP && -x $CTL ]] || { echo "flows_view_bench: build first (ninja -C build)" >&2; exit 2; }

"$PY" "$HERE/gen_traffic.py" -o "$OUTDIR/t64.pcap" --flows "$FLOWS" >/dev/null
cat >"$OUTDIR/config.json" <<J
{"dataplane": {"flow_table": {"capacity_per_worker": $((FLOWS * 2))}}}
J
STATE=$OUTDIR/state
rm -rf "$STATE"; mkdir -p "$STATE"
SOCK=unix:$STATE/api.sock
ctl() { "$CTL" --server "$SOCK" "$@"; }

stdbuf -oL -eL "$APP" run --state-dir "$STATE" --config "$OUTDIR/config.json" \
  --mbufs $((FLOWS + 16384)) -- -l "$LCORES" --no-huge --no-pci --no-shconf -m 2048 \
  --file-prefix "fvb$$" --vdev "net_pcap0,rx_pcap=$OUTDIR/t64.pcap,infinite_rx=1" \
  --vdev net_null0,no-rx=1 >"$OUTDIR/appliance.out" 2>"$OUTDIR/appliance.err" &
APID=$!
LOOP=""
cleanup() {
  [[ -n $LOOP ]] && kill "$LOOP" 2>/dev/null || true
  kill -INT $APID 2>/dev/null || true
  wait $APID 2>/dev/null || true
  rm -rf "/var/run/dpdk/fvb$$"
}
trap cleanup EXIT
for _ in $(seq 1 240); do
  grep -q '^dpu-appliance: forwarding' "$OUTDIR/appliance.err" 2>/dev/null && break
  kill -0 $APID 2>/dev/null || { cat "$OUTDIR/appliance.err" >&2; exit 1; }
  sleep 0.5
done
# Warm-up: every flow in the table.
for _ in $(seq 1 600); do
  ctl --json stats >"$OUTDIR/warm.json"
  [[ $("$PY" -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["total"].get("flows_active", 0)))' "$OUTDIR/warm.json") -ge $FLOWS ]] && break
  sleep 0.5
done

: >"$OUTDIR/windows.tsv"
window() {  # name
  local name=$1
  ctl --json stats >"$OUTDIR/s0.json"
  local t0 t1
  t0=$(date +%s.%N)
  if [[ $name == listing ]]; then
    ( n=0; while :; do ctl flows --sort packets --limit 10 >/dev/null; n=$((n + 1)); echo "$n" >"$OUTDIR/listings"; done ) &
    LOOP=$!
  fi
  sleep "$WINDOW"
  if [[ -n $LOOP ]]; then kill "$LOOP"; wait "$LOOP" 2>/dev/null || true; LOOP=""; fi
  t1=$(date +%s.%N)
  ctl --json stats >"$OUTDIR/s1.json"
  local listings=0
  [[ $name == listing && -f $OUTDIR/listings ]] && listings=$(cat "$OUTDIR/listings") && rm -f "$OUTDIR/listings"
  "$PY" - "$OUTDIR/s0.json" "$OUTDIR/s1.json" "$name" "$t0" "$t1" "$listings" >>"$OUTDIR/windows.tsv" <<'PYEOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
name, t0, t1, listings = sys.argv[3], float(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
ra, rb = int(a["total"].get("rx_packets_a", 0)), int(b["total"].get("rx_packets_a", 0))
dt = t1 - t0
print("%s\t%.0f\t%d\t%.3f\t%s" % (name, (rb - ra) / dt, listings, dt / listings if listings else 0, b["total"].get("flows_active", 0)))
PYEOF
}
for _ in $(seq 1 "$ROUNDS"); do
  window quiet
  window listing
done
"$PY" - "$OUTDIR/windows.tsv" "$FLOWS" <<'PYEOF'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
q = [float(r[1]) for r in rows if r[0] == "quiet"]
l = [float(r[1]) for r in rows if r[0] == "listing"]
n = sum(int(r[2]) for r in rows if r[0] == "listing")
per = [float(r[3]) for r in rows if r[0] == "listing" and float(r[3]) > 0]
print("window\trx pps\tlistings\ts per listing\tflows active")
for r in rows:
    print("\t".join(r))
print("flows %s: quiet median %.0f pps, listing median %.0f pps, ratio %.3f; %d listings, %.3f s each (mean)"
      % (sys.argv[2], statistics.median(q), statistics.median(l), statistics.median(l) / statistics.median(q),
         n, statistics.mean(per) if per else 0))
PYEOF
echo "output: $OUTDIR"
