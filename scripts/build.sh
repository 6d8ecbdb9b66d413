#!/usr/bin/env bash
# Configures and builds into ./build (or $BUILD_DIR). Extra args go to cmake; TARGETS (space-
# separated) builds only those ninja targets (default: all).
#
#   scripts/build.sh [--asan] [CMAKE_ARGS...]
#     --asan   the sanitizer build (scripts/test.sh, scripts/fuzz --hostile-all): build-asan/
#              (or $ASAN_BUILD_DIR), ASan + UBSan (-DDPU_SANITIZE=ON), Debug at -O0 with line
#              tables only (-gline-tables-only: what a sanitizer report needs for its stacks;
#              full -g with CMAKE_CXX_FLAGS_DEBUG=-g), with clang when it is installed: clang
#              compiles this tree's -O0 ASan objects in about half GCC's time (appliance_
#              service_test.cc 14.9 s vs 30.5 s) and CI's whole sanitizer build in 428 s vs 644.
set -euo pipefail
cd "$(dirname "$0")/.."
args=()
if [[ ${1:-} == --asan ]]; then
  shift
  BUILD_DIR=${ASAN_BUILD_DIR:-build-asan}
  BUILD_TYPE=Debug
  args+=(-DDPU_SANITIZE=ON)
  if command -v clang++ >/dev/null && [[ -z ${CXX:-} ]]; then
    args+=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++
           "-DCMAKE_C_FLAGS_DEBUG=-O0 -gline-tables-only" "-DCMAKE_CXX_FLAGS_DEBUG=-O0 -gline-tables-only")
  fi
fi
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} "${args[@]}" "$@"
# shellcheck disable=SC2086
ninja -C "$BUILD_DIR" -j"${JOBS:-$(nproc)}" ${TARGETS:-}
