#!/usr/bin/env bash
# A live lab in one command: two network namespaces joined through a running appliance.
#
#   scripts/lab.sh up [--config FILE] [--build DIR] [--pmd af_packet|pcap]
#   scripts/lab.sh status
#   scripts/lab.sh down [--keep-logs]
#
#   dpu-lab-a [eth0 198.51.100.1/24, 2001:db8:1ab::1/64]        client side (side A)
#        |  veth; host end dpulab-a: DPDK port 0 (side A)
#   dpu-appliance run  (API unix:$DPU_LAB_DIR/state/api.sock, events $DPU_LAB_DIR/eve.json)
#        |  veth; host end dpulab-b: DPDK port 1 (side B)
#   dpu-lab-b [eth0 198.51.100.2/24, 2001:db8:1ab::2/64]        servers: HTTP on :80, DNS on :53
#
# `up` builds nothing: it runs BUILD/control/dpu-appliance (default build/, made by
# scripts/build.sh). The config defaults to examples/lab/config.json (a firewall reject rule
# for telnet, a DNS block list, an EICAR YARA rule that resets, an HTTP server to download
# from); the appliance's state directory starts empty, so the file is what runs.
# What `up` takes care of, which a hand-made set-up tends to miss: checksum and segmentation
# offloads off on every veth (af_packet hands the appliance frames as the kernel queued
# them: without this TCP stalls on unfinished checksums and 64 KiB segments), no address, no
# ARP and no IPv6 on the host ends (the only path from A to B is the appliance). `down`
# removes everything `up` made, DPDK's runtime directory included.
# Needs root, iproute2, ethtool, python3. DPU_LAB_DIR (default /tmp/dpu-lab) holds the state.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
LAB=${DPU_LAB_DIR:-/tmp/dpu-lab}
NS_A=dpu-lab-a NS_B=dpu-lab-b
HOST_A=dpulab-a HOST_B=dpulab-b
# DPDK's runtime directory /var/run/dpdk/$DPDK_PREFIX (--no-huge cannot go with --in-memory
# in DPDK 22.11): removed by `down`.
DPDK_PREFIX=dpu-lab
V4_A=198.51.100.1 V4_B=198.51.100.2
V6_A=2001:db8:1ab::1 V6_B=2001:db8:1ab::2

usage() {
  sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
}
die() { echo "lab: $*" >&2; exit 1; }
need_root() { [[ $(id -u) -eq 0 ]] || die "needs root (network namespaces, veth, raw sockets)"; }

is_up() { [[ -f $LAB/appliance.pid ]] && kill -0 "$(cat "$LAB/appliance.pid")" 2>/dev/null; }

# Removes what `up` made; safe to run on a half-made lab (every step tolerates absence).
teardown() {
  local keep=${1:-0}
  set +e
  if [[ -f $LAB/appliance.pid ]]; then
    local p
    p=$(cat "$LAB/appliance.pid")
    if kill -0 "$p" 2>/dev/null; then
      kill -INT "$p"
      for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$p" 2>/dev/null
      [[ -f $LAB/appliance.out ]] && cat "$LAB/appliance.out"  # its final counters
    fi
  fi
  for f in "$LAB"/server-*.pid; do
    [[ -f $f ]] && kill "$(cat "$f")" 2>/dev/null
  done
  ip netns del "$NS_A" 2>/dev/null
  ip netns del "$NS_B" 2>/dev/null
  ip link del "$HOST_A" 2>/dev/null
  ip link del "$HOST_B" 2>/dev/null
  rm -rf "/var/run/dpdk/$DPDK_PREFIX"
  if [[ $keep == 1 && -d $LAB ]]; then
    echo "lab: logs kept in $LAB"
    rm -rf "$LAB/state" "$LAB"/*.pid "$LAB/www"
  else
    rm -rf "$LAB"
  fi
  set -e
}

write_servers() {
  mkdir -p "$LAB/www"
  printf 'hello from %s behind dpu-appliance\n' "$NS_B" >"$LAB/www/index.html"
  # The EICAR anti-virus test string (harmless by design): the lab's YARA rule resets it.
  printf '%s%s\n' 'X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD' '-ANTIVIRUS-TEST-FILE!$H+H*' >"$LAB/www/eicar.com"
  # A minimal DNS server (standard library): every A query gets V4_B, AAAA gets V6_B.
  cat >"$LAB/dns_server.py" <<'PY'
import socket, struct, sys
addr4, addr6, ready = sys.argv[1], sys.argv[2], sys.argv[3]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((addr4, 53))
open(ready, "w").write("ready\n")
while True:
    q, peer = s.recvfrom(4096)
    if len(q) < 12:
        continue
    qid, flags, qd = struct.unpack("!HHH", q[:6])
    i = 12
    while i < len(q) and q[i] != 0:
        i += q[i] + 1
    qtype = struct.unpack("!H", q[i + 1:i + 3])[0] if i + 3 <= len(q) else 0
    question = q[12:i + 5]
    ans = b""
    if qtype == 1:
        ans = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 60, 4) + socket.inet_aton(addr4)
    elif qtype == 28:
        ans = b"\xc0\x0c" + struct.pack("!HHIH", 28, 1, 60, 16) + socket.inet_pton(socket.AF_INET6, addr6)
    hdr = struct.pack("!HHHHHH", qid, 0x8180 | (flags & 0x0100), 1, 1 if ans else 0, 0, 0)
    s.sendto(hdr + question + ans, peer)
PY
}

wait_file() {  # wait_file FILE PID WHAT: until FILE exists (the process must stay alive)
  for _ in $(seq 1 300); do
    [[ -s $1 ]] && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.1
  done
  die "$3 not ready after 30 s"
}

cmd_up() {
  local config=$root/examples/lab/config.json build=$root/build pmd=af_packet
  while (($#)); do
    case $1 in
      --config) config=$(readlink -f "$2"); shift 2 ;;
      --build) build=$(readlink -f "$2"); shift 2 ;;
      --pmd) pmd=$2; shift 2 ;;
      *) usage ;;
    esac
  done
  need_root
  local app=$build/control/dpu-appliance ctl=$build/control/dpuctl
  [[ -x $app && -x $ctl ]] || die "no $app / $ctl: build first (scripts/build.sh)"
  [[ -f $config ]] || die "no config file $config"
  for t in ip ethtool python3; do command -v $t >/dev/null || die "$t is not installed (scripts/install-deps.sh)"; done
  is_up && die "already up (scripts/lab.sh down first)"
  ip netns list | grep -qw "$NS_A" && die "namespace $NS_A exists from an earlier lab: scripts/lab.sh down"
  "$app" validate --config "$config" >/dev/null || die "$config does not validate"
  mkdir -p "$LAB"
  trap 'echo "lab: up failed, removing what was made" >&2; teardown 1' ERR

  ip netns add "$NS_A"
  ip netns add "$NS_B"
  ip link add "$HOST_A" type veth peer name "${HOST_A}p"
  ip link add "$HOST_B" type veth peer name "${HOST_B}p"
  ip link set "${HOST_A}p" netns "$NS_A"
  ip link set "${HOST_B}p" netns "$NS_B"
  local ns dev v4 v6
  for spec in "$NS_A ${HOST_A}p $V4_A $V6_A" "$NS_B ${HOST_B}p $V4_B $V6_B"; do
    read -r ns dev v4 v6 <<<"$spec"
    ip -n "$ns" link set "$dev" name eth0
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$v4/24" dev eth0
    ip -n "$ns" -6 addr add "$v6/64" dev eth0 nodad
    ip netns exec "$ns" ethtool -K eth0 tx off tso off gso off gro off >/dev/null 2>&1
    ip -n "$ns" link set eth0 up
  done
  for dev in "$HOST_A" "$HOST_B"; do
    ethtool -K "$dev" tx off tso off gso off gro off >/dev/null 2>&1 || true
    echo 1 >"/proc/sys/net/ipv6/conf/$dev/disable_ipv6"
    ip link set "$dev" arp off
    ip link set "$dev" up
  done

  local va vb
  if [[ $pmd == af_packet ]]; then
    va="net_af_packet0,iface=$HOST_A" vb="net_af_packet1,iface=$HOST_B"
  else
    va="net_pcap0,iface=$HOST_A" vb="net_pcap1,iface=$HOST_B"
  fi
  "$app" run --config "$config" --state-dir "$LAB/state" --events "$LAB/eve.json" \
    --metrics-listen 127.0.0.1:0 -- -l 0,1 --no-huge --no-pci --no-shconf \
    --file-prefix="$DPDK_PREFIX" -m 512 \
    --log-level=lib.eal:error --vdev "$va" --vdev "$vb" >"$LAB/appliance.out" 2>"$LAB/appliance.log" &
  echo $! >"$LAB/appliance.pid"
  for _ in $(seq 1 300); do
    grep -q "forwarding between" "$LAB/appliance.log" && break
    kill -0 "$(cat "$LAB/appliance.pid")" 2>/dev/null || { cat "$LAB/appliance.log" >&2; die "the appliance exited"; }
    sleep 0.1
  done
  grep -q "forwarding between" "$LAB/appliance.log" || die "the appliance did not start forwarding in 30 s"

  write_servers
  ip netns exec "$NS_B" python3 -m http.server 80 --bind "$V4_B" --directory "$LAB/www" \
    >"$LAB/http.log" 2>&1 &
  echo $! >"$LAB/server-http.pid"
  ip netns exec "$NS_B" python3 "$LAB/dns_server.py" "$V4_B" "$V6_B" "$LAB/dns.ready" \
    >"$LAB/dns.log" 2>&1 &
  echo $! >"$LAB/server-dns.pid"
  wait_file "$LAB/dns.ready" "$(cat "$LAB/server-dns.pid")" "the DNS server" || die "the DNS server exited: $(cat "$LAB/dns.log")"
  # the HTTP server is ready when it accepts (python's http.server prints nothing until then)
  for _ in $(seq 1 300); do
    ip netns exec "$NS_B" python3 -c "import socket; socket.create_connection(('$V4_B', 80), 1)" 2>/dev/null && break
    sleep 0.1
  done
  trap - ERR
  local metrics
  metrics=$(sed -n 's|^dpu-appliance: metrics on \(http://[^ ]*\)$|\1|p' "$LAB/appliance.log" | head -1)
  cat <<EOF
lab up: $NS_A ($V4_A, $V6_A) <-> dpu-appliance <-> $NS_B ($V4_B, $V6_B)
  config:  $config
  state:   $LAB (appliance log: $LAB/appliance.log, events: $LAB/eve.json)
  metrics: $metrics

Try (from the client side, through the appliance):
  ip netns exec $NS_A curl http://$V4_B/                      # passes
  ip netns exec $NS_A curl http://$V4_B/eicar.com             # DPI: the YARA rule resets it
  ip netns exec $NS_A dig @$V4_B www.example.org              # answered by the server
  ip netns exec $NS_A dig @$V4_B ads.blocked.example          # NXDOMAIN from the appliance
  ip netns exec $NS_A curl -m 3 telnet://$V4_B:23             # firewall: rejected (RST)
  ip netns exec $NS_A ping -c 2 $V4_B
Manage it:
  export DPUCTL_SERVER=unix:$LAB/state/api.sock
  $ctl status
  $ctl events --types drop,dns,alert
  $ctl fw add "deny tcp any any -> $V4_B 80 id no-web"        # then curl again
  $ctl stats
Stop:  scripts/lab.sh down
EOF
}

cmd_status() {
  if is_up; then
    echo "lab up: appliance pid $(cat "$LAB/appliance.pid"), state $LAB"
    [[ -x $root/build/control/dpuctl ]] && "$root/build/control/dpuctl" --server "unix:$LAB/state/api.sock" status || true
  else
    echo "lab down"
    return 1
  fi
}

case ${1:-} in
  up) shift; cmd_up "$@" ;;
  down)
    need_root
    keep=0
    [[ ${2:-} == --keep-logs ]] && keep=1
    teardown "$keep"
    echo "lab down: namespaces, veths, processes and $LAB removed" ;;
  status) cmd_status ;;
  -h|--help) usage ;;
  *) usage ;;
esac
