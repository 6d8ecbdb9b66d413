#!/usr/bin/env bash
# Instructions per packet of the packet path (Worker::processBurst and everything it calls),
# counted by callgrind: exact and the same on every run, so a before/after of a packet-path
# change is not blurred by this VM's +-25% cycle swings (bench/RESULTS.md uses it).
#
#   bench/callgrind_path.sh BINARY [CONFIG...]      (CONFIG: none fw10k_lb100 full_imix)
#
# Configs from bench/gen_suite_configs.py (full_imix: DNS 1M names + DPI over the shared
# Yara-Rules files, minus the files dpi-coverage rejects), traffic from bench/gen_traffic.py:
# 20k packets of 1k flows, 60 B frames (IMIX for full_imix). Generated once under
# $CG_DIR (default /tmp/dpu-callgrind) and reused; full_imix replays once natively first so
# its Hyperscan database is compiled into the config's dpi.cache_dir outside the count.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(readlink -f "${1:?usage: callgrind_path.sh BINARY [CONFIG...]}")
shift
configs=("$@")
((${#configs[@]})) || configs=(none fw10k_lb100 full_imix)
dir=${CG_DIR:-/tmp/dpu-callgrind}
yara=$root/../shared/data/yara/Yara-Rules+rules
mkdir -p "$dir"
command -v valgrind >/dev/null || { echo "callgrind_path: valgrind is not installed" >&2; exit 1; }
if [[ ! -f $dir/cfg/full_imix.json ]]; then
  mkdir -p "$dir/cfg"
  cov=$(dirname "$bin")/../rules/dpi-coverage
  [[ -x $cov ]] || cov=$root/build/rules/dpi-coverage
  "$cov" "$yara" 2>/dev/null | sed -n 's/^  rejected file \([^:]*\):.*/\1/p' >"$dir/cfg/yara_rejected.txt" || true
  /usr/bin/python3 "$root/bench/gen_suite_configs.py" "$dir/cfg" "$yara" >/dev/null
fi
[[ -f $dir/t60.pcap ]] || /usr/bin/python3 "$root/bench/gen_traffic.py" -o "$dir/t60.pcap" --flows 1000 --packets 20000 --size 60 >/dev/null
[[ -f $dir/timix.pcap ]] || /usr/bin/python3 "$root/bench/gen_traffic.py" -o "$dir/timix.pcap" --flows 1000 --packets 20000 --imix >/dev/null
for c in "${configs[@]}"; do
  t=$dir/t60.pcap
  [[ $c == full_imix ]] && t=$dir/timix.pcap
  if [[ $c == full_imix ]]; then  # warm the compile cache
    "$bin" replay --config "$dir/cfg/$c.json" --in "$t" --quiet >/dev/null 2>&1
  fi
  out=$dir/cg.$c.$$.out
  valgrind --tool=callgrind --collect-atstart=no --toggle-collect='dpu::dp::Worker::processBurst(*' \
    --callgrind-out-file="$out" "$bin" replay --config "$dir/cfg/$c.json" --in "$t" --quiet \
    >/dev/null 2>"$dir/cg.$c.log"
  ir=$(sed -n 's/^summary: \([0-9]*\).*/\1/p' "$out" | head -1)
  [[ -n $ir ]] || ir=$(sed -n 's/^totals: \([0-9]*\).*/\1/p' "$out" | head -1)
  awk -v c="$c" -v ir="$ir" 'BEGIN{printf "%-12s %.1f instructions per packet (%s over 20000 packets)\n", c, ir/20000, ir}'
  [[ -n ${CG_KEEP:-} ]] || rm -f "$out"
done
