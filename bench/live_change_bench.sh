#!/usr/bin/env bash
# Live-change cost (issue #8): packets lost or delayed while the configuration changes under
# full-rate traffic. The appliance runs live on one worker core (net_pcap,infinite_rx=1 ->
# net_null, 100k flows of 64 B frames, as fwd_bench.sh) with 10k firewall rules, a 100-backend
# load-balancer service over every destination and a 1M-name DNS list; while it forwards,
# dpuctl makes, one after the other, with SETTLE seconds between them:
#
#   no_change    nothing (the control window: what the machine itself costs in latency)
#   fw_swap      ApplyConfig replacing the 10k rules with 10k others
#   fw_add       AddFirewallRule: one rule added to the 10k (incremental rte_acl build: a
#                delta on the tables in force, merged into a full build in the background)
#   fw_remove    RemoveFirewallRule: that rule removed again
#   dns_reload   ApplyConfig replacing the 1M-name list file with another 1M names
#   lb_add       AddLbBackend (a 101st backend)
#   lb_remove    RemoveLbBackend --flush (that backend; its flows re-hashed onto the others)
#
# For each change: the apply's wall time (dpuctl), then over the window from just before the
# call to SETTLE seconds after it: packets received, forwarded, dropped (any reason; none is
# expected, so every drop is a lost packet), the lowest per-second rate seen against the
# median rate over the run, and the latency through the worker in the window (p99, p99.99
# and the largest bucket, from the difference of the latency histograms read before and
# after: a change that stalled the worker shows there).
# net_pcap never overruns (the worker pulls packets from the file), so loss at the rx ring
# cannot happen here; what a stall would cost on a NIC shows as the rate dip and the latency.
#
# usage: bench/live_change_bench.sh [-o OUTDIR] [-s SETTLE] [-w WARMUP] [-l LCORES]
#                                   [--appliance BIN] [--dpuctl BIN]
# Without -o the run's files go to a temporary directory removed at exit.
# Exit status 1 when any packet was lost.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
source "$HERE/live_appliance.sh"
PY=/usr/bin/python3
SETTLE=3 WARMUP=4
while [[ $# -gt 0 ]]; do
  case $1 in
    -s) SETTLE=$2; shift 2 ;;
    -w) WARMUP=$2; shift 2 ;;
    -h|--help) live_usage "$0"; exit 0 ;;
    *) live_arg "$@" && shift 2 || { echo "live_change_bench: unknown argument $1" >&2; exit 2; } ;;
  esac
done
live_setup live_change_bench
trap live_cleanup EXIT

"$PY" "$HERE/gen_traffic.py" -o "$OUTDIR/t64.pcap" --flows 100000 >/dev/null
"$PY" "$HERE/gen_suite_configs.py" "$OUTDIR"
live_start lcb "$OUTDIR/fw10k_lb100_dns.json" 110000 --stats-interval 1
sleep "$WARMUP"

stats() { ctl --json stats >"$OUTDIR/stats_$1.json"; }
T0=$(date +%s.%N)
: >"$OUTDIR/changes.tsv"
change() {  # name, command...
  local name=$1; shift
  stats "${name}_before"
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >"$OUTDIR/$name.log" 2>&1 || { echo "live_change_bench: $name failed:" >&2; cat "$OUTDIR/$name.log" >&2; exit 1; }
  t1=$(date +%s.%N)
  sleep "$SETTLE"
  stats "${name}_after"
  printf "%s\t%s\t%s\n" "$name" "$(echo "$t0 - $T0" | bc)" "$(echo "$t1 - $t0" | bc)" >>"$OUTDIR/changes.tsv"
}
change no_change true  # the control window: the same time with nothing changed
change fw_swap ctl config apply "$OUTDIR/fw10k_b_lb100_dns.json" --force
change fw_add ctl fw add "deny tcp 192.0.2.0/24 any -> 198.51.100.0/24 22 prio 5 id bench-edit" --force
change fw_remove ctl fw remove bench-edit --force
change dns_reload ctl config apply "$OUTDIR/fw10k_lb100_dns_b.json" --force
change lb_add ctl lb add bench100 be101 --ipv4 10.200.9.9 --mac 02:be:00:00:09:09 --force
change lb_remove ctl lb remove bench100 be101 --flush --force
live_stop

"$PY" - "$OUTDIR" <<'EOF'
import json, re, statistics, sys
out = sys.argv[1]
err = open(f"{out}/appliance.err").read()
lines = [(float(t), float(m)) for t, m in re.findall(r"^\[\s*([\d.]+)s\] rx \d+ \(([\d.]+) Mpps\)", err, re.M)]
changes = [l.split("\t") for l in open(f"{out}/changes.tsv").read().splitlines()]
def total(j):
    t = j.get("total", {})
    lat = t.get("latency", {})
    return {k: int(t.get(k, 0)) for k in ("forwarded", "dropped", "rejected")} | {
        "rx": int(t.get("rx_packets_a", 0)) + int(t.get("rx_packets_b", 0)),
        "hist": {int(k): int(v) for k, v in lat.get("buckets", {}).items()}}
def window_quantile(before, after, q):
    """Upper bound (ns) of the q-quantile of the latencies recorded between two reads."""
    d = sorted((le, after.get(le, 0) - before.get(le, 0)) for le in after)
    n = sum(c for _, c in d)
    if n == 0:
        return 0
    seen = 0
    for le, c in d:
        seen += c
        if c and seen >= q * n:
            return le
    return d[-1][0]
rows, lost_any = [], 0
for name, at, secs in changes:
    b = total(json.load(open(f"{out}/stats_{name}_before.json")))
    a = total(json.load(open(f"{out}/stats_{name}_after.json")))
    rx, fwd = a["rx"] - b["rx"], a["forwarded"] - b["forwarded"]
    lost = (a["dropped"] - b["dropped"]) + (a["rejected"] - b["rejected"])
    lost_any += lost
    rows.append((name, float(secs), rx, fwd, lost, window_quantile(b["hist"], a["hist"], 0.99),
                 window_quantile(b["hist"], a["hist"], 0.9999),
                 window_quantile(b["hist"], a["hist"], 1.0)))
print(f"{'change':12s} {'apply s':>8s} {'rx in window':>13s} {'forwarded':>11s} {'lost':>6s} "
      f"{'latency p99':>12s} {'p99.99':>10s} {'max':>10s}   (window: the call + settle time)")
for name, secs, rx, fwd, lost, p99, p9999, mx in rows:
    print(f"{name:12s} {secs:8.3f} {rx:13d} {fwd:11d} {lost:6d} {p99 / 1000:9.1f} us "
          f"{p9999 / 1000:7.1f} us {mx / 1000:7.1f} us")
if lines:
    rates = [m for _, m in lines]
    print(f"rate per second over the run: median {statistics.median(rates):.2f} Mpps, "
          f"lowest {min(rates):.2f} Mpps (stats lines: {len(rates)})")
print(f"live_change_bench: {'0 packets lost' if lost_any == 0 else f'{lost_any} packets LOST'}")
sys.exit(1 if lost_any else 0)
EOF
