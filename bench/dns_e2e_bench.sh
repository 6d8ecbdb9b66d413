#!/usr/bin/env bash
# End-to-end DNS filtering cost: the appliance with a list of N names (default 1M, loaded
# from a file) on DNS-heavy traffic (every packet a DNS query over UDP to port 53) against the
# no-rule pipeline on the same traffic, same core, runs interleaved, through
# bench/fw_e2e_bench.sh -c CONFIG -p PCAP. Inputs from bench/dns_gen_traffic.py. Prints Mpps
# per run, the medians and the ratio.
#
# What it measures: per packet, the DNS header and question parsed, the name's suffix
# fingerprints computed and looked up in the 1M-name table (a cache miss per suffix).
# fwd_bench.sh counts only forwarded packets (a drop in the window fails the run), so the
# listed names are either absent (-s 0, block list: every query a miss) or on an allow list
# (-a allow -s SHARE: hits, forwarded); blocked-and-answered queries are not measured here.
#
# usage: bench/dns_e2e_bench.sh [-n NAMES] [-s LISTED_SHARE] [-a nxdomain|allow] [-P PACKETS]
#                               [-F FLOWS] [fw_e2e_bench.sh options...]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
NAMES=1000000 SHARE=0 ACTION=nxdomain PACKETS=100000 FLOWS=10000
ARGS=()
while [[ $# -gt 0 ]]; do
  case $1 in
    -n) NAMES=$2; shift 2 ;;
    -s) SHARE=$2; shift 2 ;;
    -a) ACTION=$2; shift 2 ;;
    -P) PACKETS=$2; shift 2 ;;
    -F) FLOWS=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) ARGS+=("$1"); shift ;;
  esac
done
DIR=$(mktemp -d /tmp/dns_e2e.XXXXXX)
/usr/bin/python3 "$HERE/dns_gen_traffic.py" --dir "$DIR" --names "$NAMES" --packets "$PACKETS" \
  --flows "$FLOWS" --listed-share "$SHARE" --action "$ACTION"
echo "dns_e2e_bench: $NAMES names ($ACTION), $PACKETS queries over $FLOWS flows, listed share $SHARE ($DIR)"
exec "$HERE/fw_e2e_bench.sh" -c "$DIR/dns.json" -p "$DIR/dns_queries.pcap" -f "$FLOWS" "${ARGS[@]}"
