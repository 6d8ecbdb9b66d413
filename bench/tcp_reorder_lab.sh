#!/usr/bin/env bash
# Downloads through the live lab (scripts/lab.sh) with loss and with reordering on the way to
# the appliance, with the appliance inspecting (DPI reads every TCP flow: the stream engine
# keeps bytes beyond a hole) beside the same download through the appliance in pass-through
# (no stage reads TCP: nothing is reordered or kept), and, for reference, inspecting with
# dataplane.tcp.drop_out_of_order (segments beyond a hole dropped, the behaviour before
# issue 30) and, with --modes including hold, with dataplane.tcp.hold_out_of_order (the
# segments beyond a hole held until it fills: docs/tcp-stream.md "Hold mode"). Prints MB/s per run, the median per mode, the ratio to pass-through and the
# appliance's tcp_stream counters.
#
#   sudo bench/tcp_reorder_lab.sh [--runs N] [--mb MB] [--build DIR] [--impair "none reorder loss"]
#                                 [--modes "passthrough inspect drop hold"]
#
# This kernel has no netem qdisc and no random classifier (basic/matchall) or drop action
# (act_gact), so the impairment is built from what it has: an htb qdisc on the server's side
# of the link (dpu-lab-b eth0, the download's data direction, before the appliance) and u32
# filters on the low bits of the IPv4 ID (Linux numbers every segment of a connection,
# retransmissions included, so a retransmission is picked again only by chance):
#   reorder: 1 packet in 32 bypasses the queue the others wait in (class rate 1.5 Gbit/s,
#            the link's usual throughput): it arrives ahead of packets sent before it;
#   loss:    1 packet in 64 goes to a class of 8 kbit/s with a one-packet queue: dropped
#            (the one it holds arrives seconds later, a stale duplicate).
# Needs root; leaves nothing behind (scripts/lab.sh down).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=4 mb=30 build=$root/build impairs="none reorder loss" modes="passthrough inspect drop"
while (($#)); do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --mb) mb=$2; shift 2 ;;
    --build) build=$(readlink -f "$2"); shift 2 ;;
    --impair) impairs=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    *) sed -n '2,20p' "$0"; exit 2 ;;
  esac
done
[[ $(id -u) -eq 0 ]] || { echo "tcp_reorder_lab: needs root" >&2; exit 1; }
export DPU_LAB_DIR=${DPU_LAB_DIR:-/tmp/dpu-reorder-lab}
work=$(mktemp -d)
cleanup() { "$root/scripts/lab.sh" down >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT

cp "$root/examples/lab/eicar.yar" "$work/eicar.yar"
cat >"$work/inspect.json" <<'EOF'
{"dpi": {"rule_files": ["eicar.yar"]}}
EOF
cat >"$work/drop.json" <<'EOF'
{"dpi": {"rule_files": ["eicar.yar"]}, "dataplane": {"tcp": {"drop_out_of_order": true}}}
EOF
cat >"$work/hold.json" <<'EOF'
{"dpi": {"rule_files": ["eicar.yar"]}, "dataplane": {"tcp": {"hold_out_of_order": true}}}
EOF
cat >"$work/passthrough.json" <<'EOF'
{"firewall": {"rules": [{"id": "no-telnet", "action": "REJECT", "protocols": ["tcp"], "dst_ports": ["23"]}]}}
EOF

impair() {  # impair MODE: on dpu-lab-b eth0 (server -> appliance)
  local ns=dpu-lab-b
  ip netns exec $ns tc qdisc del dev eth0 root 2>/dev/null || true
  ip netns exec $ns tc qdisc add dev eth0 root handle 1: htb default 10 r2q 1000
  ip netns exec $ns tc class add dev eth0 parent 1: classid 1:10 htb rate 1500mbit
  ip netns exec $ns tc class add dev eth0 parent 1: classid 1:20 htb rate 10gbit
  ip netns exec $ns tc class add dev eth0 parent 1: classid 1:30 htb rate 8kbit
  ip netns exec $ns tc qdisc add dev eth0 parent 1:30 handle 30: pfifo limit 1
  case $1 in
    reorder) ip netns exec $ns tc filter add dev eth0 parent 1: protocol ip prio 1 u32 \
               match u16 0x0005 0x001f at 4 classid 1:20 ;;
    loss) ip netns exec $ns tc filter add dev eth0 parent 1: protocol ip prio 1 u32 \
            match u16 0x0011 0x003f at 4 classid 1:30 ;;
    none) ;;
  esac
}

printf '%-12s %-8s %s\n' mode impair "MB/s per run | median | out_of_order reorder_kept reorder_filled reorder_full held held_released held_expired hold_full drops(tcp_out_of_order)" >"$work/table"
declare -A med
for mode in $modes; do
  "$root/scripts/lab.sh" up --config "$work/$mode.json" --build "$build" >/dev/null
  head -c $((mb * 1024 * 1024)) /dev/urandom >"$DPU_LAB_DIR/www/big.bin"
  for imp in $impairs; do
    impair $imp
    speeds=()
    for _ in $(seq 1 "$runs"); do
      s=$(ip netns exec dpu-lab-a curl -s -o /dev/null -m 120 -w '%{speed_download}' http://198.51.100.2/big.bin || echo 0)
      speeds+=("$(awk -v s="$s" 'BEGIN{printf "%.1f", s/1e6}')")
    done
    m=$(printf '%s\n' "${speeds[@]}" | sort -n | awk '{a[NR]=$1} END{print (NR%2? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}')
    med[$mode,$imp]=$m
    st=$("$build/control/dpuctl" --json --server "unix:$DPU_LAB_DIR/state/api.sock" stats 2>/dev/null || echo "{}")
    cnt=$(/usr/bin/python3 - "$st" <<'PY'
import json, sys
d = json.loads(sys.argv[1] or "{}")
t = d.get("total", {})
ts = t.get("tcp_stream", {})
dr = t.get("drops", {})
print(" ".join(str(ts.get(k, 0)) for k in ("out_of_order", "reorder_kept", "reorder_filled", "reorder_full",
                                          "held", "held_released", "held_expired", "hold_full")),
      dr.get("tcp_out_of_order", 0))
PY
)
    printf '%-12s %-8s %s | %s | %s\n' $mode $imp "${speeds[*]}" "$m" "$cnt" >>"$work/table"
  done
  "$root/scripts/lab.sh" down >/dev/null
done
cat "$work/table"
echo
echo "ratio to pass-through (median MB/s), counters are cumulative per appliance run:"
for imp in $impairs; do
  awk -v i=$imp -v p="${med[passthrough,$imp]:-}" -v a="${med[inspect,$imp]:-}" -v d="${med[drop,$imp]:-}" \
      -v h="${med[hold,$imp]:-}" \
    'BEGIN{printf "  %-8s inspect %.2fx   drop_out_of_order %.2fx   hold_out_of_order %.2fx\n", i, (p>0&&a!=""?a/p:0), (p>0&&d!=""?d/p:0), (p>0&&h!=""?h/p:0)}'
done
