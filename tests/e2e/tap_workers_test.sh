#!/usr/bin/env bash
# Two workers on net_tap ports with a queue per worker (software distribution), live.
#
#   tests/e2e/tap_workers_test.sh DPU_APPLIANCE DPUCTL
#
# The appliance creates two TAP devices (side A, side B) with two queues each and runs two
# workers (--lcores '(0-2)@(CPUS)': works on 2 CPUs, overcommitted). The kernel picks the
# tap queue of each frame with its own hash (docs/operations.md "Many workers"), so each
# worker polls its queue and hands packets of the other worker's flows over. From the host,
# 300 UDP flows send 3 frames into side A (client -> server) and 3 answers into side B
# (server -> client), through AF_PACKET sockets on the two TAPs. Then:
#  - the start-up line says software distribution with 2 rx queues per side, one polled by
#    each worker;
#  - `dpuctl flows`: exactly 300 UDP flows of these addresses, each with 3 packets each way
#    (both directions of every flow met in one flow entry, i.e. on one worker), flows on both
#    workers;
#  - `dpuctl stats`: the workers' rx add up to 1800 frames of the test's flows and more,
#    packets handed off = packets handed in, both workers handed some over (the kernel's
#    queue choice is not the appliance's hash), no drop;
#  - SIGINT stops it with exit status 0.
# Needs root (TAP devices) and python3. Without root: "SKIPPED: ..." and exit 77. Everything
# is removed on exit (the TAPs go with the process; the state directory is temporary).
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: $0 DPU_APPLIANCE DPUCTL" >&2; exit 2; }
app=$(readlink -f "$1")
ctl=$(readlink -f "$2")
skip() { echo "SKIPPED: tap_workers: $*"; exit 77; }
fail() { echo "FAIL: tap_workers: $*"; [[ -f ${work:-}/err ]] && tail -30 "$work/err"; exit 1; }
[[ $(id -u) -eq 0 ]] || skip "needs root to create TAP devices"
[[ -c /dev/net/tun ]] || skip "no /dev/net/tun"
PY=/usr/bin/python3
work=$(mktemp -d "${TMPDIR:-/tmp}/dpu_tap_workers.XXXXXX")
tap_a=dtwa$$ tap_b=dtwb$$
pid=
cleanup() {
  local rc=$?
  set +e
  if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
    kill -INT "$pid"
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  fi
  ip link del "$tap_a" 2>/dev/null
  ip link del "$tap_b" 2>/dev/null
  rm -rf "$work" "/var/run/dpdk/dtw$$"
  exit "$rc"
}
trap cleanup EXIT
cpus=$($PY -c 'import os; print(",".join(map(str, sorted(os.sched_getaffinity(0)))))')
"$app" run --state-dir "$work/state" --duration 600 -- --lcores "(0-2)@($cpus)" --no-huge \
  --no-pci --no-shconf --file-prefix="dtw$$" -m 1024 --log-level=lib.eal:error \
  --vdev "net_tap0,iface=$tap_a" --vdev "net_tap1,iface=$tap_b" >"$work/out" 2>"$work/err" &
pid=$!
for _ in $(seq 1 3000); do
  grep -q "forwarding between" "$work/err" && break
  kill -0 "$pid" 2>/dev/null || fail "the appliance exited during start-up"
  sleep 0.1
done
grep -q "forwarding between" "$work/err" || fail "not forwarding within 300 s"
grep -q "software distribution (side A: 2 rx queue(s) polled by worker(s) 0-1, a tx queue per worker; side B: 2 rx queue(s) polled by worker(s) 0-1, a tx queue per worker)" "$work/err" ||
  fail "start-up does not say software distribution over 2 tap queues: $(grep 'reach the workers' "$work/err")"
for t in "$tap_a" "$tap_b"; do
  echo 1 >"/proc/sys/net/ipv6/conf/$t/disable_ipv6"
  ip link set "$t" arp off
done
api="unix:$work/state/api.sock"

$PY - "$tap_a" "$tap_b" <<'PYEOF'
import random, socket, struct, sys
def csum(b):
    s = sum(struct.unpack(f"!{len(b) // 2}H", b)); s = (s >> 16) + (s & 0xFFFF); s += s >> 16
    return (~s) & 0xFFFF
def frame(src_mac, dst_mac, src, dst, sp, dp, body):
    udp = struct.pack("!HHHH", sp, dp, 8 + len(body), 0) + body
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0,
                    socket.inet_aton(src), socket.inet_aton(dst))
    h = h[:10] + struct.pack("!H", csum(h)) + h[12:]
    return bytes.fromhex(dst_mac + src_mac) + b"\x08\x00" + h + udp
a, b = socket.socket(socket.AF_PACKET, socket.SOCK_RAW), socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
a.bind((sys.argv[1], 0)); b.bind((sys.argv[2], 0))
r = random.Random(7)
for i in range(300):
    cli = f"10.{r.randrange(256)}.{r.randrange(256)}.{1 + r.randrange(250)}"
    srv = f"172.16.{i // 250}.{1 + i % 250}"
    sp = 1024 + r.randrange(60000)
    for _ in range(3):
        a.send(frame("020000000001", "020000000002", cli, srv, sp, 53, b"q" * 20))
        b.send(frame("020000000002", "020000000001", srv, cli, 53, sp, b"r" * 20))
PYEOF

# Wait until the flows of the test hold all 1800 frames (as long as it takes on a busy
# machine; the kernel may send a few frames of its own into the TAPs, which are not counted).
for _ in $(seq 1 3000); do
  "$ctl" --server "$api" --json flows --limit 100000 >"$work/flows.json"
  n=$($PY -c '
import json, sys
fl = json.load(open(sys.argv[1])).get("flows", [])
print(sum(int(f.get("packets_toserver", 0)) + int(f.get("packets_toclient", 0)) for f in fl
          if f.get("proto") == "UDP"))' "$work/flows.json")
  ((n >= 1800)) && break
  sleep 0.1
done
"$ctl" --server "$api" --json stats >"$work/stats.json"
"$ctl" --server "$api" --json flows --limit 100000 >"$work/flows.json"
$PY - "$work" <<'PYEOF' || fail "checks failed (above)"
import collections, json, sys
w = sys.argv[1]
stats, flows = json.load(open(f"{w}/stats.json")), json.load(open(f"{w}/flows.json")).get("flows", [])
errors = []
U = lambda d, k: int(d.get(k, 0))
ours = [f for f in flows if f.get("proto") == "UDP" and
        {f["src_ip"].split(".")[0], f["dest_ip"].split(".")[0]} == {"10", "172"}]
if len(ours) != 300:
    errors.append(f"{len(ours)} UDP flows of the test, 300 expected")
bad = [f for f in ours if U(f, "packets_toserver") != 3 or U(f, "packets_toclient") != 3]
if bad:
    errors.append(f"{len(bad)} flows without 3 packets each way (directions split over workers?): {bad[0]}")
per = collections.Counter(f.get("worker", 0) for f in ours)
if len(per) != 2:
    errors.append(f"flows per worker {dict(per)}: both workers should have some")
ws = [x["counters"] for x in stats["workers"]]
rx = [U(c, "rx_packets_a") + U(c, "rx_packets_b") for c in ws]
off, inn = [U(c, "handed_off") for c in ws], [U(c, "handed_in") for c in ws]
if sum(rx) < 1800:
    errors.append(f"workers judged {rx}, fewer than 1800 frames")
if sum(off) != sum(inn):
    errors.append(f"handed off {off} != handed in {inn}")
if min(off) == 0:
    errors.append(f"a worker handed nothing over {off}: the kernel's queue choice is not ours, some should")
drops = {k: int(v) for k, v in stats["total"].get("drops", {}).items()}
if drops:
    errors.append(f"drops {drops}")
print(f"flows per worker {dict(per)}; rx per worker {rx}; handed off {off}, in {inn}")
for e in errors:
    print("  check failed:", e)
sys.exit(1 if errors else 0)
PYEOF
kill -INT "$pid"
rc=0
wait "$pid" || rc=$?
pid=
[[ $rc -eq 0 ]] || fail "exit status $rc after SIGINT"
echo "PASS tap_workers: 300 flows, both directions of each on one worker, over 2 tap queues per side"
