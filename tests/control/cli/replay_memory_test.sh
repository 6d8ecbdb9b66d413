#!/usr/bin/env bash
# dpu-appliance replay --memory / -m: the DPDK memory of a replay. Out-of-range values are a
# usage error (exit 2); too little memory fails at once with the amount used and the way to
# give more; enough memory replays. Leaves nothing behind (its temp dir, the EAL runtime
# directories of its replays).
# usage: replay_memory_test.sh DPU_APPLIANCE
set -uo pipefail
APP=$1
SRC=$(cd "$(dirname "$0")/../../.." && pwd)
WORK=$(mktemp -d /tmp/dpu_replay_memory.XXXXXX)
FAILS=0
fail() { echo "FAIL replay memory: $*"; FAILS=$((FAILS + 1)); }
replay() {  # replay ARGS...: runs the replay, sets rc, keeps stderr in $WORK/err
  "$APP" replay "$@" >"$WORK/out" 2>"$WORK/err" &
  local pid=$!
  wait $pid
  rc=$?
  rm -rf "/var/run/dpdk/dpu$pid"
}
trap 'rm -rf "$WORK"' EXIT
CFG=$SRC/examples/firewall/config.json
PCAP=$SRC/examples/example.pcap

for bad in 10 63 1048577 lots; do
  replay --memory "$bad" --config "$CFG" --in "$PCAP" --quiet
  [[ $rc -eq 2 ]] || fail "--memory $bad: exit $rc (want 2)"
  grep -q "expected MB in \[64, 1048576\]" "$WORK/err" || fail "--memory $bad: $(cat "$WORK/err")"
done
replay -m 64 --config "$CFG" --in "$PCAP" --quiet
[[ $rc -eq 1 ]] || fail "-m 64: exit $rc (want 1)"
grep -q "replay ran with 64 MB of DPDK memory (--memory): give more with --memory MB" "$WORK/err" ||
  fail "-m 64: $(cat "$WORK/err")"
replay --memory 1024 --config "$CFG" --in "$PCAP" --quiet --verdicts "$WORK/v.jsonl"
[[ $rc -eq 0 ]] || fail "--memory 1024: exit $rc: $(cat "$WORK/err")"
[[ $(wc -l <"$WORK/v.jsonl") -gt 0 ]] || fail "--memory 1024: no verdicts"
# Sized from the config (no option): the same run works.
replay --config "$CFG" --in "$PCAP" --quiet
[[ $rc -eq 0 ]] || fail "sized from the config: exit $rc: $(cat "$WORK/err")"

if ((FAILS)); then
  echo "replay memory: $FAILS failure(s)"
  exit 1
fi
echo "ok   replay memory: --memory range, a clear failure with too little, replays with enough"
