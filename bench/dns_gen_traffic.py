#!/usr/bin/python3
"""DNS-heavy benchmark input for bench/dns_e2e_bench.sh: a block list of N names, an appliance
config that loads it, and a pcap of DNS queries over UDP port 53.

  dns_gen_traffic.py --dir OUT [--names 1000000] [--packets 100000] [--flows 10000]
                     [--listed-share 0.1] [--action nxdomain|allow] [--seed 1]

Writes OUT/list.txt (N distinct names, 2..4 labels, plain format, matching subdomains too),
OUT/dns.json (the config: one list of those names with --action) and OUT/dns_queries.pcap:
packet i is a query of flow i % flows (client 10.x.y.z:port -> resolver 172.16.0.53:53,
Ethernet/IPv4/UDP, checksums set); its name is, with probability --listed-share, a listed
name (half the time with an extra label in front: a subdomain match), else a name that is not
listed. Every query is looked up in the 1M-name set; with action nxdomain the listed ones are
dropped and answered NXDOMAIN (with the SOA) out of the ingress port, with action allow they
are forwarded (an allow list: the same lookup, a hit). Same arguments, same bytes. Classic pcap written with
struct (scapy is far too slow for 100k frames).
"""
import argparse
import json
import os
import random
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_traffic import csum  # noqa: E402  (the Internet checksum, same directory)

ETH = bytes.fromhex("020000000002") + bytes.fromhex("020000000001") + b"\x08\x00"
TS_BASE = 1_700_000_000
ALPHA = "abcdefghijklmnopqrstuvwxyz0123456789"
TLDS = ["com", "net", "org", "io", "de", "info", "example"]


def label(rng, lo, hi):
    return "".join(rng.choice(ALPHA) for _ in range(rng.randint(lo, hi)))


def name(rng):
    parts = [label(rng, 3, 12) for _ in range(rng.randint(1, 3))]
    return ".".join(parts + [rng.choice(TLDS)])


def query(ident, qname):
    q = b"".join(bytes([len(p)]) + p.encode() for p in qname.split(".")) + b"\0"
    return struct.pack("!HHHHHH", ident, 0x0100, 1, 0, 0, 0) + q + struct.pack("!HH", 1, 1)


def frame(src, sport, payload):
    dst = (172 << 24) | (16 << 16) | 53
    udp_len = 8 + len(payload)
    ip = struct.pack("!BBHHHBBHII", 0x45, 0, 20 + udp_len, 0, 0, 64, 17, 0, src, dst)
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    pseudo = struct.pack("!IIBBH", src, dst, 0, 17, udp_len)
    udp = struct.pack("!HHHH", sport, 53, udp_len, 0) + payload
    c = csum(pseudo + udp) or 0xFFFF
    udp = udp[:6] + struct.pack("!H", c) + udp[8:]
    f = ETH + ip + udp
    return f + b"\0" * max(0, 60 - len(f))


def listed_under(qname, lset):
    parts = qname.split(".")
    return any(".".join(parts[k:]) in lset for k in range(len(parts)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--names", type=int, default=1_000_000)
    ap.add_argument("--packets", type=int, default=100_000)
    ap.add_argument("--flows", type=int, default=10_000)
    ap.add_argument("--listed-share", type=float, default=0.1)
    ap.add_argument("--action", choices=["nxdomain", "allow"], default="nxdomain")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    os.makedirs(a.dir, exist_ok=True)
    listed = set()
    while len(listed) < a.names:
        listed.add(name(rng))
    listed = sorted(listed)
    with open(os.path.join(a.dir, "list.txt"), "w") as f:
        f.write("\n".join(listed) + "\n")
    action = {"nxdomain": "DNS_NXDOMAIN", "allow": "DNS_ALLOW"}[a.action]
    cfg = {"dns": {"lists": [{"name": "bench", "action": action,
                              "format": "DNS_FORMAT_PLAIN", "match_subdomains": True,
                              "files": [os.path.abspath(os.path.join(a.dir, "list.txt"))]}]}}
    with open(os.path.join(a.dir, "dns.json"), "w") as f:
        json.dump(cfg, f, indent=1)
        f.write("\n")
    flows = [((10 << 24) | rng.getrandbits(24), rng.randint(1024, 65535)) for _ in range(a.flows)]
    lset = set(listed)
    with open(os.path.join(a.dir, "dns_queries.pcap"), "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i in range(a.packets):
            src, sport = flows[i % a.flows]
            if rng.random() < a.listed_share:
                qn = rng.choice(listed)
                if rng.random() < 0.5:
                    qn = label(rng, 1, 8) + "." + qn
            else:
                qn = name(rng)
                while listed_under(qn, lset):  # lists match subdomains: no listed suffix
                    qn = name(rng)
            fr = frame(src, sport, query(i & 0xFFFF, qn))
            f.write(struct.pack("<IIII", TS_BASE + i // 1_000_000, i % 1_000_000, len(fr), len(fr)))
            f.write(fr)


if __name__ == "__main__":
    main()
