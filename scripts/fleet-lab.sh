#!/usr/bin/env bash
# A fleet lab in one command (docs/fleet.md): one etcd and three appliances following one
# fleet, on this machine.
#
#   scripts/fleet-lab.sh up [--config FILE] [--build DIR] [--fleet NAME]
#   scripts/fleet-lab.sh status
#   scripts/fleet-lab.sh apply FILE [dpuctl fleet apply options]
#   scripts/fleet-lab.sh send NODE [COUNT]
#   scripts/fleet-lab.sh env
#   scripts/fleet-lab.sh down [--keep-logs]
#
#   etcd        127.0.0.1:PORT (data in $FLEET_LAB_DIR/etcd)
#   edge-1      group canary   API 127.0.0.1:PORT+11  metrics 127.0.0.1:PORT+21
#   edge-2      group a        API 127.0.0.1:PORT+12  metrics 127.0.0.1:PORT+22
#   edge-3      group b        API 127.0.0.1:PORT+13  metrics 127.0.0.1:PORT+23
#
# Each node is `dpu-appliance run --fleet NAME --poll idle` (the workers sleep when nothing
# comes, so three appliances and etcd share a small machine) with its own state directory
# ($FLEET_LAB_DIR/nodes/edge-N), DPDK --file-prefix ($FLEET_LAB_NAME-N) and two veth pairs
# and no NIC: DPDK port 0 (side A) is net_pcap on NAME<N>a, whose peer NAME<N>ap takes frames
# you inject (`send`); port 1 (side B) is net_pcap on NAME<N>b, whose peer NAME<N>bp shows what
# the node forwards (tcpdump -ni NAME<N>bp). `up` starts etcd and the nodes, applies FILE
# (default examples/config.json) as the fleet's version 1 with `dpuctl fleet apply`, waits until
# every node reports it, and prints `dpuctl fleet status` and how to go on. `status`: the
# fleet's status and whether each process lives. `down` stops what `up` started (by the PIDs it
# recorded, nodes first so they revoke their leases), removes the veths, the DPDK runtime
# directories /var/run/dpdk/NAME-N and $FLEET_LAB_DIR; it is safe on a half-made or absent lab.
#
# `up` builds nothing: it runs BUILD/control/dpu-appliance and BUILD/control/dpuctl (default
# build/, made by scripts/build.sh; or $FLEET_LAB_BUILD). Environment: FLEET_LAB_DIR (default
# /tmp/dpu-fleet-lab), FLEET_LAB_PORT (first of the loopback ports, default 24790),
# FLEET_LAB_NAME (prefix of veths and DPDK file prefixes, default dpufl; at most 10
# characters), FLEET_LAB_WAIT (seconds to wait for each step, default 180).
# Needs root, iproute2, etcd (Debian etcd-server), python3; ethtool if present.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
LAB=${FLEET_LAB_DIR:-/tmp/dpu-fleet-lab}
PORT=${FLEET_LAB_PORT:-24790}
NAME=${FLEET_LAB_NAME:-dpufl}
WAIT=${FLEET_LAB_WAIT:-180}
NODES=(edge-1 edge-2 edge-3)
GROUPS_=(canary a b)

usage() {
  sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
}
die() { echo "fleet-lab: $*" >&2; exit 1; }
say() { echo "fleet-lab: $*"; }
need_root() { [[ $(id -u) -eq 0 ]] || die "needs root (veths, raw sockets, /var/run/dpdk)"; }
[[ $NAME =~ ^[a-z][a-z0-9]{0,9}$ ]] || die "FLEET_LAB_NAME '$NAME': 1 to 10 lower-case letters or digits, a letter first"
{ [[ $PORT =~ ^[0-9]+$ ]] && ((PORT >= 1024 && PORT <= 65000)); } || die "FLEET_LAB_PORT '$PORT': a port 1024..65000"

etcd_port() { echo "$PORT"; }
api_port() { echo $((PORT + 11 + $1)); }      # node index 0..2
metrics_port() { echo $((PORT + 21 + $1)); }
prefix() { echo "$NAME-$(($1 + 1))"; }
veth() { echo "$NAME$(($1 + 1))$2"; }        # veth I a|b (host end, DPDK's); peer: ...p

# The build dir `up` used (status, apply and down use its dpuctl), else --build / default.
build_dir() {
  if [[ -f $LAB/build ]]; then cat "$LAB/build"; else echo "${FLEET_LAB_BUILD:-$root/build}"; fi
}
fleet_name() { if [[ -f $LAB/fleet ]]; then cat "$LAB/fleet"; else echo lab; fi; }

# ours PIDFILE MARKER: the recorded process lives and is the one we started (its command line
# holds MARKER), so a recycled PID is never signalled.
ours() {
  [[ -f $1 ]] || return 1
  local p
  p=$(cat "$1")
  [[ $p =~ ^[0-9]+$ ]] || return 1
  [[ -r /proc/$p/cmdline ]] || return 1
  tr '\0' ' ' <"/proc/$p/cmdline" | grep -qF -- "$2"
}
etcd_marker() { echo "--data-dir $LAB/etcd "; }
node_marker() { echo "--state-dir $LAB/nodes/$1 "; }

alive_count() {
  local n=0 i
  ours "$LAB/etcd.pid" "$(etcd_marker)" && n=$((n + 1))
  for i in 0 1 2; do ours "$LAB/${NODES[$i]}.pid" "$(node_marker "${NODES[$i]}")" && n=$((n + 1)); done
  echo $n
}
is_up() { [[ $(alive_count) -gt 0 ]]; }

ctl_fleet() {  # dpuctl fleet with the lab's etcd and fleet
  "$(build_dir)/control/dpuctl" fleet --etcd "127.0.0.1:$(etcd_port)" --fleet "$(fleet_name)" "$@"
}

# stop PIDFILE MARKER WHAT SECONDS: SIGTERM, wait, SIGKILL.
stop_proc() {
  local f=$1 marker=$2 what=$3 secs=$4 p
  ours "$f" "$marker" || { rm -f "$f"; return 0; }
  p=$(cat "$f")
  kill -TERM "$p" 2>/dev/null || true
  for _ in $(seq 1 $((secs * 10))); do
    ours "$f" "$marker" || break
    sleep 0.1
  done
  if ours "$f" "$marker"; then
    echo "fleet-lab: $what (pid $p) did not stop on SIGTERM in $secs s: SIGKILL" >&2
    kill -KILL "$p" 2>/dev/null || true
    for _ in $(seq 1 50); do ours "$f" "$marker" || break; sleep 0.1; done
  fi
  rm -f "$f"
}

# Removes what `up` made; every step tolerates absence (a half-made lab, or none).
teardown() {
  local keep=${1:-0} i f
  set +e
  # Nodes first, all at once (each revokes its lease on SIGTERM), then etcd.
  for i in 0 1 2; do
    f=$LAB/${NODES[$i]}.pid
    ours "$f" "$(node_marker "${NODES[$i]}")" && kill -TERM "$(cat "$f")" 2>/dev/null
  done
  for i in 0 1 2; do
    stop_proc "$LAB/${NODES[$i]}.pid" "$(node_marker "${NODES[$i]}")" "${NODES[$i]}" 60
  done
  stop_proc "$LAB/etcd.pid" "$(etcd_marker)" etcd 30
  for i in 0 1 2; do
    ip link del "$(veth "$i" a)" 2>/dev/null
    ip link del "$(veth "$i" b)" 2>/dev/null
    rm -rf "/var/run/dpdk/$(prefix "$i")"
  done
  if [[ $keep == 1 && -d $LAB ]]; then
    rm -rf "$LAB/etcd" "$LAB/nodes" "$LAB"/*.pid "$LAB/env" "$LAB/build" "$LAB/fleet"
    echo "fleet-lab: logs kept in $LAB (scripts/fleet-lab.sh down removes them)" >&2
  else
    rm -rf "$LAB"
  fi
  set -e
}

port_free() {
  python3 - "$1" <<'PY'
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers do: TIME_WAIT is no conflict
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)
PY
}

# waits WHAT CMD...: until CMD succeeds, at most $WAIT s; dies if a lab process exited.
wait_until() {
  local what=$1 end=$((SECONDS + WAIT))
  shift
  until "$@" >/dev/null 2>&1; do
    (( SECONDS < end )) || die "timed out after $WAIT s waiting for $what"
    check_alive
    sleep 0.5
  done
}
check_alive() {
  local i
  if ! ours "$LAB/etcd.pid" "$(etcd_marker)"; then
    tail -n 20 "$LAB/etcd.log" >&2 2>/dev/null
    die "etcd exited (log: $LAB/etcd.log)"
  fi
  for i in 0 1 2; do
    [[ -f $LAB/${NODES[$i]}.pid ]] || continue
    if ! ours "$LAB/${NODES[$i]}.pid" "$(node_marker "${NODES[$i]}")"; then
      tail -n 20 "$LAB/${NODES[$i]}.log" >&2 2>/dev/null
      die "${NODES[$i]} exited (log: $LAB/${NODES[$i]}.log)"
    fi
  done
}

# nodes_on V: every lab node is live in the fleet's status, synced on version V (V=0: just live).
nodes_on() {
  ctl_fleet status --json | python3 -c '
import json, sys
want, names = int(sys.argv[1]), sys.argv[2:]
st = {n["node"]: n for n in json.load(sys.stdin).get("nodes", [])}
ok = all(n in st and (want == 0 or (int(st[n].get("applied_version", 0)) == want
                                    and st[n].get("state") == "synced")) for n in names)
sys.exit(0 if ok else 1)' "$1" "${NODES[@]}"
}

write_env() {
  local i
  {
    echo "# source this file: the lab's etcd and fleet for dpuctl fleet, and each node's API"
    echo "export DPUCTL_ETCD=127.0.0.1:$(etcd_port)"
    echo "export DPUCTL_FLEET=$(fleet_name)"
    echo "export ETCDCTL_API=3 ETCDCTL_ENDPOINTS=127.0.0.1:$(etcd_port)"
    echo "export PATH=$(build_dir)/control:\$PATH"
    for i in 0 1 2; do
      echo "export FLEET_LAB_EDGE$((i + 1))=127.0.0.1:$(api_port "$i")    # ${NODES[$i]}, group ${GROUPS_[$i]}"
    done
  } >"$LAB/env"
}

cmd_up() {
  local config=$root/examples/config.json build=${FLEET_LAB_BUILD:-$root/build} fleet=lab
  while (($#)); do
    case $1 in
      --config) [[ $# -ge 2 ]] || usage; config=$(readlink -f "$2"); shift 2 ;;
      --build) [[ $# -ge 2 ]] || usage; build=$(readlink -f "$2"); shift 2 ;;
      --fleet) [[ $# -ge 2 ]] || usage; fleet=$2; shift 2 ;;
      *) usage ;;
    esac
  done
  need_root
  if is_up; then
    die "already up ($(alive_count) of 4 processes live, state in $LAB): scripts/fleet-lab.sh status, or down first"
  fi
  [[ -e $LAB ]] && die "$LAB holds what an earlier lab left (nothing of it runs): scripts/fleet-lab.sh down first"
  local app=$build/control/dpu-appliance ctl=$build/control/dpuctl
  [[ -x $app && -x $ctl ]] || die "no $app / $ctl: build first (scripts/build.sh), or give --build DIR"
  [[ -f $config ]] || die "no config file $config"
  for t in ip etcd python3; do
    command -v $t >/dev/null || die "$t is not installed (scripts/install-deps.sh; etcd: apt-get install etcd-server)"
  done
  "$app" validate --config "$config" >/dev/null || die "$config does not validate"
  local i p
  for p in "$(etcd_port)" $((PORT + 1)) "$(api_port 0)" "$(api_port 1)" "$(api_port 2)" \
           "$(metrics_port 0)" "$(metrics_port 1)" "$(metrics_port 2)"; do
    port_free "$p" || die "port 127.0.0.1:$p is in use (set FLEET_LAB_PORT to another first port)"
  done
  for i in 0 1 2; do
    for s in a b; do
      ! ip link show "$(veth "$i" $s)" >/dev/null 2>&1 ||
        die "interface $(veth "$i" $s) exists (another fleet lab? FLEET_LAB_NAME=$NAME): scripts/fleet-lab.sh down removes it"
    done
    [[ ! -e /var/run/dpdk/$(prefix "$i") ]] ||
      die "/var/run/dpdk/$(prefix "$i") exists (left by an earlier run, or in use): scripts/fleet-lab.sh down removes it"
  done

  mkdir -p "$LAB/nodes"
  echo "$build" >"$LAB/build"
  echo "$fleet" >"$LAB/fleet"
  set -E  # the ERR trap fires inside functions too
  trap 'echo "fleet-lab: up failed, removing what was made" >&2; teardown 1' ERR
  trap 'echo "fleet-lab: interrupted, removing what was made" >&2; teardown 1; exit 130' INT TERM
  # die() inside `up` must tear down too (ERR does not fire on `exit`).
  die() { echo "fleet-lab: $*" >&2; echo "fleet-lab: up failed, removing what was made" >&2; trap - ERR; teardown 1; exit 1; }

  local url peer=http://127.0.0.1:$((PORT + 1))
  url=http://127.0.0.1:$(etcd_port)
  etcd --name fleet-lab --data-dir "$LAB/etcd" \
    --listen-client-urls "$url" --advertise-client-urls "$url" \
    --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
    --initial-cluster "fleet-lab=$peer" \
    --experimental-watch-progress-notify-interval=2s \
    </dev/null >"$LAB/etcd.log" 2>&1 &
  echo $! >"$LAB/etcd.pid"
  wait_until "etcd on $url" ctl_fleet status
  say "etcd up on 127.0.0.1:$(etcd_port) (pid $(cat "$LAB/etcd.pid"))"

  for i in 0 1 2; do
    local n=${NODES[$i]} a b
    a=$(veth "$i" a) b=$(veth "$i" b)
    for v in "$a" "$b"; do
      ip link add "$v" type veth peer name "${v}p"
      for d in "$v" "${v}p"; do
        ethtool -K "$d" tx off tso off gso off gro off >/dev/null 2>&1 || true
        echo 1 >"/proc/sys/net/ipv6/conf/$d/disable_ipv6"
        ip link set "$d" arp off
        ip link set "$d" up
      done
    done
    "$app" run --state-dir "$LAB/nodes/$n" --fleet "$fleet" --etcd "127.0.0.1:$(etcd_port)" \
      --node "$n" --group "${GROUPS_[$i]}" --listen "127.0.0.1:$(api_port "$i")" \
      --metrics-listen "127.0.0.1:$(metrics_port "$i")" --events "$LAB/$n.eve.json" \
      --poll idle --idle-sleep-max-us 2000 -- \
      -l 0,1 --no-huge --no-pci --no-shconf --file-prefix="$(prefix "$i")" -m 512 \
      --log-level=lib.eal:error --vdev "net_pcap0,iface=$a" --vdev "net_pcap1,iface=$b" \
      </dev/null >"$LAB/$n.out" 2>"$LAB/$n.log" &
    echo $! >"$LAB/$n.pid"
    wait_until "$n to start forwarding" grep -q "forwarding between" "$LAB/$n.log"
    say "$n (group ${GROUPS_[$i]}) up: pid $(cat "$LAB/$n.pid"), API 127.0.0.1:$(api_port "$i"), DPDK prefix $(prefix "$i"), ports $a / $b"
  done
  wait_until "all three nodes live in the fleet's status" nodes_on 0

  local out
  out=$(ctl_fleet apply "$config" --comment "fleet-lab up: $(basename "$config")" 2>&1) ||
    die "dpuctl fleet apply $config failed: $out"
  echo "$out" | sed 's/^/  /'
  grep -q "version 1 " <<<"$out" || die "the first apply is not version 1: $out"
  wait_until "every node to report version 1 applied" nodes_on 1
  write_env
  trap - ERR INT TERM
  local ctl_dir=$build/control
  echo
  ctl_fleet status
  cat <<EOF

fleet lab up: fleet $fleet on etcd 127.0.0.1:$(etcd_port), 3 nodes on version 1 ($config)
  state: $LAB (logs: etcd.log, edge-N.log; events: edge-N.eve.json)
  nodes: edge-1 canary API 127.0.0.1:$(api_port 0) metrics http://127.0.0.1:$(metrics_port 0)/metrics
         edge-2 a      API 127.0.0.1:$(api_port 1) metrics http://127.0.0.1:$(metrics_port 1)/metrics
         edge-3 b      API 127.0.0.1:$(api_port 2) metrics http://127.0.0.1:$(metrics_port 2)/metrics

Use it (from $root):
  source $LAB/env   # DPUCTL_ETCD=127.0.0.1:$(etcd_port) DPUCTL_FLEET=$fleet, PATH, FLEET_LAB_EDGE1..3
  dpuctl fleet status
  dpuctl fleet apply examples/firewall/config.json --comment "second version"
  dpuctl fleet apply examples/dns/config.json --stage && dpuctl fleet rollout --groups canary,a,b
  dpuctl fleet rollback
  dpuctl fleet history; dpuctl fleet diff 1 2
  dpuctl --server \$FLEET_LAB_EDGE1 status       # one node's own API (local edits are refused)
  scripts/fleet-lab.sh send edge-2 100           # 100 UDP frames into edge-2's side A ($(veth 1 a)p)
  tcpdump -ni $(veth 1 b)p                           # what edge-2 forwards (side B)
  etcdctl get --prefix /dpu/fleet/$fleet/ --keys-only
Without sourcing: $ctl_dir/dpuctl fleet --etcd 127.0.0.1:$(etcd_port) --fleet $fleet status
Status: scripts/fleet-lab.sh status     Stop: scripts/fleet-lab.sh down
EOF
}

cmd_status() {
  if ! is_up; then
    say "down (nothing of a lab in $LAB runs)"
    return 1
  fi
  local i n dead=0
  say "up: fleet $(fleet_name), state $LAB"
  if ours "$LAB/etcd.pid" "$(etcd_marker)"; then
    printf '  %-8s pid %-8s live   etcd 127.0.0.1:%s\n' etcd "$(cat "$LAB/etcd.pid")" "$(etcd_port)"
  else
    printf '  %-8s %-12s DEAD   (log %s)\n' etcd "" "$LAB/etcd.log"; dead=1
  fi
  for i in 0 1 2; do
    n=${NODES[$i]}
    if ours "$LAB/$n.pid" "$(node_marker "$n")"; then
      printf '  %-8s pid %-8s live   group %-7s API 127.0.0.1:%s metrics 127.0.0.1:%s\n' \
        "$n" "$(cat "$LAB/$n.pid")" "${GROUPS_[$i]}" "$(api_port "$i")" "$(metrics_port "$i")"
    else
      printf '  %-8s %-12s DEAD   (log %s)\n' "$n" "" "$LAB/$n.log"; dead=1
    fi
  done
  echo
  ctl_fleet status || dead=1
  if ((dead)); then
    say "degraded: a process of the lab is not running or the fleet's status is unreadable"
    return 3
  fi
}

case ${1:-} in
  up) shift; cmd_up "$@" ;;
  down)
    need_root
    keep=0
    [[ ${2:-} == --keep-logs ]] && keep=1
    was=$(alive_count)
    teardown "$keep"
    say "down: $was process(es) stopped; veths $NAME{1,2,3}{a,b}, /var/run/dpdk/$NAME-{1,2,3} and $LAB removed" ;;
  status) cmd_status ;;
  apply)
    shift
    [[ $# -ge 1 ]] || usage
    is_up || die "down: scripts/fleet-lab.sh up first"
    ctl_fleet apply "$@" ;;
  env)
    [[ -f $LAB/env ]] || die "down: scripts/fleet-lab.sh up first"
    cat "$LAB/env" ;;
  send)
    need_root
    [[ $# -ge 2 ]] || usage
    idx=-1
    for i in 0 1 2; do [[ ${NODES[$i]} == "$2" ]] && idx=$i; done
    ((idx >= 0)) || die "no node '$2' (${NODES[*]})"
    is_up || die "down: scripts/fleet-lab.sh up first"
    # COUNT UDP frames 10.1.0.1 -> 10.2.0.1:5353 (distinct source ports) into side A.
    python3 - "$(veth "$idx" a)p" "${3:-10}" <<'PY'
import socket, struct, sys
iface, count = sys.argv[1], int(sys.argv[2])
def csum(b):
    s = sum(struct.unpack(f"!{len(b) // 2}H", b)); s = (s >> 16) + (s & 0xFFFF); s += s >> 16
    return (~s) & 0xFFFF
tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
tx.bind((iface, 0))
for i in range(count):
    udp = struct.pack("!HHHH", 20000 + i % 40000, 5353, 40, 0) + b"x" * 32
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0,
                     socket.inet_aton("10.1.0.1"), socket.inet_aton("10.2.0.1"))
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    tx.send(bytes.fromhex("020000000002020000000001") + b"\x08\x00" + ip + udp)
print(f"fleet-lab: {count} UDP frames sent into {iface}")
PY
    ;;
  -h|--help) usage ;;
  *) usage ;;
esac
