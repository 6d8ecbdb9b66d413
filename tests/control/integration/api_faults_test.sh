#!/usr/bin/env bash
# Hostile API clients against a running appliance (api_abuse does the talking, see its header):
#  1. requests past --max-request-bytes: RESOURCE_EXHAUSTED; absurd but well-formed ones just
#     under it: INVALID_ARGUMENT naming the field, a bounded error, nothing committed;
#  2. undecodable request bytes to every method, unknown methods, raw garbage on the socket;
#  3. 32 clients at once (one connection each) reading and applying: only OK or ABORTED, the
#     version advanced by exactly the number of acknowledged applies;
#  4. a WatchEvents subscriber that never reads: other clients keep their deadlines, applies
#     go through, forwarding goes on, the subscriber is told what it lost; and SIGTERM still
#     stops the appliance promptly (exit 0) while a subscriber is stalled.
# After each part the appliance still answers and still forwards.
source "$(dirname "$0")/common.sh" "$@"
ABUSE=${API_ABUSE:-$(dirname "$DPUCTL")/../tests/control/integration/api_abuse}
[[ -x $ABUSE ]] || fail "api_abuse helper '$ABUSE' not found (set API_ABUSE)"
MAX=1048576

STATE=$WORK/state
start_appliance "$STATE" --max-request-bytes "$MAX"
# Drop non-IP frames: every ARP frame of the traffic becomes a drop event (a steady stream).
ctl config set dataplane.non_ip=DROP >/dev/null || fail "config set non_ip=DROP"

rx() { ctl --json stats | jq_rx; }
jq_rx() { $PY -c 'import json,sys; d=json.load(sys.stdin); print(sum(int(p.get("rx_packets",p.get("rxPackets",0))) for p in d.get("ports",[])))'; }
still_forwarding() {  # $1: what just happened
  local a b
  a=$(rx) || fail "$1: stats failed"
  sleep 0.5
  b=$(rx) || fail "$1: stats failed"
  ((b > a)) || fail "$1: the appliance stopped receiving (rx $a -> $b)"
  kill -0 "$APP_PID" 2>/dev/null || fail "$1: the appliance died"
}

"$ABUSE" "$APP_ADDR" oversized "$MAX" || fail "oversized requests"
still_forwarding "oversized requests"
pass "oversized requests"

"$ABUSE" "$APP_ADDR" malformed || fail "malformed requests"
still_forwarding "malformed requests"
pass "malformed requests"

"$ABUSE" "$APP_ADDR" concurrent 32 8 || fail "concurrent clients"
still_forwarding "concurrent clients"
pass "32 concurrent clients"

"$ABUSE" "$APP_ADDR" stall 4 || fail "stalled subscriber"
still_forwarding "stalled subscriber"
pass "a subscriber that never reads"

# SIGTERM with a stalled subscriber: the appliance stops within its grace time, exit 0.
API_ABUSE_KEEP_STALLED=1 "$ABUSE" "$APP_ADDR" stall 1 >"$WORK/stall.out" 2>&1 &
stall_pid=$!
BG_PIDS+=("$stall_pid")
for ((i = 0; i < 300; i++)); do
  grep -q "stalling until killed" "$WORK/stall.out" && break
  kill -0 "$stall_pid" 2>/dev/null || fail "stall client ended: $(cat "$WORK/stall.out")"
  sleep 0.1
done
grep -q "stalling until killed" "$WORK/stall.out" || fail "stall client did not get going"
t0=$SECONDS
kill -TERM "$APP_PID"
rc=0
for ((i = 0; i < 300; i++)); do kill -0 "$APP_PID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$APP_PID" 2>/dev/null && fail "SIGTERM: still running after 30 s with a stalled subscriber"
wait "$APP_PID" || rc=$?
((rc == 0)) || fail "SIGTERM with a stalled subscriber: exit $rc"
kill -9 "$stall_pid" 2>/dev/null || true
pass "SIGTERM with a stalled subscriber: stopped in $((SECONDS - t0)) s, exit 0"
if grep -E 'AddressSanitizer|LeakSanitizer|runtime error:' "$APP_LOG"; then fail "sanitizer report"; fi
echo "PASS $TEST_NAME"
