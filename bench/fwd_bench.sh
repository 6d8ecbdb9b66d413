#!/usr/bin/env bash
# Forwarding benchmark on one worker core: dpu-appliance against DPDK's own forwarders, all on
# the same vdevs and lcores with the same traffic, interleaved in one run:
#
#   port 0 = net_pcap0,rx_pcap=PCAP,infinite_rx=1   (side A: replays PCAP forever)
#   port 1 = net_null0,no-rx=1                      (side B: frees whatever it is given)
#
# Tools (--tools, default "testpmd appliance"):
#   testpmd    dpdk-testpmd --forward-mode=io: touches no packet data, the I/O floor
#   l3fwd_em   DPDK's l3fwd example, --lookup=em: an rte_hash exact-match lookup of the
#              5-tuple per packet (routes for every 5-tuple of PCAP, all to port 1)
#   l3fwd_acl  l3fwd --lookup=acl: rte_acl per packet with --acl-rules FILE (an appliance rule
#              file) converted to l3fwd's ACL rule format, plus a default route to port 1
#   l3fwd_acl512  l3fwd_acl with EAL --force-max-simd-bitwidth=512: rte_acl's AVX-512
#              classify instead of AVX2 (EAL's default cap is 256 bits)
#   appliance  dpu-appliance run (--app-config FILE, default no rules)
#   baseline   another dpu-appliance binary (--baseline BIN), same config: an A/B of two
#              builds in the same interleaved run
# l3fwd is built from /usr/share/dpdk/examples/l3fwd (Debian package dpdk-doc) at benchmark
# time in a temporary directory, with two patches applied by this script (l3fwd_build):
# the port's RX checksum offload request is set to 0 (net_pcap / net_null have none, and
# l3fwd would refuse to configure them) and the mbuf pool minimum (8192) is raised to the
# packets of PCAP + 8192 (net_pcap infinite_rx holds one mbuf per packet of the capture).
# l3fwd runs on one lcore (the worker lcore as its main lcore: it wants a TX queue per lcore
# and net_pcap has one), with --parse-ptype (the vdevs set no packet type).
#
# All poll both ports; port 1 never receives, so all traffic is port 0 rx -> port 1 tx.
# net_pcap infinite_rx copies every packet out of its ring into a fresh mbuf, so all pay the
# same rx cost.
#
# Measurement window: after WARMUP seconds of forwarding, DURATION seconds.
#   testpmd:   two `show port stats all` DURATION s apart; port 1 "Tx-pps" (testpmd computes
#              it from the TSC between the two calls), cross-checked with port 0 "Rx-pps".
#   l3fwd:     prints no counters: port stats from DPDK telemetry
#              (/var/run/dpdk/<prefix>/dpdk_telemetry.v2, /ethdev/stats,N) at both ends of
#              the window; Mpps = delta port 1 opackets / wall time, cross-checked with port
#              0 ipackets (all received packets must leave on port 1).
#   appliance: `run --stats-interval 1` lines; Mpps = sum(delta rx) / sum(interval time)
#              over the lines inside the window (each line's interval time is recovered
#              from its delta and its Mpps figure); the final summary gives port B tx = port
#              A rx for the whole run as a cross-check.
# For each run the forwarding thread's share of a CPU over the window is read from
# /proc/<pid>/task/<tid>/schedstat: below MIN_CPU (97%) something else ran on the worker
# core, and the measurement is repeated (up to RETRIES times; discarded.tsv keeps them).
# The load average (1 min) at the start of each run is recorded with it.
#
# Nothing is left behind: each run's DPDK runtime directory (/var/run/dpdk/<prefix>) is
# removed, every process started is stopped, and without -o the output directory (a new
# /tmp/fwd_bench.*) is removed at exit (--keep keeps it and says where).
#
# usage: bench/fwd_bench.sh [-r REPS] [-d DURATION] [-w WARMUP] [-f FLOWS] [-p PCAP]
#                           [-o OUTDIR] [--keep] [-l LCORES] [-m MEM_MB] [--appliance BIN]
#                           [--testpmd BIN] [--idle-wait S] [--idle-max PCT]
#                           [--retries N] [--min-cpu PCT] [--nice N] [--app-config FILE]
#                           [--tools "testpmd l3fwd_em l3fwd_acl appliance"]
#                           [--acl-rules FILE] [--eal-extra "ARGS"] [--baseline BIN]
#                           [--only TOOL] [--testpmd-mode MODE] [--check] [--huge]
# --huge: every tool on 2 MB hugepages (EAL without --no-huge) instead of 4 KB pages: what a
#         deployment runs on. Needs MEM_MB of free hugepages and a mounted hugetlbfs, set up
#         beforehand by root (the script changes no system setting):
#           echo 1536 > /proc/sys/vm/nr_hugepages; mount -t hugetlbfs nodev /dev/hugepages
#         EAL unlinks the hugepage files once mapped (--huge-unlink); nothing is left behind.
# --eal-extra: more EAL arguments for the appliance and l3fwd (e.g.
#              --force-max-simd-bitwidth=512).
# --check: exit 1 when the median ratio appliance/testpmd is below 0.9.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ORIG_ARGS=("$@")
ROOT="$(cd "$HERE/.." && pwd)"
PY=/usr/bin/python3

REPS=3
DURATION=10
WARMUP=3
FLOWS=8192      # one packet per flow (both get --mbufs / --total-num-mbufs for the file)
PCAP=""
OUTDIR=""
LCORES="0,1"
MEM=1024
HUGE=0          # --huge: hugepages instead of --no-huge
APP="$ROOT/build/control/dpu-appliance"
TESTPMD="$(command -v dpdk-testpmd || true)"
IDLE_WAIT=30    # seconds to wait at most for the machine to go quiet before each run
IDLE_MAX=15     # "quiet" = total CPU busy below this percent over one second
RETRIES=3       # re-runs of a measurement whose worker thread got < MIN_CPU % of its CPU
MIN_CPU=97
NICE=""         # --nice N: run both programs at this niceness (shared machine)
APP_CONFIG=""   # --app-config FILE: appliance config (default: none = no rules, defaults)
ONLY=""         # --only TOOL: run one tool only (no ratio)
TOOLS="testpmd appliance"
ACL_RULES=""    # --acl-rules FILE: appliance rule file, converted for l3fwd_acl
EAL_EXTRA=""    # --eal-extra "ARGS": more EAL arguments for the appliance and l3fwd
KEEP=0
BASELINE=""    # --baseline BIN: the "baseline" tool runs this appliance binary
TP_MODE=io      # --testpmd-mode M: testpmd --forward-mode (io is the baseline; e.g. 5tswap)
CHECK=0
TARGET=0.9

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit "${1:-0}"; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    -r) REPS="$2"; shift 2 ;;
    -d) DURATION="$2"; shift 2 ;;
    -w) WARMUP="$2"; shift 2 ;;
    -f) FLOWS="$2"; shift 2 ;;
    -p) PCAP="$2"; shift 2 ;;
    -o) OUTDIR="$2"; shift 2 ;;
    -l) LCORES="$2"; shift 2 ;;
    -m) MEM="$2"; shift 2 ;;
    --appliance) APP="$2"; shift 2 ;;
    --testpmd) TESTPMD="$2"; shift 2 ;;
    --idle-wait) IDLE_WAIT="$2"; shift 2 ;;
    --idle-max) IDLE_MAX="$2"; shift 2 ;;
    --retries) RETRIES="$2"; shift 2 ;;
    --min-cpu) MIN_CPU="$2"; shift 2 ;;
    --nice) NICE="$2"; shift 2 ;;
    --app-config) APP_CONFIG="$2"; shift 2 ;;
    --only) ONLY="$2"; shift 2 ;;
    --tools) TOOLS="$2"; shift 2 ;;
    --acl-rules) ACL_RULES="$2"; shift 2 ;;
    --eal-extra) EAL_EXTRA="$2"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --baseline) BASELINE="$2"; shift 2 ;;
    --testpmd-mode) TP_MODE="$2"; shift 2 ;;
    --check) CHECK=1; shift ;;
    --huge) HUGE=1; shift ;;
    -h|--help) usage 0 ;;
    *) echo "fwd_bench: unknown argument '$1'" >&2; usage 2 ;;
  esac
done

die() { echo "fwd_bench: $*" >&2; exit 1; }
PAGES=--no-huge
if (( HUGE )); then
  PAGES=--huge-unlink   # hugepage files unlinked once mapped: none left behind
  free_mb=$(( $(awk '/^HugePages_Free:/ {print $2}' /proc/meminfo) * 2 ))
  (( free_mb >= MEM )) || die "--huge needs $MEM MB of free 2 MB hugepages ($free_mb MB free):" \
    "echo $(( (MEM + 512) / 2 )) > /proc/sys/vm/nr_hugepages"
  awk '$3 == "hugetlbfs"' /proc/mounts | grep -q . ||
    die "--huge needs a mounted hugetlbfs: mount -t hugetlbfs nodev /dev/hugepages"
fi
[[ -x "$APP" ]] || die "appliance binary not found: $APP (ninja -C build dpu-appliance)"
[[ -n "$TESTPMD" && -x "$TESTPMD" ]] || die "dpdk-testpmd not found (apt-get install dpdk)"
if [[ -n "$ONLY" ]]; then TOOLS="$ONLY"; fi
for t in $TOOLS; do
  case $t in testpmd|l3fwd_em|l3fwd_acl|l3fwd_acl512|appliance|baseline) ;; *) die "unknown tool '$t'" ;; esac
done
if [[ " $TOOLS " == *" baseline "* ]]; then
  [[ -x "$BASELINE" ]] || die "the baseline tool needs --baseline BIN"
fi
if [[ " $TOOLS " == *" l3fwd_acl"* ]]; then
  [[ -r "$ACL_RULES" ]] || die "l3fwd_acl needs --acl-rules FILE (an appliance rule file)"
fi
if [[ " $TOOLS " == *" l3fwd_"* ]]; then
  [[ -r /usr/share/dpdk/examples/l3fwd/main.c ]] ||
    die "l3fwd sources not found in /usr/share/dpdk/examples/l3fwd (apt-get install dpdk-doc)"
fi
[[ -z "$APP_CONFIG" || -r "$APP_CONFIG" ]] || die "cannot read $APP_CONFIG"
if [[ -n "$APP_CONFIG" ]]; then APP_CONFIG="$(cd "$(dirname "$APP_CONFIG")" && pwd)/$(basename "$APP_CONFIG")"; fi
[[ "$LCORES" =~ ^[0-9]+,[0-9]+$ ]] || die "-l wants exactly two lcores, main,worker (e.g. 0,1)"
WORKER_LCORE="${LCORES#*,}"

# --nice: with scheduler autogroups (one per session) a process's nice value only counts
# inside its own session, so the benchmark re-runs itself in a new session and gives that
# session's autogroup the niceness as well. Only this benchmark's processes are affected.
NICE_CMD=""
if [[ -n "$NICE" ]]; then
  NICE_CMD="nice -n $NICE"
  if [[ "$(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null)" == 1 ]]; then
    if [[ -z "${FWD_BENCH_SESSION:-}" ]]; then
      FWD_BENCH_SESSION=1 setsid -w "$HERE/$(basename "$0")" "${ORIG_ARGS[@]}" &
      child=$!
      trap 'kill -TERM -- -"$child" 2>/dev/null || true' INT TERM
      rc=0
      while :; do
        wait "$child" && rc=0 || rc=$?
        kill -0 "$child" 2>/dev/null || break
      done
      exit "$rc"
    fi
    echo "$NICE" >/proc/self/autogroup 2>/dev/null ||
      echo "fwd_bench: warning: cannot set the autogroup niceness to $NICE" >&2
  fi
fi

OWN_OUTDIR=0
if [[ -z "$OUTDIR" ]]; then OUTDIR="$(mktemp -d /tmp/fwd_bench.XXXXXX)"; OWN_OUTDIR=1; fi
mkdir -p "$OUTDIR"
OUTDIR="$(cd "$OUTDIR" && pwd)"
# Cleanup at exit: processes still running (an interrupted run), runtime directories of this
# script's prefixes, the l3fwd build directory, and the output directory when it is ours.
L3FWD_DIR=""
cleanup() {
  local p
  # Programs this script started (run_* record their pids in OUTDIR/pids) still running
  # after an interruption; then the runtime directories of this script's file prefixes.
  if [[ -r "$OUTDIR/pids" ]]; then
    while read -r p; do
      # (only if the pid is still one of ours: its command line holds our file prefix)
      local c; c=$( { tr '\0' ' ' <"/proc/$p/cmdline"; } 2>/dev/null || true)
      if [[ "$c" == *"--file-prefix=fwdb_"*"_$$_"* ]]; then
        kill -INT "$p" 2>/dev/null || true; sleep 1; kill -KILL "$p" 2>/dev/null || true
      fi
    done <"$OUTDIR/pids"
  fi
  rm -rf /var/run/dpdk/fwdb_*_$$_*
  if declare -F eal_dirs_cleanup >/dev/null; then eal_dirs_cleanup; fi
  rm -f "$OUTDIR"/testpmd_*.in
  [[ -z "$L3FWD_DIR" ]] || rm -rf "$L3FWD_DIR"
  if (( OWN_OUTDIR )); then
    if (( KEEP )); then echo "fwd_bench: logs kept in $OUTDIR" >&2; else rm -rf "$OUTDIR"; fi
  fi
}
trap cleanup EXIT
# Run a private copy: the build tree may be rebuilt while the benchmark runs.
APP_SRC="$APP"
APP="$OUTDIR/dpu-appliance"
cp "$APP_SRC" "$APP"
if [[ -n "$BASELINE" ]]; then cp "$BASELINE" "$OUTDIR/dpu-appliance-baseline"; BASELINE="$OUTDIR/dpu-appliance-baseline"; fi
if [[ -z "$PCAP" ]]; then
  PCAP="$OUTDIR/traffic_${FLOWS}.pcap"
  "$PY" "$HERE/gen_traffic.py" -o "$PCAP" --flows "$FLOWS" >"$OUTDIR/gen.txt"
  cat "$OUTDIR/gen.txt"
fi
[[ -r "$PCAP" ]] || die "cannot read $PCAP"
PCAP="$(cd "$(dirname "$PCAP")" && pwd)/$(basename "$PCAP")"
NPKTS=$("$PY" -c 'import os,sys,struct
f=open(sys.argv[1],"rb"); f.seek(24); n=0
while True:
    h=f.read(16)
    if len(h)<16: break
    f.seek(struct.unpack("<IIII",h)[2],1); n+=1
print(n)' "$PCAP")
# net_pcap infinite_rx keeps one mbuf per packet of the file in its ring: both get the
# packets plus room (the appliance through run --mbufs, when it has the option).
TP_MBUFS=$(( NPKTS + 4096 > 8448 ? NPKTS + 4096 : 8448 ))
L3FWD_MBUFS=$(( NPKTS + 8192 ))  # l3fwd: the capture + its own need (8192 in the example)
APP_MBUFS=()
# (the help text is read whole first: with pipefail, grep -q closing the pipe early could make
# the program's SIGPIPE exit status count as "no match")
APP_RUN_HELP=$("$APP" run --help 2>&1 || true)
if grep -q -- '--mbufs' <<<"$APP_RUN_HELP"; then APP_MBUFS=(--mbufs "$TP_MBUFS"); fi

APP_HAS_STATE_DIR=0
if grep -q -- '--state-dir' <<<"$APP_RUN_HELP"; then APP_HAS_STATE_DIR=1; fi

VDEVS=(--vdev "net_pcap0,rx_pcap=$PCAP,infinite_rx=1" --vdev "net_null0,no-rx=1")
source "$HERE/eal_dirs.sh"
eal_dirs_track "fwdb_*_$$_*"  # the prefixes below, removed at exit
eal_args() {  # $1 = file prefix
  echo -l "$LCORES" $PAGES --no-pci --no-shconf --file-prefix="$1" -m "$MEM"
}
prefix_of() {  # $1 tool, $2 run id: the EAL file prefix of that run
  echo "fwdb_${1}_$$_${2//./_}"
}
started() {  # $1 pid: recorded for the exit cleanup (run_* functions run in subshells)
  echo "$1" >>"$OUTDIR/pids"
}
finished() {  # $1 prefix: removes the run's DPDK runtime directory
  rm -rf "/var/run/dpdk/$1"
}

# --- l3fwd: built here, from the dpdk-doc example sources, with the two vdev patches --------
L3FWD=""
l3fwd_build() {
  L3FWD_DIR=$(mktemp -d /tmp/fwdb_l3fwd.XXXXXX)
  cp -r /usr/share/dpdk/examples/l3fwd "$L3FWD_DIR/"
  local src="$L3FWD_DIR/l3fwd"
  # Patch 1: no RX checksum offload request (net_pcap / net_null offer none).
  sed -i 's/\.offloads = RTE_ETH_RX_OFFLOAD_CHECKSUM,/.offloads = 0,/' "$src/main.c"
  # Patch 2: the mbuf pool minimum, 8192 in the example, becomes L3FWD_MIN_MBUFS.
  sed -i 's/(unsigned)8192)/(unsigned)L3FWD_MIN_MBUFS)/' "$src/main.c"
  grep -q '\.offloads = 0,' "$src/main.c" && grep -q 'L3FWD_MIN_MBUFS' "$src/main.c" ||
    die "the l3fwd patches no longer apply to /usr/share/dpdk/examples/l3fwd/main.c"
  echo "fwd_bench: building l3fwd in $L3FWD_DIR (patched: RX checksum offload 0, mbuf pool >= $L3FWD_MBUFS)"
  make -C "$src" shared -j2 CFLAGS="-O3 $(pkg-config --cflags libdpdk) -DALLOW_EXPERIMENTAL_API -I/usr/share/dpdk/examples/common -DL3FWD_MIN_MBUFS=$L3FWD_MBUFS" \
    >"$OUTDIR/l3fwd_build.log" 2>&1 || { tail -20 "$OUTDIR/l3fwd_build.log" >&2; die "l3fwd build failed"; }
  L3FWD="$src/build/l3fwd"
  # Rule files: every 5-tuple of the pcap routed to port 1 (em); the appliance's rules (acl).
  "$PY" "$HERE/l3fwd_rules.py" em "$PCAP" "$L3FWD_DIR/em4.cfg" "$L3FWD_DIR/em6.cfg"
  if [[ -n "$ACL_RULES" ]]; then
    "$PY" "$HERE/l3fwd_rules.py" acl "$ACL_RULES" "$L3FWD_DIR/acl4.rules" "$L3FWD_DIR/acl6.rules"
  fi
}

# --- helpers ---------------------------------------------------------------------------

cpu_busy_pct() {  # total CPU busy percent over one second, all CPUs
  local a b
  a=($(head -1 /proc/stat)); sleep 1; b=($(head -1 /proc/stat))
  local ta=0 tb=0 i
  for i in 1 2 3 4 5 6 7 8; do ta=$((ta + a[i])); tb=$((tb + b[i])); done
  local ia=$((a[4] + a[5])) ib=$((b[4] + b[5]))
  local dt=$((tb - ta)); [[ $dt -gt 0 ]] || dt=1
  echo $(( 100 * ((tb - ta) - (ib - ia)) / dt ))
}

wait_idle() {  # waits until the machine is quiet; echoes the last busy percent
  local t0=$SECONDS busy
  while :; do
    busy=$(cpu_busy_pct)
    if (( busy < IDLE_MAX )) || (( SECONDS - t0 >= IDLE_WAIT )); then echo "$busy"; return; fi
  done
}

worker_tid() {  # $1 = pid: the EAL thread of the worker lcore
  local pid=$1 t c
  for t in /proc/"$pid"/task/*; do
    c="$(cat "$t/comm" 2>/dev/null || true)"   # DPDK 22.11 names it rte-worker-N
    if [[ "$c" == "rte-worker-$WORKER_LCORE" || "$c" == "lcore-worker-$WORKER_LCORE" ]]; then
      basename "$t"; return 0
    fi
  done
  return 1
}

schedstat() {  # $1 pid, $2 tid -> "run_ns wait_ns now_ns"
  local s; s=($(cat /proc/"$1"/task/"$2"/schedstat 2>/dev/null || echo "0 0 0"))
  echo "${s[0]} ${s[1]} $(date +%s%N)"
}

cpu_share() {  # "$start" "$end" -> percent of wall time the thread ran
  local a=($1) b=($2)
  local wall=$((b[2] - a[2])); [[ $wall -gt 0 ]] || { echo "?"; return; }
  awk -v r=$((b[0] - a[0])) -v w=$wall 'BEGIN { printf "%.1f", 100 * r / w }'
}

wait_for_line() {  # $1 file, $2 regex, $3 timeout s, $4 pid that must stay alive
  local t0=$SECONDS
  until grep -qE "$2" "$1" 2>/dev/null; do
    kill -0 "$4" 2>/dev/null || return 1
    (( SECONDS - t0 < $3 )) || return 1
    sleep 0.1
  done
}

wait_stats_ge() {  # $1 stats file, $2 elapsed seconds, $3 timeout s, $4 pid
  local t0=$SECONDS last
  while :; do
    last=$(sed -n 's/^\[ *\([0-9.]*\)s\] rx .*/\1/p' "$1" 2>/dev/null | tail -1)
    if [[ -n "$last" ]] && awk -v a="$last" -v b="$2" 'BEGIN { exit !(a >= b - 0.05) }'; then
      return 0
    fi
    kill -0 "$4" 2>/dev/null || return 1
    (( SECONDS - t0 < $3 )) || return 1
    sleep 0.05
  done
}

stop_pid() {  # $1 pid: ends a process this script started, if it is still there
  local pid=$1 i
  for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }; sleep 0.2; done
  kill -INT "$pid" 2>/dev/null || true
  for i in $(seq 1 25); do kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }; sleep 0.2; done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

# --- one testpmd run: prints "mpps cpu_share" ------------------------------------------
run_testpmd() {
  local i=$1 log="$OUTDIR/testpmd_$1.log" fifo="$OUTDIR/testpmd_$1.in" pid fd s0 s1 tid
  rm -f "$fifo"; mkfifo -m 600 "$fifo"
  local prefix; prefix=$(prefix_of tp "$i")
  $NICE_CMD stdbuf -oL -eL "$TESTPMD" $(eal_args "$prefix") "${VDEVS[@]}" -- \
    -i --forward-mode="$TP_MODE" --nb-cores=1 --rxq=1 --txq=1 --burst=32 --no-flush-rx \
    --total-num-mbufs="$TP_MBUFS" <"$fifo" >"$log" 2>&1 &
  pid=$!
  started "$pid"
  exec {fd}>"$fifo"
  if ! wait_for_line "$log" '^Checking link statuses' 120 "$pid"; then
    exec {fd}>&-; stop_pid "$pid"; finished "$prefix"; die "testpmd did not start, see $log"
  fi
  echo "start" >&"$fd"
  if ! wait_for_line "$log" "$TP_MODE packet forwarding - ports=" 30 "$pid"; then
    exec {fd}>&-; stop_pid "$pid"; finished "$prefix"; die "testpmd did not start forwarding, see $log"
  fi
  tid=$(worker_tid "$pid") || tid=$pid
  sleep "$WARMUP"
  echo "show port stats all" >&"$fd"; s0=$(schedstat "$pid" "$tid")
  sleep "$DURATION"
  echo "show port stats all" >&"$fd"; s1=$(schedstat "$pid" "$tid")
  echo "stop" >&"$fd"; echo "quit" >&"$fd"
  exec {fd}>&-
  stop_pid "$pid"
  finished "$prefix"
  rm -f "$fifo"
  "$PY" - "$log" <<'EOF' || die "cannot parse $log"
import re, sys
text = open(sys.argv[1]).read()
# Each "show port stats all" prints one block per port; the second call's blocks hold the
# window's throughput.
blocks = re.findall(r"NIC statistics for port (\d+).*?TX-packets:\s+(\d+).*?Rx-pps:\s+(\d+)"
                    r".*?Tx-pps:\s+(\d+)", text, re.S)
last = {}
for port, txp, rxpps, txpps in blocks:
    last[int(port)] = (int(txp), int(rxpps), int(txpps))
if len(blocks) < 4 or 0 not in last or 1 not in last:
    sys.exit("no port stats in the testpmd output")
rx0, tx1 = last[0][1], last[1][2]
if tx1 == 0 or abs(rx0 - tx1) > 0.01 * tx1:
    sys.exit(f"port 0 Rx-pps {rx0} and port 1 Tx-pps {tx1} disagree")
print(f"{tx1 / 1e6:.4f}")
EOF
  cpu_share "$s0" "$s1"
}

# --- one appliance run: prints "mpps cpu_share" ----------------------------------------
run_baseline() { APP="$BASELINE" NAME=baseline run_appliance "$1"; }
run_appliance() {
  local name=${NAME:-appliance}
  local i=$1 out="$OUTDIR/${name}_$1.out" err="$OUTDIR/${name}_$1.err" pid s0 s1 tid total
  local prefix; prefix=$(prefix_of "$name" "$i")
  # The stats line at ~WARMUP opens the window; the one at ~WARMUP+DURATION closes it.
  total=$((WARMUP + DURATION + 2))
  # A fresh, private state directory: a config committed in the default one
  # (/var/lib/dpu-appliance) would win over --config, and its API socket may be taken.
  local state=()
  if (( APP_HAS_STATE_DIR )); then
    STATE_DIR=$(mktemp -d /tmp/fwdb_state.XXXXXX)
    state=(--state-dir "$STATE_DIR")
  fi
  $NICE_CMD stdbuf -oL -eL "$APP" run "${state[@]}" ${APP_CONFIG:+--config "$APP_CONFIG"} \
    --duration "$total" --stats-interval 1 "${APP_MBUFS[@]}" -- \
    $(eal_args "$prefix") $EAL_EXTRA "${VDEVS[@]}" >"$out" 2>"$err" &
  pid=$!
  started "$pid"
  if ! wait_for_line "$err" '^dpu-appliance: forwarding' 120 "$pid"; then
    stop_pid "$pid"; finished "$prefix"; [[ -z "${STATE_DIR:-}" ]] || rm -rf "$STATE_DIR"
    if grep -q "Not enough mbufs" "$err"; then
      die "appliance did not start: net_pcap infinite_rx needs one mbuf per packet of the" \
          "pcap ($NPKTS); this build has no 'run --mbufs' (${#APP_MBUFS[@]} args given), see $err"
    fi
    die "appliance did not start, see $err"
  fi
  tid=$(worker_tid "$pid") || tid=$pid
  wait_stats_ge "$err" "$WARMUP" 60 "$pid" || true
  s0=$(schedstat "$pid" "$tid")
  wait_stats_ge "$err" "$((WARMUP + DURATION))" 60 "$pid" || true
  s1=$(schedstat "$pid" "$tid")
  stop_pid "$pid"
  finished "$prefix"
  if [[ -n "${STATE_DIR:-}" ]]; then rm -rf "$STATE_DIR"; fi
  "$PY" - "$err" "$out" "$WARMUP" "$DURATION" <<'EOF' || die "cannot parse $err / $out"
import re, sys
err, out = open(sys.argv[1]).read(), open(sys.argv[2]).read()
warm, dur = float(sys.argv[3]), float(sys.argv[4])
# Two formats of the stats line: cumulative counters ("rx N (X Mpps)  fwd N  drop N", older
# builds) or per-second rates over the interval ("rx R pps  fwd R/s  drop R/s", newer ones).
cum = [(float(t), int(rx), float(mpps), int(fwd), int(drop)) for t, rx, mpps, fwd, drop in
       re.findall(r"^\[\s*([\d.]+)s\] rx (\d+) \(([\d.]+) Mpps\)\s+fwd (\d+)\s+drop (\d+)",
                  err, re.M)]
rates = [(float(t), float(rx), float(fwd), float(drop)) for t, rx, fwd, drop in
         re.findall(r"^\[\s*([\d.]+)s\] rx ([\d.]+) pps\s+fwd ([\d.]+)/s\s+drop ([\d.]+)/s",
                    err, re.M)]
lines = cum or rates
# The first line at >= WARMUP opens the window, the first at >= WARMUP + DURATION closes it.
first = next((k for k, l in enumerate(lines) if l[0] >= warm - 0.05), None)
last = next((k for k, l in enumerate(lines) if l[0] >= warm + dur - 0.05), len(lines) - 1)
win = lines[first:last + 1] if first is not None else []
if len(win) < 2:
    sys.exit("not enough stats lines in the window")
if cum:
    pk = secs = 0.0
    for prev, cur in zip(win, win[1:]):
        d = cur[1] - prev[1]
        pk += d
        secs += d / (cur[2] * 1e6) if cur[2] > 0 else 1.0
    fwd = win[-1][3] - win[0][3]
    drops = win[-1][4] - win[0][4]
else:
    # Each line's rate covers the interval since the line before it: the window's rate is
    # their mean weighted by the interval lengths (printed to 0.1 s; each is ~1 s).
    pk = secs = fwd = drops = 0.0
    for prev, cur in zip(win, win[1:]):
        dt = max(cur[0] - prev[0], 0.05)
        pk += cur[1] * dt
        fwd += cur[2] * dt
        drops += cur[3] * dt
        secs += dt
if drops:
    sys.exit(f"{drops:.0f} drops in the window")
if abs(fwd - pk) > 0.001 * pk + 64:
    sys.exit(f"rx {pk:.0f} and forwarded {fwd:.0f} disagree in the window")
m = re.search(r"^\s*A \(.*?\)\s+(\d+)\s+\d+\s+(\d+)\s+\d+\s*\n\s*B \(.*?\)\s+(\d+)\s+\d+\s+(\d+)",
              out, re.M)
if not m:
    sys.exit("no ports table in the appliance summary")
a_rx, b_tx = int(m.group(1)), int(m.group(4))
if a_rx != b_tx:
    sys.exit(f"port A rx {a_rx} != port B tx {b_tx}")
print(f"{pk / secs / 1e6:.4f}")
EOF
  cpu_share "$s0" "$s1"
}

# --- one l3fwd run ($1 = em|acl, $2 = run id): prints "mpps cpu_share" -------------------
telemetry_stats() {  # $1 socket: "ns port0_ipackets port1_opackets port0_opackets"
  "$PY" - "$1" <<'EOF'
import json, socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1])
json.loads(s.recv(1 << 16))  # greeting: version, pid, max_output_len
st = {}
t = time.time_ns()
for port in (0, 1):
    s.send(f"/ethdev/stats,{port}".encode())
    st[port] = json.loads(s.recv(1 << 20))["/ethdev/stats"]
print(t, st[0]["ipackets"], st[1]["opackets"], st[0]["opackets"])
EOF
}

run_l3fwd() {
  local mode=$1 i=$2 log="$OUTDIR/l3fwd_${1}${SIMD512:+512}_$2.log" pid s0 s1 t0 t1 prefix sock rules
  prefix=$(prefix_of "l3fwd$mode${SIMD512:+512}" "$i")
  sock="/var/run/dpdk/$prefix/dpdk_telemetry.v2"
  if [[ $mode == em ]]; then
    rules=(--rule_ipv4="$L3FWD_DIR/em4.cfg" --rule_ipv6="$L3FWD_DIR/em6.cfg")
  else
    rules=(--rule_ipv4="$L3FWD_DIR/acl4.rules" --rule_ipv6="$L3FWD_DIR/acl6.rules")
  fi
  # One lcore, the worker lcore, as l3fwd's main lcore: it runs the loop itself.
  $NICE_CMD "$L3FWD" -l "$WORKER_LCORE" $PAGES --no-pci --no-shconf --file-prefix="$prefix" \
    -m "$MEM" $EAL_EXTRA ${SIMD512:+--force-max-simd-bitwidth=512} "${VDEVS[@]}" -- -p 0x3 --config="(0,0,$WORKER_LCORE),(1,0,$WORKER_LCORE)" \
    --parse-ptype --lookup="$mode" "${rules[@]}" >"$log" 2>&1 &
  pid=$!
  started "$pid"
  if ! wait_for_line "$log" 'entering main loop' 300 "$pid" || ! [[ -S "$sock" ]]; then
    stop_pid "$pid"; finished "$prefix"; die "l3fwd --lookup=$mode did not start, see $log"
  fi
  sleep "$WARMUP"
  t0=$(telemetry_stats "$sock"); s0=$(schedstat "$pid" "$pid")
  sleep "$DURATION"
  t1=$(telemetry_stats "$sock"); s1=$(schedstat "$pid" "$pid")
  kill -INT "$pid" 2>/dev/null || true
  stop_pid "$pid"
  finished "$prefix"
  "$PY" - "$t0" "$t1" <<'EOF' || die "l3fwd --lookup=$mode: bad counters, see $log"
import sys
a, b = [list(map(int, x.split())) for x in sys.argv[1:3]]
secs = (b[0] - a[0]) / 1e9
rx0, tx1, tx0 = b[1] - a[1], b[2] - a[2], b[3] - a[3]
if tx1 == 0 or tx0 != 0 or abs(rx0 - tx1) > 0.01 * tx1:
    sys.exit(f"port 0 rx {rx0}, port 1 tx {tx1}, port 0 tx {tx0}: not all traffic to port 1")
print(f"{tx1 / secs / 1e6:.4f}")
EOF
  cpu_share "$s0" "$s1"
}
run_l3fwd_em() { run_l3fwd em "$1"; }
run_l3fwd_acl() { run_l3fwd acl "$1"; }
run_l3fwd_acl512() { SIMD512=1 run_l3fwd acl "$1"; }

# --- main -------------------------------------------------------------------------------
RESULTS="$OUTDIR/results.tsv"
DISCARDED="$OUTDIR/discarded.tsv"
: >"$DISCARDED"
printf "rep\ttool\tmpps\tworker_cpu_pct\tidle_busy_pct\tload1\n" >"$RESULTS"
if [[ " $TOOLS " == *" l3fwd_"* ]]; then l3fwd_build; fi
echo "fwd_bench: $REPS x (warmup ${WARMUP}s + ${DURATION}s), lcores $LCORES (worker $WORKER_LCORE),${NICE:+ nice $NICE,} testpmd --forward-mode=$TP_MODE," \
     "pcap $PCAP ($NPKTS packets), $( ((HUGE)) && echo "2 MB hugepages" || echo "4 KB pages (--no-huge)"), logs in $OUTDIR"
echo "fwd_bench: CPU $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs;" \
     "appliance $APP_SRC ($(date -r "$APP_SRC" '+%F %T'), sha256 $(sha256sum "$APP" | cut -c1-16));" \
     "DPDK $(pkg-config --modversion libdpdk 2>/dev/null || echo "?")"
printf "%-4s %-10s %10s %12s %14s %6s\n" rep tool Mpps worker-cpu busy-before load
for rep in $(seq 1 "$REPS"); do
  # Alternate the order so that slow drift on the machine hits both sides alike.
  if (( rep % 2 )); then order="$TOOLS"; else order=$(tr ' ' '\n' <<<"$TOOLS" | tac | tr '\n' ' '); fi
  for tool in $order; do
    for try in $(seq 0 "$RETRIES"); do
      busy=$(wait_idle)
      load=$(cut -d' ' -f1 /proc/loadavg)
      res=$("run_$tool" "$rep.$try")
      mpps=$(echo "$res" | sed -n 1p); share=$(echo "$res" | sed -n 2p)
      ok=$(awk -v s="$share" -v m="$MIN_CPU" 'BEGIN { print (s != "?" && s + 0 >= m) ? 1 : 0 }')
      if [[ $ok == 1 || $try == "$RETRIES" ]]; then
        printf "%-4s %-10s %10s %11s%% %13s%% %6s\n" "$rep" "$tool" "$mpps" "$share" "$busy" "$load"
        printf "%s\t%s\t%s\t%s\t%s\t%s\n" "$rep" "$tool" "$mpps" "$share" "$busy" "$load" >>"$RESULTS"
        break
      fi
      printf "%-4s %-10s %10s %11s%% %13s%%  (discarded: worker CPU < %s%%, retrying)\n" \
        "$rep" "$tool" "$mpps" "$share" "$busy" "$MIN_CPU"
      printf "%s\t%s\t%s\t%s\t%s\t%s\tdiscarded\n" "$rep" "$tool" "$mpps" "$share" "$busy" "$load" >>"$DISCARDED"
    done
  done
done

"$PY" - "$RESULTS" "$TARGET" "$CHECK" "$MIN_CPU" <<'EOF'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])][1:]
target, check = float(sys.argv[2]), sys.argv[3] == "1"
med = {}
for tool in ("testpmd", "l3fwd_em", "l3fwd_acl", "l3fwd_acl512", "baseline", "appliance"):
    v = [float(r[2]) for r in rows if r[1] == tool]
    if v:
        med[tool] = statistics.median(v)
        loads = [r[5] for r in rows if r[1] == tool]
        ns = 1e3 / med[tool]
        above = f", {ns - 1e3 / med['testpmd']:+.1f} ns above the testpmd io floor" \
            if "testpmd" in med and tool != "testpmd" else ""
        print(f"{tool:10s} median {med[tool]:.3f} Mpps = {ns:.1f} ns/packet{above}  "
              f"(runs: {', '.join(f'{x:.3f}' for x in v)}; load {', '.join(loads)})")
low = [r for r in rows if r[3] == "?" or float(r[3]) < float(sys.argv[4])]
if low:
    print(f"warning: {len(low)} run(s) kept with the worker thread on its CPU less than "
          f"{sys.argv[4]}% of the window (other load on the machine); numbers are noisy")
if "appliance" in med:
    for peer in ("l3fwd_em", "l3fwd_acl", "l3fwd_acl512", "baseline"):
        if peer in med:
            print(f"ratio appliance/{peer} = {med['appliance'] / med[peer]:.3f}")
if "appliance" not in med or "testpmd" not in med:
    sys.exit(0)
ratio = med["appliance"] / med["testpmd"]
print(f"ratio appliance/testpmd = {ratio:.3f}  (target >= {target}: "
      f"{'PASS' if ratio >= target else 'FAIL'})")
ns_t, ns_a = 1e3 / med["testpmd"], 1e3 / med["appliance"]
print(f"per packet: testpmd {ns_t:.1f} ns, appliance {ns_a:.1f} ns, appliance work on top of "
      f"the I/O {ns_a - ns_t:.1f} ns (the target allows {1e3 / (target * med['testpmd']) - ns_t:.1f} ns)")
sys.exit(1 if check and ratio < target else 0)
EOF
