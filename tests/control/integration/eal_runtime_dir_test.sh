#!/usr/bin/env bash
# DPDK runtime directories and start-up output of `dpu-appliance run` (docs/operations.md):
# - the start-up line names what each side is bound to (the pcap file, the tap interface);
# - an appliance killed with -9 leaves /var/run/dpdk/<prefix>; the next start with the same
#   prefix removes it (it says so) and leaves nothing at its own exit;
# - a directory a live appliance uses (its telemetry socket answers) is left alone by a second
#   one with the same prefix;
# - net_tap's multiq qdisc / "start req to secondary" lines do not reach the log as errors.
source "$(dirname "$0")/common.sh" "$@"
[[ $(id -u) -eq 0 ]] || skip "needs root (/var/run/dpdk)"
RUN=/var/run/dpdk
P=dpuit_${TEST_NAME}_$$_shared  # removed by common.sh's cleanup like every dpuit_<test>_<pid>_*

# 1. Start-up names the bindings; kill -9 leaves the directory (telemetry socket inside).
APP_PREFIX=$P start_appliance "$WORK/s1"
grep -qF "forwarding between A (net_pcap0 (rx_pcap=$PCAP,infinite_rx=1)) and B (net_null0 (no-rx=1))" "$APP_LOG" ||
  fail "start-up does not name the ports' bindings: $(grep forwarding "$APP_LOG")"
[[ -S $RUN/$P/dpdk_telemetry.v2 ]] || fail "no telemetry socket in $RUN/$P: $(ls -la "$RUN/$P" 2>&1)"
kill9_appliance
[[ -d $RUN/$P ]] || fail "kill -9 left no runtime directory (nothing to test)"

# 2. The next start with the same prefix removes the stale directory (without telemetry it
#    makes no socket of its own, so nothing would ever remove the old one).
APP_PREFIX=$P APP_EAL_EXTRA=--no-telemetry start_appliance "$WORK/s2"
grep -qF "removed the stale DPDK runtime directory $RUN/$P" "$APP_LOG" ||
  fail "the stale directory was not reported removed"
[[ ! -e $RUN/$P ]] || fail "$RUN/$P still there while the second appliance runs: $(ls -la "$RUN/$P")"
stop_appliance
[[ ! -e $RUN/$P ]] || fail "$RUN/$P left after a clean stop"
pass "a stale runtime directory is removed by the next start with its prefix"

# 3. A live appliance's directory is left alone by a second one with the same prefix.
APP_PREFIX=$P start_appliance "$WORK/s3"
LIVE_PID=$APP_PID LIVE_LOG=$APP_LOG
APP_PREFIX=$P APP_EAL_EXTRA=--no-telemetry start_appliance "$WORK/s4"
! grep -q "removed the stale" "$APP_LOG" || fail "the live appliance's directory was removed"
[[ -S $RUN/$P/dpdk_telemetry.v2 ]] || fail "the live appliance's telemetry socket is gone"
stop_appliance
APP_PID=$LIVE_PID APP_LOG=$LIVE_LOG
stop_appliance
[[ ! -e $RUN/$P ]] || fail "$RUN/$P left after both stopped: $(ls -la "$RUN/$P")"
pass "a directory in use is kept"

# 4. net_tap: the interface is named; no multiq / start-req noise (tests leave no interface:
#    a tap goes with the process).
if [[ -c /dev/net/tun ]]; then
  TA=dpt$$a TB=dpt$$b
  APP_VDEVS="--vdev net_tap0,iface=$TA --vdev net_tap1,iface=$TB" start_appliance "$WORK/s5"
  grep -qF "forwarding between A (net_tap0 on interface $TA (iface=$TA)) and B (net_tap1 on interface $TB (iface=$TB))" "$APP_LOG" ||
    fail "start-up does not name the tap interfaces: $(grep forwarding "$APP_LOG")"
  if grep -E "failed to create multiq qdisc|Could not add multiq|Disabling rte flow|Specified qdisc kind|Failed to send start req" "$APP_LOG"; then
    fail "net_tap start-up noise in the log"
  fi
  stop_appliance
  pass "net_tap start-up names the interfaces, without the multiq / secondary noise"
else
  echo "no /dev/net/tun: the net_tap part is not run"
fi
pass "done"
