#!/usr/bin/python3
"""An appliance config with one load-balancer service of N backends over the benchmark
traffic of gen_traffic.py (destinations in 172.16.0.0/12, TCP and UDP, any port), for
bench/fw_e2e_bench.sh -c (see bench/lb_e2e_bench.sh).

  lb_gen_config.py -o lb100.json [--backends 100] [--mode l2|nat|ipip] [--table-size 65537]
                   [--weights equal|mixed]

Backend k (1..N) is "be<k>": MAC 02:be:00:00:hi:lo, IPv4 10.200.hi.lo, IPv6
2001:db8:200::<k>, weight 1 (mixed: 1 + k % 4). The key is the 5-tuple (empty key). NAT
keeps the ports; IPIP tunnels from 198.51.100.1 / 2001:db8:ff::1. Same arguments, same file.
"""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--backends", type=int, default=100)
    ap.add_argument("--mode", choices=["l2", "nat", "ipip"], default="l2")
    ap.add_argument("--table-size", type=int, default=65537)
    ap.add_argument("--weights", choices=["equal", "mixed"], default="equal")
    a = ap.parse_args()
    if not 1 <= a.backends <= 4096:
        sys.exit("lb_gen_config: --backends must be 1..4096")
    backends = []
    for k in range(1, a.backends + 1):
        hi, lo = k >> 8, k & 0xFF
        backends.append({
            "id": f"be{k}",
            "mac": f"02:be:00:00:{hi:02x}:{lo:02x}",
            "ipv4": f"10.200.{hi}.{lo}",
            "ipv6": f"2001:db8:200::{k:x}",
            "weight": 1 if a.weights == "equal" else 1 + k % 4,
        })
    svc = {
        "id": f"bench{a.backends}",
        "dst": ["172.16.0.0/12"],
        "mode": {"l2": "LB_MODE_L2", "nat": "LB_MODE_NAT", "ipip": "LB_MODE_IPIP"}[a.mode],
        "table_size": a.table_size,
        "backends": backends,
    }
    if a.mode == "ipip":
        svc["tunnel_src_v4"] = "198.51.100.1"
        svc["tunnel_src_v6"] = "2001:db8:ff::1"
    with open(a.out, "w") as f:
        json.dump({"lb": {"services": [svc]}}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
