#!/usr/bin/env bash
# scripts/fleet-lab.sh end to end: `up` (etcd and three nodes on version 1), `up` again is
# refused, `status` shows the three live processes and nodes synced on version 1, a node
# forwards frames injected on its side A, a second version applied with `dpuctl fleet apply`
# (the environment `up` wrote) reaches every node, a third through `fleet-lab.sh apply`;
# `down` leaves nothing behind (no process, no veth, nothing in /var/run/dpdk, no lab
# directory), and a second `down` is harmless.
#
#   tests/e2e/fleet_lab_test.sh BUILD_DIR
#
# Needs root and etcd; without them prints "SKIPPED: ..." and exits 77.
set -euo pipefail
[[ $# -eq 1 ]] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
build=$(readlink -f "$1")
root=$(cd "$(dirname "$0")/../.." && pwd)
lab=$root/scripts/fleet-lab.sh
skip() { echo "SKIPPED: fleet_lab: $*"; exit 77; }
[[ $(id -u) -eq 0 ]] || skip "needs root for veths and DPDK's runtime directory (uid $(id -u))"
command -v ip >/dev/null || skip "iproute2 missing"
command -v etcd >/dev/null || skip "etcd not installed (apt-get install etcd-server)"

# A lab of its own: directory, veth/DPDK prefix and ports that no other lab uses.
FLEET_LAB_DIR=$(mktemp -u "${TMPDIR:-/tmp}/dpu_fleet_lab_test.XXXXXX")
export FLEET_LAB_DIR
export FLEET_LAB_NAME=dpuflt
export FLEET_LAB_WAIT=${FLEET_LAB_WAIT:-300}
LOGS=$(mktemp -d "${TMPDIR:-/tmp}/dpu_fleet_lab_test_logs.XXXXXX")
FLEET_LAB_PORT=$(python3 - <<'PY'
import random, socket
def free(p):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", p))
        return True
    except OSError:
        return False
    finally:
        s.close()
# The lab uses PORT, PORT+1, PORT+12..14 and PORT+22..24; outside the ephemeral range.
for base in random.sample(range(20000, 32000, 40), 200):
    if all(free(base + o) for o in (0, 1, 12, 13, 14, 22, 23, 24)):
        print(base)
        break
PY
)
[[ -n $FLEET_LAB_PORT ]] || { echo "FAIL: fleet_lab: no free loopback ports"; exit 1; }
export FLEET_LAB_PORT
fail() {
  echo "FAIL: fleet_lab: $*"
  for f in "$FLEET_LAB_DIR"/*.log; do
    [[ -f $f ]] && { echo "--- $f"; tail -n 20 "$f"; }
  done
  exit 1
}
trap '"$lab" down >/dev/null 2>&1 || true; rm -rf "$FLEET_LAB_DIR" "$LOGS"' EXIT
ctl=$build/control/dpuctl

# fleet_on V: `dpuctl fleet status --json` lists edge-1..3, each synced on version V.
fleet_on() {
  "$ctl" fleet --etcd "127.0.0.1:$FLEET_LAB_PORT" --fleet lab status --json | python3 -c '
import json, sys
want = int(sys.argv[1])
st = {n["node"]: n for n in json.load(sys.stdin)["nodes"]}
ok = sorted(st) == ["edge-1", "edge-2", "edge-3"] and all(
    int(n.get("applied_version", 0)) == want and n["state"] == "synced" for n in st.values())
sys.exit(0 if ok else 1)' "$1"
}
wait_on() {  # wait_on V: until every node reports V (generous: a busy machine)
  local end=$((SECONDS + FLEET_LAB_WAIT))
  until fleet_on "$1" 2>/dev/null; do
    ((SECONDS < end)) || fail "nodes not on version $1 after $FLEET_LAB_WAIT s: $("$ctl" fleet --etcd "127.0.0.1:$FLEET_LAB_PORT" --fleet lab status 2>&1)"
    sleep 0.5
  done
}

t0=$SECONDS
"$lab" up --build "$build" >"$LOGS/up.log" 2>&1 || { cat "$LOGS/up.log"; fail "fleet-lab up failed"; }
cat "$LOGS/up.log"
grep -q "^fleet lab up: fleet lab on etcd 127.0.0.1:$FLEET_LAB_PORT, 3 nodes on version 1" "$LOGS/up.log" ||
  fail "no 'fleet lab up' line"
grep -q "source $FLEET_LAB_DIR/env" "$LOGS/up.log" || fail "up does not say how to use the lab"
echo "ok: up in $((SECONDS - t0)) s"

rc=0
"$lab" up --build "$build" >"$LOGS/up2.log" 2>&1 || rc=$?
[[ $rc -ne 0 ]] && grep -q "already up" "$LOGS/up2.log" || fail "a second up: exit $rc: $(cat "$LOGS/up2.log")"
echo "ok: a second up is refused: $(cat "$LOGS/up2.log")"

rc=0
"$lab" status >"$LOGS/status.log" 2>&1 || rc=$?
[[ $rc -eq 0 ]] || { cat "$LOGS/status.log"; fail "fleet-lab status: exit $rc"; }
cat "$LOGS/status.log"
[[ $(grep -cE '^  (etcd|edge-[123]) +pid [0-9]+ +live' "$LOGS/status.log") -eq 4 ]] ||
  fail "status does not show 4 live processes"
[[ $(grep -cE '^edge-[123] +(canary|a|b) +synced +1 +1 ' "$LOGS/status.log") -eq 3 ]] ||
  fail "status does not show 3 nodes synced on version 1"
fleet_on 1 || fail "dpuctl fleet status --json: not every node on version 1"
echo "ok: status: etcd and 3 nodes live, every node synced on version 1"

# The lab's environment, as a user would use it.
# shellcheck disable=SC1091
source "$FLEET_LAB_DIR/env"
[[ $DPUCTL_ETCD == 127.0.0.1:$FLEET_LAB_PORT && $DPUCTL_FLEET == lab ]] || fail "env: $(cat "$FLEET_LAB_DIR/env")"
fwd() { "$ctl" --server "$FLEET_LAB_EDGE2" --json stats | python3 -c 'import json, sys; print(int(json.load(sys.stdin).get("total", {}).get("forwarded", 0)))'; }
before=$(fwd)
"$lab" send edge-2 50 >/dev/null || fail "fleet-lab send"
end=$((SECONDS + FLEET_LAB_WAIT))
until (($(fwd) - before >= 50)); do
  ((SECONDS < end)) || fail "edge-2 forwarded $(($(fwd) - before)) of 50 frames"
  sleep 0.5
done
echo "ok: edge-2 forwards the frames sent into its side A"

"$ctl" fleet apply "$root/examples/firewall/config.json" --comment "second" >"$LOGS/apply2.log" 2>&1 ||
  { cat "$LOGS/apply2.log"; fail "dpuctl fleet apply (version 2)"; }
grep -q "version 2 applied to every node" "$LOGS/apply2.log" || fail "apply 2: $(cat "$LOGS/apply2.log")"
wait_on 2
for a in "$FLEET_LAB_EDGE1" "$FLEET_LAB_EDGE2" "$FLEET_LAB_EDGE3"; do
  "$ctl" --server "$a" fw list | grep -q "bad-hosts" || fail "node $a: no rule bad-hosts of version 2"
done
echo "ok: version 2 (dpuctl fleet apply) reported by every node, its rules on every node"

"$lab" apply "$root/examples/lab/config.json" --comment "third" >"$LOGS/apply3.log" 2>&1 ||
  { cat "$LOGS/apply3.log"; fail "fleet-lab apply (version 3)"; }
grep -q "version 3 applied to every node" "$LOGS/apply3.log" || fail "apply 3: $(cat "$LOGS/apply3.log")"
wait_on 3
echo "ok: version 3 (fleet-lab.sh apply) reported by every node"

pids=$(cat "$FLEET_LAB_DIR"/*.pid)
"$lab" down >"$LOGS/down.log" 2>&1 || { cat "$LOGS/down.log"; fail "fleet-lab down failed"; }
cat "$LOGS/down.log"
grep -q "down: 4 process(es) stopped" "$LOGS/down.log" || fail "down did not stop 4 processes"
for p in $pids; do  # gone, or a zombie not reaped yet by init (no command line any more)
  if [[ -r /proc/$p/stat ]] && [[ $(awk '{print $3}' "/proc/$p/stat" 2>/dev/null) != Z ]]; then
    fail "process $p left: $(tr '\0' ' ' <"/proc/$p/cmdline")"
  fi
done
for c in /proc/[0-9]*/cmdline; do
  if tr '\0' ' ' <"$c" 2>/dev/null | grep -qF -- "$FLEET_LAB_DIR"; then
    fail "a process of the lab is left: ${c%/cmdline}: $(tr '\0' ' ' <"$c")"
  fi
done
! ip -o link show | grep -q "${FLEET_LAB_NAME}[0-9]" || fail "veths left: $(ip -o link show | grep "$FLEET_LAB_NAME")"
! ls -d /var/run/dpdk/"$FLEET_LAB_NAME"-* >/dev/null 2>&1 || fail "DPDK runtime dirs left: $(ls -d /var/run/dpdk/"$FLEET_LAB_NAME"-*)"
[[ ! -e $FLEET_LAB_DIR ]] || fail "$FLEET_LAB_DIR left"
! "$lab" status >/dev/null 2>&1 || fail "fleet-lab status says up after down"
"$lab" down >/dev/null 2>&1 || fail "a second down failed"
echo "PASS: fleet_lab: up (3 nodes on v1), second up refused, status, traffic, v2 via dpuctl fleet apply and v3 via fleet-lab.sh apply on every node, down leaves nothing ($((SECONDS - t0)) s)"
