#!/usr/bin/env bash
# Many workers: the full forwarding path with 1 worker and with N workers behind software
# distribution (dataplane.distribution SOFTWARE), same traffic, interleaved.
#
#   port 0 = net_pcap0,rx_pcap=PCAP,infinite_rx=1  (side A: one rx queue, no RSS: worker 0
#            polls it and hands every packet to the worker of its flow)
#   port 1 = net_null0,no-rx=1                     (side B: a tx queue per worker)
#
# Traffic: bench/gen_traffic.py, FLOWS flows (random 10/8 -> 172.16/12 addresses, so the
# address hash spreads them), one 60-byte frame per flow, repeated. Config: --config FILE
# (default: no rules) with dataplane.distribution set to SOFTWARE.
#
# For each run: `dpu-appliance run --stats-interval 1`; Mpps = median of the per-second rx
# rates after WARMUP s; from the final summary, the cycles per received packet of the
# "distribute" bucket (worker 0's parse + hash + ring enqueue of every packet it received;
# ns = cycles / TSC GHz) and the per-worker packets. Prints one line per run and a table of
# medians. The load average (1 min) is printed with every run: on a machine with fewer free
# CPUs than workers + 1 (control) the workers are overcommitted and the N-worker figure is
# the machine's, not the appliance's (with fewer CPUs than lcores, EAL gets
# --lcores '(0-N)@(CPUS)': the lcore threads share the CPUs).
#
# usage: bench/workers_bench.sh [-r REPS] [-d DURATION] [-w WARMUP] [-f FLOWS] [-n WORKERS]
#                               [--config FILE] [--appliance BIN]
# Nothing is left behind: the temporary directory, each run's DPDK runtime directory and
# every process started are removed / stopped at exit.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
reps=3 duration=10 warmup=3 flows=100000 nworkers=2 config= app=$here/../build/control/dpu-appliance
while [[ $# -gt 0 ]]; do
  case $1 in
    -r) reps=$2; shift 2 ;;
    -d) duration=$2; shift 2 ;;
    -w) warmup=$2; shift 2 ;;
    -f) flows=$2; shift 2 ;;
    -n) nworkers=$2; shift 2 ;;
    --config) config=$2; shift 2 ;;
    --appliance) app=$2; shift 2 ;;
    *) echo "usage: $0 [-r REPS] [-d DURATION] [-w WARMUP] [-f FLOWS] [-n WORKERS] [--config FILE] [--appliance BIN]" >&2; exit 2 ;;
  esac
done
[[ -x $app ]] || { echo "no dpu-appliance at $app (--appliance BIN)" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/workers_bench.XXXXXX")
pid=
source "$here/eal_dirs.sh"
eal_dirs_track "wbench_$$_*"  # the prefixes below, removed at exit
cleanup() {
  [[ -n $pid ]] && kill -9 "$pid" 2>/dev/null || true
  rm -rf "$work" 2>/dev/null || true
  eal_dirs_cleanup
}
trap cleanup EXIT

/usr/bin/python3 "$here/gen_traffic.py" -o "$work/traffic.pcap" --flows "$flows" >/dev/null
/usr/bin/python3 - "$config" "$work/config.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1])) if sys.argv[1] else {}
c.setdefault("dataplane", {})["distribution"] = "SOFTWARE"
json.dump(c, open(sys.argv[2], "w"))
EOF

cpus=$(/usr/bin/python3 -c 'import os; print(",".join(map(str, sorted(os.sched_getaffinity(0)))))')
ncpus=$(/usr/bin/python3 -c 'import os; print(len(os.sched_getaffinity(0)))')
lcores() {  # lcores N: control on lcore 0, workers on 1..N; EAL arguments
  if (($1 + 1 <= ncpus)); then
    local l=0
    for ((i = 1; i <= $1; i++)); do l+=",$i"; done
    echo "-l $l"
  else
    echo "--lcores (0-$1)@($cpus)"  # more lcores than CPUs: threads share them
  fi
}

run_one() {  # run_one WORKERS REP -> prints "workers rep load mpps dist_ns per_worker"
  local w=$1 rep=$2
  local d=$work/run_${w}_$rep
  mkdir -p "$d"
  local load
  load=$(cut -d' ' -f1 /proc/loadavg)
  "$app" run --config "$work/config.json" --state-dir "$d/state" --stats-interval 1 \
      --duration $((warmup + duration)) --mbufs $((flows + 65536)) -- \
      $(lcores "$w") --no-huge --no-pci --no-shconf --file-prefix="wbench_$$_${w}_$rep" \
      -m 2048 --log-level=lib.eal:error \
      --vdev "net_pcap0,rx_pcap=$work/traffic.pcap,infinite_rx=1" --vdev net_null0,no-rx=1 \
      >"$d/out" 2>"$d/err" &
  pid=$!
  wait "$pid" || { echo "run failed:"; tail -20 "$d/err"; exit 1; }
  pid=
  /usr/bin/python3 - "$d" "$w" "$rep" "$load" "$warmup" <<'EOF'
import re, statistics, sys
d, w, rep, load, warmup = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
rates = []
for l in open(f"{d}/err"):
    m = re.match(r"\[\s*([\d.]+)s\] rx (\d+) pps", l)
    if m and float(m.group(1)) > warmup:
        rates.append(int(m.group(2)))
out = open(f"{d}/out").read()
ghz = float(re.search(r"TSC ([\d.]+) GHz", out).group(1))
dist = re.search(r" distribute ([\d.]+)", out)
dist_ns = float(dist.group(1)) / ghz if dist else 0.0
print(f"{w} {rep} {load} {statistics.median(rates) / 1e6:.3f} {dist_ns:.1f}")
EOF
}

echo "# workers rep load1 Mpps distribute_ns_per_pkt"
for ((r = 1; r <= reps; r++)); do
  for w in 1 "$nworkers"; do
    run_one "$w" "$r" | tee -a "$work/results"
  done
done
/usr/bin/python3 - "$work/results" <<'EOF'
import collections, statistics, sys
by = collections.defaultdict(list)
for l in open(sys.argv[1]):
    w, rep, load, mpps, dist = l.split()
    by[int(w)].append((float(mpps), float(dist), float(load)))
print("| workers | runs, Mpps | median Mpps | ns/packet | distributor ns/packet | load (1 min) |")
print("|---|---|---|---|---|---|")
for w in sorted(by):
    m = [x[0] for x in by[w]]
    med = statistics.median(m)
    dist = statistics.median(x[1] for x in by[w])
    loads = ", ".join(f"{x[2]:.1f}" for x in by[w])
    print(f"| {w} | {', '.join(f'{x:.3f}' for x in m)} | {med:.3f} | {1000 / med:.0f} | "
          f"{dist:.1f} | {loads} |")
EOF
