#!/usr/bin/env bash
# Forwarding benchmark on one worker core: dpu-appliance (no rules, flow table on) versus
# dpdk-testpmd --forward-mode=io, both on the same vdevs and lcores with the same traffic:
#
#   port 0 = net_pcap0,rx_pcap=PCAP,infinite_rx=1   (side A: replays PCAP forever)
#   port 1 = net_null0,no-rx=1                      (side B: frees whatever it is given)
#
# Both programs poll both ports (testpmd io streams 0->1 and 1->0, the appliance sides A and
# B); port 1 never receives, so all traffic is port 0 rx -> port 1 tx. net_pcap infinite_rx
# copies every packet out of its ring into a fresh mbuf, so both pay the same rx cost.
#
# Measurement window: after WARMUP seconds of forwarding, DURATION seconds.
#   testpmd:   two `show port stats all` DURATION s apart; port 1 "Tx-pps" (testpmd computes
#              it from the TSC between the two calls), cross-checked with port 0 "Rx-pps".
#   appliance: `run --stats-interval 1` lines; Mpps = sum(delta rx) / sum(interval time)
#              over the lines inside the window (each line's interval time is recovered
#              from its delta and its Mpps figure); the final summary gives port B tx = port
#              A rx for the whole run as a cross-check.
# For each run the forwarding thread's share of a CPU over the window is read from
# /proc/<pid>/task/<tid>/schedstat: below MIN_CPU (97%) something else ran on the worker
# core, and the measurement is repeated (up to RETRIES times; discarded.tsv keeps them).
#
# usage: bench/fwd_bench.sh [-r REPS] [-d DURATION] [-w WARMUP] [-f FLOWS] [-p PCAP]
#                           [-o OUTDIR] [-l LCORES] [-m MEM_MB] [--appliance BIN]
#                           [--testpmd BIN] [--idle-wait S] [--idle-max PCT]
#                           [--retries N] [--min-cpu PCT] [--nice N] [--app-config FILE]
#                           [--only testpmd|appliance] [--testpmd-mode MODE] [--check]
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
APP="$ROOT/build/control/dpu-appliance"
TESTPMD="$(command -v dpdk-testpmd || true)"
IDLE_WAIT=30    # seconds to wait at most for the machine to go quiet before each run
IDLE_MAX=15     # "quiet" = total CPU busy below this percent over one second
RETRIES=3       # re-runs of a measurement whose worker thread got < MIN_CPU % of its CPU
MIN_CPU=97
NICE=""         # --nice N: run both programs at this niceness (shared machine)
APP_CONFIG=""   # --app-config FILE: appliance config (default: none = no rules, defaults)
ONLY=""         # --only testpmd|appliance: run one side only (no ratio)
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
    --testpmd-mode) TP_MODE="$2"; shift 2 ;;
    --check) CHECK=1; shift ;;
    -h|--help) usage 0 ;;
    *) echo "fwd_bench: unknown argument '$1'" >&2; usage 2 ;;
  esac
done

die() { echo "fwd_bench: $*" >&2; exit 1; }
[[ -x "$APP" ]] || die "appliance binary not found: $APP (ninja -C build dpu-appliance)"
[[ -n "$TESTPMD" && -x "$TESTPMD" ]] || die "dpdk-testpmd not found (apt-get install dpdk)"
[[ -z "$ONLY" || "$ONLY" == testpmd || "$ONLY" == appliance ]] || die "--only testpmd|appliance"
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

if [[ -z "$OUTDIR" ]]; then OUTDIR="$(mktemp -d /tmp/fwd_bench.XXXXXX)"; fi
mkdir -p "$OUTDIR"
# Run a private copy: the build tree may be rebuilt while the benchmark runs.
APP_SRC="$APP"
APP="$OUTDIR/dpu-appliance"
cp "$APP_SRC" "$APP"
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
  echo -l "$LCORES" --no-huge --no-pci --no-shconf --file-prefix="$1" -m "$MEM"
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
  $NICE_CMD stdbuf -oL -eL "$TESTPMD" $(eal_args "fwdb_tp_$$_$i") "${VDEVS[@]}" -- \
    -i --forward-mode="$TP_MODE" --nb-cores=1 --rxq=1 --txq=1 --burst=32 --no-flush-rx \
    --total-num-mbufs="$TP_MBUFS" <"$fifo" >"$log" 2>&1 &
  pid=$!
  exec {fd}>"$fifo"
  if ! wait_for_line "$log" '^Checking link statuses' 120 "$pid"; then
    exec {fd}>&-; stop_pid "$pid"; die "testpmd did not start, see $log"
  fi
  echo "start" >&"$fd"
  if ! wait_for_line "$log" "$TP_MODE packet forwarding - ports=" 30 "$pid"; then
    exec {fd}>&-; stop_pid "$pid"; die "testpmd did not start forwarding, see $log"
  fi
  tid=$(worker_tid "$pid") || tid=$pid
  sleep "$WARMUP"
  echo "show port stats all" >&"$fd"; s0=$(schedstat "$pid" "$tid")
  sleep "$DURATION"
  echo "show port stats all" >&"$fd"; s1=$(schedstat "$pid" "$tid")
  echo "stop" >&"$fd"; echo "quit" >&"$fd"
  exec {fd}>&-
  stop_pid "$pid"
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
run_appliance() {
  local i=$1 out="$OUTDIR/appliance_$1.out" err="$OUTDIR/appliance_$1.err" pid s0 s1 tid total
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
    $(eal_args "fwdb_app_$$_$i") "${VDEVS[@]}" >"$out" 2>"$err" &
  pid=$!
  if ! wait_for_line "$err" '^dpu-appliance: forwarding' 120 "$pid"; then
    stop_pid "$pid"; [[ -z "${STATE_DIR:-}" ]] || rm -rf "$STATE_DIR"
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
  if [[ -n "${STATE_DIR:-}" ]]; then rm -rf "$STATE_DIR"; fi
  "$PY" - "$err" "$out" "$WARMUP" "$DURATION" <<'EOF' || die "cannot parse $err / $out"
import re, sys
err, out = open(sys.argv[1]).read(), open(sys.argv[2]).read()
warm, dur = float(sys.argv[3]), float(sys.argv[4])
lines = [(float(t), int(rx), float(mpps), int(fwd), int(drop)) for t, rx, mpps, fwd, drop in
         re.findall(r"^\[\s*([\d.]+)s\] rx (\d+) \(([\d.]+) Mpps\)\s+fwd (\d+)\s+drop (\d+)",
                    err, re.M)]
# The first line at >= WARMUP opens the window, the first at >= WARMUP + DURATION closes it.
first = next((k for k, l in enumerate(lines) if l[0] >= warm - 0.05), None)
last = next((k for k, l in enumerate(lines) if l[0] >= warm + dur - 0.05), len(lines) - 1)
win = lines[first:last + 1] if first is not None else []
if len(win) < 2:
    sys.exit("not enough stats lines in the window")
pk = secs = 0.0
for prev, cur in zip(win, win[1:]):
    d = cur[1] - prev[1]
    pk += d
    secs += d / (cur[2] * 1e6) if cur[2] > 0 else 1.0
fwd = win[-1][3] - win[0][3]
drops = win[-1][4] - win[0][4]
if drops:
    sys.exit(f"{drops} drops in the window")
if abs(fwd - pk) > 0.001 * pk + 64:
    sys.exit(f"rx {pk} and forwarded {fwd} disagree in the window")
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

# --- main -------------------------------------------------------------------------------
trap 'rm -f "$OUTDIR"/testpmd_*.in; eal_dirs_cleanup' EXIT
RESULTS="$OUTDIR/results.tsv"
DISCARDED="$OUTDIR/discarded.tsv"
: >"$DISCARDED"
printf "rep\ttool\tmpps\tworker_cpu_pct\tidle_busy_pct\n" >"$RESULTS"
echo "fwd_bench: $REPS x (warmup ${WARMUP}s + ${DURATION}s), lcores $LCORES (worker $WORKER_LCORE),${NICE:+ nice $NICE,} testpmd --forward-mode=$TP_MODE," \
     "pcap $PCAP ($NPKTS packets), logs in $OUTDIR"
echo "fwd_bench: CPU $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs;" \
     "appliance $APP_SRC ($(date -r "$APP_SRC" '+%F %T'), sha256 $(sha256sum "$APP" | cut -c1-16));" \
     "DPDK $(pkg-config --modversion libdpdk 2>/dev/null || echo "?")"
printf "%-4s %-10s %10s %12s %14s\n" rep tool Mpps worker-cpu busy-before
for rep in $(seq 1 "$REPS"); do
  # Alternate the order so that slow drift on the machine hits both sides alike.
  if (( rep % 2 )); then order="testpmd appliance"; else order="appliance testpmd"; fi
  if [[ -n "$ONLY" ]]; then order="$ONLY"; fi
  for tool in $order; do
    for try in $(seq 0 "$RETRIES"); do
      busy=$(wait_idle)
      res=$("run_$tool" "$rep.$try")
      mpps=$(echo "$res" | sed -n 1p); share=$(echo "$res" | sed -n 2p)
      ok=$(awk -v s="$share" -v m="$MIN_CPU" 'BEGIN { print (s != "?" && s + 0 >= m) ? 1 : 0 }')
      if [[ $ok == 1 || $try == "$RETRIES" ]]; then
        printf "%-4s %-10s %10s %11s%% %13s%%\n" "$rep" "$tool" "$mpps" "$share" "$busy"
        printf "%s\t%s\t%s\t%s\t%s\n" "$rep" "$tool" "$mpps" "$share" "$busy" >>"$RESULTS"
        break
      fi
      printf "%-4s %-10s %10s %11s%% %13s%%  (discarded: worker CPU < %s%%, retrying)\n" \
        "$rep" "$tool" "$mpps" "$share" "$busy" "$MIN_CPU"
      printf "%s\t%s\t%s\t%s\t%s\tdiscarded\n" "$rep" "$tool" "$mpps" "$share" "$busy" >>"$DISCARDED"
    done
  done
done

"$PY" - "$RESULTS" "$TARGET" "$CHECK" "$MIN_CPU" <<'EOF'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])][1:]
target, check = float(sys.argv[2]), sys.argv[3] == "1"
med = {}
for tool in ("testpmd", "appliance"):
    v = [float(r[2]) for r in rows if r[1] == tool]
    if v:
        med[tool] = statistics.median(v)
        print(f"{tool:10s} median {med[tool]:.3f} Mpps  (runs: {', '.join(f'{x:.3f}' for x in v)})")
low = [r for r in rows if r[3] == "?" or float(r[3]) < float(sys.argv[4])]
if low:
    print(f"warning: {len(low)} run(s) kept with the worker thread on its CPU less than "
          f"{sys.argv[4]}% of the window (other load on the machine); numbers are noisy")
if len(med) < 2:
    sys.exit(0)
ratio = med["appliance"] / med["testpmd"]
print(f"ratio appliance/testpmd = {ratio:.3f}  (target >= {target}: "
      f"{'PASS' if ratio >= target else 'FAIL'})")
ns_t, ns_a = 1e3 / med["testpmd"], 1e3 / med["appliance"]
print(f"per packet: testpmd {ns_t:.1f} ns, appliance {ns_a:.1f} ns, appliance work on top of "
      f"the I/O {ns_a - ns_t:.1f} ns (the target allows {1e3 / (target * med['testpmd']) - ns_t:.1f} ns)")
sys.exit(1 if check and ratio < target else 0)
EOF
