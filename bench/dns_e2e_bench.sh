#!/usr/bin/env bash
# End-to-end DNS filtering cost: the appliance with a block list of N names (default 1M,
# loaded from a file) on DNS-heavy traffic (every packet a DNS query over UDP to port 53, a
# share of them blocked: dropped and answered NXDOMAIN) against the no-rule pipeline on the
# same traffic, same core, runs interleaved, through bench/fw_e2e_bench.sh -c CONFIG -p PCAP.
# Inputs from bench/dns_gen_traffic.py. Prints Mpps per run, the medians and the ratio.
#
# What it measures: per packet, the DNS header and question parsed, the name's suffix
# fingerprints computed and looked up in the 1M-name table (a cache miss per suffix), plus,
# for the blocked share, an answer frame built and queued.
#
# usage: bench/dns_e2e_bench.sh [-n NAMES] [-b BLOCKED_SHARE] [-P PACKETS] [-F FLOWS]
#                               [fw_e2e_bench.sh options...]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
NAMES=1000000 SHARE=0.1 PACKETS=100000 FLOWS=10000
ARGS=()
while [[ $# -gt 0 ]]; do
  case $1 in
    -n) NAMES=$2; shift 2 ;;
    -b) SHARE=$2; shift 2 ;;
    -P) PACKETS=$2; shift 2 ;;
    -F) FLOWS=$2; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) ARGS+=("$1"); shift ;;
  esac
done
DIR=$(mktemp -d /tmp/dns_e2e.XXXXXX)
/usr/bin/python3 "$HERE/dns_gen_traffic.py" --dir "$DIR" --names "$NAMES" --packets "$PACKETS" \
  --flows "$FLOWS" --blocked-share "$SHARE"
echo "dns_e2e_bench: $NAMES names, $PACKETS queries over $FLOWS flows, blocked share $SHARE ($DIR)"
exec "$HERE/fw_e2e_bench.sh" -c "$DIR/dns.json" -p "$DIR/dns_queries.pcap" -f "$FLOWS" "${ARGS[@]}"
