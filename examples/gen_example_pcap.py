#!/usr/bin/python3
"""Writes examples/example.pcap: a small, realistic traffic mix for trying the appliance.

Deterministic: fixed timestamps, fixed addresses, payloads from a seeded generator, so
running it again produces the same bytes (check with sha256sum). Needs scapy
(Debian: python3-scapy). Usage:

    /usr/bin/python3 examples/gen_example_pcap.py [OUT.pcap]   # default: examples/example.pcap

Everything is one capture that arrives on side A of the appliance (`replay --in`); both
directions of each conversation are in it. What it holds, in this order (see README.md):
  1. ARP request and reply
  2. TCP over IPv4: an HTTP-like session (handshake, request, 9-segment response, FIN
     teardown from both sides), a second one the client aborts with a RST, and an
     SSH-like session opened by the other host
  3. UDP: DNS-like queries and responses (one NXDOMAIN), an NTP-like exchange
  4. ICMP echo request and reply (4 times)
  5. IPv6: a TCP session (handshake, data, FIN teardown) and an ICMPv6 echo exchange
  6. An 802.1Q VLAN (VID 100) UDP flow answered by an ICMP port unreachable, and a QinQ
     (802.1ad 200 / 802.1Q 300) TCP session
  7. IPv4 fragments: a UDP datagram in 3 fragments in order; one whose last fragment comes
     first (last, first, middle); one with an overlapping fragment; a tiny first fragment
     (8 bytes: too short for a TCP header)
  8. Malformed frames: an IPv4 header with IHL 3, and a TCP header cut to 10 bytes
Frames shorter than 60 bytes are zero-padded as they are on a real wire.
"""
import os
import random
import sys
from decimal import Decimal

from scapy.all import (ARP, DNS, DNSQR, DNSRR, ICMP, IP, TCP, UDP, Dot1AD, Dot1Q, Ether,
                       ICMPv6EchoReply, ICMPv6EchoRequest, IPv6, Raw, raw, wrpcap)
from scapy.all import conf as scapy_conf

scapy_conf.verb = 0

BASE_US = 1_700_000_000 * 1_000_000  # 2023-11-14T22:13:20Z
RNG = random.Random(20240601)

MAC_CLIENT = "02:00:00:00:0a:01"
MAC_SERVER = "02:00:00:00:0b:01"
MAC_ROUTER = "02:00:00:00:0c:01"


class Capture:
    """Collects frames with strictly increasing, fixed timestamps."""

    def __init__(self):
        self.frames = []
        self.t_us = BASE_US

    def add(self, pkt, gap_us=1000):
        self.t_us += gap_us
        data = raw(pkt)
        if len(data) < 60:
            data += b"\x00" * (60 - len(data))
        frame = Ether(data)
        frame.time = Decimal(self.t_us) / Decimal(1_000_000)
        self.frames.append(frame)


def payload(n):
    return bytes(RNG.randrange(32, 127) for _ in range(n))


def syn_options(mss):
    return [("MSS", mss), ("NOP", None), ("WScale", 7), ("SAckOK", b""), ("NOP", None),
            ("NOP", None)]


def tcp_session(cap, l2_c2s, l2_s2c, ip_c2s, ip_s2c, sport, dport, request, responses,
                mss=1460, close="fin"):
    """Handshake, one request, responses (list of byte strings), then a FIN teardown from
    both sides (close="fin") or a reset from the client (close="rst")."""
    cseq, sseq = RNG.randrange(1 << 32), RNG.randrange(1 << 32)
    c = lambda flags, seq, ack, data=b"": l2_c2s() / ip_c2s() / TCP(
        sport=sport, dport=dport, flags=flags, seq=seq % (1 << 32), ack=ack % (1 << 32),
        window=64240) / (Raw(data) if data else b"")
    s = lambda flags, seq, ack, data=b"": l2_s2c() / ip_s2c() / TCP(
        sport=dport, dport=sport, flags=flags, seq=seq % (1 << 32), ack=ack % (1 << 32),
        window=65160) / (Raw(data) if data else b"")
    cap.add(l2_c2s() / ip_c2s() / TCP(sport=sport, dport=dport, flags="S", seq=cseq,
                                       window=64240, options=syn_options(mss)))
    cap.add(l2_s2c() / ip_s2c() / TCP(sport=dport, dport=sport, flags="SA", seq=sseq,
                                       ack=cseq + 1, window=65160, options=syn_options(mss)),
            gap_us=300)
    cseq += 1
    sseq += 1
    cap.add(c("A", cseq, sseq), gap_us=150)
    cap.add(c("PA", cseq, sseq, request), gap_us=200)
    cseq += len(request)
    cap.add(s("A", sseq, cseq), gap_us=250)
    for r in responses:
        cap.add(s("PA", sseq, cseq, r), gap_us=400)
        sseq += len(r)
    cap.add(c("A", cseq, sseq), gap_us=150)
    if close == "rst":
        cap.add(c("RA", cseq, sseq), gap_us=5000)
        return
    cap.add(c("FA", cseq, sseq), gap_us=5000)
    cseq += 1
    cap.add(s("FA", sseq, cseq), gap_us=300)
    sseq += 1
    cap.add(c("A", cseq, sseq), gap_us=150)


def ipv4_fragments(datagram, chunk):
    """Splits an IPv4 packet (scapy IP layer with payload) into fragments of `chunk` bytes
    (a multiple of 8) of the IP payload. Returns the fragment IP packets in order."""
    full = IP(raw(datagram))  # checksums and lengths computed once, over the whole datagram
    body = raw(full.payload)
    frags = []
    for off in range(0, len(body), chunk):
        part = body[off:off + chunk]
        more = off + chunk < len(body)
        frags.append(IP(src=full.src, dst=full.dst, id=full.id, ttl=full.ttl,
                        proto=full.proto, flags="MF" if more else 0, frag=off // 8) /
                     Raw(part))
    return frags


def build():
    cap = Capture()
    eth_cs = lambda: Ether(src=MAC_CLIENT, dst=MAC_SERVER)
    eth_sc = lambda: Ether(src=MAC_SERVER, dst=MAC_CLIENT)

    # 1. ARP: the client resolves the server.
    cap.add(Ether(src=MAC_CLIENT, dst="ff:ff:ff:ff:ff:ff") /
            ARP(op=1, hwsrc=MAC_CLIENT, psrc="192.0.2.10", pdst="192.0.2.20"))
    cap.add(Ether(src=MAC_SERVER, dst=MAC_CLIENT) /
            ARP(op=2, hwsrc=MAC_SERVER, psrc="192.0.2.20", hwdst=MAC_CLIENT,
                pdst="192.0.2.10"), gap_us=200)

    # 2. TCP over IPv4.
    ip_cs = lambda: IP(src="192.0.2.10", dst="192.0.2.20", ttl=64, id=RNG.randrange(65536))
    ip_sc = lambda: IP(src="192.0.2.20", dst="192.0.2.10", ttl=64, id=RNG.randrange(65536))
    request = (b"GET /index.html HTTP/1.1\r\nHost: www.example.com\r\n"
               b"User-Agent: example/1.0\r\nAccept: */*\r\n\r\n")
    body = payload(12000)
    header = (b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 12000\r\n\r\n")
    resp = header + body
    tcp_session(cap, eth_cs, eth_sc, ip_cs, ip_sc, 51000, 80, request,
                [resp[i:i + 1448] for i in range(0, len(resp), 1448)])
    # A second HTTP session that the client aborts with a reset.
    tcp_session(cap, eth_cs, eth_sc, ip_cs, ip_sc, 51002, 80,
                request.replace(b"/index.html", b"/large.bin"),
                [b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n" + payload(1300),
                 payload(1448)], close="rst")
    # The server opens a session to the client this time (the other direction).
    tcp_session(cap, eth_sc, eth_cs, ip_sc, ip_cs, 40022, 22,
                b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n",
                [b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n", payload(600)])

    # 3. DNS over UDP.
    for i, name in enumerate(("mail.example.org", "cdn.example.net", "www.example.com")):
        cap.add(eth_cs() / ip_cs() / UDP(sport=53100 + i, dport=53) /
                DNS(id=0x2000 + i, rd=1, qd=DNSQR(qname=name, qtype="A")))
        cap.add(eth_sc() / ip_sc() / UDP(sport=53, dport=53100 + i) /
                DNS(id=0x2000 + i, qr=1, rd=1, ra=1, rcode=0 if i != 1 else 3,
                    qd=DNSQR(qname=name, qtype="A"),
                    an=DNSRR(rrname=name, type="A", ttl=60, rdata="192.0.2.%d" % (30 + i))
                    if i != 1 else None), gap_us=900)
    # NTP (UDP 123), client mode then server mode.
    cap.add(eth_cs() / ip_cs() / UDP(sport=123, dport=123) / Raw(b"\x23" + b"\x00" * 47),
            gap_us=2000)
    cap.add(eth_sc() / ip_sc() / UDP(sport=123, dport=123) / Raw(b"\x24\x02" + payload(46)),
            gap_us=700)
    q = DNS(id=0x1a2b, rd=1, qd=DNSQR(qname="www.example.com", qtype="A"))
    cap.add(eth_cs() / ip_cs() / UDP(sport=53001, dport=53) / q)
    cap.add(eth_sc() / ip_sc() / UDP(sport=53, dport=53001) /
            DNS(id=0x1a2b, qr=1, aa=1, rd=1, ra=1, qd=DNSQR(qname="www.example.com", qtype="A"),
                an=DNSRR(rrname="www.example.com", type="A", ttl=300, rdata="192.0.2.20")),
            gap_us=800)
    q6 = DNS(id=0x1a2c, rd=1, qd=DNSQR(qname="www.example.com", qtype="AAAA"))
    cap.add(eth_cs() / ip_cs() / UDP(sport=53002, dport=53) / q6)
    cap.add(eth_sc() / ip_sc() / UDP(sport=53, dport=53002) /
            DNS(id=0x1a2c, qr=1, aa=1, rd=1, ra=1,
                qd=DNSQR(qname="www.example.com", qtype="AAAA"),
                an=DNSRR(rrname="www.example.com", type="AAAA", ttl=300,
                         rdata="2001:db8::20")), gap_us=800)

    # 4. ICMP echo.
    for seq in (1, 2, 3, 4):
        data = payload(56)
        cap.add(eth_cs() / ip_cs() / ICMP(type=8, id=0x4242, seq=seq) / Raw(data), gap_us=100000)
        cap.add(eth_sc() / ip_sc() / ICMP(type=0, id=0x4242, seq=seq) / Raw(data), gap_us=400)

    # 5. IPv6.
    ip6_cs = lambda: IPv6(src="2001:db8::10", dst="2001:db8::20", hlim=64)
    ip6_sc = lambda: IPv6(src="2001:db8::20", dst="2001:db8::10", hlim=64)
    tcp_session(cap, eth_cs, eth_sc, ip6_cs, ip6_sc, 52000, 443, payload(517),
                [payload(1200), payload(1200), payload(1200), payload(300)], mss=1440)
    for seq in (1, 2):
        data = payload(56)
        cap.add(eth_cs() / ip6_cs() / ICMPv6EchoRequest(id=0x6262, seq=seq, data=data),
                gap_us=100000)
        cap.add(eth_sc() / ip6_sc() / ICMPv6EchoReply(id=0x6262, seq=seq, data=data), gap_us=400)

    # 6. VLAN 100 (802.1Q) syslog-like UDP, and QinQ 200/300 TCP.
    vl_cs = lambda: Ether(src=MAC_CLIENT, dst=MAC_ROUTER) / Dot1Q(vlan=100)
    vl_sc = lambda: Ether(src=MAC_ROUTER, dst=MAC_CLIENT) / Dot1Q(vlan=100)
    for i in range(6):
        cap.add(vl_cs() / IP(src="198.51.100.10", dst="198.51.100.1") /
                UDP(sport=45514, dport=514) / Raw(b"<134>example: message %d" % i))
    cap.add(vl_sc() / IP(src="198.51.100.1", dst="198.51.100.10") /
            ICMP(type=3, code=3) / raw(IP(src="198.51.100.10", dst="198.51.100.1") /
                                       UDP(sport=45514, dport=514))[:28])
    qq_cs = lambda: Ether(src=MAC_CLIENT, dst=MAC_ROUTER) / Dot1AD(vlan=200) / Dot1Q(vlan=300)
    qq_sc = lambda: Ether(src=MAC_ROUTER, dst=MAC_CLIENT) / Dot1AD(vlan=200) / Dot1Q(vlan=300)
    qip_cs = lambda: IP(src="203.0.113.10", dst="203.0.113.20", id=RNG.randrange(65536))
    qip_sc = lambda: IP(src="203.0.113.20", dst="203.0.113.10", id=RNG.randrange(65536))
    tcp_session(cap, qq_cs, qq_sc, qip_cs, qip_sc, 53000, 8080,
                b"PING example\r\n", [b"PONG example\r\n"])

    # 7. IPv4 fragments (UDP, 2 x 16 bytes + rest).
    def udp_datagram(ident, n):
        return IP(src="192.0.2.10", dst="192.0.2.20", id=ident, ttl=64) / \
            UDP(sport=50000 + ident % 1000, dport=5001) / Raw(payload(n))
    f = ipv4_fragments(udp_datagram(0x1001, 1400), 480)  # in order: 480+480+448 bytes
    assert len(f) == 3
    for frag in f:
        cap.add(eth_cs() / frag, gap_us=50)
    f = ipv4_fragments(udp_datagram(0x1002, 1400), 480)
    for frag in (f[2], f[0], f[1]):                            # last fragment first
        cap.add(eth_cs() / frag, gap_us=50)
    # Overlap: the second fragment starts 8 bytes inside the first (teardrop-style).
    f = ipv4_fragments(udp_datagram(0x1003, 1000), 512)
    first, last = f[0], f[1]
    overlapping = IP(src=last.src, dst=last.dst, id=last.id, proto=last.proto,
                     frag=(512 - 8) // 8) / Raw(b"\x41" * 8 + raw(last.payload))
    cap.add(eth_cs() / first, gap_us=50)
    cap.add(eth_cs() / overlapping, gap_us=50)
    cap.add(eth_cs() / last, gap_us=50)
    # Tiny first fragment: 8 bytes of a TCP header, the rest in the second fragment.
    seg = raw(IP(src="192.0.2.10", dst="192.0.2.20", id=0x1004) /
              TCP(sport=51999, dport=80, flags="S", seq=1000, window=64240))
    body_tcp = seg[20:]
    cap.add(eth_cs() / IP(src="192.0.2.10", dst="192.0.2.20", id=0x1004, proto=6, flags="MF",
                          frag=0) / Raw(body_tcp[:8]), gap_us=50)
    cap.add(eth_cs() / IP(src="192.0.2.10", dst="192.0.2.20", id=0x1004, proto=6, frag=1) /
            Raw(body_tcp[8:]), gap_us=50)

    # 8. Malformed frames.
    bad_ihl = bytearray(raw(IP(src="192.0.2.10", dst="192.0.2.20") /
                            UDP(sport=40000, dport=9) / Raw(b"x" * 12)))
    bad_ihl[0] = 0x43  # version 4, IHL 3 (12 bytes: shorter than the fixed header)
    cap.add(Ether(src=MAC_CLIENT, dst=MAC_SERVER, type=0x0800) / Raw(bytes(bad_ihl)))
    trunc = raw(IP(src="192.0.2.10", dst="192.0.2.20") /
                TCP(sport=40001, dport=80, flags="S"))
    cut = bytearray(trunc[:30])  # 20-byte IP header + 10 of the 20-byte TCP header
    cut[2:4] = (30).to_bytes(2, "big")
    cut[10:12] = b"\x00\x00"
    cut[10:12] = ip_checksum(bytes(cut[:20])).to_bytes(2, "big")
    cap.add(Ether(src=MAC_CLIENT, dst=MAC_SERVER, type=0x0800) / Raw(bytes(cut)))
    return cap.frames


def ip_checksum(hdr):
    s = 0
    for i in range(0, len(hdr), 2):
        s += (hdr[i] << 8) | hdr[i + 1]
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "example.pcap")
    frames = build()
    wrpcap(out, frames, linktype=1)
    print(f"{out}: {len(frames)} frames")


if __name__ == "__main__":
    main()
