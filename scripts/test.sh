#!/usr/bin/env bash
# README command 2: installs dependencies, builds, and runs the whole test suite (ctest);
# then the same suite built with ASan + UBSan (build-asan/, plus the hostile pcap replay),
# then every fuzz target for FUZZ_SECONDS (default 30) each (scripts/fuzz, build-fuzz/).
# SANITIZE=0 skips the sanitizer build, FUZZ_SECONDS=0 the fuzzing. Extra args go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
scripts/install-deps.sh
scripts/build.sh
(cd "${BUILD_DIR:-build}" && ctest --output-on-failure -j"${JOBS:-$(nproc)}" "$@")
echo "== build + tests: $SECONDS s"

if [[ ${SANITIZE:-1} != 0 ]]; then
  # Debug (-O0): the sanitizers check the same at -O0, and it builds ~3x faster than -O2.
  echo "== sanitizer build (ASan + UBSan): ${ASAN_BUILD_DIR:-build-asan}"
  BUILD_TYPE=Debug BUILD_DIR=${ASAN_BUILD_DIR:-build-asan} scripts/build.sh -DDPU_SANITIZE=ON
  (cd "${ASAN_BUILD_DIR:-build-asan}" &&
    ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1} \
    UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1} \
    LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/tests/sanitizers/lsan.supp:print_suppressions=0} \
    ctest --output-on-failure -j"${JOBS:-$(nproc)}" "$@")
  echo "== sanitizer build + tests done: $SECONDS s"
fi

if [[ ${FUZZ_SECONDS:-30} != 0 ]]; then
  echo "== fuzzing: ${FUZZ_SECONDS:-30} s per target"
  scripts/fuzz "${FUZZ_SECONDS:-30}"
  echo "== fuzzing done: $SECONDS s"
fi
