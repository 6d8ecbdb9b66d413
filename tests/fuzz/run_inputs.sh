#!/usr/bin/env bash
# Runs a fuzz target binary once on every file under the given paths (folders are walked;
# missing paths are skipped with a note). Works with both the libFuzzer binary (files given
# one by one are executed, not fuzzed) and the replay driver. Fails when no input is found.
#
#   tests/fuzz/run_inputs.sh BINARY PATH...
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: $0 BINARY PATH..." >&2; exit 2; }
bin=$1; shift
files=()
for p in "$@"; do
  if [[ -e $p ]]; then
    while IFS= read -r -d '' f; do files+=("$f"); done < <(find "$p" -type f -print0 | sort -z)
  else
    echo "note: $p does not exist (no inputs there)"
  fi
done
if ((${#files[@]} == 0)); then
  echo "FAIL: no inputs under $*" >&2
  exit 1
fi
echo "running $(basename "$bin") on ${#files[@]} inputs"
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
# libFuzzer prints one "Running: FILE" line per input; keep the output short unless it fails.
log=$(mktemp "${TMPDIR:-/tmp}/fuzz_inputs.XXXXXX")
trap 'rm -f "$log"' EXIT
if ! "$bin" "${files[@]}" >"$log" 2>&1; then
  tail -n 60 "$log"
  echo "FAIL: $(basename "$bin") crashed or violated an invariant (the last 'Running:' line names the input)"
  exit 1
fi
echo "PASS: ${#files[@]} inputs"
