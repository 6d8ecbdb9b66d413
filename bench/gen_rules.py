#!/usr/bin/env python3
"""Writes N generated firewall rules (text format) that never match the bench traffic of
gen_traffic.py (10/8 -> 172.16/12): sources in 192.168/16, destinations in 198.18/15, one
port each, priorities spread over 1000 values; and a config JSON that loads them.

    gen_rules.py N VARIANT RULES_FILE      (writes RULES_FILE and RULES_FILE minus .rules + .json)

VARIANT (0/1) shifts the ports, so two files of the same size are different rule sets."""
import sys

n, var, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
with open(out, "w") as f:
    f.write(f"# gen_rules.py: {n} generated rules, variant {var}; never match the bench traffic\n")
    for i in range(n):
        proto = ("tcp", "udp")[i % 2]
        src = f"192.168.{(i >> 8) & 255}.{i & 255}/32"
        dst = f"198.{18 + ((i >> 16) & 1)}.{(i >> 8) & 255}.{(i * 7) & 255}/32"
        dport = 1 + (i % 1000) + 1000 * var
        f.write(f"deny {proto} {src} any -> {dst} {dport} prio {10 + i % 1000} id r{var}_{i}\n")
base = out[:-len(".rules")] if out.endswith(".rules") else out
with open(base + ".json", "w") as f:
    f.write('{"firewall": {"default_a_to_b": "ALLOW", "default_b_to_a": "ALLOW", '
            f'"rule_files": ["{out}"]}}}}\n')
