#!/usr/bin/python3
"""Writes examples/lb/traffic.pcap: client traffic to the three services of
examples/lb/config.json, for docs/lb-guide.md.

Deterministic: fixed timestamps, addresses, ports and payloads. Needs scapy (Debian:
python3-scapy). Usage: /usr/bin/python3 examples/lb/gen_traffic.py [OUT.pcap]

Everything arrives on side A (`replay --in`), in this order:
  0-47   web: 24 clients, 8 in each of 203.0.113.0/24, 198.18.0.0/24 and 198.18.1.0/24,
         open a TCP connection to 192.0.2.10:80 (SYN, then an HTTP request)
  48-57  resolvers: 10 DNS queries to 192.0.2.53 (5 names, each asked twice by different
         clients)
  58     resolvers: a UDP datagram to 192.0.2.53:53 that is not DNS (no name to hash:
         fallback DROP)
  59-62  api: two clients, SYN + data each, to 198.51.100.5:8080
  63     a packet to no service (192.0.2.99:80): forwarded unchanged
"""
import os
import sys

from scapy.all import DNS, DNSQR, IP, TCP, UDP, Ether, Raw, wrpcap
from scapy.all import conf as scapy_conf

scapy_conf.verb = 0
BASE = 1_700_000_000  # 2023-11-14T22:13:20Z
MAC_C, MAC_R = "02:00:00:00:00:02", "02:00:00:00:00:fe"


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__),
                                                              "traffic.pcap")
    frames = []

    def add(p):
        p.time = BASE + len(frames) / 1000
        frames.append(p)

    def eth():
        return Ether(src=MAC_C, dst=MAC_R)

    nets = ["203.0.113.", "198.18.0.", "198.18.1."]
    for n, net in enumerate(nets):
        for h in range(8):
            src, sport = net + str(10 + h), 41000 + n * 100 + h
            add(eth() / IP(src=src, dst="192.0.2.10") / TCP(sport=sport, dport=80, flags="S", seq=1000))
            add(eth() / IP(src=src, dst="192.0.2.10") /
                TCP(sport=sport, dport=80, flags="PA", seq=1001, ack=1) /
                Raw(b"GET / HTTP/1.1\r\nHost: www.example\r\n\r\n"))
    names = ["www.example.com", "mail.example.com", "example.org", "cdn.example.net",
             "api.example.io"]
    for k in range(10):
        add(eth() / IP(src="10.0.0.%d" % (20 + k), dst="192.0.2.53") /
            UDP(sport=42000 + k, dport=53) /
            DNS(id=0x3000 + k, rd=1, qd=DNSQR(qname=names[k % 5])))
    add(eth() / IP(src="10.0.0.40", dst="192.0.2.53") / UDP(sport=42100, dport=53) / Raw(b"\x00\x01"))
    for c in range(2):
        src, sport = "10.0.0.%d" % (50 + c), 43000 + c
        add(eth() / IP(src=src, dst="198.51.100.5") / TCP(sport=sport, dport=8080, flags="S", seq=5000))
        add(eth() / IP(src=src, dst="198.51.100.5") /
            TCP(sport=sport, dport=8080, flags="PA", seq=5001, ack=1) / Raw(b"ping"))
    add(eth() / IP(src="10.0.0.60", dst="192.0.2.99") / TCP(sport=44000, dport=80, flags="S"))
    wrpcap(out, frames)


if __name__ == "__main__":
    main()
