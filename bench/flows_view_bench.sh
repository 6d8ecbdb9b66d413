#!/usr/bin/env bash
# Flows view cost (issue #19 item 7): does `dpuctl flows` stall the data path? The appliance
# runs live on one worker core (net_pcap,infinite_rx=1 -> net_null, FLOWS flows of 64 B
# frames from gen_traffic.py, no rules: the fastest path, where a stall shows most), and the
# worker's table holds all FLOWS flows. Alternating windows of WINDOW seconds:
#
#   quiet    nothing but the traffic
#   listing  a loop of `dpuctl flows --sort packets --limit 10`, back to back or one every
#            INTERVAL seconds (-i; every call makes the worker walk its whole table: FLOWS
#            flows copied, sorted on the control side, 10 sent)
#
# Per window: packets received per second (rx of side A over the window, from GetStats), the
# same per second of CPU time the worker thread got (/proc schedstat) and that share, the
# worker's cycles in its "aging" bucket per second (the bucket after tx, which holds the flow
# and fragment sweeps and the flow-dump slices: the listing's whole cost on the worker), and
# for the listing windows the listings done and their mean wall time. The summary is the
# ratio of the median listing-window rate to the median quiet-window rate, and the worker
# cycles one listing added (aging cycles above the quiet windows' rate, per listing).
# The dpuctl loop runs on the control core (the first of LCORES, like the appliance's gRPC
# threads) so that its own CPU time does not land on the worker's core; on a machine shared
# with other work the rates move with that work too (compare the quiet windows).
#
# usage: bench/flows_view_bench.sh [-o OUTDIR] [-f FLOWS] [-w WINDOW] [-r ROUNDS] [-i INTERVAL]
#                                  [-l LCORES] [--appliance BIN] [--dpuctl BIN]
# Without -o the run's files go to a temporary directory removed at exit.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
source "$HERE/live_appliance.sh"
PY=/usr/bin/python3
FLOWS=100000 WINDOW=5 ROUNDS=3 INTERVAL=0
while [[ $# -gt 0 ]]; do
  case $1 in
    -f) FLOWS=$2; shift 2 ;;
    -w) WINDOW=$2; shift 2 ;;
    -r) ROUNDS=$2; shift 2 ;;
    -i) INTERVAL=$2; shift 2 ;;
    -h|--help) live_usage "$0"; exit 0 ;;
    *) live_arg "$@" && shift 2 || { echo "flows_view_bench: unknown argument $1" >&2; exit 2; } ;;
  esac
done
live_setup flows_view_bench
LOOP=""
trap '[[ -n $LOOP ]] && kill "$LOOP" 2>/dev/null; live_cleanup' EXIT

"$PY" "$HERE/gen_traffic.py" -o "$OUTDIR/t64.pcap" --flows "$FLOWS" >/dev/null
cat >"$OUTDIR/config.json" <<J
{"dataplane": {"flow_table": {"capacity_per_worker": $((FLOWS * 2))}}}
J
live_start fvb "$OUTDIR/config.json" $((FLOWS + 16384))
# Warm-up: every flow in the table.
for _ in $(seq 1 600); do
  ctl --json stats >"$OUTDIR/warm.json"
  [[ $("$PY" -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["total"].get("flows_active", 0)))' "$OUTDIR/warm.json") -ge $FLOWS ]] && break
  sleep 0.5
done

: >"$OUTDIR/windows.tsv"
# CPU time (ns) the worker threads ran so far (EAL names them rte-worker-N): on a machine
# shared with other work a worker thread does not own its core, and packets per worker CPU
# second is the rate that says what the worker's own work costs.
worker_ns() {
  local t s=0 v
  for t in /proc/$APID/task/*; do
    [[ $(cat "$t/comm" 2>/dev/null) == rte-worker-* ]] || continue
    read -r v _ <"$t/schedstat"
    s=$((s + v))
  done
  echo "$s"
}
window() {  # name
  local name=$1
  ctl --json stats >"$OUTDIR/s0.json"
  local t0 t1 c0 c1
  c0=$(worker_ns)
  t0=$(date +%s.%N)
  if [[ $name == listing ]]; then
    ( n=0; while :; do taskset -c "${LCORES%%,*}" "$CTL" --server "$SOCK" flows --sort packets --limit 10 >/dev/null; n=$((n + 1)); echo "$n" >"$OUTDIR/listings"; sleep "$INTERVAL"; done ) &
    LOOP=$!
  fi
  sleep "$WINDOW"
  if [[ -n $LOOP ]]; then kill "$LOOP"; wait "$LOOP" 2>/dev/null || true; LOOP=""; fi
  t1=$(date +%s.%N)
  c1=$(worker_ns)
  ctl --json stats >"$OUTDIR/s1.json"
  local listings=0
  [[ $name == listing && -f $OUTDIR/listings ]] && listings=$(cat "$OUTDIR/listings") && rm -f "$OUTDIR/listings"
  "$PY" - "$OUTDIR/s0.json" "$OUTDIR/s1.json" "$name" "$t0" "$t1" "$listings" "$c0" "$c1" >>"$OUTDIR/windows.tsv" <<'PYEOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
name, t0, t1, listings = sys.argv[3], float(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
cpu = (int(sys.argv[8]) - int(sys.argv[7])) / 1e9
ra, rb = int(a["total"].get("rx_packets_a", 0)), int(b["total"].get("rx_packets_a", 0))
def aging(s):
    return sum(int(c["cycles"]) for c in s["total"].get("cycles", []) if c["bucket"] == "aging")
dt = t1 - t0
print("%s\t%.0f\t%.0f\t%.2f\t%.0f\t%d\t%.3f\t%s" % (name, (rb - ra) / dt, (rb - ra) / cpu if cpu > 0 else 0, cpu / dt,
                                       (aging(b) - aging(a)) / dt, listings,
                                       dt / listings if listings else 0, b["total"].get("flows_active", 0)))
PYEOF
}
for _ in $(seq 1 "$ROUNDS"); do
  window quiet
  window listing
done
"$PY" - "$OUTDIR/windows.tsv" "$FLOWS" "$WINDOW" <<'PYEOF'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
q = [float(r[1]) for r in rows if r[0] == "quiet"]
l = [float(r[1]) for r in rows if r[0] == "listing"]
qc = [float(r[2]) for r in rows if r[0] == "quiet"]
lc = [float(r[2]) for r in rows if r[0] == "listing"]
qa = statistics.median(float(r[4]) for r in rows if r[0] == "quiet")
n = sum(int(r[5]) for r in rows if r[0] == "listing")
per = [float(r[6]) for r in rows if r[0] == "listing" and float(r[6]) > 0]
# Aging cycles a listing window spent above the quiet rate, per listing (TSC: includes time
# the thread was preempted inside that bucket).
extra = [(float(r[4]) - qa) / (int(r[5]) / float(sys.argv[3])) for r in rows if r[0] == "listing" and int(r[5])]
print("window\trx pps\tpkts per worker cpu s\tworker cpu share\taging cycles/s\tlistings\ts per listing\tflows active")
for r in rows:
    print("\t".join(r))
print("flows %s: quiet median %.0f pps, listing median %.0f pps, ratio %.3f; per worker CPU second: quiet %.0f, "
      "listing %.0f, ratio %.3f; %d listings, %.3f s each (mean); aging cycles per listing %.3g (median)"
      % (sys.argv[2], statistics.median(q), statistics.median(l), statistics.median(l) / statistics.median(q),
         statistics.median(qc), statistics.median(lc), statistics.median(lc) / statistics.median(qc),
         n, statistics.mean(per) if per else 0, statistics.median(extra) if extra else 0))
PYEOF
[[ -n $LIVE_TMP ]] || echo "output: $OUTDIR"
