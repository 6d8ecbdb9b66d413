#!/usr/bin/env bash
# Replay and the EAL test binaries leave nothing behind, whether they succeed or fail:
# no DPDK runtime directory (/var/run/dpdk/<prefix> for root, else $XDG_RUNTIME_DIR/dpdk or
# /tmp/dpdk), no empty side-B capture in /tmp. An input path with ',' (DPDK device arguments
# are comma-separated) is refused with a clear message before anything is created.
# usage: replay_leaves_nothing_test.sh DPU_APPLIANCE EAL_TEST_BINARY
set -uo pipefail
APP=$1
EAL_TEST=$2
SRC=$(cd "$(dirname "$0")/../../.." && pwd)
FAILS=0
fail() { echo "FAIL replay_leaves_nothing: $*"; FAILS=$((FAILS + 1)); }
work=$(mktemp -d "${TMPDIR:-/tmp}/replay_leaves_nothing.XXXXXX")
trap 'rm -rf "$work"' EXIT

runtime_dirs() {  # where EAL would put the runtime directory of file prefix $1
  echo "/var/run/dpdk/$1"
  [[ -n ${XDG_RUNTIME_DIR:-} ]] && echo "$XDG_RUNTIME_DIR/dpdk/$1"
  echo "/tmp/dpdk/$1"
}

# run NAME PREFIX_STEM CMD...: runs CMD in the background (its pid names its EAL file prefix
# and its /tmp file), waits, checks that nothing of it remains; prints its exit code.
last_rc=0
run() {
  local name=$1 stem=$2
  shift 2
  # (a directory of the same name older than the run is another, earlier process's with the
  # same pid, e.g. a run killed with SIGKILL: not this run's)
  touch "$work/$name.start"
  "$@" >"$work/$name.out" 2>"$work/$name.err" &
  local pid=$!
  wait "$pid"
  last_rc=$?
  local d
  for d in $(runtime_dirs "$stem$pid"); do
    [[ -e $d && ! $work/$name.start -nt $d ]] && fail "$name: left the DPDK runtime directory $d"
  done
  [[ -e /tmp/dpu-replay-empty-$pid.pcap ]] && fail "$name: left /tmp/dpu-replay-empty-$pid.pcap"
  return 0
}

echo '{}' >"$work/config.json"
cp "$SRC/tests/pcap/udp_icmp/input.pcap" "$work/in.pcap"
cp "$work/in.pcap" "$work/with,comma.pcap"

# 1. A successful replay.
run ok dpu "$APP" replay --config "$work/config.json" --in "$work/in.pcap" --quiet \
  --verdicts "$work/ok.jsonl"
[[ $last_rc -eq 0 ]] || fail "ok: replay exited $last_rc: $(cat "$work/ok.err")"
[[ -s $work/ok.jsonl ]] || fail "ok: no verdicts written"

# 2. A path with ',' (side A, then side B): refused before anything is created.
run comma dpu "$APP" replay --config "$work/config.json" --in "$work/with,comma.pcap" --quiet
[[ $last_rc -ne 0 ]] || fail "comma: replay of a path with ',' exited 0"
grep -q "cannot contain ','" "$work/comma.err" || fail "comma: no clear message: $(cat "$work/comma.err")"
run comma_b dpu "$APP" replay --config "$work/config.json" --in "$work/in.pcap" \
  --in-b "$work/with,comma.pcap" --quiet
[[ $last_rc -ne 0 ]] || fail "comma_b: replay of a side-B path with ',' exited 0"
grep -q "cannot contain ','" "$work/comma_b.err" || fail "comma_b: no clear message"

# 3. A replay that fails after EAL is up (an output that cannot be written).
run late_fail dpu "$APP" replay --config "$work/config.json" --in "$work/in.pcap" --quiet \
  --out "$work/no/such/dir/out.pcap"
[[ $last_rc -ne 0 ]] || fail "late_fail: replay with an unwritable --out exited 0"

# 4. A gtest binary with the EAL test main (tests/util/eal_test_main.cc).
run eal_test dputest "$EAL_TEST" --gtest_brief=1
[[ $last_rc -eq 0 ]] || fail "eal_test: $EAL_TEST exited $last_rc"

if [[ $FAILS -ne 0 ]]; then
  echo "replay_leaves_nothing: $FAILS failure(s)"
  exit 1
fi
echo "replay_leaves_nothing: ok (replay ok / refused / failed late, and an EAL test binary leave nothing)"
