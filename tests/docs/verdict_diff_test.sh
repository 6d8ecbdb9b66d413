#!/usr/bin/env bash
# scripts/verdict-diff on the example shown in docs/pcap-regression.md: examples/example.pcap
# replayed with examples/config.json and with examples/firewall/default-deny.json. The
# numbers printed in the doc are checked here, so the doc cannot go stale either.
# usage: verdict_diff_test.sh REPO_ROOT DPU_APPLIANCE
set -euo pipefail
ROOT=$1
APP=$2
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL verdict_diff: $*"; exit 1; }
"$APP" replay --config "$ROOT/examples/config.json" --in "$ROOT/examples/example.pcap" --verdicts "$W/a.jsonl" --quiet
"$APP" replay --config "$ROOT/examples/firewall/default-deny.json" --in "$ROOT/examples/example.pcap" --verdicts "$W/b.jsonl" --quiet
rc=0; "$ROOT/scripts/verdict-diff" "$W/a.jsonl" "$W/b.jsonl" >"$W/out" || rc=$?
[[ $rc -eq 1 ]] || fail "exit $rc for different verdicts (want 1)"
# Every line the doc shows (but the "..." line) is in the output.
sed -n '/^    scripts\/verdict-diff a.jsonl b.jsonl$/,/^`--rules`/p' "$ROOT/docs/pcap-regression.md" |
  sed -n '3,$p' | grep -v '^`--rules`' | grep -v '^ *\.\.\.$' | grep -v '^$' | sed 's/^    //' >"$W/doc"
[[ $(wc -l <"$W/doc") -ge 3 ]] || fail "could not find the example output in docs/pcap-regression.md"
while IFS= read -r line; do
  grep -qxF -- "$line" "$W/out" || fail "doc line not in the output: '$line'
output:
$(cat "$W/out")"
done <"$W/doc"
rc=0; "$ROOT/scripts/verdict-diff" "$W/a.jsonl" "$W/a.jsonl" >"$W/same" || rc=$?
[[ $rc -eq 0 ]] && grep -q "^0 of 51 packets judged differently" "$W/same" || fail "same verdicts: rc $rc $(cat "$W/same")"
head -5 "$W/a.jsonl" >"$W/short.jsonl"
rc=0; "$ROOT/scripts/verdict-diff" "$W/a.jsonl" "$W/short.jsonl" >/dev/null 2>&1 || rc=$?
[[ $rc -eq 2 ]] || fail "different captures: rc $rc (want 2)"
rc=0; "$ROOT/scripts/verdict-diff" --rules --json "$W/a.jsonl" "$W/b.jsonl" >"$W/json" || rc=$?
[[ $rc -eq 1 && $(wc -l <"$W/json") -eq 49 ]] || fail "--rules --json: rc $rc, $(wc -l <"$W/json") lines (want 49)"
# A reader that stops early (`verdict-diff ... | head`): no BrokenPipeError traceback. The
# read end is closed before the script starts, so its first write fails, every time.
python3 - "$ROOT/scripts/verdict-diff" "$W/a.jsonl" "$W/b.jsonl" <<'PY' || fail "closed pipe: traceback on stderr"
import os, subprocess, sys
r, w = os.pipe()
os.close(r)
p = subprocess.run(sys.argv[1:], stdout=w, stderr=subprocess.PIPE)
if p.stderr:
    sys.stderr.write(p.stderr.decode())
    sys.exit(1)
PY
echo "ok   verdict_diff: the example of docs/pcap-regression.md"
