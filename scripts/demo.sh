#!/usr/bin/env bash
# README command 1: installs what dpu-appliance needs (scripts/install-deps.sh --demo), builds
# only dpu-appliance (no tests: -DDPU_BUILD_TESTS=OFF, target dpu-appliance), and replays the
# demo capture (examples/example.pcap, from examples/gen_example.py) through the demo config
# (examples/config.json: firewall, DNS list, YARA rules, load balancer), printing the summary.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS
scripts/install-deps.sh --demo
TARGETS=dpu-appliance scripts/build.sh -DDPU_BUILD_TESTS=OFF
echo "demo: dependencies and build in $((SECONDS - t0)) s"
out=$(mktemp -d /tmp/dpu-demo.XXXXXX)
build/control/dpu-appliance replay --config examples/config.json --in examples/example.pcap \
  --out "$out/out_b.pcap" --out-a "$out/out_a.pcap" --verdicts "$out/verdicts.jsonl" \
  --events "$out/events.jsonl"
echo
echo "outputs in $out: out_b.pcap (sent out of side B), out_a.pcap (side A: the resets and"
echo "the NXDOMAIN answer), verdicts.jsonl (one line per input packet), events.jsonl (drops,"
echo "DNS blocks, DPI alerts, flows)"
