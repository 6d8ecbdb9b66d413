#!/usr/bin/env bash
# The fleet benchmark (#29, docs/fleet.md): time from `dpuctl fleet apply` to every node
# reporting the version, beside the same config applied node by node through each appliance's
# own gRPC API (`dpuctl config apply`, sequential and all at once), in the same run:
#
#   1. 100 nodes in one process (bench/fleet_bench.cc: a real FleetAgent each, with its own
#      etcd connection, watch, lease and status key; the control side of an appliance without
#      its dataplane tables), small config and large config;
#   2. 3 real appliances (bench/fleet_real_bench.py: dpu-appliance live on veths, --poll idle),
#      small config and large config; the large one also with `fleet apply --no-validate`
#      (what the dpuctl-side validation costs).
#
# Small config: examples/config.json (2 firewall rules, a DNS list, the demo YARA rule, a
# 3-backend LB service) and the same with one more rule. Large config: bench/gen_suite_configs.py's
# fw10k_lb100_dns (10k firewall rules, 100-backend LB, a 1M-name DNS list) and fw10k_b_lb100_dns
# (the other 10k rules). Configs alternate, so every apply is a real change. etcd's request
# rates and watch fan-out come from its /metrics.
#
#   bench/fleet_bench.sh --build DIR [-o OUTDIR] [--nodes N] [--reps R] [--quick]
#
# Needs root (veths for the real appliances), etcd, curl. Writes OUTDIR/results.tsv and the logs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=build out="" nodes=100 reps=5 quick=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    -o) out=$2; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    *) echo "usage: $0 --build DIR [-o OUTDIR] [--nodes N] [--reps R] [--quick]" >&2; exit 2 ;;
  esac
done
build=$(cd "$build" && pwd)
out=${out:-$build/bench/fleet}
mkdir -p "$out"
out=$(cd "$out" && pwd)
app=$build/control/dpu-appliance dpuctl=$build/control/dpuctl fb=$build/bench/fleet_bench
for f in "$app" "$dpuctl" "$fb"; do
  [[ -x $f ]] || { echo "fleet_bench.sh: $f missing (ninja -C $build dpu-appliance dpuctl fleet_bench)" >&2; exit 2; }
done
command -v etcd >/dev/null || { echo "fleet_bench.sh: etcd missing (apt-get install etcd-server etcd-client)" >&2; exit 2; }

cfg=$out/configs
mkdir -p "$cfg"
/usr/bin/python3 - "$here/../examples" "$cfg" <<'EOF'
import json, os, sys
ex, out = sys.argv[1], sys.argv[2]
c = json.load(open(os.path.join(ex, "config.json")))
c["dpi"]["rule_files"] = [os.path.abspath(os.path.join(ex, f)) for f in c["dpi"]["rule_files"]]
json.dump(c, open(os.path.join(out, "small_a.json"), "w"), indent=1)
c["firewall"]["rules"].append({"id": "bench-extra", "priority": 30, "action": "DENY",
                               "protocols": ["udp"], "dst_ports": ["9999"]})
json.dump(c, open(os.path.join(out, "small_b.json"), "w"), indent=1)
EOF
[[ -f $cfg/suite/fw10k_b_lb100_dns.json ]] || /usr/bin/python3 "$here/gen_suite_configs.py" "$cfg/suite" >"$out/gen.log" 2>&1
small=("$cfg/small_a.json" "$cfg/small_b.json")
large=("$cfg/suite/fw10k_lb100_dns.json" "$cfg/suite/fw10k_b_lb100_dns.json")

tsv=$out/results.tsv
: >"$tsv"
: >"$out/log.txt"
echo "# fleet_bench.sh $(date -u +%FT%TZ) on $(hostname), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$out/summary.txt"
run() { echo "+ $*" >>"$out/log.txt"; "$@" 2>&1 | tee -a "$out/log.txt"; }

large_nodes=$nodes large_reps=$(( reps < 3 ? reps : 3 ))
(( quick )) && large_nodes=10
run "$fb" --dpuctl "$dpuctl" --nodes "$nodes" --reps "$reps" --label small --tsv "$tsv" \
    --config "${small[0]}" --config "${small[1]}"
run "$fb" --dpuctl "$dpuctl" --nodes "$large_nodes" --reps "$large_reps" --label large --tsv "$tsv" \
    --config "${large[0]}" --config "${large[1]}"
export FLEET_BENCH_TSV=$tsv
run /usr/bin/python3 "$here/fleet_real_bench.py" "$app" "$dpuctl" small "$reps" "${small[@]}"
run /usr/bin/python3 "$here/fleet_real_bench.py" "$app" "$dpuctl" large "$large_reps" "${large[@]}"
FLEET_APPLY_EXTRA=--no-validate run /usr/bin/python3 "$here/fleet_real_bench.py" "$app" "$dpuctl" \
    large-no-validate "$large_reps" "${large[@]}"
# The summaries (each run's medians) in one place.
awk '/^fleet_(real_)?bench /{p=1} /^  (fleet|peer) rep|^\+ /{p=0} p' "$out/log.txt" >>"$out/summary.txt"
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/summary.txt"
echo
cat "$out/summary.txt"
echo "results: $tsv, log: $out/log.txt"
