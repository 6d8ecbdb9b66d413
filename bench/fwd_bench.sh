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
# /proc/<pid>/task/<tid>/schedstat: below ~98% something else ran on the worker core.
#
# usage: bench/fwd_bench.sh [-r REPS] [-d DURATION] [-w WARMUP] [-f FLOWS] [-p PCAP]
#                           [-o OUTDIR] [-l LCORES] [-m MEM_MB] [--appliance BIN]
#                           [--testpmd BIN] [--idle-wait S] [--idle-max PCT] [--check]
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
PY=/usr/bin/python3

REPS=3
DURATION=10
WARMUP=3
FLOWS=8192
PCAP=""
OUTDIR=""
LCORES="0,1"
MEM=1024
APP="$ROOT/build/control/dpu-appliance"
TESTPMD="$(command -v dpdk-testpmd || true)"
IDLE_WAIT=300    # seconds to wait for the machine to go quiet before each run
IDLE_MAX=15      # "quiet" = total CPU busy below this percent over one second
CHECK=0
TARGET=0.9

usage() { sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
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
    --check) CHECK=1; shift ;;
    -h|--help) usage 0 ;;
    *) echo "fwd_bench: unknown argument '$1'" >&2; usage 2 ;;
  esac
done

die() { echo "fwd_bench: $*" >&2; exit 1; }
[[ -x "$APP" ]] || die "appliance binary not found: $APP (ninja -C build dpu-appliance)"
[[ -n "$TESTPMD" && -x "$TESTPMD" ]] || die "dpdk-testpmd not found (apt-get install dpdk)"
[[ "$LCORES" =~ ^[0-9]+,[0-9]+$ ]] || die "-l wants exactly two lcores, main,worker (e.g. 0,1)"
WORKER_LCORE="${LCORES#*,}"

if [[ -z "$OUTDIR" ]]; then OUTDIR="$(mktemp -d /tmp/fwd_bench.XXXXXX)"; fi
mkdir -p "$OUTDIR"
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
# net_pcap infinite_rx keeps one mbuf per packet of the file in its ring. The appliance
# sizes its pool itself (8448 mbufs with one worker); testpmd gets the packets plus room.
TP_MBUFS=$(( NPKTS + 4096 > 8448 ? NPKTS + 4096 : 8448 ))

VDEVS=(--vdev "net_pcap0,rx_pcap=$PCAP,infinite_rx=1" --vdev "net_null0,no-rx=1")
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
  stdbuf -oL -eL "$TESTPMD" $(eal_args "fwdb_tp_$$_$i") "${VDEVS[@]}" -- \
    -i --forward-mode=io --nb-cores=1 --rxq=1 --txq=1 --burst=32 --no-flush-rx \
    --total-num-mbufs="$TP_MBUFS" <"$fifo" >"$log" 2>&1 &
  pid=$!
  exec {fd}>"$fifo"
  if ! wait_for_line "$log" '^Checking link statuses' 120 "$pid"; then
    exec {fd}>&-; stop_pid "$pid"; die "testpmd did not start, see $log"
  fi
  echo "start" >&"$fd"
  if ! wait_for_line "$log" 'io packet forwarding - ports=' 30 "$pid"; then
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
  stdbuf -oL -eL "$APP" run --duration "$total" --stats-interval 1 -- \
    $(eal_args "fwdb_app_$$_$i") "${VDEVS[@]}" >"$out" 2>"$err" &
  pid=$!
  if ! wait_for_line "$err" '^dpu-appliance: forwarding' 120 "$pid"; then
    stop_pid "$pid"; die "appliance did not start, see $err"
  fi
  tid=$(worker_tid "$pid") || tid=$pid
  wait_stats_ge "$err" "$WARMUP" 60 "$pid" || true
  s0=$(schedstat "$pid" "$tid")
  wait_stats_ge "$err" "$((WARMUP + DURATION))" 60 "$pid" || true
  s1=$(schedstat "$pid" "$tid")
  stop_pid "$pid"
  "$PY" - "$err" "$out" "$WARMUP" <<'EOF' || die "cannot parse $err / $out"
import re, sys
err, out, warm = open(sys.argv[1]).read(), open(sys.argv[2]).read(), float(sys.argv[3])
lines = [(float(t), int(rx), float(mpps), int(fwd), int(drop)) for t, rx, mpps, fwd, drop in
         re.findall(r"^\[\s*([\d.]+)s\] rx (\d+) \(([\d.]+) Mpps\)\s+fwd (\d+)\s+drop (\d+)",
                    err, re.M)]
win = [l for l in lines if l[0] >= warm - 0.05]  # the first one opens the window
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
RESULTS="$OUTDIR/results.tsv"
printf "rep\ttool\tmpps\tworker_cpu_pct\tidle_busy_pct\n" >"$RESULTS"
echo "fwd_bench: $REPS x (warmup ${WARMUP}s + ${DURATION}s), lcores $LCORES (worker $WORKER_LCORE)," \
     "pcap $PCAP ($NPKTS packets), logs in $OUTDIR"
echo "fwd_bench: CPU $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs"
printf "%-4s %-10s %10s %12s %14s\n" rep tool Mpps worker-cpu busy-before
for rep in $(seq 1 "$REPS"); do
  # Alternate the order so that slow drift on the machine hits both sides alike.
  if (( rep % 2 )); then order="testpmd appliance"; else order="appliance testpmd"; fi
  for tool in $order; do
    busy=$(wait_idle)
    res=$("run_$tool" "$rep")
    mpps=$(echo "$res" | sed -n 1p); share=$(echo "$res" | sed -n 2p)
    printf "%-4s %-10s %10s %11s%% %13s%%\n" "$rep" "$tool" "$mpps" "$share" "$busy"
    printf "%s\t%s\t%s\t%s\t%s\n" "$rep" "$tool" "$mpps" "$share" "$busy" >>"$RESULTS"
  done
done

"$PY" - "$RESULTS" "$TARGET" "$CHECK" <<'EOF'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])][1:]
target, check = float(sys.argv[2]), sys.argv[3] == "1"
med = {}
for tool in ("testpmd", "appliance"):
    v = [float(r[2]) for r in rows if r[1] == tool]
    med[tool] = statistics.median(v)
    print(f"{tool:10s} median {med[tool]:.3f} Mpps  (runs: {', '.join(f'{x:.3f}' for x in v)})")
ratio = med["appliance"] / med["testpmd"]
low = [r for r in rows if r[3] != "?" and float(r[3]) < 98.0]
print(f"ratio appliance/testpmd = {ratio:.3f}  (target >= {target}: "
      f"{'PASS' if ratio >= target else 'FAIL'})")
if low:
    print(f"warning: {len(low)} run(s) had the worker thread on its CPU < 98% of the window "
          "(other load on the machine); numbers are noisy")
sys.exit(1 if check and ratio < target else 0)
EOF
