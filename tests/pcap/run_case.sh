#!/usr/bin/env bash
# Replays one pcap regression case and compares what the appliance wrote with the case's
# expected files.
#
#   tests/pcap/run_case.sh CASE_DIR BINARY          check (exit 1 with a diff on mismatch)
#   REGEN=1 tests/pcap/run_case.sh CASE_DIR BINARY  rewrite the expected_* files instead
#
# CASE_DIR holds config.json, input.pcap (or input_a.pcap [+ input_b.pcap]), intent.tsv and
# the expectations: expected_verdicts.jsonl, expected_summary.json, expected_events.jsonl,
# expected_out.pcap or expected_out.sha256 (frames leaving side B) and expected_out_a.pcap
# or expected_out_a.sha256 (frames leaving side A). Output pcaps up to 32 KiB are kept as
# files, larger ones as a sha256; so are events files over 128 KiB
# (expected_events.sha256). Verdicts and summary are always kept as text.
#
# Every run replays the case twice and requires identical bytes from both runs
# (determinism), then runs check_case.py (self-consistency + the hand-written intent.tsv);
# both also apply with REGEN=1, so a regeneration cannot record inconsistent output.
# See tests/pcap/README.md.
set -euo pipefail

usage() { echo "usage: [REGEN=1] $0 CASE_DIR BINARY" >&2; exit 2; }
[[ $# -eq 2 ]] || usage
case_dir=$(cd "$1" && pwd)
bin=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
name=$(basename "$case_dir")
regen=${REGEN:-0}
max_inline_pcap=32768
max_inline_events=131072

[[ -x $bin ]] || { echo "$name: binary '$bin' not found or not executable" >&2; exit 2; }
[[ -f $case_dir/config.json ]] || { echo "$name: no config.json in $case_dir" >&2; exit 2; }
if [[ -f $case_dir/input.pcap ]]; then
  inputs=(--in "$case_dir/input.pcap")
elif [[ -f $case_dir/input_a.pcap ]]; then
  inputs=(--in "$case_dir/input_a.pcap")
  [[ -f $case_dir/input_b.pcap ]] && inputs+=(--in-b "$case_dir/input_b.pcap")
else
  echo "$name: no input.pcap or input_a.pcap in $case_dir" >&2
  exit 2
fi

# changes.tsv (optional): "INDEX<TAB>FILE" lines, each a config committed before packet INDEX.
if [[ -f $case_dir/changes.tsv ]]; then
  while IFS=$'\t' read -r at file; do
    [[ -z $at || $at == \#* ]] && continue
    inputs+=(--change "$at:$case_dir/$file")
  done <"$case_dir/changes.tsv"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/pcap_case_${name}.XXXXXX")
trap 'rm -rf "$work"' EXIT

outputs=(verdicts.jsonl summary.json events.jsonl out_b.pcap out_a.pcap)
replay() {  # replay RUN_DIR
  mkdir -p "$1"
  if ! "$bin" replay --config "$case_dir/config.json" "${inputs[@]}" \
      --out "$1/out_b.pcap" --out-a "$1/out_a.pcap" --verdicts "$1/verdicts.jsonl" \
      --events "$1/events.jsonl" --summary-json "$1/summary.json" --quiet \
      >"$1/stdout" 2>"$1/stderr"; then
    echo "FAIL $name: dpu-appliance replay exited non-zero; stderr:"
    cat "$1/stderr"
    exit 1
  fi
  for f in "${outputs[@]}"; do
    [[ -f $1/$f ]] || { echo "FAIL $name: replay wrote no $f"; exit 1; }
  done
}

replay "$work/run1"
replay "$work/run2"
for f in "${outputs[@]}"; do
  if ! cmp -s "$work/run1/$f" "$work/run2/$f"; then
    echo "FAIL $name: not deterministic: $f differs between two replays of the same input"
    diff -u "$work/run1/$f" "$work/run2/$f" | head -40 || true
    exit 1
  fi
done
run=$work/run1

if ! python3 "$here/check_case.py" "$case_dir" "$run"; then
  echo "FAIL $name: consistency/intent check failed (see above)"
  exit 1
fi

# Expected file names for an output pcap: inline when small, else its sha256.
pcap_expectation() {  # pcap_expectation BASENAME -> sets exp_pcap and exp_sha
  exp_pcap=$case_dir/$1.pcap
  exp_sha=$case_dir/$1.sha256
}

if [[ $regen == 1 ]]; then
  cp "$run/verdicts.jsonl" "$case_dir/expected_verdicts.jsonl"
  cp "$run/summary.json" "$case_dir/expected_summary.json"
  rm -f "$case_dir/expected_events.jsonl" "$case_dir/expected_events.sha256"
  if (( $(stat -c %s "$run/events.jsonl") <= max_inline_events )); then
    cp "$run/events.jsonl" "$case_dir/expected_events.jsonl"
  else
    (cd "$run" && sha256sum events.jsonl) | sed 's/ events.jsonl$/ expected_events.jsonl/' \
      >"$case_dir/expected_events.sha256"
  fi
  for pair in "out_b.pcap:expected_out" "out_a.pcap:expected_out_a"; do
    out=${pair%%:*}
    pcap_expectation "${pair##*:}"
    rm -f "$exp_pcap" "$exp_sha"
    if (( $(stat -c %s "$run/$out") <= max_inline_pcap )); then
      cp "$run/$out" "$exp_pcap"
    else
      (cd "$run" && sha256sum "$out") | sed "s/ $out\$/ $(basename "$exp_pcap")/" >"$exp_sha"
    fi
  done
  echo "REGEN $name: expected files rewritten; review them with git diff before committing"
  exit 0
fi

# Readable rendering of a one-line JSON object: one field per line.
json_lines() { sed -e 's/,"/,\n"/g' -e 's/{"/{\n"/g' "$1"; }
# Readable rendering of a pcap: tcpdump when installed, else a hex dump.
pcap_text() {
  if command -v tcpdump >/dev/null 2>&1; then
    tcpdump -nn -e -tttt -xx -r "$1" 2>/dev/null
  else
    od -A d -t x1 "$1"
  fi
}

failed=0
fail() { echo "FAIL $name: $*"; failed=1; }

compare_text() {  # compare_text EXPECTED ACTUAL LABEL [renderer]
  local exp=$1 act=$2 label=$3 render=${4:-cat}
  if [[ ! -f $exp ]]; then
    fail "missing $(basename "$exp") (create it with REGEN=1, then review it)"
    return
  fi
  if ! cmp -s "$exp" "$act"; then
    fail "$label differs from $(basename "$exp") (--- expected, +++ actual):"
    diff -u --label "expected/$(basename "$exp")" --label "actual/$label" \
      <($render "$exp") <($render "$act") | head -80 || true
  fi
}

compare_text "$case_dir/expected_verdicts.jsonl" "$run/verdicts.jsonl" verdicts.jsonl
compare_text "$case_dir/expected_summary.json" "$run/summary.json" summary.json json_lines
if [[ -f $case_dir/expected_events.sha256 ]]; then
  want=$(awk '{print $1}' "$case_dir/expected_events.sha256")
  got=$(sha256sum "$run/events.jsonl" | awk '{print $1}')
  if [[ $want != "$got" ]]; then
    fail "events.jsonl sha256 $got differs from expected_events.sha256 ($want); actual" \
         "event counts: $(sed -n 's/.*"event_type":"\([a-z_]*\)".*/\1/p' "$run/events.jsonl" |
                           sort | uniq -c | tr -s ' \n' ' ')"
  fi
else
  compare_text "$case_dir/expected_events.jsonl" "$run/events.jsonl" events.jsonl
fi

for pair in "out_b.pcap:expected_out" "out_a.pcap:expected_out_a"; do
  out=${pair%%:*}
  pcap_expectation "${pair##*:}"
  if [[ -f $exp_pcap ]]; then
    compare_text "$exp_pcap" "$run/$out" "$out" pcap_text
  elif [[ -f $exp_sha ]]; then
    want=$(awk '{print $1}' "$exp_sha")
    got=$(sha256sum "$run/$out" | awk '{print $1}')
    if [[ $want != "$got" ]]; then
      fail "$out sha256 $got differs from $(basename "$exp_sha") ($want);" \
           "the verdict and summary diffs above show which frames changed"
    fi
  else
    fail "missing $(basename "$exp_pcap") or $(basename "$exp_sha") (create with REGEN=1)"
  fi
done

if (( failed )); then
  echo "To accept the new behaviour on purpose: REGEN=1 $0 $case_dir $bin, then review git diff."
  exit 1
fi
echo "PASS $name"
