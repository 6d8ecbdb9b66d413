#!/usr/bin/env bash
# End-to-end performance suite (issues #8, #20): the appliance beside dpdk-testpmd
# --forward-mode=io (the I/O floor) and DPDK's reference forwarders l3fwd --lookup=em (an
# rte_hash exact-match lookup of the 5-tuple per packet) and l3fwd --lookup=acl (rte_acl per
# packet with the same 10k rules as fw10k), built by fwd_bench.sh from dpdk-doc's example
# sources, on the same vdevs (net_pcap,rx_pcap=X,infinite_rx=1 -> net_null), the same traffic
# and the same worker core, runs interleaved, for each configuration (the l3fwd peers on the
# 64 B configurations; full_imix against testpmd only):
#
#   none        no rules (flow table only)                          64 B frames, 100k flows
#   fw10k       10 000 firewall rules (gen_rules.py)                64 B frames, 100k flows
#   fw10k_lb100 + a load-balancer service over every destination    64 B frames, 100k flows
#               (172.16.0.0/12, 100 backends, L2 mode): the full L3/L4 path of #8
#   full_imix   + DNS filtering (1M names) + DPI (the Yara-Rules set: ~990 rules accepted)
#                                                    IMIX 7:4:1, 10k flows of 10 segments
#
# Each configuration is one bench/fwd_bench.sh run (REPS x WARMUP + DURATION seconds per
# tool). Results: OUTDIR/suite.tsv (config, traffic, testpmd and appliance Mpps medians, ratio,
# cycles per packet for both, the appliance's cycles per packet by stage, latency p50/p99,
# inspected payload Gbit/s, then l3fwd em / acl Mpps, the appliance's ratios to them, its ns
# per packet above the testpmd floor, and the 1-min load average of each tool's runs), printed
# as a table (each configuration, each tool: Mpps, ns per packet, the appliance's ratio to
# it); then bench/plot_suite.py draws OUTDIR/suite.png.
#
# Traffic is replayed in a loop: a TCP segment seen again is a retransmission to the DPI
# stage and is not scanned again, while UDP datagrams are scanned every time (per-datagram
# mode). The inspected-payload figure is therefore taken from the DPI stage's own byte
# counter (dpi_bytes scanned), not from the frames forwarded.
#
# Nothing is left behind: fwd_bench.sh stops its programs and removes their DPDK runtime
# directories; without -o the working directory (pcaps, configs, the DPI cache, the runs) is a
# temporary one, removed at exit, and the table and the plot are copied to the --results
# directory (default: the current one) as perf_suite_<UTC date and time>.tsv / .png.
#
# usage: bench/perf_suite.sh [-r REPS] [-d DURATION] [-w WARMUP] [-o OUTDIR] [--results DIR]
#                            [--configs "none fw10k ..."] [fwd_bench.sh options...]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
PY=/usr/bin/python3
REPS=3 DURATION=5 WARMUP=2 OUTDIR="" RESULTS=.
CONFIGS="none fw10k fw10k_lb100 full_imix"
YARA_DIR=${YARA_DIR:-$ROOT/../shared/data/yara/Yara-Rules+rules}
EXTRA=()
while [[ $# -gt 0 ]]; do
  case $1 in
    -r) REPS=$2; shift 2 ;;
    -d) DURATION=$2; shift 2 ;;
    -w) WARMUP=$2; shift 2 ;;
    -o) OUTDIR=$2; shift 2 ;;
    --configs) CONFIGS=$2; shift 2 ;;
    --results) RESULTS=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) EXTRA+=("$1"); shift ;;
  esac
done
for b in "$ROOT/build/control/dpu-appliance" "$ROOT/build/rules/dpi-coverage"; do
  [[ -x $b ]] || { echo "perf_suite: $b missing (ninja -C build dpu-appliance dpi-coverage)" >&2; exit 2; }
done
TMPDIR_OURS=""
if [[ -z $OUTDIR ]]; then
  OUTDIR=$(mktemp -d /tmp/perf_suite.XXXXXX)
  TMPDIR_OURS=$OUTDIR
  mkdir -p "$RESULTS"
  RESULTS=$(cd "$RESULTS" && pwd)
fi
trap '[[ -z $TMPDIR_OURS ]] || rm -rf "$TMPDIR_OURS"' EXIT
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
STARTED=$(date -u +%Y-%m-%d_%H%M)
echo "perf_suite: $(date -u '+%F %T') UTC, $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"

# --- traffic and configs ----------------------------------------------------------------
"$PY" "$HERE/gen_traffic.py" -o "$OUTDIR/t64.pcap" --flows 100000 >/dev/null
"$PY" "$HERE/gen_traffic.py" -o "$OUTDIR/imix.pcap" --flows 10000 --packets 100000 --imix >/dev/null
# The YARA set: every file under YARA_DIR libyara accepts on its own (rules/dpi-coverage
# lists the others); its accepted-rule count is printed.
"$ROOT/build/rules/dpi-coverage" "$YARA_DIR" >"$OUTDIR/dpi-coverage.txt" 2>&1
sed -n 's/^  rejected file \([^:]*\): .*/\1/p' "$OUTDIR/dpi-coverage.txt" >"$OUTDIR/yara_rejected.txt"
echo "perf_suite: DPI rule set $YARA_DIR: $(grep '^files' "$OUTDIR/dpi-coverage.txt")"
"$PY" "$HERE/gen_suite_configs.py" "$OUTDIR" "$YARA_DIR"

# Compile the DPI set once before timing anything (Hyperscan takes a minute for ~1k rules;
# runs after this one load the compiled database from the cache_dir).
if [[ " $CONFIGS " == *" full_imix "* ]]; then
  echo "perf_suite: compiling the DPI rule set into $OUTDIR/dpi-cache (once)"
  "$ROOT/build/control/dpu-appliance" replay --config "$OUTDIR/full_imix.json" \
    --in "$ROOT/examples/example.pcap" --out "$OUTDIR/warm.pcap" --quiet \
    >"$OUTDIR/warm.log" 2>&1 || { cat "$OUTDIR/warm.log" >&2; exit 1; }
fi

traffic_of() { case $1 in *imix*) echo imix ;; *) echo t64 ;; esac; }

# --- runs ------------------------------------------------------------------------------
TSV="$OUTDIR/suite.tsv"
printf "config\ttraffic\ttestpmd_mpps\tappliance_mpps\tratio\ttestpmd_cycles_pkt\tappliance_cycles_pkt\tstage_cycles_pkt\tlatency_p50_us\tlatency_p99_us\tinspected_gbps\tload\tl3fwd_em_mpps\tl3fwd_acl_mpps\tratio_em\tratio_acl\tns_above_floor\tloads\n" >"$TSV"
for cfg in $CONFIGS; do
  tr=$(traffic_of "$cfg")
  run="$OUTDIR/run_$cfg"
  echo "perf_suite: $cfg on $tr ($(uptime | sed 's/.*load average: //'))"
  load=$(cut -d' ' -f1 /proc/loadavg)
  tools="testpmd appliance"
  if [[ $tr == t64 ]]; then tools="testpmd l3fwd_em l3fwd_acl appliance"; fi
  "$HERE/fwd_bench.sh" -r "$REPS" -d "$DURATION" -w "$WARMUP" -p "$OUTDIR/$tr.pcap" \
    -m 2048 --app-config "$OUTDIR/$cfg.json" -o "$run" --tools "$tools" \
    --acl-rules "$OUTDIR/fw10k.rules" "${EXTRA[@]}" | tee "$run.log" | tail -9
  "$PY" - "$run" "$cfg" "$tr" "$load" >>"$TSV" <<'EOF'
import glob, re, statistics, sys
run, cfg, tr, load = sys.argv[1:5]
rows = [l.rstrip("\n").split("\t") for l in open(f"{run}/results.tsv")][1:]
med = {t: statistics.median(float(r[2]) for r in rows if r[1] == t)
       for t in ("testpmd", "l3fwd_em", "l3fwd_acl", "appliance") if any(r[1] == t for r in rows)}
# The appliance's final summaries: cycles per received packet by stage, latency, TSC, and
# the DPI bytes scanned (from the summary's dpi line) over the run's duration.
stages, p50, p99, hz, gbps = {}, [], [], None, []
for out in sorted(glob.glob(f"{run}/appliance_*.out")):
    s = open(out).read()
    m = re.search(r"worker cycles per received packet \(TSC ([\d.]+) GHz\)\n(.*)\n", s)
    if m:
        hz = float(m.group(1)) * 1e9
        for name, v in re.findall(r" (\w+) ([\d.]+)", m.group(2).split("=")[0]):
            stages.setdefault(name, []).append(float(v))
    m = re.search(r"p50 ([\d.]+) us\s+p99 ([\d.]+) us", s)
    if m:
        p50.append(float(m.group(1))); p99.append(float(m.group(2)))
    m = re.search(r"^dpi: (\d+) bytes scanned", s, re.M)
    e = open(out.replace(".out", ".err")).read()
    secs = re.findall(r"^\[\s*([\d.]+)s\]", e, re.M)
    if m and secs:
        gbps.append(int(m.group(1)) * 8 / float(secs[-1]) / 1e9)
med_or = lambda v: f"{statistics.median(v):.2f}" if v else ""
cyc = lambda mpps: f"{hz / (mpps * 1e6):.0f}" if hz and mpps else ""
stage_s = " ".join(f"{k}={statistics.median(v):.0f}" for k, v in stages.items())
peer = lambda t: f"{med[t]:.3f}" if t in med else ""
ratio = lambda t: f"{med['appliance'] / med[t]:.3f}" if t in med else ""
loads = " ".join(f"{t}:{min(float(r[5]) for r in rows if r[1] == t):.1f}-"
                 f"{max(float(r[5]) for r in rows if r[1] == t):.1f}" for t in med)
print("\t".join([cfg, tr, f"{med['testpmd']:.3f}", f"{med['appliance']:.3f}",
                 f"{med['appliance'] / med['testpmd']:.3f}", cyc(med["testpmd"]),
                 cyc(med["appliance"]), stage_s, med_or(p50), med_or(p99), med_or(gbps), load,
                 peer("l3fwd_em"), peer("l3fwd_acl"), ratio("l3fwd_em"), ratio("l3fwd_acl"),
                 f"{1e3 / med['appliance'] - 1e3 / med['testpmd']:.1f}", loads]))
EOF
done
echo
# One table: per configuration and tool, Mpps, ns per packet and the appliance's ratio to it.
"$PY" - "$TSV" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
tools = [("testpmd_mpps", "testpmd io (floor)"), ("l3fwd_em_mpps", "l3fwd em"),
         ("l3fwd_acl_mpps", "l3fwd acl (10k)"), ("appliance_mpps", "appliance")]
print(f"{'config':12s} {'traffic':7s} {'tool':20s} {'Mpps':>8s} {'ns/pkt':>8s} {'appliance/x':>12s} {'load (1 min)':>14s}")
for r in rows:
    loads = dict(x.split(":", 1) for x in r.get("loads", "").split() if ":" in x)
    app = float(r["appliance_mpps"])
    for key, name in tools:
        if not r.get(key):
            continue
        v = float(r[key])
        tool = key[:-5]
        ratio = f"{app / v:.2f}x" if key != "appliance_mpps" else f"+{r['ns_above_floor']} ns"
        print(f"{r['config']:12s} {r['traffic']:7s} {name:20s} {v:8.3f} {1e3 / v:8.1f} {ratio:>12s} "
              f"{loads.get(tool, ''):>14s}")
EOF
echo
column -t -s $'\t' "$TSV"
"$PY" "$HERE/plot_suite.py" "$TSV" "$OUTDIR/suite.png" \
  --title "dpu-appliance beside testpmd io and l3fwd, one worker core ($(date -u +%F), load $(cut -d' ' -f1 /proc/loadavg))"
if [[ -n $TMPDIR_OURS ]]; then
  cp "$TSV" "$RESULTS/perf_suite_$STARTED.tsv"
  cp "$OUTDIR/suite.png" "$RESULTS/perf_suite_$STARTED.png"
  echo "perf_suite: table and plot: $RESULTS/perf_suite_$STARTED.tsv, $RESULTS/perf_suite_$STARTED.png"
else
  echo "perf_suite: results in $TSV and $OUTDIR/suite.png"
fi
