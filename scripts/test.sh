#!/usr/bin/env bash
# README command 2 (and CI: .ci/run): installs dependencies, builds, and runs the whole test
# suite (ctest) in build/; then the same suite built with ASan + UBSan (build-asan/, Debug,
# plus the hostile pcap replay; SANITIZE=0 skips it); then every fuzz target for FUZZ_SECONDS
# seconds each (default 30; scripts/fuzz, build-fuzz/; FUZZ_SECONDS=0 skips it). Any
# failure, sanitizer report or fuzz finding fails it. Extra args go to ctest.
# Each phase prints its wall time and the CPU time (user + sys) of its processes.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=${JOBS:-$(nproc)}
# ctest runs one test more than there are CPUs: many tests wait part of their time (DPDK's
# 100 ms TSC calibration at every EAL start, etcd and gRPC round trips, netns links), and a
# third one fills those gaps (normal ctest on 2 CPUs: 331 s at -j2, 316 s at -j3).
ctest_jobs=${CTEST_JOBS:-$((jobs + 1))}

phase_t0=$SECONDS
phase_cpu0=0
# Children's user+sys CPU seconds so far (bash `times`, second line). `times` must run in
# this shell: in a $(...) subshell it reports the subshell's children (none), which made
# every phase print 0 s CPU before.
cpu_file=$(mktemp "${TMPDIR:-/tmp}/test-cpu.XXXXXX")
# The Hyperscan databases the YARA tests compile (tests/rules/dpi_test_util.h: through the
# product's dpi.cache_dir, keyed by the expressions, their flags and the library version):
# the sanitizer phase loads what the first phase compiled for the same rules. libhs is not
# instrumented, so compiling them again under ASan checks nothing more of ours; translation,
# evaluation and scanning still run in both builds. Removed at the end.
hs_cache=$(mktemp -d "${TMPDIR:-/tmp}/test-hs-cache.XXXXXX")
export DPU_TEST_HS_CACHE_DIR=$hs_cache
trap 'rm -f "$cpu_file"; rm -rf "$hs_cache"' EXIT
cpu_now() {  # sets CPU_NOW (not a $(...) either, for the same reason)
  times >"$cpu_file"
  CPU_NOW=$(awk 'NR == 2 { for (i = 1; i <= 2; i++) { split($i, a, "m"); s += a[1] * 60 + a[2] } print int(s) }' "$cpu_file")
}
# The slowest tests of a ctest phase (its Testing/Temporary/LastTest.log), so a test that
# outgrows the README's rule (<= 10 s CPU in the sanitizer build) shows in every run.
slowest() {
  local log=$1/Testing/Temporary/LastTest.log
  [[ -f $log ]] || return 0
  echo "== slowest tests in $1:"
  awk '/^[0-9]+\/[0-9]+ Testing: / { name = $3 }
       /^Test time = / { printf "   %7.1f s  %s\n", $4, name }' "$log" | sort -rn | awk 'NR <= 8'  # (all read: no SIGPIPE under pipefail)
}
phase_done() {
  local cpu
  cpu_now
  cpu=$CPU_NOW
  echo "== $1: $((SECONDS - phase_t0)) s wall, $((cpu - phase_cpu0)) s CPU (total so far: $SECONDS s wall)"
  phase_t0=$SECONDS
  phase_cpu0=$cpu
}

scripts/install-deps.sh
scripts/build.sh -DDPU_BUILD_TESTS=ON
phase_done "build"
(cd "${BUILD_DIR:-build}" && ctest --output-on-failure -j"$ctest_jobs" "$@")
slowest "${BUILD_DIR:-build}"
phase_done "tests"

if [[ ${SANITIZE:-1} != 0 ]]; then
  # Debug (-O0): the sanitizers check the same at -O0, and it builds ~3x faster than -O2;
  # with clang (scripts/build.sh --asan says why).
  asan_dir=${ASAN_BUILD_DIR:-build-asan}
  echo "== sanitizer build (ASan + UBSan): $asan_dir"
  ASAN_BUILD_DIR=$asan_dir scripts/build.sh --asan -DDPU_BUILD_TESTS=ON
  phase_done "sanitizer build"
  (cd "$asan_dir" &&
    ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1} \
    UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1} \
    LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/tests/sanitizers/lsan.supp:print_suppressions=0} \
    ctest --output-on-failure -j"$ctest_jobs" "$@")
  slowest "$asan_dir"
  phase_done "sanitizer tests"
fi

if [[ ${FUZZ_SECONDS:-30} != 0 ]]; then
  echo "== fuzzing: ${FUZZ_SECONDS:-30} s per target"
  scripts/fuzz "${FUZZ_SECONDS:-30}"
  phase_done "fuzzing (build + runs)"
fi
echo "== all passed in $SECONDS s"
