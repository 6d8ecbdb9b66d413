# Shared helpers of the control-plane integration tests (sourced, not run).
#   usage in a test: source common.sh "$@"   (args: DPU_APPLIANCE DPUCTL)
# Provides: $WORK (temp dir, removed on exit), $APPLIANCE, $DPUCTL, PY (/usr/bin/python3),
# make_pcap, start_appliance, stop_appliance, kill9_appliance, ctl, fail, pass, skip, jq_py,
# wait_until.
#
# A busy machine (2 cores at load 5, ASan) makes everything slower, never wrong: the tests wait
# for what they wait for as long as it takes. dpuctl calls have no deadline (DPUCTL_TIMEOUT=0:
# a 30k-rule apply took longer than dpuctl's default 30 s); waits for something the appliance
# will do (start-up, a reload, a log line, a counter) poll up to WAIT_S seconds (default 300),
# under ctest's 600 s TIMEOUT so a real hang still fails with the appliance's log.
set -euo pipefail
export DPUCTL_TIMEOUT=0
WAIT_S=${WAIT_S:-300}

# wait_until CMD...: runs CMD every 0.1 s until it succeeds (0) or WAIT_S seconds have passed
# (1). The caller checks the outcome itself (so that the failure says what was missing).
wait_until() {
  local end=$((SECONDS + WAIT_S))
  until "$@"; do
    ((SECONDS < end)) || return 1
    sleep 0.1
  done
}

if [[ $# -lt 2 ]]; then
  echo "usage: $0 DPU_APPLIANCE DPUCTL" >&2
  exit 2
fi
APPLIANCE=$1
DPUCTL=$2
TEST_NAME=$(basename "$0" .sh)
PY=/usr/bin/python3

skip() { echo "SKIPPED: $*"; exit 77; }
fail() {
  echo "FAIL $TEST_NAME: $*"
  if [[ -n ${APP_LOG:-} && -f ${APP_LOG:-} ]]; then
    # A sanitizer report: its head (the error and the stack of the bad access), which the
    # tail below would cut off.
    if grep -qE 'ERROR: (Address|Leak|UndefinedBehavior)Sanitizer|runtime error:' "$APP_LOG"; then
      echo "--- appliance log ($APP_LOG): sanitizer report ---"
      grep -m1 -A 45 -E 'ERROR: (Address|Leak|UndefinedBehavior)Sanitizer|runtime error:' "$APP_LOG"
    fi
    echo "--- appliance log ($APP_LOG), last 40 lines ---"
    tail -n 40 "$APP_LOG"
  fi
  exit 1
}
pass() { echo "ok   $TEST_NAME: $*"; }

[[ -x $APPLIANCE ]] || fail "dpu-appliance '$APPLIANCE' is not executable"
[[ -x $DPUCTL ]] || fail "dpuctl '$DPUCTL' is not executable"
[[ -x $PY ]] || skip "$PY not found (apt-get install python3 python3-scapy)"
$PY -c 'import scapy.all' 2>/dev/null || skip "python3-scapy missing (apt-get install python3-scapy)"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/dpu_${TEST_NAME}.XXXXXX")
APP_PIDS=()
cleanup() {
  local rc=$?
  for p in "${APP_PIDS[@]:-}"; do
    [[ -n $p ]] && kill -9 "$p" 2>/dev/null || true
  done
  for p in "${BG_PIDS[@]:-}"; do
    [[ -n $p ]] && kill -9 "$p" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  # An appliance stopped with kill -9 (persistence tests) cannot remove its DPDK runtime
  # directory itself: remove those of this script's file prefixes (start_appliance's,
  # ops_test's unit run, state_faults' read-only run).
  rm -rf /var/run/dpdk/dpuit_"${TEST_NAME}"_$$_* /var/run/dpdk/dpuit_unit_$$ 2>/dev/null || true
  if [[ $rc -ne 0 && -n ${KEEP_WORK:-} ]]; then
    echo "work directory kept: $WORK"
  else
    rm -rf "$WORK"
  fi
}
BG_PIDS=()
trap cleanup EXIT

# make_pcap OUT: ARP, IPv4 TCP and UDP frames; 2 of every 8 frames are non-IP (ARP).
make_pcap() {
  $PY - "$1" <<'PYEOF'
import sys
from scapy.all import Ether, ARP, IP, TCP, UDP, Raw, wrpcap
a, b = "02:00:00:00:00:01", "02:00:00:00:00:02"
pk = [
    Ether(src=a, dst="ff:ff:ff:ff:ff:ff") / ARP(op=1, psrc="10.0.0.1", pdst="10.0.0.2"),
    Ether(src=a, dst=b) / IP(src="10.0.0.1", dst="10.0.0.2") / TCP(sport=40000, dport=80, flags="S"),
    Ether(src=a, dst=b) / IP(src="10.0.0.1", dst="10.0.0.2") / TCP(sport=40000, dport=80, flags="A") / Raw(b"GET / HTTP/1.1\r\n\r\n"),
    Ether(src=a, dst=b) / IP(src="10.0.0.3", dst="10.0.0.4") / UDP(sport=5000, dport=53) / Raw(b"q" * 30),
    Ether(src=b, dst=a) / ARP(op=2, psrc="10.0.0.2", pdst="10.0.0.1"),
    Ether(src=a, dst=b) / IP(src="10.0.0.5", dst="10.0.0.6") / UDP(sport=5001, dport=123) / Raw(b"n" * 48),
    Ether(src=a, dst=b) / IP(src="10.0.0.7", dst="10.0.0.8") / TCP(sport=40001, dport=443, flags="S"),
    Ether(src=a, dst=b) / IP(src="10.0.0.9", dst="10.0.0.10") / UDP(sport=5002, dport=514) / Raw(b"l" * 20),
]
wrpcap(sys.argv[1], pk)
PYEOF
}

PREFIX_N=0
# start_appliance STATE_DIR [run options...]: starts `dpu-appliance run` in the background on
# net_pcap (side A, $PCAP replayed forever) -> net_null (side B, no rx), waits until the API
# listens. Sets APP_PID, APP_LOG, APP_OUT, APP_ADDR. The caller may set APP_PREFIX (the EAL
# file prefix; a new dpuit_<test>_<pid>_<n> by default), APP_EAL_EXTRA (more EAL arguments),
# APP_VDEVS (the --vdev arguments instead of the pcap -> null pair) and APP_LCORES (EAL -l,
# default 0,1: control + one worker; a value with '@' goes to --lcores instead, e.g.
# '(0-2)@(0,1)': three lcores on two CPUs).
start_appliance() {
  local state=$1
  shift
  PREFIX_N=$((PREFIX_N + 1))
  APP_LOG=$WORK/appliance.$PREFIX_N.log
  APP_OUT=$WORK/appliance.$PREFIX_N.out
  local eal_extra=() vdevs=(--vdev "net_pcap0,rx_pcap=$PCAP,infinite_rx=1" --vdev net_null0,no-rx=1)
  [[ -z ${APP_EAL_EXTRA:-} ]] || read -ra eal_extra <<<"$APP_EAL_EXTRA"
  [[ -z ${APP_VDEVS:-} ]] || read -ra vdevs <<<"$APP_VDEVS"
  local lcores=(-l "${APP_LCORES:-0,1}")
  [[ ${APP_LCORES:-} != *@* ]] || lcores=(--lcores "$APP_LCORES")
  "$APPLIANCE" run --state-dir "$state" "$@" -- \
    "${lcores[@]}" --no-huge --no-pci --no-shconf \
    --file-prefix="${APP_PREFIX:-dpuit_${TEST_NAME}_$$_$PREFIX_N}" \
    -m 1024 --log-level=lib.eal:error "${eal_extra[@]}" "${vdevs[@]}" \
    >"$APP_OUT" 2>"$APP_LOG" &
  APP_PID=$!
  APP_PIDS+=("$APP_PID")
  local end=$((SECONDS + WAIT_S))
  while ((SECONDS < end)); do
    if grep -q "API listening on" "$APP_LOG" 2>/dev/null && grep -q "forwarding between" "$APP_LOG"; then
      APP_ADDR=$(sed -n 's/^dpu-appliance: API listening on \([^ ]*\) .*/\1/p' "$APP_LOG" | head -1)
      return 0
    fi
    if ! kill -0 "$APP_PID" 2>/dev/null; then
      wait "$APP_PID" || true
      fail "dpu-appliance exited during start-up"
    fi
    sleep 0.1
  done
  fail "dpu-appliance did not start listening within $WAIT_S s"
}

# stop_appliance: SIGTERM, wait, require exit status 0.
stop_appliance() {
  kill -TERM "$APP_PID"
  local rc=0
  wait "$APP_PID" || rc=$?
  [[ $rc -eq 0 ]] || fail "dpu-appliance exited with $rc after SIGTERM"
}

kill9_appliance() {
  kill -9 "$APP_PID"
  wait "$APP_PID" 2>/dev/null || true
}

# ctl ARGS...: dpuctl against the running appliance.
ctl() { "$DPUCTL" --server "$APP_ADDR" "$@"; }

# jq_py FILE EXPR: evaluates the Python expression EXPR with `d` = the JSON in FILE.
jq_py() {
  $PY -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

PCAP=$WORK/traffic.pcap
make_pcap "$PCAP"
