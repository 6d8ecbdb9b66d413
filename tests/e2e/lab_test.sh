#!/usr/bin/env bash
# scripts/lab.sh end to end: `up` with the lab config, then the things it tells the user to
# try, each with the outcome the config promises; `down` leaves nothing behind (no
# namespace, no veth, no process, no lab directory, nothing in /var/run/dpdk).
#
#   tests/e2e/lab_test.sh BUILD_DIR
#
# Needs root; without it (or without network namespaces) prints "SKIPPED: ..." and exits 77.
set -euo pipefail
[[ $# -eq 1 ]] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
build=$(readlink -f "$1")
root=$(cd "$(dirname "$0")/../.." && pwd)
lab=$root/scripts/lab.sh
export DPU_LAB_DIR=$(mktemp -d "${TMPDIR:-/tmp}/dpu_lab_test.XXXXXX")
LOGS=$(mktemp -d "${TMPDIR:-/tmp}/dpu_lab_test_logs.XXXXXX")
skip() { echo "SKIPPED: lab: $*"; rm -rf "$DPU_LAB_DIR" "$LOGS"; exit 77; }
fail() {
  echo "FAIL: lab: $*"
  [[ -f $DPU_LAB_DIR/appliance.log ]] && tail -n 30 "$DPU_LAB_DIR/appliance.log"
  exit 1
}
[[ $(id -u) -eq 0 ]] || skip "needs root to create network namespaces (uid $(id -u))"
command -v ip >/dev/null || skip "iproute2 missing"
ip netns add dpu-lab-probe-$$ 2>/dev/null || skip "'ip netns add' is not permitted here"
ip netns del dpu-lab-probe-$$
command -v curl >/dev/null || fail "curl missing (scripts/install-deps.sh)"
command -v dig >/dev/null || fail "dig missing (scripts/install-deps.sh installs bind9-dnsutils)"
trap '"$lab" down >/dev/null 2>&1 || true; rm -rf "$DPU_LAB_DIR" "$LOGS"' EXIT

"$lab" up --build "$build" >"$LOGS/up.log" 2>&1 || { cat "$LOGS/up.log"; fail "lab up failed"; }
cat "$LOGS/up.log"
grep -q "^lab up: dpu-lab-a" "$LOGS/up.log" || fail "no 'lab up' line"
"$lab" status >/dev/null || fail "lab status says down"
in_a() { ip netns exec dpu-lab-a "$@"; }

out=$(in_a curl -sS -m 120 http://198.51.100.2/) || fail "curl through the appliance failed"
[[ $out == "hello from dpu-lab-b behind dpu-appliance" ]] || fail "curl got '$out'"
echo "ok: HTTP passes"
ans=$(in_a dig +short +tries=5 +time=5 @198.51.100.2 www.example.org A) || fail "dig failed"
[[ $ans == 198.51.100.2 ]] || fail "dig www.example.org: '$ans'"
echo "ok: DNS answered by the server"
st=$(in_a dig +tries=5 +time=5 @198.51.100.2 ads.blocked.example A | sed -n 's/.*status: \([A-Z]*\).*/\1/p')
[[ $st == NXDOMAIN ]] || fail "dig ads.blocked.example: status '$st' (want NXDOMAIN from the appliance)"
echo "ok: blocked name answered NXDOMAIN"
rc=0
in_a curl -sS -m 120 -o /dev/null http://198.51.100.2/eicar.com 2>"$LOGS/eicar.err" || rc=$?
[[ $rc -ne 0 ]] || fail "the EICAR download passed"
echo "ok: EICAR download stopped (curl exit $rc: $(cat "$LOGS/eicar.err"))"
# A server does listen on port 23 in dpu-lab-b: a refused connection is the appliance's RST.
ip netns exec dpu-lab-b python3 -m http.server 23 --bind 198.51.100.2 >/dev/null 2>&1 &
tel=$!
until ip netns exec dpu-lab-b python3 -c "import socket; socket.create_connection(('198.51.100.2', 23), 1)" 2>/dev/null; do
  kill -0 "$tel" 2>/dev/null || fail "the port 23 server did not start"
  sleep 0.1
done
rc=0
in_a curl -sS -m 120 telnet://198.51.100.2:23 </dev/null 2>"$LOGS/telnet.err" || rc=$?
kill "$tel"; wait "$tel" 2>/dev/null || true
grep -qi "refused\|reset\|Couldn't connect" "$LOGS/telnet.err" || fail "telnet not rejected: exit $rc: $(cat "$LOGS/telnet.err")"
echo "ok: telnet rejected ($(cat "$LOGS/telnet.err"))"
ctl=("$build/control/dpuctl" --server "unix:$DPU_LAB_DIR/state/api.sock")
"${ctl[@]}" status >/dev/null || fail "dpuctl status"
"${ctl[@]}" --json stats >"$LOGS/stats.json" || fail "dpuctl stats"
for r in firewall_reject dpi_reset; do
  grep -q "\"$r\"" "$LOGS/stats.json" || fail "no $r in the stats: $(head -c 2000 "$LOGS/stats.json")"
done
echo "ok: dpuctl sees the rejects"

"$lab" down >"$LOGS/down.log" 2>&1 || { cat "$LOGS/down.log"; fail "lab down failed"; }
grep -q "final counters" "$LOGS/down.log" || fail "down printed no final counters"
! ip netns list | grep -q dpu-lab || fail "namespaces left: $(ip netns list)"
! ip link show dpulab-a >/dev/null 2>&1 || fail "veth dpulab-a left"
! ip link show dpulab-b >/dev/null 2>&1 || fail "veth dpulab-b left"
[[ ! -e $DPU_LAB_DIR ]] || fail "$DPU_LAB_DIR left"
[[ ! -e /var/run/dpdk/dpu-lab ]] || fail "/var/run/dpdk/dpu-lab left"
! "$lab" status >/dev/null || fail "lab status says up after down"
rm -f "$DPU_LAB_DIR".*.log "$DPU_LAB_DIR".*.err "$DPU_LAB_DIR".*.json
echo "PASS: lab: up, HTTP passes, DNS answered, blocked name NXDOMAIN, EICAR reset, telnet rejected, down leaves nothing"
