#!/usr/bin/python3
"""Writes examples/dns/queries.pcap: DNS queries (and two resolver answers) that exercise
every list of examples/dns/config.json, for docs/dns-guide.md.

Deterministic: fixed timestamps, addresses, DNS ids. Needs scapy (Debian: python3-scapy).
Usage: /usr/bin/python3 examples/dns/gen_queries.py [OUT.pcap]

The client 10.0.0.2 (side A) asks the resolver 10.0.0.53 (beyond side B); the whole
capture is replayed on side A (`replay --in`), the answers of frames 19-20 included.
"""
import os
import sys

from scapy.all import DNS, DNSQR, DNSRR, IP, UDP, Ether, Raw, wrpcap
from scapy.all import conf as scapy_conf

scapy_conf.verb = 0
BASE = 1_700_000_000  # 2023-11-14T22:13:20Z
CLIENT, RESOLVER = "10.0.0.2", "10.0.0.53"
MAC_C, MAC_R = "02:00:00:00:00:02", "02:00:00:00:00:35"

# (name, qtype, destination port): in this order, frames 0..17.
QUERIES = [
    ("ads.example", "A", 53),             # 0  ads: NXDOMAIN
    ("www.ads.example", "A", 53),         # 1  ads (subdomain): NXDOMAIN
    ("cdn.ads.example", "A", 53),         # 2  @@||cdn.ads.example^: allowed
    ("evil.example", "A", 53),            # 3  malware: sinkhole A 192.0.2.66
    ("dl.evil.example", "AAAA", 53),      # 4  malware (match_subdomains): sinkhole AAAA
    ("evil.example", "MX", 53),           # 5  malware, not A/AAAA: NODATA
    ("safe.evil.example", "A", 53),       # 6  exceptions (DNS_ALLOW): allowed
    ("casino.example", "A", 53),          # 7  policy, CNAME . : NXDOMAIN
    ("www.casino.example", "A", 53),      # 8  policy, *.casino.example CNAME . : NXDOMAIN
    ("partner.casino.example", "A", 53),  # 9  policy, rpz-passthru: allowed
    ("ipv6only.example", "A", 53),        # 10 policy, CNAME *. : NODATA
    ("flood.example", "A", 53),           # 11 policy, rpz-drop: dropped
    ("gaming.example", "A", 53),          # 12 local-block: REFUSED
    ("chat.social.example", "A", 53),     # 13 local-block, *.social.example: REFUSED
    ("social.example", "A", 53),          # 14 "*.x" is subdomains only: not blocked
    ("www.example.com", "A", 53),         # 15 on no list: forwarded
    ("ads.example", "A", 5353),           # 16 extra_ports 5353: NXDOMAIN
    ("ads.example", "A", 5300),           # 17 port not inspected: forwarded
]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__),
                                                              "queries.pcap")
    frames = []
    t = 0

    def add(p):
        nonlocal t
        p.time = BASE + t / 1000
        t += 1
        frames.append(p)

    for i, (name, qtype, port) in enumerate(QUERIES):
        add(Ether(src=MAC_C, dst=MAC_R) / IP(src=CLIENT, dst=RESOLVER) /
            UDP(sport=40000 + i, dport=port) / DNS(id=0x1000 + i, rd=1, qd=DNSQR(qname=name, qtype=qtype)))
    # 18: malformed: the header announces a question that is not there (dns.malformed DROP)
    add(Ether(src=MAC_C, dst=MAC_R) / IP(src=CLIENT, dst=RESOLVER) /
        UDP(sport=40100, dport=53) / Raw(bytes.fromhex("2000010000010000000000000377")))
    # 19: the resolver answers frame 15: forwarded
    add(Ether(src=MAC_R, dst=MAC_C) / IP(src=RESOLVER, dst=CLIENT) / UDP(sport=53, dport=40015) /
        DNS(id=0x100f, qr=1, rd=1, ra=1, qd=DNSQR(qname="www.example.com"),
            an=DNSRR(rrname="www.example.com", type="A", ttl=300, rdata="93.184.216.34")))
    # 20: an answer whose CNAME leads to a blocked name (cloaking): replaced by NXDOMAIN
    add(Ether(src=MAC_R, dst=MAC_C) / IP(src=RESOLVER, dst=CLIENT) / UDP(sport=53, dport=40200) /
        DNS(id=0x2001, qr=1, rd=1, ra=1, qd=DNSQR(qname="img.shop.example"),
            an=DNSRR(rrname="img.shop.example", type="CNAME", ttl=300, rdata="pixel.tracker.example") /
            DNSRR(rrname="pixel.tracker.example", type="A", ttl=300, rdata="198.51.100.7")))
    wrpcap(out, frames)


if __name__ == "__main__":
    main()
