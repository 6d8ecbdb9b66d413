#!/usr/bin/env bash
# The perf-suite tooling outside the timed runs: bench/plot_suite.py draws a PNG from a suite
# TSV (and refuses an empty one), and bench/gen_suite_configs.py writes configs the appliance
# accepts (`dpu-appliance validate` on each; the DPI config over a small YARA file); the bench
# scripts remove the DPDK runtime directories of their file prefixes (bench/eal_dirs.sh).
#   bench_tools_test.sh BUILD_DIR
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=${1:-$ROOT/build}
PY=/usr/bin/python3
W=$(mktemp -d /tmp/bench_tools.XXXXXX)
trap 'rm -rf "$W"' EXIT
fail() { echo "bench_tools_test: FAIL: $*" >&2; exit 1; }

printf 'config\ttraffic\ttestpmd_mpps\tappliance_mpps\tratio\ttestpmd_cycles_pkt\tappliance_cycles_pkt\tstage_cycles_pkt\tlatency_p50_us\tlatency_p99_us\tinspected_gbps\tload\n' >"$W/suite.tsv"
printf 'none\tt64\t40.0\t12.0\t0.300\t65\t217\trx=60 parse=40\t2.1\t5.0\t\t0.1\n' >>"$W/suite.tsv"
printf 'full_imix\timix\t20.0\t4.0\t0.200\t130\t650\trx=60 dpi=300\t3.0\t9.0\t2.5\t0.1\n' >>"$W/suite.tsv"
"$PY" "$ROOT/bench/plot_suite.py" "$W/suite.tsv" "$W/suite.png" >/dev/null
[[ $(head -c 8 "$W/suite.png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] || fail "not a PNG"
(( $(stat -c %s "$W/suite.png") > 5000 )) || fail "PNG suspiciously small"
head -1 "$W/suite.tsv" >"$W/empty.tsv"
if "$PY" "$ROOT/bench/plot_suite.py" "$W/empty.tsv" "$W/empty.png" 2>/dev/null; then
  fail "an empty TSV was plotted"
fi

mkdir -p "$W/yara"
cat >"$W/yara/one.yar" <<'YAR'
rule bench_tools_test { strings: $a = "bench-tools-test" condition: $a }
YAR
"$PY" "$ROOT/bench/gen_suite_configs.py" "$W/cfg" "$W/yara"
for c in none fw10k fw10k_b fw10k_lb100 fw10k_lb100_dns fw10k_lb100_dns_b fw10k_b_lb100_dns full_imix; do
  [[ -s $W/cfg/$c.json ]] || fail "$c.json not written"
  "$BUILD/control/dpu-appliance" validate --config "$W/cfg/$c.json" >"$W/v.log" 2>&1 ||
    { cat "$W/v.log" >&2; fail "$c.json does not validate"; }
done
[[ $(wc -l <"$W/cfg/names_1m.txt") == 1000000 ]] || fail "names_1m.txt is not 1M names"
# EAL runtime directories: every bench script that gives a DPDK program a --file-prefix
# tracks it with bench/eal_dirs.sh and removes it from its EXIT trap (a killed appliance and
# dpdk-testpmd leave theirs); the helper removes exactly the tracked prefixes and globs.
for f in "$ROOT"/bench/*.sh; do
  grep -q -- '--file-prefix' "$f" || continue
  grep -qiE 'source "\$here/eal_dirs\.sh"' "$f" || fail "$(basename "$f") starts DPDK without bench/eal_dirs.sh"
  grep -q 'eal_dirs_track ' "$f" || fail "$(basename "$f") tracks no file prefix"
  grep -q 'eal_dirs_cleanup' "$f" || fail "$(basename "$f") never removes its runtime directories"
done
(
  source "$ROOT/bench/eal_dirs.sh"
  base=/var/run/dpdk
  [[ $(id -u) -eq 0 ]] || base=${XDG_RUNTIME_DIR:-/tmp}/dpdk
  mkdir -p "$base/benchtools_$$_a" "$base/benchtools_$$_b1" "$base/benchtools_$$_b2" "$base/benchtools_$$_keep"
  touch "$base/benchtools_$$_a/dpdk_telemetry.v2"
  eal_dirs_track "benchtools_$$_a"
  eal_dirs_track "benchtools_$$_b*"
  eal_dirs_cleanup
  left=$(ls -d "$base"/benchtools_$$_* 2>/dev/null | xargs -n1 basename | tr '\n' ' ')
  rm -rf "$base"/benchtools_$$_*
  [[ $left == "benchtools_$$_keep " ]] || fail "eal_dirs_cleanup left '$left' (expected only the untracked one)"
)
echo "bench_tools_test: ok"
