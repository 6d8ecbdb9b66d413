#!/usr/bin/env bash
# End-to-end test: dpu-appliance as a real bump in the wire between two network namespaces.
#
#   tests/e2e/bump_in_wire_test.sh BINARY [--workers N --dpuctl DPUCTL]
#
#   ns_a [eth0 198.51.100.1/24, 2001:db8:e2e::1/64] -- veth -- host va<pid>  (DPDK port 0, A)
#                                                               dpu-appliance run
#   ns_b [eth0 198.51.100.2/24, 2001:db8:e2e::2/64] -- veth -- host vb<pid>  (DPDK port 1, B)
#
# The host ends carry no addresses, answer no ARP (NOARP) and have IPv6 off: the only way
# from ns_a to ns_b is through the appliance (net_af_packet on both host ends;
# net_pcap,iface=... if af_packet is unavailable). The subnets are documentation prefixes
# (RFC 5737, RFC 3849) that a CI host does not use itself: if the host owned one of these
# addresses it would not matter (NOARP), but a collision would make failures confusing.
# Checks:
# ICMP and ICMPv6 echo both ways, a TCP connection carrying 1 MiB each way over IPv4 (256 KiB
# over IPv6) with sha256 compare, UDP datagrams echoed intact over IPv4 and IPv6 (over IPv6
# one larger than the MTU, so fragments cross the appliance); then SIGINT must stop the appliance with exit status 0 and
# final counters showing forwarded packets, created flows and no drops.
#
# --workers N (N > 1; ctest e2e_bump_in_wire_2workers runs 2) starts N workers on the CPUs
# the test may use (--lcores '(0-N)@(CPUS)', overcommitted on 2 CPUs). A veth gives one rx
# queue per port, so this is software distribution (docs/operations.md "Many workers"):
# worker 0 polls both ports and hands the packets of the other workers' flows over through
# their rings. The start-up line must say so. Software distribution hashes the two addresses
# of a flow, not its ports, so ns_a gets 8 more IPv4 and 8 more IPv6 addresses, each the
# client of one TCP connection (256 KiB each way) and of UDP datagrams (over IPv6 one sent as
# fragments): 18 host pairs per protocol, spread over the workers. All the checks above must
# pass, and then, through the gRPC API (dpuctl, on the socket of the state directory):
#  - `dpuctl flows`: one entry per TCP / UDP / ICMP conversation, each with packets both ways
#    (both directions of every flow met on one worker), TCP and UDP flows on both workers;
#  - `dpuctl stats`: the workers' rx add up to the total and to what the ports received,
#    their forwarded packets, flows created and fragments to the totals, tx to the ports'
#    tx; no fragment held waiting for a first fragment (all on one worker); worker 0
#    handed off exactly what the others handed in, which is all the others judged; no drop
#    (in particular no worker_ring_full).
# Idle timeouts are raised to an hour there (--config), so no flow ages out before it is read.
#
# Needs root (network namespaces), iproute2, ethtool and python3 (standard library only).
# Without root or network namespaces it prints "SKIPPED: ..." and exits 77 (ctest:
# SKIP_RETURN_CODE 77). Everything it creates is removed on exit, whatever happens.
set -euo pipefail

usage() { echo "usage: $0 BINARY [--workers N --dpuctl DPUCTL]" >&2; exit 2; }
[[ $# -ge 1 ]] || usage
bin_arg=$1
bin=$(readlink -f "$1")
shift
workers=1 ctl=
while [[ $# -gt 0 ]]; do
  case $1 in
    --workers) [[ $# -ge 2 && $2 =~ ^[1-9][0-9]*$ ]] || usage; workers=$2; shift 2 ;;
    --dpuctl) [[ $# -ge 2 ]] || usage; ctl=$(readlink -f "$2"); shift 2 ;;
    *) usage ;;
  esac
done
(( workers == 1 )) || [[ -n $ctl ]] || usage
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
netcheck=$here/netcheck.py

name=bump_in_wire
(( workers == 1 )) || name="bump_in_wire ($workers workers)"
skip() { echo "SKIPPED: $name: $*"; exit 77; }
fail() { echo "FAIL: $name: $*"; exit 1; }
step() { echo "== $*"; }

[[ -x $bin ]] || fail "binary '$bin_arg' not found or not executable"
[[ -z $ctl || -x $ctl ]] || fail "dpuctl not found or not executable"
[[ $(id -u) -eq 0 ]] || skip "needs root to create network namespaces (running as uid $(id -u))"
command -v ip >/dev/null || skip "iproute2 ('ip') is not installed"
command -v python3 >/dev/null || skip "python3 is not installed"
command -v ethtool >/dev/null || fail "ethtool is not installed (Debian package ethtool):" \
  "it turns off checksum/segmentation offloads on the veths, without which TCP breaks"

id=$$
v4_a=198.51.100.1 v4_b=198.51.100.2
v6_a=2001:db8:e2e::1 v6_b=2001:db8:e2e::2
ns_a=dpu_e2e_a_$id
ns_b=dpu_e2e_b_$id
host_a=va$id        # host end of ns_a's veth: DPDK port 0 (side A)
host_b=vb$id        # host end of ns_b's veth: DPDK port 1 (side B)
work=$(mktemp -d "${TMPDIR:-/tmp}/dpu_e2e.XXXXXX")
app_pid=
pmd_used=
bg_pids=()

cleanup() {
  local rc=$?
  set +e
  for p in "${bg_pids[@]}"; do kill "$p" 2>/dev/null; done
  if [[ -n $app_pid ]] && kill -0 "$app_pid" 2>/dev/null; then
    kill -INT "$app_pid" 2>/dev/null
    for _ in $(seq 1 50); do kill -0 "$app_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$app_pid" 2>/dev/null
  fi
  ip netns del "$ns_a" 2>/dev/null
  ip netns del "$ns_b" 2>/dev/null
  ip link del "$host_a" 2>/dev/null
  ip link del "$host_b" 2>/dev/null
  rm -rf "/var/run/dpdk/e2e$id"
  if (( rc != 0 && rc != 77 )); then
    for f in "$work"/*.log; do
      [[ -s $f ]] || continue
      echo "---- $(basename "$f")"
      tail -n 60 "$f"
    done
  fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step "network namespaces $ns_a, $ns_b"
if ! ip netns add "$ns_a" 2>"$work/netns.log"; then
  skip "'ip netns add' failed: $(cat "$work/netns.log")"
fi
ip netns add "$ns_b"
ip link add "$host_a" type veth peer name "${host_a}p"
ip link add "$host_b" type veth peer name "${host_b}p"
ip link set "${host_a}p" netns "$ns_a"
ip link set "${host_b}p" netns "$ns_b"
for pair in "$ns_a:${host_a}p:$v4_a:$v6_a" "$ns_b:${host_b}p:$v4_b:$v6_b"; do
  IFS=: read -r ns dev v4 v6 <<<"$pair"
  v6=${pair#*:*:*:}
  ip -n "$ns" link set "$dev" name eth0
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "$v4/24" dev eth0
  ip -n "$ns" -6 addr add "$v6/64" dev eth0 nodad
  # Offloads would hand the other end frames with unfinished checksums or 64 KiB segments
  # that af_packet cannot carry: make the kernel finish every frame itself.
  ip netns exec "$ns" ethtool -K eth0 tx off tso off gso off gro off >/dev/null 2>&1 ||
    fail "ethtool -K eth0 tx off ... failed in $ns"
  ip -n "$ns" link set eth0 up
done
for dev in "$host_a" "$host_b"; do
  ethtool -K "$dev" tx off tso off gso off gro off >/dev/null 2>&1 || true
  # Keep the host out of it: no addresses, no ARP answers, no IPv6 on the wire ends.
  echo 1 >"/proc/sys/net/ipv6/conf/$dev/disable_ipv6"
  ip link set "$dev" arp off
  ip link set "$dev" up
done
[[ -z $(ip -o addr show dev "$host_a") && -z $(ip -o addr show dev "$host_b") ]] ||
  fail "host ends of the veths have addresses"
# Many workers: software distribution hashes the two addresses of a flow, not its ports, so
# every flow between ns_a's and ns_b's first addresses lands on one worker. More addresses
# in ns_a make more host pairs (8 IPv4, 8 IPv6) that spread over the workers.
extra_v4=() extra_v6=()
if (( workers > 1 )); then
  for i in $(seq 11 18); do
    extra_v4+=("198.51.100.$i") extra_v6+=("2001:db8:e2e::$i")
    ip -n "$ns_a" addr add "198.51.100.$i/24" dev eth0
    # Deprecated (preferred_lft 0): never the kernel's choice of source address, so the
    # flows without --from keep coming from $v6_a (IPv4 secondaries are never chosen).
    ip -n "$ns_a" -6 addr add "2001:db8:e2e::$i/64" dev eth0 nodad preferred_lft 0
  done
fi

# Starts the appliance with the given PMD; returns 0 once it forwards, 1 if it exited.
start_appliance() {  # start_appliance PMD
  local pmd=$1 vdev_a vdev_b
  if [[ $pmd == af_packet ]]; then
    vdev_a="net_af_packet0,iface=$host_a"
    vdev_b="net_af_packet1,iface=$host_b"
  else
    vdev_a="net_pcap0,iface=$host_a"
    vdev_b="net_pcap1,iface=$host_b"
  fi
  local opts=() lcores=(-l 0,1) duration=300
  if (( workers > 1 )); then
    duration=600
    # Control and the workers share the CPUs this may use (overcommitted on 2 CPUs). Long
    # idle timeouts keep every flow of the test in its table until the flows are read.
    lcores=(--lcores "(0-$workers)@($(python3 -c 'import os; print(",".join(map(str, sorted(os.sched_getaffinity(0)))))'))")
    opts=(--config "$work/config.json")
    echo '{"dataplane": {"timeouts": {"tcp_closing_s": 3600, "tcp_closed_s": 3600, "udp_s": 3600, "icmp_s": 3600}}}' >"$work/config.json"
  fi
  "$bin" run --duration "$duration" --state-dir "$work/state_$pmd" "${opts[@]}" -- "${lcores[@]}" --no-huge --no-pci --no-shconf --file-prefix="e2e$id" \
    -m 1024 --vdev "$vdev_a" --vdev "$vdev_b" >"$work/appliance.log" 2>"$work/appliance_err.log" &
  app_pid=$!
  # As long as it takes on a busy machine (the process is watched), up to 300 s.
  for _ in $(seq 1 3000); do
    if grep -q "dpu-appliance: forwarding between" "$work/appliance_err.log"; then pmd_used=$pmd; return 0; fi
    kill -0 "$app_pid" 2>/dev/null || { wait "$app_pid" || true; app_pid=; return 1; }
    sleep 0.1
  done
  fail "appliance ($pmd) did not report ready within 300 s"
}

step "dpu-appliance run (net_af_packet on $host_a, $host_b)"
if ! start_appliance af_packet; then
  echo "net_af_packet failed to start:"
  cat "$work/appliance_err.log"
  step "dpu-appliance run (net_pcap,iface= on $host_a, $host_b)"
  start_appliance pcap || fail "the appliance failed to start with net_af_packet and net_pcap"
fi
grep "forwarding between" "$work/appliance_err.log"
# Start-up names the kernel interface each side is bound to, not only the PMD.
grep -qE "forwarding between A \(net_(af_packet|pcap)0 on interface $host_a \(iface=$host_a[,)].*B \(net_(af_packet|pcap)1 on interface $host_b \(iface=$host_b[,)]" \
  "$work/appliance_err.log" || fail "start-up does not name the interfaces $host_a / $host_b"
if (( workers > 1 )); then
  # One rx and one tx queue per veth (af_packet's default qpairs=1, no RSS): worker 0 polls
  # both ports and hands the other workers' packets over; they send through worker 0.
  grep -qF "packets reach the workers by software distribution (side A: 1 rx queue(s) polled by worker(s) 0, 1 tx queue(s), the other workers send through a ring to worker 0; side B: 1 rx queue(s) polled by worker(s) 0, 1 tx queue(s), the other workers send through a ring to worker 0)" \
    "$work/appliance_err.log" ||
    fail "start-up does not say software distribution from one queue per side: $(grep 'reach the workers' "$work/appliance_err.log")"
  grep "reach the workers" "$work/appliance_err.log"
fi

in_a() { ip netns exec "$ns_a" "$@"; }
in_b() { ip netns exec "$ns_b" "$@"; }
wait_ready() {  # wait_ready FILE PID (the server process is watched; up to 300 s)
  for _ in $(seq 1 3000); do
    [[ -s $1 ]] && return 0
    kill -0 "$2" 2>/dev/null || fail "server exited before it was ready"
    sleep 0.1
  done
  fail "server not ready within 300 s"
}

step "ICMP echo across the appliance"
in_a python3 "$netcheck" ping "$v4_b" --count 3 || fail "IPv4 ping from $ns_a to $ns_b"
in_b python3 "$netcheck" ping "$v4_a" --count 3 || fail "IPv4 ping from $ns_b to $ns_a"
in_a python3 "$netcheck" ping "$v6_b" --count 3 || fail "IPv6 ping from $ns_a to $ns_b"
in_b python3 "$netcheck" ping "$v6_a" --count 3 || fail "IPv6 ping from $ns_b to $ns_a"

step "TCP: 1 MiB each way over IPv4, 256 KiB over IPv6"
for spec in "$v4_b:5001:1048576" "$v6_b:5002:262144"; do
  addr=${spec%:*:*}; rest=${spec#"$addr":}; port=${rest%%:*}; size=${rest#*:}
  rm -f "$work/tcp_ready"
  in_b python3 "$netcheck" tcp-serve "$addr" "$port" "$work/tcp_ready" >"$work/tcp_server_$port.log" 2>&1 &
  srv=$!
  bg_pids+=("$srv")
  wait_ready "$work/tcp_ready" "$srv"
  in_a python3 "$netcheck" tcp-send "$addr" "$port" "$size" || fail "TCP transfer to [$addr]:$port"
  wait "$srv" || fail "TCP server on port $port failed"
  cat "$work/tcp_server_$port.log"
done

# IPv4 datagrams stay within the MTU: DPDK's net_af_packet joins a PACKET_FANOUT group with
# PACKET_FANOUT_FLAG_DEFRAG, so the kernel reassembles IPv4 fragments before the appliance
# sees them, and a datagram reassembled past the 2048-byte frame size arrives truncated
# (dropped as bad_ipv4_total_length). IPv6 fragments are not reassembled there, so the
# IPv6 run carries a 3000-byte datagram as fragments through the appliance's fragment path.
step "UDP datagrams (IPv6: one above the MTU, sent as fragments)"
for spec in "$v4_b:6001:16,512,1400,1472,8" "$v6_b:6002:16,512,1400,3000,8"; do
  sizes=${spec##*:}; rest=${spec%:*}; addr=${rest%:*}; port=${rest##*:}
  rm -f "$work/udp_ready"
  in_b python3 "$netcheck" udp-serve "$addr" "$port" "$work/udp_ready" 5 >"$work/udp_server_$port.log" 2>&1 &
  srv=$!
  bg_pids+=("$srv")
  wait_ready "$work/udp_ready" "$srv"
  in_a python3 "$netcheck" udp-send "$addr" "$port" "$sizes" || fail "UDP to [$addr]:$port"
  wait "$srv" || fail "UDP server on port $port failed"
done

if (( workers > 1 )); then
  step "many workers: TCP (256 KiB each way) and UDP from ${#extra_v4[@]} more IPv4 and ${#extra_v6[@]} more IPv6 addresses"
  # The same servers' addresses, other clients: host pairs that hash to every worker.
  for fam in 4 6; do
    if [[ $fam == 4 ]]; then dst=$v4_b srcs=("${extra_v4[@]}") sizes=16,512,1400,1472; tport=5003 uport=6003
    else dst=$v6_b srcs=("${extra_v6[@]}") sizes=16,512,1400,3000; tport=5004 uport=6004; fi
    rm -f "$work/tcp_ready" "$work/udp_ready"
    in_b python3 "$netcheck" tcp-serve "$dst" "$tport" "$work/tcp_ready" "${#srcs[@]}" >"$work/tcp_server_$tport.log" 2>&1 &
    tsrv=$!
    in_b python3 "$netcheck" udp-serve "$dst" "$uport" "$work/udp_ready" $(( ${#srcs[@]} * 4 )) >"$work/udp_server_$uport.log" 2>&1 &
    usrv=$!
    bg_pids+=("$tsrv" "$usrv")
    wait_ready "$work/tcp_ready" "$tsrv"
    wait_ready "$work/udp_ready" "$usrv"
    for src in "${srcs[@]}"; do
      in_a python3 "$netcheck" tcp-send "$dst" "$tport" 262144 --from "$src" || fail "TCP from $src to [$dst]:$tport"
      in_a python3 "$netcheck" udp-send "$dst" "$uport" "$sizes" --from "$src" || fail "UDP from $src to [$dst]:$uport"
    done
    wait "$tsrv" || fail "TCP server on port $tport failed"
    wait "$usrv" || fail "UDP server on port $uport failed"
  done

  step "many workers: flows and per-worker counters (dpuctl)"
  api="unix:$work/state_$pmd_used/api.sock"
  "$ctl" --server "$api" --json flows --limit 100000 >"$work/flows.json" || fail "dpuctl flows"
  python3 - "$work/flows.json" "$v4_a" "$v6_a" "${extra_v4[@]}" "${extra_v6[@]}" <<'PYEOF' ||
import collections, json, sys
flows = json.load(open(sys.argv[1])).get("flows", [])
clients, servers = set(sys.argv[2:]), {"198.51.100.2", "2001:db8:e2e::2"}
errors = []
ours = [f for f in flows if {f["src_ip"], f["dest_ip"]} & servers and {f["src_ip"], f["dest_ip"]} & clients]
# One TCP and one UDP conversation per client address; ping both ways between the first ones.
for proto, want in (("TCP", len(clients)), ("UDP", len(clients)), ("ICMP", 2)):
    fl = [f for f in ours if f["proto"] == proto]
    # Both directions of a flow in one entry: one entry per conversation, packets both ways.
    keys = collections.Counter(frozenset({(f["src_ip"], f.get("src_port", 0)),
                                          (f["dest_ip"], f.get("dest_port", 0))}) for f in fl)
    if len(fl) != want or len(keys) != want:
        errors.append(f"{proto}: {len(fl)} flow entries, {len(keys)} conversations, {want} expected")
    by_client = collections.Counter(a for f in fl for a in (f["src_ip"], f["dest_ip"]) if a in clients)
    if proto != "ICMP" and any(by_client[c] != 1 for c in clients):
        errors.append(f"{proto}: flow entries per client address {dict(by_client)}, one each expected")
    one_way = [f for f in fl if not int(f.get("packets_toserver", 0)) or not int(f.get("packets_toclient", 0))]
    if one_way:
        errors.append(f"{proto}: {len(one_way)} flows seen one way only (directions split over workers?): {one_way[0]}")
    per = collections.Counter(int(f.get("worker", 0)) for f in fl)
    if proto != "ICMP" and len(per) < 2:
        errors.append(f"{proto}: flows per worker {dict(per)}, the host pairs should spread over the workers")
    print(f"{proto}: {len(fl)} flow entries, {len(one_way)} of them one way only; per worker {dict(sorted(per.items()))}")
for e in errors:
    print("  check failed:", e)
sys.exit(1 if errors else 0)
PYEOF
    fail "flow checks (above)"
  # Counters are read while the namespaces may still send a packet of their own (neighbour
  # probes between a port's count and a worker's): read until they add up, at most 100 times.
  for try in $(seq 1 100); do
    "$ctl" --server "$api" --json stats >"$work/stats.json" || fail "dpuctl stats"
    python3 - "$work/stats.json" "$workers" "$try" <<'PYEOF' && break
import json, sys
d, nw, last = json.load(open(sys.argv[1])), int(sys.argv[2]), sys.argv[3] == "100"
U = lambda c, k: int(c.get(k, 0))
t, ws = d["total"], [w["counters"] for w in d["workers"]]
errors = []
if len(ws) != nw:
    errors.append(f"{len(ws)} workers, {nw} expected")
rx = [U(c, "rx_packets_a") + U(c, "rx_packets_b") for c in ws]
tx = [U(c, "tx_packets_a") + U(c, "tx_packets_b") for c in ws]
port_rx = sum(U(p, "rx_packets") for p in d["ports"])
port_tx = sum(U(p, "tx_packets") for p in d["ports"])
fwd = [U(c, "forwarded") for c in ws]
off, inn = [U(c, "handed_off") for c in ws], [U(c, "handed_in") for c in ws]
created = [U(c, "flows_created") for c in ws]
if sum(rx) != U(t, "rx_packets_a") + U(t, "rx_packets_b") or sum(rx) != port_rx:
    errors.append(f"workers' rx {rx} do not add up to the total {U(t, 'rx_packets_a') + U(t, 'rx_packets_b')} / the ports' {port_rx}")
if sum(tx) != port_tx or sum(fwd) != U(t, "forwarded") or sum(fwd) != sum(rx):
    errors.append(f"tx {tx} / forwarded {fwd} do not add up to the ports' tx {port_tx}, the total forwarded {U(t, 'forwarded')}, rx {sum(rx)}")
if sum(created) != U(t, "flows_created"):
    errors.append(f"flows created {created} do not add up to {U(t, 'flows_created')}")
# Every fragment of a datagram on the worker of its first fragment: none waited for a first
# fragment that went elsewhere. 9 IPv6 datagrams of 3000 bytes cross each way as fragments.
frags = [U(c, "fragments") for c in ws]
if sum(frags) != U(t, "fragments") or sum(frags) < 2 * 9 * 2:
    errors.append(f"fragments {frags}: do not add up to {U(t, 'fragments')} or fewer than 36")
if U(t, "fragments_held") or U(t, "fragments_first_missing"):
    errors.append(f"fragments held {U(t, 'fragments_held')}, first fragment missing {U(t, 'fragments_first_missing')}")
# One rx queue per port: worker 0 receives everything and hands the other workers' packets
# over; the others judge only what was handed to them.
if sum(off) != sum(inn) or off[0] != sum(off) or inn[0] != 0 or min(inn[1:]) == 0 or rx[1:] != inn[1:]:
    errors.append(f"handed off {off}, handed in {inn}, rx {rx}: expected worker 0 to hand every other worker all it judged")
if t.get("drops") or any(c.get("drops") for c in ws):
    errors.append(f"drops: total {t.get('drops')}, per worker {[c.get('drops') for c in ws]}")
if errors and not last:
    sys.exit(1)
print(f"rx per worker {rx} = {port_rx} received; forwarded {fwd}; flows created {created}; fragments {frags}; "
      f"handed off {off}, handed in {inn}; no drop (no worker_ring_full)")
for e in errors:
    print("  check failed:", e)
sys.exit(1 if errors else 0)
PYEOF
    (( try < 100 )) || fail "per-worker counters (above)"
    sleep 0.2
  done
fi

step "SIGINT: the appliance stops and prints its final counters"
kill -INT "$app_pid"
rc=0
for _ in $(seq 1 100); do kill -0 "$app_pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$app_pid" 2>/dev/null && fail "appliance still running 10 s after SIGINT"
wait "$app_pid" || rc=$?
app_pid=
cat "$work/appliance.log"
(( rc == 0 )) || fail "appliance exited with status $rc after SIGINT"
grep -q "dpu-appliance run: final counters" "$work/appliance.log" || fail "no final counters printed"
read -r fwd drop < <(sed -n 's/^ *forwarded \([0-9]*\) *dropped \([0-9]*\).*/\1 \2/p' "$work/appliance.log") || true
flows=$(sed -n 's/^ *created \([0-9]*\).*/\1/p' "$work/appliance.log")
[[ -n ${fwd:-} && -n ${flows:-} ]] || fail "could not read the final counters"
(( fwd > 1000 )) || fail "only $fwd packets forwarded (the TCP transfers alone are > 1000)"
frags=$(sed -n 's/^ *packets \([0-9]*\) *held.*/\1/p' "$work/appliance.log")
(( ${frags:-0} >= 3 )) || fail "the fragments of the IPv6 datagram did not reach the fragment stage"
(( flows > 0 )) || fail "final counters show no flows created"
(( drop == 0 )) || fail "$drop packets dropped (all traffic in this test is legitimate)"
echo "PASS: bump_in_wire: $fwd packets forwarded, $flows flows created, 0 dropped"
