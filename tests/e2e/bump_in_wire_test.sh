#!/usr/bin/env bash
# End-to-end test: dpu-appliance as a real bump in the wire between two network namespaces.
#
#   tests/e2e/bump_in_wire_test.sh BINARY
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
# Needs root (network namespaces), iproute2, ethtool and python3 (standard library only).
# Without root or network namespaces it prints "SKIPPED: ..." and exits 77 (ctest:
# SKIP_RETURN_CODE 77). Everything it creates is removed on exit, whatever happens.
set -euo pipefail

usage() { echo "usage: $0 BINARY" >&2; exit 2; }
[[ $# -eq 1 ]] || usage
bin=$(readlink -f "$1")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
netcheck=$here/netcheck.py

skip() { echo "SKIPPED: bump_in_wire: $*"; exit 77; }
fail() { echo "FAIL: bump_in_wire: $*"; exit 1; }
step() { echo "== $*"; }

[[ -x $bin ]] || fail "binary '$1' not found or not executable"
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
  "$bin" run --duration 300 --state-dir "$work/state_$pmd" -- -l 0,1 --no-huge --no-pci --no-shconf --file-prefix="e2e$id" \
    -m 1024 --vdev "$vdev_a" --vdev "$vdev_b" >"$work/appliance.log" 2>"$work/appliance_err.log" &
  app_pid=$!
  # As long as it takes on a busy machine (the process is watched), up to 300 s.
  for _ in $(seq 1 3000); do
    if grep -q "dpu-appliance: forwarding between" "$work/appliance_err.log"; then return 0; fi
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
