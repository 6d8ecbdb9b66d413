#!/usr/bin/python3
"""Generates the synthetic pcap regression cases under tests/pcap/<case>/.

    /usr/bin/python3 tests/pcap/gen_cases.py [CASE ...]     # default: every synthetic case

Needs scapy (Debian: python3-scapy) to build packets; the pcap files are written by this
script (fixed timestamps, no randomness), so the output is byte-for-byte reproducible.
For each case it writes config.json, input.pcap (or input_a.pcap + input_b.pcap) and
intent.tsv: the verdict the author expects for every packet, with a note saying what the
packet is (checked by check_case.py on every run). The expected_* files are then produced
by replaying the case: `REGEN=1 tests/pcap/run_case.sh tests/pcap/<case> BINARY`, and
reviewed before they are committed. The real-capture cases (real_*) are not generated
here: they are copies of files from ../shared/data/pcap (see their SOURCE.txt).

Intent notation used below (exp argument of Case.add):
  "F"            forward, no flow (flow_id null)
  "F s1"         forward, flow labelled s1 (same label = same flow_id), not a new flow
  "F s1 new"     forward, creates flow s1 (new_flow true)
  "D reason"     drop with that reason, no flow
  "D reason s1 new"  drop with that reason inside flow s1 (a later stage dropped it)
"""
import json
import os
import struct
import sys

from scapy.all import (ARP, ICMP, IP, TCP, UDP, Dot1AD, Dot1Q, Ether, ICMPv6EchoReply,
                       ICMPv6EchoRequest, IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrFragment,
                       IPv6ExtHdrHopByHop, IPv6ExtHdrRouting, Raw, raw)
from scapy.all import conf as scapy_conf
from scapy.layers.dns import DNS, DNSQR, DNSRR
from scapy.layers.ppp import PPP, PPPoE, PPPoED

scapy_conf.verb = 0

HERE = os.path.dirname(os.path.abspath(__file__))
BASE_US = 1_700_000_000 * 1_000_000  # 2023-11-14T22:13:20Z

MAC_A = "02:00:00:00:00:0a"   # hosts on side A
MAC_B = "02:00:00:00:00:0b"   # hosts on side B
BCAST = "ff:ff:ff:ff:ff:ff"


def payload(n, seed=0):
    """n deterministic printable bytes."""
    return bytes(33 + (i * 7 + seed * 13) % 90 for i in range(n))


def ip_checksum(hdr):
    s = 0
    for i in range(0, len(hdr), 2):
        s += (hdr[i] << 8) | (hdr[i + 1] if i + 1 < len(hdr) else 0)
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


class Case:
    def __init__(self, name, config, about):
        self.name = name
        self.config = config
        self.about = about
        self.items = []  # [ts_us, side, frame bytes, exp, note]
        self.t_us = {"A": BASE_US, "B": BASE_US}

    def add(self, pkt, exp, note, gap_us=1000, side="A", at_us=None, pad=True):
        """Appends a frame on `side`, gap_us after the previous frame of that side (or at the
        absolute offset at_us from BASE_US)."""
        t = BASE_US + at_us if at_us is not None else self.t_us[side] + gap_us
        if t < self.t_us[side]:
            raise ValueError(f"{self.name}: timestamps must not go back on side {side}")
        self.t_us[side] = t
        data = pkt if isinstance(pkt, (bytes, bytearray)) else raw(pkt)
        if pad and len(data) < 60:
            data = bytes(data) + b"\x00" * (60 - len(data))
        self.items.append([t, side, bytes(data), exp, note])

    def now(self, side="A"):
        return self.t_us[side] - BASE_US

    def merged(self):
        """Frames in the order the appliance reads them: timestamp merge of the sides,
        side A first on equal timestamps, each side in file order."""
        a = [x for x in self.items if x[1] == "A"]
        b = [x for x in self.items if x[1] == "B"]
        out, i, j = [], 0, 0
        while i < len(a) or j < len(b):
            if j >= len(b) or (i < len(a) and a[i][0] <= b[j][0]):
                out.append(a[i])
                i += 1
            else:
                out.append(b[j])
                j += 1
        return out

    def write(self):
        d = os.path.join(HERE, self.name)
        os.makedirs(d, exist_ok=True)
        for stale in ("input.pcap", "input_a.pcap", "input_b.pcap"):
            p = os.path.join(d, stale)
            if os.path.exists(p):
                os.remove(p)
        with open(os.path.join(d, "config.json"), "w") as f:
            f.write(json.dumps(self.config, indent=2) + "\n")
        # Config changes during the replay (run_case.sh passes them as --change).
        changes = getattr(self, "changes", [])
        if changes:
            with open(os.path.join(d, "changes.tsv"), "w") as f:
                f.write("# input index<TAB>config file committed just before that packet\n")
                for at, fname, cfg in changes:
                    f.write(f"{at}\t{fname}\n")
                    with open(os.path.join(d, fname), "w") as g:
                        g.write(json.dumps(cfg, indent=2) + "\n")
        sides = sorted({x[1] for x in self.items})
        if sides == ["A"]:
            write_pcap(os.path.join(d, "input.pcap"), [x for x in self.items if x[1] == "A"])
        else:
            write_pcap(os.path.join(d, "input_a.pcap"), [x for x in self.items if x[1] == "A"])
            write_pcap(os.path.join(d, "input_b.pcap"), [x for x in self.items if x[1] == "B"])
        lines = ["# " + l for l in self.about.strip().splitlines()]
        lines.append("# Generated by tests/pcap/gen_cases.py; the notation is explained in "
                     "check_case.py.")
        lines.append("index\tside\tverdict\treason\tflow\tnew\tnote")
        for i, (_, side, _, exp, note) in enumerate(self.merged()):
            parts = exp.split()
            verdict = {"F": "forward", "D": "drop", "R": "reject", "X": "reject"}[parts[0]]
            reason, flow, new = "-", "-", "0"
            if parts[0] in ("D", "X"):
                reason = parts[1]
                if len(parts) > 2:  # "D reason label [new]": a drop inside a tracked flow
                    flow = parts[2]
                    new = "1" if len(parts) > 3 and parts[3] == "new" else "0"
            elif len(parts) > 1:
                flow = parts[1]
                new = "1" if len(parts) > 2 and parts[2] == "new" else "0"
                if flow == "?":
                    new = "?"
            lines.append(f"{i}\t{side}\t{verdict}\t{reason}\t{flow}\t{new}\t{note}")
        with open(os.path.join(d, "intent.tsv"), "w") as f:
            f.write("\n".join(lines) + "\n")
        print(f"{self.name}: {len(self.items)} frames")


def write_pcap(path, items):
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for t, _, data, _, _ in items:
            f.write(struct.pack("<IIII", t // 1000000, t % 1000000, len(data), len(data)))
            f.write(data)


class Tcp:
    """One TCP connection: builds segments with consistent sequence numbers."""

    def __init__(self, case, l2c, l2s, ipc, ips, cport, sport, flow, cseq=1000, sseq=5000,
                 side_c="A", side_s="A"):
        self.case, self.l2c, self.l2s, self.ipc, self.ips = case, l2c, l2s, ipc, ips
        self.cport, self.sport, self.flow = cport, sport, flow
        self.cseq, self.sseq = cseq, sseq
        self.side_c, self.side_s = side_c, side_s

    def seg(self, from_client, flags, data=b""):
        if from_client:
            p = self.l2c() / self.ipc() / TCP(sport=self.cport, dport=self.sport, flags=flags,
                                              seq=self.cseq % 2**32,
                                              ack=self.sseq % 2**32 if "A" in flags else 0,
                                              window=64240)
        else:
            p = self.l2s() / self.ips() / TCP(sport=self.sport, dport=self.cport, flags=flags,
                                              seq=self.sseq % 2**32,
                                              ack=self.cseq % 2**32 if "A" in flags else 0,
                                              window=65160)
        if data:
            p = p / Raw(data)
        adv = len(data) + (1 if ("S" in flags or "F" in flags) else 0)
        if from_client:
            self.cseq += adv
        else:
            self.sseq += adv
        return p

    def c(self, flags, exp=None, note="", data=b"", gap_us=1000, **kw):
        self.case.add(self.seg(True, flags, data), exp or f"F {self.flow}",
                      note or f"{self.flow}: client {flags}" + (f" +{len(data)}B" if data else ""),
                      gap_us=gap_us, side=self.side_c, **kw)

    def s(self, flags, exp=None, note="", data=b"", gap_us=1000, **kw):
        self.case.add(self.seg(False, flags, data), exp or f"F {self.flow}",
                      note or f"{self.flow}: server {flags}" + (f" +{len(data)}B" if data else ""),
                      gap_us=gap_us, side=self.side_s, **kw)

    def handshake(self, note=""):
        self.c("S", f"F {self.flow} new", f"{self.flow}: SYN {note}".strip())
        self.s("SA")
        self.c("A")

    def fin_teardown(self):
        self.c("FA")
        self.s("FA")
        self.c("A", note=f"{self.flow}: last ACK")


def eth_a():
    return Ether(src=MAC_A, dst=MAC_B)


def eth_b():
    return Ether(src=MAC_B, dst=MAC_A)


def ipv4_fragments(datagram, sizes):
    """Fragments an IPv4 packet (scapy IP with payload): `sizes` are the payload bytes of
    each fragment but the last (multiples of 8). Returns [(offset, more, IP packet)]."""
    full = IP(raw(datagram))
    body = raw(full.payload)
    out, off = [], 0
    for n in list(sizes) + [len(body)]:
        part = body[off:off + n]
        if not part:
            break
        more = off + len(part) < len(body)
        out.append((off, more, frag4(full, off, more, part)))
        off += len(part)
    return out


def frag4(full, off, more, part, ident=None):
    return IP(src=full.src, dst=full.dst, id=full.id if ident is None else ident, ttl=64,
              proto=full.proto, flags="MF" if more else 0, frag=off // 8) / Raw(part)


def ipv6_fragments(src, dst, upper, ident, sizes):
    """Fragments the upper-layer bytes of an IPv6 packet; upper = scapy layer (UDP/...)
    already bound to the IPv6 header so checksums are right. Returns IPv6 packets."""
    whole = IPv6(raw(IPv6(src=src, dst=dst) / upper))
    body = raw(whole.payload)
    nh = whole.nh
    out, off = [], 0
    for n in list(sizes) + [len(body)]:
        part = body[off:off + n]
        if not part:
            break
        more = off + len(part) < len(body)
        out.append(IPv6(src=src, dst=dst, nh=44) /
                   IPv6ExtHdrFragment(nh=nh, offset=off // 8, m=1 if more else 0, id=ident) /
                   Raw(part))
        off += len(part)
    return out


# --------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------

def case_tcp_session():
    c = Case("tcp_session", {}, """
TCP over IPv4 with the default config: complete sessions, each one flow.
s1: handshake, data both ways, FIN from both sides, last ACK (state closed at the end).
s2: handshake, data, then the server resets; a late client ACK after the RST still
    belongs to s2 (the closed flow is kept for tcp_closed_s).
s3: a SYN the server never answers, retransmitted twice (state syn_sent).
s4: simultaneous close (both FINs cross) with data from the server only.
s5: same addresses and server port as s1 but another client port: a separate flow.
Expected: everything forwarded, 5 flows, new_flow only on each first SYN.""")
    ip_c = lambda: IP(src="10.0.0.1", dst="10.0.0.2", ttl=64)
    ip_s = lambda: IP(src="10.0.0.2", dst="10.0.0.1", ttl=64)
    s1 = Tcp(c, eth_a, eth_b, ip_c, ip_s, 40000, 80, "s1")
    s1.handshake()
    s1.c("PA", data=b"GET / HTTP/1.1\r\nHost: a.example\r\n\r\n")
    s1.s("A")
    s1.s("PA", data=b"HTTP/1.1 200 OK\r\nContent-Length: 1200\r\n\r\n" + payload(1200, 1))
    s1.s("PA", data=payload(600, 2))
    s1.c("A")
    s1.fin_teardown()
    ip_c3 = lambda: IP(src="10.0.0.3", dst="10.0.0.2", ttl=64)
    ip_s3 = lambda: IP(src="10.0.0.2", dst="10.0.0.3", ttl=64)
    s2 = Tcp(c, eth_a, eth_b, ip_c3, ip_s3, 40001, 443, "s2", cseq=77777, sseq=99999)
    s2.handshake()
    s2.c("PA", data=payload(300, 3))
    s2.s("R", note="s2: server RST")
    s2.c("A", note="s2: late client ACK after the RST")
    s3 = Tcp(c, eth_a, eth_b, ip_c, ip_s, 40002, 8443, "s3")
    s3.c("S", "F s3 new", "s3: SYN, never answered")
    s3.cseq -= 1
    s3.c("S", note="s3: SYN retransmission", gap_us=1_000_000)
    s3.cseq -= 1
    s3.c("S", note="s3: SYN retransmission", gap_us=2_000_000)
    s4 = Tcp(c, eth_a, eth_b, ip_c3, ip_s3, 40003, 25, "s4", cseq=1, sseq=2**32 - 10)
    s4.handshake("(server sequence numbers wrap)")
    s4.s("PA", data=b"220 mail.example ESMTP\r\n")
    s4.c("A")
    fin_c = s4.seg(True, "FA")
    fin_s = s4.seg(False, "FA")
    c.add(fin_c, "F s4", "s4: client FIN (crosses the server FIN)")
    c.add(fin_s, "F s4", "s4: server FIN", gap_us=10)
    s4.c("A", note="s4: client ACK of the server FIN")
    s4.s("A", note="s4: server ACK of the client FIN")
    s5 = Tcp(c, eth_a, eth_b, ip_c, ip_s, 40004, 80, "s5")
    s5.handshake("(same hosts and server port as s1, other client port)")
    s5.c("PA", data=b"GET /b HTTP/1.1\r\n\r\n")
    s5.s("PA", data=b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
    s5.fin_teardown()
    return c


def case_udp_icmp():
    c = Case("udp_icmp", {}, """
UDP and ICMP over IPv4 with the default config.
u1/u2: DNS queries from two client ports to one server, each answered: two flows.
u3: NTP-like exchange with source port == destination port (123 <-> 123): one flow.
u4: DHCP discover from 0.0.0.0 to the broadcast address.
u5: a UDP datagram whose length field is smaller than the IP payload (trailing bytes),
    still valid.
i1: ICMP echo request/reply, identifier 0x1234, two rounds: one flow (both directions share
    the identifier). i2: another identifier: another flow.
i3: ICMP errors (port unreachable, then time exceeded) from a router to 10.0.0.1: not echo,
    keyed without ports, so both share one flow between the two hosts.
i4: ICMP echo request of exactly 8 bytes (no data) from another host.
Expected: everything forwarded.""")
    ipa = lambda: IP(src="10.0.0.1", dst="10.0.0.53")
    ipb = lambda: IP(src="10.0.0.53", dst="10.0.0.1")
    for port, fl in ((33333, "u1"), (33334, "u2")):
        name = "a.example" if fl == "u1" else "b.example"
        c.add(eth_a() / ipa() / UDP(sport=port, dport=53) /
              DNS(id=port & 0xffff, rd=1, qd=DNSQR(qname=name)), f"F {fl} new",
              f"{fl}: DNS query {name}")
        c.add(eth_b() / ipb() / UDP(sport=53, dport=port) /
              DNS(id=port & 0xffff, qr=1, rd=1, ra=1, qd=DNSQR(qname=name),
                  an=DNSRR(rrname=name, rdata="192.0.2.7")), f"F {fl}", f"{fl}: DNS answer")
    c.add(eth_a() / IP(src="10.0.0.1", dst="10.0.0.123") / UDP(sport=123, dport=123) /
          Raw(b"\x23" + bytes(47)), "F u3 new", "u3: NTP client, sport == dport")
    c.add(eth_b() / IP(src="10.0.0.123", dst="10.0.0.1") / UDP(sport=123, dport=123) /
          Raw(b"\x24" + bytes(47)), "F u3", "u3: NTP server")
    c.add(Ether(src=MAC_A, dst=BCAST) / IP(src="0.0.0.0", dst="255.255.255.255") /
          UDP(sport=68, dport=67) / Raw(b"\x01\x01\x06\x00" + bytes(236)), "F u4 new",
          "u4: DHCP discover to broadcast")
    udp = bytearray(raw(UDP(sport=5000, dport=6000, len=8 + 10, chksum=0) / Raw(payload(10))))
    c.add(eth_a() / IP(src="10.0.0.1", dst="10.0.0.9", proto=17) / Raw(bytes(udp) + b"TRAILER!"),
          "F u5 new", "u5: UDP length 18 inside a 26-byte IP payload")
    for seq in (1, 2):
        c.add(eth_a() / IP(src="10.0.0.1", dst="10.0.0.2") / ICMP(type=8, id=0x1234, seq=seq) /
              Raw(payload(56, seq)), "F i1 new" if seq == 1 else "F i1",
              f"i1: echo request seq {seq}", gap_us=100000)
        c.add(eth_b() / IP(src="10.0.0.2", dst="10.0.0.1") / ICMP(type=0, id=0x1234, seq=seq) /
              Raw(payload(56, seq)), "F i1", f"i1: echo reply seq {seq}")
    c.add(eth_a() / IP(src="10.0.0.1", dst="10.0.0.2") / ICMP(type=8, id=0x9999, seq=1) /
          Raw(payload(32)), "F i2 new", "i2: echo request, another identifier")
    c.add(eth_b() / IP(src="10.0.0.2", dst="10.0.0.1") / ICMP(type=0, id=0x9999, seq=1) /
          Raw(payload(32)), "F i2", "i2: echo reply")
    quoted = raw(IP(src="10.0.0.1", dst="10.0.0.77") / UDP(sport=33335, dport=9))[:28]
    c.add(eth_b() / IP(src="10.0.0.254", dst="10.0.0.1") / ICMP(type=3, code=3) / Raw(quoted),
          "F i3 new", "i3: ICMP port unreachable from a router")
    c.add(eth_b() / IP(src="10.0.0.254", dst="10.0.0.1") / ICMP(type=11, code=0) / Raw(quoted),
          "F i3", "i3: ICMP time exceeded from the same router (same flow: no ports)")
    c.add(eth_a() / IP(src="10.0.0.5", dst="10.0.0.2") / ICMP(type=8, id=7, seq=1),
          "F i4 new", "i4: echo request with no data (8 bytes)")
    return c


def case_ipv6_ext_headers():
    c = Case("ipv6_ext_headers", {}, """
IPv6 with extension headers, default config. The flow key uses the protocol found at the
end of the header chain, so packets of one connection with different extension headers
share one flow.
t1: TCP session; SYN plain, SYN-ACK with a destination options header, ACK with hop-by-hop +
    destination options + routing (segments left 0), data, FINs.
u1: UDP with hop-by-hop + routing + destination options, answered without.
e1: ICMPv6 echo with hop-by-hop on the request.
a1: TCP after an AH header. esp: ESP (not an extension header; no ports).
nnh: next header 59 (no next header) after a destination options header.
d8: 8 destination options headers (the most accepted) before UDP: forwarded.
Malformed (dropped, bad_ipv6_ext_header): 9 extension headers; hop-by-hop not first; an
extension header longer than the payload.
atomic: an atomic fragment (fragment header, offset 0, M clear) of UDP: forwarded in the
    same flow as the unfragmented datagrams of that 5-tuple (u2); a whole datagram judged on its
    own (RFC 6946), not tracked as a fragment (summary fragments.atomic).""")
    A, B = "2001:db8:a::1", "2001:db8:b::2"
    ipa = lambda **kw: IPv6(src=A, dst=B, **kw)
    ipb = lambda **kw: IPv6(src=B, dst=A, **kw)
    t1 = Tcp(c, eth_a, eth_b, ipa, ipb, 50000, 443, "t1")
    c.add(eth_a() / ipa() / TCP(sport=50000, dport=443, flags="S", seq=1000), "F t1 new",
          "t1: SYN, no extension header")
    c.add(eth_b() / ipb() / IPv6ExtHdrDestOpt() /
          TCP(sport=443, dport=50000, flags="SA", seq=5000, ack=1001), "F t1",
          "t1: SYN-ACK after destination options")
    c.add(eth_a() / ipa() / IPv6ExtHdrHopByHop() / IPv6ExtHdrDestOpt() /
          IPv6ExtHdrRouting(segleft=0, addresses=[B]) /
          TCP(sport=50000, dport=443, flags="A", seq=1001, ack=5001), "F t1",
          "t1: ACK after hop-by-hop + destination options + routing")
    t1.cseq, t1.sseq = 1001, 5001
    t1.c("PA", data=payload(200))
    t1.s("PA", data=payload(900, 4))
    t1.fin_teardown()
    c.add(eth_a() / ipa() / IPv6ExtHdrHopByHop() / IPv6ExtHdrRouting(segleft=0, addresses=[B]) /
          IPv6ExtHdrDestOpt() / UDP(sport=5353, dport=9999) / Raw(payload(40)), "F u1 new",
          "u1: UDP after hop-by-hop + routing + destination options")
    c.add(eth_b() / ipb() / UDP(sport=9999, dport=5353) / Raw(payload(20)), "F u1",
          "u1: UDP answer, no extension header")
    c.add(eth_a() / ipa() / IPv6ExtHdrHopByHop() / ICMPv6EchoRequest(id=0x77, seq=1, data=payload(16)),
          "F e1 new", "e1: ICMPv6 echo request after hop-by-hop")
    c.add(eth_b() / ipb() / ICMPv6EchoReply(id=0x77, seq=1, data=payload(16)), "F e1",
          "e1: ICMPv6 echo reply")
    tcp = raw(IPv6(src=A, dst=B) / TCP(sport=50001, dport=22, flags="S", seq=1))[40:]
    ah = bytes([6, 4, 0, 0]) + struct.pack(">II", 0x1000, 1) + bytes(12)  # (4 + 2) * 4 = 24 B
    c.add(eth_a() / ipa(nh=51) / Raw(ah + tcp), "F a1 new", "a1: TCP SYN after an AH header")
    esp = struct.pack(">II", 0x2000, 1) + payload(48)
    c.add(eth_a() / ipa(nh=50) / Raw(esp), "F esp new", "esp: ESP packet (no ports)")
    c.add(eth_b() / ipb(nh=50) / Raw(struct.pack(">II", 0x3000, 1) + payload(48)), "F esp",
          "esp: ESP the other way (same flow: no ports)")
    c.add(eth_a() / ipa() / IPv6ExtHdrDestOpt(nh=59), "F nnh new",
          "nnh: destination options then no next header (59)")
    many = UDP(sport=7000, dport=7001) / Raw(payload(8))
    for _ in range(8):
        many = IPv6ExtHdrDestOpt() / many
    c.add(eth_a() / ipa() / many, "F d8 new", "d8: 8 destination options headers, then UDP")
    many9 = IPv6ExtHdrDestOpt() / many
    c.add(eth_a() / ipa() / many9, "D bad_ipv6_ext_header", "9 extension headers (limit 8)")
    c.add(eth_a() / ipa() / IPv6ExtHdrDestOpt() / IPv6ExtHdrHopByHop() / UDP(sport=7000, dport=7002),
          "D bad_ipv6_ext_header", "hop-by-hop after destination options")
    bad_len = bytes([17, 10]) + bytes(6) + raw(UDP(sport=7000, dport=7003))
    c.add(eth_a() / ipa(nh=60) / Raw(bad_len), "D bad_ipv6_ext_header",
          "destination options header claiming 88 bytes in a 16-byte payload")
    udp = UDP(sport=6000, dport=6001) / Raw(payload(24))
    c.add(eth_a() / ipa() / udp, "F u2 new", "u2: UDP 6000 -> 6001")
    atomic = IPv6(raw(IPv6(src=A, dst=B) / udp))
    c.add(eth_a() / ipa(nh=44) / IPv6ExtHdrFragment(nh=17, offset=0, m=0, id=0xa1) /
          Raw(raw(atomic.payload)), "F u2", "u2: same datagram as an atomic fragment")
    c.add(eth_b() / ipb() / UDP(sport=6001, dport=6000) / Raw(payload(24)), "F u2",
          "u2: UDP answer")
    return c


def case_vlan_qinq():
    c = Case("vlan_qinq", {}, """
802.1Q, 802.1ad (QinQ) and legacy 0x9100 tags, default config. The flow key includes the
outer and inner VLAN IDs (not the priority bits), so one 5-tuple in two VLANs is two flows.
v10: TCP handshake in VLAN 10; then a data packet of it with priority 5 and DEI set.
v20: the same 5-tuple in VLAN 20. untagged: the same 5-tuple without a tag; then a
     priority-tagged (VID 0) packet of it: VID 0 means "no VLAN", so the same flow.
q1: UDP in 802.1ad 100 / 802.1Q 200; q2: inner VID 201 instead (another flow).
q3: legacy 0x9100 outer tag + 802.1Q; q4: two 802.1Q tags; q5: a single 802.1ad tag.
v6: ICMPv6 echo in VLAN 30. ARP in VLAN 10: non-IP, forwarded without a flow.
Malformed (dropped): three tags (too_many_vlans); a frame ending inside its tag
(truncated_vlan).""")
    def l2(tags, src=MAC_A, dst=MAC_B):
        p = Ether(src=src, dst=dst)
        for tpid, vid, prio, dei in tags:
            if tpid == 0x88A8:
                p = p / Dot1AD(vlan=vid, prio=prio, id=dei)
            else:
                p = p / Dot1Q(vlan=vid, prio=prio, id=dei)
        return p
    def set_tpid(pkt, positions, tpid):
        b = bytearray(raw(pkt))
        for off in positions:
            b[off:off + 2] = tpid.to_bytes(2, "big")
        return bytes(b)
    ipc = IP(src="10.1.1.1", dst="10.1.1.2")
    ips = IP(src="10.1.1.2", dst="10.1.1.1")
    for vid, fl in ((10, "v10"), (20, "v20"), (None, "untagged")):
        tags = [(0x8100, vid, 0, 0)] if vid else []
        c.add(l2(tags) / ipc / TCP(sport=1000, dport=80, flags="S", seq=1), f"F {fl} new",
              f"{fl}: SYN")
        c.add(l2(tags, MAC_B, MAC_A) / ips / TCP(sport=80, dport=1000, flags="SA", seq=9, ack=2),
              f"F {fl}", f"{fl}: SYN-ACK")
        c.add(l2(tags) / ipc / TCP(sport=1000, dport=80, flags="A", seq=2, ack=10), f"F {fl}",
              f"{fl}: ACK")
    c.add(l2([(0x8100, 10, 5, 1)]) / ipc / TCP(sport=1000, dport=80, flags="PA", seq=2, ack=10) /
          Raw(b"hello"), "F v10", "v10: data with priority 5 and DEI set")
    c.add(l2([(0x8100, 0, 6, 0)]) / ipc / TCP(sport=1000, dport=80, flags="PA", seq=2, ack=10) /
          Raw(b"hello"), "F untagged", "untagged: priority-tagged frame (VID 0)")
    for inner, fl in ((200, "q1"), (201, "q2")):
        tags = [(0x88A8, 100, 0, 0), (0x8100, inner, 0, 0)]
        c.add(l2(tags) / IP(src="172.16.0.1", dst="172.16.0.2") / UDP(sport=4000, dport=4001) /
              Raw(payload(30)), f"F {fl} new", f"{fl}: UDP in 802.1ad 100 / 802.1Q {inner}")
        c.add(l2(tags, MAC_B, MAC_A) / IP(src="172.16.0.2", dst="172.16.0.1") /
              UDP(sport=4001, dport=4000) / Raw(payload(30)), f"F {fl}", f"{fl}: UDP answer")
    legacy = l2([(0x8100, 300, 0, 0), (0x8100, 301, 0, 0)]) / IP(src="172.16.1.1", dst="172.16.1.2") / \
        UDP(sport=4000, dport=4001)
    c.add(set_tpid(legacy, [12], 0x9100), "F q3 new", "q3: legacy 0x9100 outer tag + 802.1Q")
    c.add(l2([(0x8100, 400, 0, 0), (0x8100, 401, 0, 0)]) / IP(src="172.16.2.1", dst="172.16.2.2") /
          UDP(sport=4000, dport=4001), "F q4 new", "q4: two 802.1Q tags")
    c.add(l2([(0x88A8, 500, 0, 0)]) / IP(src="172.16.3.1", dst="172.16.3.2") /
          UDP(sport=4000, dport=4001), "F q5 new", "q5: one 802.1ad tag")
    c.add(l2([(0x8100, 30, 0, 0)]) / IPv6(src="2001:db8::1", dst="2001:db8::2") /
          ICMPv6EchoRequest(id=1, seq=1), "F v6 new", "v6: ICMPv6 echo request in VLAN 30")
    c.add(l2([(0x8100, 30, 0, 0)], MAC_B, MAC_A) / IPv6(src="2001:db8::2", dst="2001:db8::1") /
          ICMPv6EchoReply(id=1, seq=1), "F v6", "v6: ICMPv6 echo reply in VLAN 30")
    c.add(l2([(0x8100, 10, 0, 0)], MAC_A, BCAST) / ARP(op=1, hwsrc=MAC_A, psrc="10.1.1.1",
                                                      pdst="10.1.1.2"),
          "F", "ARP request in VLAN 10 (non-IP)")
    c.add(l2([(0x88A8, 1, 0, 0), (0x8100, 2, 0, 0), (0x8100, 3, 0, 0)]) /
          IP(src="172.16.4.1", dst="172.16.4.2") / UDP(sport=1, dport=2),
          "D too_many_vlans", "three VLAN tags")
    c.add(raw(Ether(src=MAC_A, dst=MAC_B, type=0x8100))[:14] + b"\x00\x0a", "D truncated_vlan",
          "frame ends 2 bytes into its 802.1Q tag", pad=False)
    return c


def udp4(src, dst, sport, dport, n, ident, seed=0):
    return IP(src=src, dst=dst, id=ident, ttl=64) / UDP(sport=sport, dport=dport) / \
        Raw(payload(n, seed))


def case_fragments_in_order():
    c = Case("fragments_in_order", {}, """
Fragments arriving in order, default config: every fragment gets its datagram's verdict
(forward). The first fragment creates or finds the flow (its 5-tuple is in it); later
fragments of a datagram carry the same flow.
f1: IPv4 UDP datagram in 3 fragments.
i1: ICMP echo request in 3 fragments, the echo reply in 3 fragments (one flow).
f6: IPv6 UDP datagram in 3 fragments.
t1: TCP handshake, a 3000-byte segment in 3 fragments, the ACK.
x: two datagrams (ids 2 and 3, same hosts and ports) with their fragments interleaved.
p: 9 unfragmented datagrams, so that what follows is read in the next burst of 32 packets.
f1: a new datagram that reuses IP id 1 of the first (completed) one: a new datagram of the
    same flow, forwarded.""")
    f1 = ipv4_fragments(udp4("10.2.0.1", "10.2.0.2", 7000, 7001, 1400, 1), [512, 512])
    for off, more, fr in f1:
        c.add(eth_a() / fr, "F f1 new" if off == 0 else "F f1",
              f"f1: IPv4 id 1 fragment offset {off}{' MF' if more else ''}", gap_us=100)
    for kind, src, dst in ((8, "10.2.0.1", "10.2.0.3"), (0, "10.2.0.3", "10.2.0.1")):
        dg = IP(src=src, dst=dst, id=0x50 + kind) / ICMP(type=kind, id=0x4444, seq=1) / Raw(payload(2000))
        for off, more, fr in ipv4_fragments(dg, [808, 808]):
            exp = "F i1 new" if (kind == 8 and off == 0) else "F i1"
            c.add((eth_a() if kind == 8 else eth_b()) / fr, exp,
                  f"i1: echo {'request' if kind == 8 else 'reply'} fragment offset {off}", gap_us=100)
    for n, fr in enumerate(ipv6_fragments("2001:db8::1", "2001:db8::2",
                                          UDP(sport=8000, dport=8001) / Raw(payload(2500)),
                                          0x600, [1232, 1232])):
        c.add(eth_a() / fr, "F f6 new" if n == 0 else "F f6", f"f6: IPv6 fragment {n + 1} of 3",
              gap_us=100)
    ipc = lambda: IP(src="10.2.0.1", dst="10.2.0.4", id=0x70)
    ips = lambda: IP(src="10.2.0.4", dst="10.2.0.1", id=0x71)
    t1 = Tcp(c, eth_a, eth_b, ipc, ips, 41000, 80, "t1")
    t1.handshake()
    seg = IP(src="10.2.0.1", dst="10.2.0.4", id=0x72) / TCP(
        sport=41000, dport=80, flags="PA", seq=t1.cseq, ack=t1.sseq) / Raw(payload(3000))
    t1.cseq += 3000
    for off, more, fr in ipv4_fragments(seg, [1480, 1480]):
        c.add(eth_a() / fr, "F t1", f"t1: 3000-byte segment, fragment offset {off}", gap_us=100)
    t1.s("A")
    f2 = ipv4_fragments(udp4("10.2.0.5", "10.2.0.6", 9000, 9001, 1000, 2), [512])
    f3 = ipv4_fragments(udp4("10.2.0.5", "10.2.0.6", 9000, 9001, 1000, 3, 1), [512])
    for (o2, _, a), (o3, _, b) in zip(f2, f3):
        c.add(eth_a() / a, "F x new" if o2 == 0 else "F x", f"x: id 2 fragment offset {o2}", gap_us=100)
        c.add(eth_a() / b, "F x", f"x: id 3 fragment offset {o3}", gap_us=100)
    for n in range(9):
        c.add(eth_a() / IP(src="10.2.0.7", dst="10.2.0.8") / UDP(sport=1, dport=2) / Raw(payload(8, n)),
              "F p new" if n == 0 else "F p", f"p: unfragmented datagram {n + 1} of 9", gap_us=100)
    assert len(c.items) == 32
    for off, more, fr in ipv4_fragments(udp4("10.2.0.1", "10.2.0.2", 7000, 7001, 900, 1, 5), [600]):
        c.add(eth_a() / fr, "F f1", f"f1: IP id 1 reused by a new datagram, fragment offset {off}",
              gap_us=100)
    return c


FRAG_SMALL = {"dataplane": {
    "flow_table": {"capacity_per_worker": 1024, "aging_slice": 4096},
    "fragments": {"max_datagrams": 16, "timeout_ms": 1000}}}


def case_fragments_out_of_order():
    c = Case("fragments_out_of_order", FRAG_SMALL, """
Fragments out of order. Config: fragment table of 16 datagrams, timeout 1 s, and the whole
table examined for expiry on every loop. Later fragments that arrive before the first
fragment are held (up to 8 per datagram) and leave, with the datagram's verdict, right
after the first fragment.
d10: IPv4 UDP, last fragment first (last, first, middle). d11: middle, last, first.
d12: IPv6 UDP, last, first, middle. d14: 4 fragments in reverse order.
d15: 10 fragments in reverse order: 8 are held, the 9th finds the hold full and is dropped
     (fragment_hold_full); the first fragment then releases the 8 held ones.
d13: a middle and a last fragment whose first fragment never comes: dropped when the
     datagram times out (fragment_first_missing), with d16's below.
d16: a lone middle fragment, then 40 packets of another flow (p1) 2 s later: the datagram
     expires (timeout 1 s) and its held fragment is dropped (fragment_first_missing); its
     first and last fragments arriving afterwards start a new datagram and are forwarded.""")
    def frags(ident, sizes, n, sport, seed=0):
        return ipv4_fragments(udp4("10.3.0.1", "10.3.0.2", sport, 7001, n, ident, seed), sizes)
    f = frags(10, [512, 512], 1400, 7010)
    for k, exp in ((2, "F d10"), (0, "F d10 new"), (1, "F d10")):
        c.add(eth_a() / f[k][2], exp, f"d10: fragment offset {f[k][0]}", gap_us=100)
    f = frags(11, [512, 512], 1400, 7011)
    for k, exp in ((1, "F d11"), (2, "F d11"), (0, "F d11 new")):
        c.add(eth_a() / f[k][2], exp, f"d11: fragment offset {f[k][0]}", gap_us=100)
    f6 = ipv6_fragments("2001:db8::1", "2001:db8::2", UDP(sport=7012, dport=7001) / Raw(payload(2500)),
                        12, [1232, 1232])
    for k, exp in ((2, "F d12"), (0, "F d12 new"), (1, "F d12")):
        c.add(eth_a() / f6[k], exp, f"d12: IPv6 fragment {k + 1} of 3", gap_us=100)
    f = frags(14, [256, 256, 256], 1000, 7014)
    for k in (3, 2, 1, 0):
        c.add(eth_a() / f[k][2], "F d14 new" if k == 0 else "F d14",
              f"d14: fragment offset {f[k][0]} (reverse order)", gap_us=100)
    f = frags(15, [120] * 9, 1200, 7015)
    assert len(f) == 10
    for k in range(9, -1, -1):
        if k == 1:
            c.add(eth_a() / f[k][2], "D fragment_hold_full",
                  f"d15: fragment offset {f[k][0]}: 9th held fragment, hold full", gap_us=100)
        else:
            c.add(eth_a() / f[k][2], "F d15 new" if k == 0 else "F d15",
                  f"d15: fragment offset {f[k][0]} (reverse order)", gap_us=100)
    f = frags(13, [512, 512], 1400, 7013)
    c.add(eth_a() / f[1][2], "D fragment_first_missing", "d13: middle fragment, first never comes",
          gap_us=100)
    c.add(eth_a() / f[2][2], "D fragment_first_missing", "d13: last fragment, first never comes",
          gap_us=100)
    f = frags(16, [512, 512], 1400, 7016)
    c.add(eth_a() / f[1][2], "D fragment_first_missing",
          "d16: lone middle fragment, expires after 1 s", gap_us=100)
    for k in range(40):
        c.add(eth_a() / IP(src="10.3.0.9", dst="10.3.0.10") / UDP(sport=5555, dport=5556) /
              Raw(payload(20, k)), "F p1 new" if k == 0 else "F p1",
              f"p1: filler datagram {k + 1} of 40, 2 s later",
              gap_us=2_000_000 if k == 0 else 1000)
    c.add(eth_a() / f[0][2], "F d16 new", "d16: first fragment after the expiry (new datagram)",
          gap_us=100)
    c.add(eth_a() / f[2][2], "F d16", "d16: last fragment", gap_us=100)
    return c


def overlap_input(c, forward):
    """The same frames for fragments_overlap and fragments_overlap_forward."""
    def ov(d):
        # Under FORWARD an overlapping fragment still follows its datagram's verdict and flow.
        return f"F {d}" if forward else "D fragment_overlap"
    def dg(ident, n=152, sport=None):
        return udp4("10.4.0.1", "10.4.0.2", sport or (7000 + ident), 7001, n, ident, ident)
    def parts(ident, n=152):
        full = IP(raw(dg(ident, n)))
        return full, raw(full.payload)
    # d20: partial overlap into the first fragment.
    full, body = parts(20)
    c.add(eth_a() / frag4(full, 0, True, body[0:64]), "F d20 new", "d20: [0,64) MF", gap_us=100)
    c.add(eth_a() / frag4(full, 56, True, b"X" * 8 + body[64:120]), ov("d20"),
          "d20: [56,120) MF overlaps [0,64)", gap_us=100)
    c.add(eth_a() / frag4(full, 64, True, body[64:128]), "F d20", "d20: [64,128) MF", gap_us=100)
    c.add(eth_a() / frag4(full, 128, False, body[128:]), "F d20", "d20: [128,160) last", gap_us=100)
    # d21: exact duplicate of a middle fragment.
    full, body = parts(21)
    c.add(eth_a() / frag4(full, 0, True, body[0:64]), "F d21 new", "d21: [0,64) MF", gap_us=100)
    c.add(eth_a() / frag4(full, 64, True, body[64:128]), "F d21", "d21: [64,128) MF", gap_us=100)
    c.add(eth_a() / frag4(full, 64, True, body[64:128]), ov("d21"), "d21: [64,128) MF again (duplicate)",
          gap_us=100)
    c.add(eth_a() / frag4(full, 128, False, body[128:]), "F d21", "d21: [128,160) last", gap_us=100)
    # d22: a second first fragment with other content.
    full, body = parts(22)
    c.add(eth_a() / frag4(full, 0, True, body[0:64]), "F d22 new", "d22: [0,64) MF", gap_us=100)
    c.add(eth_a() / frag4(full, 0, True, body[0:8] + b"Y" * 56), ov("d22"),
          "d22: second first fragment [0,64) MF", gap_us=100)
    c.add(eth_a() / frag4(full, 64, False, body[64:]), "F d22", "d22: [64,160) last", gap_us=100)
    # d23: two last fragments that disagree on the datagram's end (datagram still open).
    full, body = parts(23)
    c.add(eth_a() / frag4(full, 0, True, body[0:64]), "F d23 new", "d23: [0,64) MF", gap_us=100)
    c.add(eth_a() / frag4(full, 96, False, body[96:]), "F d23", "d23: [96,160) last", gap_us=100)
    c.add(eth_a() / frag4(full, 160, False, b"Z" * 16), ov("d23"), "d23: [160,176) a second last fragment",
          gap_us=100)
    c.add(eth_a() / frag4(full, 64, True, body[64:96]), "F d23", "d23: [64,96) MF completes it",
          gap_us=100)
    # d24: data past the end of the datagram once its last fragment was seen.
    full, body = parts(24)
    c.add(eth_a() / frag4(full, 0, True, body[0:64]), "F d24 new", "d24: [0,64) MF", gap_us=100)
    c.add(eth_a() / frag4(full, 128, False, body[128:]), "F d24", "d24: [128,160) last", gap_us=100)
    c.add(eth_a() / frag4(full, 160, True, b"W" * 16), ov("d24"), "d24: [160,176) MF past the end",
          gap_us=100)
    c.add(eth_a() / frag4(full, 64, True, body[64:128]), "F d24", "d24: [64,128) MF completes it",
          gap_us=100)
    # d25: RFC 1858 overwrite: a fragment at offset 8 rewrites the TCP flags of the first.
    seg = IP(src="10.4.0.1", dst="10.4.0.2", id=25) / TCP(sport=7025, dport=80, flags="A",
                                                          seq=1, ack=1) / Raw(payload(40))
    full = IP(raw(seg))
    body = raw(full.payload)
    c.add(eth_a() / frag4(full, 0, True, body[0:24]), "F d25 new",
          "d25: TCP [0,24) MF (ACK, whole TCP header)", gap_us=100)
    forged = bytearray(body[8:40])
    forged[13 - 8] = 0x02  # SYN instead of ACK
    c.add(eth_a() / frag4(full, 8, True, bytes(forged)), ov("d25"),
          "d25: [8,40) MF rewrites the TCP flags (RFC 1858)", gap_us=100)
    c.add(eth_a() / frag4(full, 24, False, body[24:]), "F d25", "d25: [24,60) last", gap_us=100)
    # d30: IPv6 partial overlap.
    f6 = ipv6_fragments("2001:db8::1", "2001:db8::2", UDP(sport=7030, dport=7001) / Raw(payload(200)),
                        30, [104])
    c.add(eth_a() / f6[0], "F d30 new", "d30: IPv6 [0,104) M", gap_us=100)
    ov6 = IPv6(src="2001:db8::1", dst="2001:db8::2", nh=44) / \
        IPv6ExtHdrFragment(nh=17, offset=12, m=0, id=30) / Raw(b"V" * 112)
    c.add(eth_a() / ov6, ov("d30"), "d30: IPv6 [96,208) overlaps [0,104)", gap_us=100)
    c.add(eth_a() / f6[1], "F d30", "d30: IPv6 [104,208) last", gap_us=100)


def case_fragments_overlap():
    c = Case("fragments_overlap", {}, """
Overlapping fragments with the default policy (fragments.overlapping DROP): a fragment that
overlaps bytes already seen for its datagram, or contradicts its length, is dropped
(fragment_overlap); the datagram's other fragments keep the datagram's verdict (forward).
d20 partial overlap into the first fragment; d21 exact duplicate of a middle fragment;
d22 a second first fragment; d23 a second last fragment; d24 a fragment past the
datagram's end; d25 RFC 1858 TCP flag rewrite at offset 8; d30 IPv6 partial overlap.""")
    overlap_input(c, False)
    return c


def case_fragments_overlap_forward():
    c = Case("fragments_overlap_forward", {"dataplane": {"fragments": {"overlapping": "FORWARD"}}}, """
The input of fragments_overlap with fragments.overlapping FORWARD: the overlapping
fragments are forwarded too (counted as overlaps), with their datagram's verdict and flow;
nothing is dropped.""")
    overlap_input(c, True)
    return c


def case_tiny_fragment():
    c = Case("tiny_fragment", {}, """
Tiny first fragments (RFC 1858), default policy fragments.tiny DROP: a first fragment too
short for its TCP header is dropped (fragment_tiny) and so is every later fragment of that
datagram (fragment_datagram_dropped).
k1: IPv4 TCP, first fragment 8 bytes, then 2 more fragments.
k2: IPv4 TCP, first fragment 16 bytes.
k3: IPv4 TCP, first fragment 24 bytes but the TCP data offset says 32 (options).
k6: IPv6 TCP, first fragment 8 bytes.
ok: control: the same kind of TCP segment fragmented with a whole header in the first
    fragment (24 bytes) is forwarded.""")
    def tcp_dg(ident, sport, opts=False):
        t = TCP(sport=sport, dport=80, flags="S", seq=100, window=1024,
                options=[("MSS", 1460), ("NOP", None), ("WScale", 2), ("SAckOK", b""),
                         ("NOP", None), ("NOP", None)] if opts else [])
        return IP(raw(IP(src="10.5.0.1", dst="10.5.0.2", id=ident) / t / Raw(payload(40))))
    full = tcp_dg(1, 7101)
    body = raw(full.payload)
    c.add(eth_a() / frag4(full, 0, True, body[0:8]), "D fragment_tiny", "k1: first fragment, 8 bytes of TCP",
          gap_us=100)
    c.add(eth_a() / frag4(full, 8, True, body[8:32]), "D fragment_datagram_dropped",
          "k1: [8,32) MF", gap_us=100)
    c.add(eth_a() / frag4(full, 32, False, body[32:]), "D fragment_datagram_dropped",
          "k1: [32,60) last", gap_us=100)
    full = tcp_dg(2, 7102)
    body = raw(full.payload)
    c.add(eth_a() / frag4(full, 0, True, body[0:16]), "D fragment_tiny", "k2: first fragment, 16 bytes",
          gap_us=100)
    c.add(eth_a() / frag4(full, 16, False, body[16:]), "D fragment_datagram_dropped",
          "k2: [16,60) last", gap_us=100)
    full = tcp_dg(3, 7103, opts=True)
    body = raw(full.payload)
    assert (body[12] >> 4) * 4 == 32
    c.add(eth_a() / frag4(full, 0, True, body[0:24]), "D fragment_tiny",
          "k3: first fragment 24 bytes, TCP header is 32", gap_us=100)
    c.add(eth_a() / frag4(full, 24, False, body[24:]), "D fragment_datagram_dropped",
          "k3: [24,72) last", gap_us=100)
    f6 = IPv6(raw(IPv6(src="2001:db8::5", dst="2001:db8::6") /
                  TCP(sport=7106, dport=80, flags="S", seq=5) / Raw(payload(40))))
    body = raw(f6.payload)
    for off, part, more, exp, note in ((0, body[:8], 1, "D fragment_tiny", "k6: IPv6 first fragment, 8 bytes of TCP"),
                                       (8, body[8:], 0, "D fragment_datagram_dropped", "k6: IPv6 [8,60) last")):
        c.add(eth_a() / IPv6(src="2001:db8::5", dst="2001:db8::6", nh=44) /
              IPv6ExtHdrFragment(nh=6, offset=off // 8, m=more, id=6) / Raw(part), exp, note,
              gap_us=100)
    full = tcp_dg(4, 7104)
    body = raw(full.payload)
    c.add(eth_a() / frag4(full, 0, True, body[0:24]), "F ok new",
          "ok: first fragment 24 bytes (whole TCP header)", gap_us=100)
    c.add(eth_a() / frag4(full, 24, False, body[24:]), "F ok", "ok: [24,60) last", gap_us=100)
    return c


def case_malformed(name, forward):
    if forward:
        about = """
The frames of the malformed case with dataplane.malformed FORWARD: every malformed frame
is forwarded unchanged and untracked (flow_id null), counted as forwarded malformed; the
valid datagram at the end still creates its flow."""
    else:
        about = """
One frame for every malformation the parser reports, default policy (malformed DROP): each
is dropped with its reason (the names of dataplane/packet/parser.cc parseStatusName). A
valid UDP datagram at the end shows that processing continues (forwarded, new flow)."""
    c = Case(name, {"dataplane": {"malformed": "FORWARD"}} if forward else {}, about)
    def exp(reason):
        return "F" if forward else f"D {reason}"
    e4 = raw(Ether(src=MAC_A, dst=MAC_B, type=0x0800))
    e6 = raw(Ether(src=MAC_A, dst=MAC_B, type=0x86DD))
    good4 = raw(IP(src="10.6.0.1", dst="10.6.0.2") / UDP(sport=1, dport=2) / Raw(b"abcd"))
    def ip4(body_proto, body, total=None, ihl=None, flags_frag=0, version=4):
        hdr = bytearray(raw(IP(src="10.6.0.1", dst="10.6.0.2", proto=body_proto)))[:20]
        hdr[0] = (version << 4) | (ihl if ihl is not None else 5)
        tl = total if total is not None else 20 + len(body)
        hdr[2:4] = tl.to_bytes(2, "big")
        hdr[6:8] = flags_frag.to_bytes(2, "big")
        hdr[10:12] = b"\x00\x00"
        hdr[10:12] = ip_checksum(bytes(hdr)).to_bytes(2, "big")
        return bytes(hdr) + body
    c.add(e4[:10], exp("truncated_l2"), "10-byte frame", pad=False)
    c.add(raw(Ether(src=MAC_A, dst=MAC_B, type=0x8100))[:14] + b"\x00\x05", exp("truncated_vlan"),
          "frame ends inside its 802.1Q tag", pad=False)
    c.add(Ether(src=MAC_A, dst=MAC_B) / Dot1AD(vlan=1) / Dot1Q(vlan=2) / Dot1Q(vlan=3) / good4,
          exp("too_many_vlans"), "three VLAN tags")
    c.add(e4 + good4[:12], exp("truncated_ipv4"), "12 bytes after an IPv4 EtherType", pad=False)
    c.add(e4 + ip4(17, raw(UDP(sport=1, dport=2)), version=6), exp("bad_ipv4_version"),
          "IPv4 EtherType, version 6 in the header")
    c.add(e4 + ip4(17, raw(UDP(sport=1, dport=2)), ihl=4), exp("bad_ipv4_ihl"), "IHL 4 (16 bytes)")
    c.add(e4 + ip4(17, raw(UDP(sport=1, dport=2)), total=1500), exp("bad_ipv4_total_length"),
          "total length 1500 in a 60-byte frame")
    c.add(e6 + raw(IPv6(src="2001:db8::1", dst="2001:db8::2"))[:30], exp("truncated_ipv6"),
          "30 bytes after an IPv6 EtherType", pad=False)
    v6 = bytearray(raw(IPv6(src="2001:db8::1", dst="2001:db8::2") / UDP(sport=1, dport=2)))
    v6[0] = 0x40
    c.add(e6 + bytes(v6), exp("bad_ipv6_version"), "IPv6 EtherType, version 4 in the header")
    v6 = bytearray(raw(IPv6(src="2001:db8::1", dst="2001:db8::2") / UDP(sport=1, dport=2)))
    v6[4:6] = (1000).to_bytes(2, "big")
    c.add(e6 + bytes(v6), exp("bad_ipv6_payload_length"), "payload length 1000, 8 bytes present")
    c.add(Ether(src=MAC_A, dst=MAC_B) / IPv6(src="2001:db8::1", dst="2001:db8::2") /
          IPv6ExtHdrDestOpt() / IPv6ExtHdrHopByHop() / UDP(sport=1, dport=2),
          exp("bad_ipv6_ext_header"), "hop-by-hop after destination options")
    tcp = raw(TCP(sport=1, dport=2, flags="S"))
    c.add(e4 + ip4(6, tcp[:10]), exp("truncated_tcp"), "10 bytes of TCP header")
    bad_off = bytearray(tcp)
    bad_off[12] = 0x40
    c.add(e4 + ip4(6, bytes(bad_off)), exp("bad_tcp_data_offset"), "TCP data offset 4 (16 bytes)")
    c.add(e4 + ip4(17, raw(UDP(sport=1, dport=2))[:4]), exp("truncated_udp"), "4 bytes of UDP header")
    c.add(e4 + ip4(17, raw(UDP(sport=1, dport=2, len=200))), exp("bad_udp_length"),
          "UDP length 200, 8 bytes present")
    c.add(e4 + ip4(1, raw(ICMP(type=8, id=1, seq=1))[:6]), exp("truncated_icmp"),
          "ICMP echo request of 6 bytes (needs 8)")
    c.add(e4 + ip4(17, b"", flags_frag=0x2000), exp("bad_fragment"),
          "fragment (MF set) with no payload")
    c.add(Ether(src=MAC_A, dst=MAC_B) / IP(src="10.6.0.1", dst="10.6.0.2") /
          UDP(sport=1234, dport=5678) / Raw(b"still alive"), "F ok new",
          "ok: a valid UDP datagram after the malformed frames")
    return c


def case_non_ip():
    c = Case("non_ip", {"dataplane": {"non_ip": "DROP"}}, """
Non-IP frames with dataplane.non_ip DROP: ARP, LLDP, a VLAN-tagged ARP, an 802.3/LLC
spanning-tree BPDU (length field instead of an EtherType) and PPPoE discovery are dropped
(non_ip); IPv4 and IPv6 between them pass (u1, e6), and so does IPv4 inside MPLS (m1): MPLS
is a tunnel the appliance opens (dataplane.tunnels, docs/tunnels.md), its inner packet is
judged, not the label stack.""")
    c.add(Ether(src=MAC_A, dst=BCAST) / ARP(op=1, hwsrc=MAC_A, psrc="10.7.0.1", pdst="10.7.0.2"),
          "D non_ip", "ARP request")
    c.add(Ether(src=MAC_B, dst=MAC_A) / ARP(op=2, hwsrc=MAC_B, psrc="10.7.0.2", hwdst=MAC_A,
                                           pdst="10.7.0.1"), "D non_ip", "ARP reply")
    c.add(Ether(src=MAC_A, dst=MAC_B) / IP(src="10.7.0.1", dst="10.7.0.2") / UDP(sport=1000, dport=2000),
          "F u1 new", "u1: UDP")
    lldp = bytes([0x02, 0x07, 0x04]) + bytes.fromhex("02000000000a") + bytes([0x04, 0x02, 0x07, 0x31]) + \
        bytes([0x06, 0x02, 0x00, 0x78]) + bytes([0x00, 0x00])
    c.add(Ether(src=MAC_A, dst="01:80:c2:00:00:0e", type=0x88CC) / Raw(lldp), "D non_ip", "LLDP")
    c.add(Ether(src=MAC_A, dst=BCAST) / Dot1Q(vlan=7) /
          ARP(op=1, hwsrc=MAC_A, psrc="10.7.0.1", pdst="10.7.0.3"), "D non_ip", "ARP in VLAN 7")
    bpdu = bytes([0x42, 0x42, 0x03]) + bytes(35)
    c.add(raw(Ether(src=MAC_A, dst="01:80:c2:00:00:00", type=len(bpdu))) + bpdu, "D non_ip",
          "802.3 + LLC spanning-tree BPDU")
    mpls = bytes([0x00, 0x01, 0x01, 0x40]) + raw(IP(src="10.7.0.1", dst="10.7.0.2") / UDP(sport=1, dport=2))
    c.add(raw(Ether(src=MAC_A, dst=MAC_B, type=0x8847)) + mpls, "F m1 new", "m1: MPLS label 16 + IPv4/UDP")
    c.add(Ether(src=MAC_A, dst=BCAST, type=0x8863) / Raw(bytes([0x11, 0x09, 0, 0, 0, 4, 1, 1, 0, 0])),
          "D non_ip", "PPPoE discovery (PADI)")
    c.add(Ether(src=MAC_A, dst=MAC_B) / IPv6(src="2001:db8::7", dst="2001:db8::8") /
          ICMPv6EchoRequest(id=3, seq=1), "F e6 new", "e6: ICMPv6 echo request")
    c.add(Ether(src=MAC_B, dst=MAC_A) / IP(src="10.7.0.2", dst="10.7.0.1") / UDP(sport=2000, dport=1000),
          "F u1", "u1: UDP answer")
    return c


def case_tcp_midstream_drop():
    c = Case("tcp_midstream_drop", {"dataplane": {"tcp": {"midstream": "DROP"}}}, """
dataplane.tcp.midstream DROP: TCP packets without SYN for unknown flows (connections opened
before the appliance started) are dropped (tcp_midstream) in both directions, including a
FIN; a reset of an unknown flow is passed on untracked. A connection opened with a SYN
(s1) is tracked and forwarded. UDP is not affected (u1).""")
    ipc = lambda: IP(src="10.8.0.1", dst="10.8.0.2")
    ips = lambda: IP(src="10.8.0.2", dst="10.8.0.1")
    old = Tcp(c, eth_a, eth_b, ipc, ips, 45000, 80, "old", cseq=1_000_000, sseq=2_000_000)
    old.c("PA", "D tcp_midstream", "data of a connection older than the appliance",
          data=payload(100))
    old.s("A", "D tcp_midstream", "its ACK from the server")
    old.s("PA", "D tcp_midstream", "server data", data=payload(200))
    old.c("FA", "D tcp_midstream", "client FIN of the old connection")
    c.add(eth_a() / ipc() / TCP(sport=45001, dport=80, flags="R", seq=5), "F",
          "RST of another unknown connection: forwarded untracked")
    s1 = Tcp(c, eth_a, eth_b, ipc, ips, 45002, 80, "s1")
    s1.handshake()
    s1.c("PA", data=payload(50))
    s1.s("PA", data=payload(500))
    s1.fin_teardown()
    c.add(eth_a() / ipc() / UDP(sport=45003, dport=53) / Raw(payload(30)), "F u1 new", "u1: UDP")
    old.c("A", "D tcp_midstream", "old connection again: still unknown, still dropped")
    return c


def case_flow_timeouts():
    cfg = {"dataplane": {
        "flow_table": {"capacity_per_worker": 1024, "aging_slice": 4096},
        "timeouts": {"udp_s": 5, "icmp_s": 3, "tcp_established_s": 10, "tcp_closed_s": 2}}}
    c = Case("flow_timeouts", cfg, """
Idle timeouts. Config: udp 5 s, icmp 3 s, tcp established 10 s, tcp closed 2 s; a table of
1024 flows examined whole on every loop (aging_slice 4096).
t=0..2 s: UDP flow u, ICMP echo e, TCP session s (established, then idle), TCP session r
(closed by FINs at ~1 s). UDP flow k keeps sending every 4 s (< 5 s), so it never expires.
t=20 s: 40 packets of a new UDP flow p (they end the read burst, so the expiry sweep runs
with the clock at 20 s: u, e, s, r expire). Then at t=21 s: u's 5-tuple again -> a new flow
u2; the same echo identifier -> e2; data on s without SYN -> picked up mid-stream as s2;
a SYN reusing r's ports -> r2; k -> still the same flow.
Summary: 10 flows created, 4 expired, 1 mid-stream, 6 active at the end.""")
    ipc = lambda: IP(src="10.9.0.1", dst="10.9.0.2")
    ips = lambda: IP(src="10.9.0.2", dst="10.9.0.1")
    def udp_u(exp, note, at, fwd=True):
        p = (eth_a() / ipc() / UDP(sport=1111, dport=2222)) if fwd else \
            (eth_b() / ips() / UDP(sport=2222, dport=1111))
        c.add(p / Raw(payload(20)), exp, note, at_us=at)
    def udp_k(exp, at):
        c.add(eth_a() / IP(src="10.9.0.5", dst="10.9.0.6") / UDP(sport=3333, dport=4444) /
              Raw(payload(10)), exp, f"k: keepalive at {at / 1e6:g} s", at_us=at)
    udp_u("F u new", "u: UDP at 0 s", 0)
    udp_k("F k new", 100)
    c.add(eth_a() / ipc() / ICMP(type=8, id=77, seq=1), "F e new", "e: echo request at 0.5 s", at_us=500_000)
    c.add(eth_b() / ips() / ICMP(type=0, id=77, seq=1), "F e", "e: echo reply", at_us=500_400)
    s = Tcp(c, eth_a, eth_b, ipc, ips, 40100, 22, "s")
    c.t_us["A"] = BASE_US + 600_000
    s.handshake()
    s.c("PA", data=payload(40), gap_us=1000)
    r = Tcp(c, eth_a, eth_b, ipc, ips, 40200, 80, "r")
    c.t_us["A"] = BASE_US + 900_000
    r.handshake()
    r.fin_teardown()
    udp_u("F u", "u: UDP at 1 s", 1_000_000)
    udp_u("F u", "u: UDP answer at 2 s", 2_000_000, fwd=False)
    for t in (4, 8, 12, 16, 19.5):
        udp_k("F k", int(t * 1_000_000))
    for n in range(40):
        c.add(eth_a() / IP(src="10.9.0.7", dst="10.9.0.8") / UDP(sport=5555, dport=6666) /
              Raw(payload(10, n)), "F p new" if n == 0 else "F p", f"p: packet {n + 1} of 40 at 20 s",
              at_us=20_000_000 + n * 1000)
    udp_u("F u2 new", "u2: u's 5-tuple at 21 s, after u expired", 21_000_000)
    udp_u("F u2", "u2: answer", 21_000_500, fwd=False)
    c.add(eth_a() / ipc() / ICMP(type=8, id=77, seq=2), "F e2 new",
          "e2: same echo identifier at 21 s, after e expired", at_us=21_001_000)
    c.add(eth_b() / ips() / ICMP(type=0, id=77, seq=2), "F e2", "e2: echo reply", at_us=21_001_400)
    c.t_us["A"] = BASE_US + 21_002_000
    s.c("PA", "F s2 new", "s2: data on s at 21 s without SYN: picked up mid-stream", data=payload(40))
    s.s("A", "F s2", "s2: server ACK")
    r2 = Tcp(c, eth_a, eth_b, ipc, ips, 40200, 80, "r2", cseq=9000, sseq=19000)
    r2.handshake("reusing r's ports after r expired")
    udp_k("F k", 21_100_000)
    return c


def case_two_sided():
    c = Case("two_sided", {}, """
Two inputs: input_a.pcap arrives on side A (clients), input_b.pcap on side B (servers);
the appliance merges them by timestamp (side A first on equal timestamps). What arrives on
A leaves on B (expected_out.pcap) and the other way round (expected_out_a.pcap).
s1: TCP session, client on A, server on B. d1: DNS query from A, answer from B.
e1: ICMP echo opened from side B, answered from A. ARP on both sides (forwarded, no flow).
tie: a UDP datagram on A and one on B with the same timestamp: A's comes first.
A malformed frame arriving on B is dropped (bad_ipv4_ihl).""")
    ipc = lambda: IP(src="192.168.1.10", dst="198.18.0.10")
    ips = lambda: IP(src="198.18.0.10", dst="192.168.1.10")
    c.add(Ether(src=MAC_A, dst=BCAST) / ARP(op=1, hwsrc=MAC_A, psrc="192.168.1.10", pdst="192.168.1.1"),
          "F", "ARP request on side A", at_us=1000)
    c.add(Ether(src=MAC_B, dst=BCAST) / ARP(op=1, hwsrc=MAC_B, psrc="198.18.0.1", pdst="198.18.0.10"),
          "F", "ARP request on side B", side="B", at_us=1500)
    s1 = Tcp(c, eth_a, eth_b, ipc, ips, 43000, 443, "s1", side_c="A", side_s="B")
    c.t_us["A"] = c.t_us["B"] = BASE_US + 2000
    s1.c("S", "F s1 new", "s1: SYN (side A)", gap_us=0)
    s1.s("SA", note="s1: SYN-ACK (side B)", gap_us=300)
    s1.c("A", note="s1: ACK (side A)", gap_us=500)
    s1.c("PA", note="s1: request (side A)", data=payload(300), gap_us=100)
    s1.s("A", note="s1: ACK (side B)", gap_us=1000)
    s1.s("PA", note="s1: response (side B)", data=payload(1400, 1), gap_us=100)
    s1.s("PA", note="s1: response (side B)", data=payload(700, 2), gap_us=100)
    s1.c("A", note="s1: ACK (side A)", gap_us=1000)
    c.add(eth_a() / IP(src="192.168.1.10", dst="198.18.0.53") / UDP(sport=5353, dport=53) /
          DNS(id=1, rd=1, qd=DNSQR(qname="two.example")), "F d1 new", "d1: DNS query (side A)",
          at_us=10_000)
    c.add(eth_b() / IP(src="198.18.0.53", dst="192.168.1.10") / UDP(sport=53, dport=5353) /
          DNS(id=1, qr=1, qd=DNSQR(qname="two.example"), an=DNSRR(rrname="two.example", rdata="198.18.0.10")),
          "F d1", "d1: DNS answer (side B)", side="B", at_us=10_700)
    c.add(eth_b() / IP(src="198.18.0.10", dst="192.168.1.10") / ICMP(type=8, id=5, seq=1) / Raw(payload(32)),
          "F e1 new", "e1: echo request opened from side B", side="B", at_us=11_000)
    c.add(eth_a() / IP(src="192.168.1.10", dst="198.18.0.10") / ICMP(type=0, id=5, seq=1) / Raw(payload(32)),
          "F e1", "e1: echo reply (side A)", at_us=11_300)
    c.add(eth_a() / IP(src="192.168.1.11", dst="198.18.0.11") / UDP(sport=1, dport=2),
          "F tieA new", "tie: UDP on side A at 12 ms", at_us=12_000)
    c.add(eth_b() / IP(src="198.18.0.12", dst="192.168.1.12") / UDP(sport=3, dport=4),
          "F tieB new", "tie: UDP on side B at the same 12 ms (after A's)", side="B", at_us=12_000)
    bad = bytearray(raw(IP(src="198.18.0.10", dst="192.168.1.10") / UDP(sport=9, dport=9)))
    bad[0] = 0x44
    c.add(raw(Ether(src=MAC_B, dst=MAC_A, type=0x0800)) + bytes(bad), "D bad_ipv4_ihl",
          "IHL 4 arriving on side B", side="B", at_us=13_000)
    c.t_us["A"] = BASE_US + 14_000
    c.t_us["B"] = BASE_US + 14_000
    s1.c("FA", note="s1: client FIN (side A)", gap_us=0)
    s1.s("FA", note="s1: server FIN (side B)", gap_us=200)
    s1.c("A", note="s1: last ACK (side A)", gap_us=400)
    return c


def case_flow_table_full():
    c = Case("flow_table_full", {"dataplane": {"flow_table": {"capacity_per_worker": 1024,
                                                              "when_full": "DROP"}}}, """
A full flow table with flow_table.when_full DROP. Capacity 1024 flows; 2000 UDP flows
(one datagram each, 1 ms apart, far below any timeout): the first 1024 are tracked, the
next 976 are dropped (flow_table_full). Then: second datagrams of flows 1..10 (tracked:
forwarded in their flow), of flows 1991..2000 (not tracked, table still full: dropped), a
TCP SYN of a new connection (dropped), and ARP (non-IP needs no flow: forwarded).""")
    def flow_pkt(n):
        return eth_a() / IP(src=f"10.10.{n // 250}.{n % 250 + 1}", dst="10.11.0.1") / \
            UDP(sport=20000 + n, dport=53) / Raw(payload(16, n))
    for n in range(2000):
        if n < 1024:
            c.add(flow_pkt(n), f"F f{n} new", f"flow {n + 1}: first datagram", gap_us=1000)
        else:
            c.add(flow_pkt(n), "D flow_table_full", f"flow {n + 1}: first datagram, table full",
                  gap_us=1000)
    for n in range(10):
        c.add(flow_pkt(n), f"F f{n}", f"flow {n + 1}: second datagram", gap_us=1000)
    for n in range(1990, 2000):
        c.add(flow_pkt(n), "D flow_table_full", f"flow {n + 1}: second datagram, still full",
              gap_us=1000)
    c.add(eth_a() / IP(src="10.12.0.1", dst="10.11.0.1") / TCP(sport=1, dport=80, flags="S"),
          "D flow_table_full", "TCP SYN of a new connection")
    c.add(Ether(src=MAC_A, dst=BCAST) / ARP(op=1, hwsrc=MAC_A, psrc="10.12.0.1", pdst="10.11.0.1"),
          "F", "ARP request (no flow needed)")
    return c


# --------------------------------------------------------------------------------------
# Firewall cases (fw_*). Their drops belong to flows (the firewall judges a flow on its
# first packet and caches the verdict), so their intent uses an extended notation:
#   "F s1 [new]"          forward in flow s1 (as above)
#   "D reason s1 [new]"   drop with that reason, in flow s1
#   "R s1 [new]"          reject (reason firewall_reject), in flow s1
#   "X reason s1 [new]"   reject with another reason (e.g. dpi_reset), in flow s1
# The note of each packet names the rule expected to decide its flow ("rule N" = position in
# the config's rules list, "default" = no rule). The verdicts' "rule" field is the deciding rule's
# id (null = default); it is not checked by check_case.py, but was reviewed against these
# notes in expected_verdicts.jsonl.
# --------------------------------------------------------------------------------------

class FwCase(Case):
    def add(self, pkt, exp, note, gap_us=1000, side="A", at_us=None, pad=True):
        """As Case.add, but both sides share one clock (frames in the order added)."""
        now = max(self.t_us.values())
        self.t_us = {"A": now, "B": now}
        super().add(pkt, exp, note, gap_us=gap_us, side=side, at_us=at_us, pad=pad)

    def write(self):
        super().write()
        lines = ["# " + l for l in self.about.strip().splitlines()]
        lines.append("# Generated by tests/pcap/gen_cases.py (case_fw_*: drops and rejects "
                     "carry a flow); the notation is explained in check_case.py.")
        lines.append("index\tside\tverdict\treason\tflow\tnew\tnote")
        for i, (_, side, _, exp, note) in enumerate(self.merged()):
            parts = exp.split()
            kind = parts.pop(0)
            verdict = {"F": "forward", "D": "drop", "R": "reject", "X": "reject"}[kind]
            reason = "-"
            if kind in ("D", "X"):
                reason = parts.pop(0)
            elif kind == "R":
                reason = "firewall_reject"
            flow = parts[0] if parts else "-"
            new = "1" if len(parts) > 1 and parts[1] == "new" else "0"
            lines.append(f"{i}\t{side}\t{verdict}\t{reason}\t{flow}\t{new}\t{note}")
        with open(os.path.join(HERE, self.name, "intent.tsv"), "w") as f:
            f.write("\n".join(lines) + "\n")


def fw_udp(c, side, src, dst, sport, dport, exp, note, n=24, seed=0, **kw):
    eth = eth_a if side == "A" else eth_b
    ip = IPv6 if ":" in src else IP
    c.add(eth() / ip(src=src, dst=dst) / UDP(sport=sport, dport=dport) / Raw(payload(n, seed)),
          exp, note, side=side, **kw)


def fw_tcp(c, side_c, src, dst, sport, dport, flow, rule, ok, cseq=1000):
    """A client on side_c opens src:sport -> dst:dport. ok: 3-way handshake + request +
    answer, all forwarded; else (denied) a SYN and a retransmission, both dropped."""
    side_s = "B" if side_c == "A" else "A"
    ethc = eth_a if side_c == "A" else eth_b
    eths = eth_b if side_c == "A" else eth_a
    ip = IPv6 if ":" in src else IP
    t = Tcp(c, ethc, eths, lambda: ip(src=src, dst=dst), lambda: ip(src=dst, dst=src),
            sport, dport, flow, cseq=cseq, side_c=side_c, side_s=side_s)
    what = f"{flow}: {src}:{sport} -> {dst}:{dport} tcp from {side_c}, {rule}"
    if ok:
        t.c("S", f"F {flow} new", f"{what}: SYN")
        t.s("SA", f"F {flow}", f"{flow}: SYN-ACK (return traffic)")
        t.c("A", f"F {flow}", f"{flow}: ACK")
        t.c("PA", f"F {flow}", f"{flow}: request", data=payload(40, cseq))
        t.s("PA", f"F {flow}", f"{flow}: answer (return traffic)", data=payload(80, cseq + 1))
    else:
        t.c("S", f"D firewall_deny {flow} new", f"{what}: SYN denied")
        t.cseq -= 1
        t.c("S", f"D firewall_deny {flow}", f"{flow}: SYN retransmission, cached deny",
            gap_us=3000)
    return t


def case_fw_allow_deny():
    rules = [
        {"id": "deny-host-web", "priority": 5, "action": "DENY", "protocols": ["tcp"],
         "src": ["10.1.0.66"], "dst": ["10.2.0.0/16"], "dst_ports": ["80"]},
        {"id": "allow-web", "priority": 10, "action": "ALLOW", "protocols": ["tcp"],
         "src": ["10.1.0.0/16"], "dst": ["10.2.0.0/16"], "dst_ports": ["80", "443"]},
        {"id": "allow-dns", "priority": 10, "action": "ALLOW", "protocols": ["udp"],
         "dst": ["10.2.0.53"], "dst_ports": ["53"]},
        {"id": "deny-net9", "priority": 20, "action": "DENY", "dst": ["10.2.9.0/24"]},
        {"id": "allow-high", "priority": 20, "action": "ALLOW", "direction": "A_TO_B",
         "dst_ports": ["1024-65535"]},
        {"id": "admin-web", "priority": 1, "action": "ALLOW", "protocols": ["tcp"],
         "src": ["10.1.0.66"], "dst": ["10.2.0.80"], "dst_ports": ["80"]},
        {"id": "deny-src-9999", "priority": 8, "action": "DENY", "protocols": ["udp"],
         "src_ports": ["9999"]},
        {"id": "deny-b-telnet", "priority": 10, "action": "DENY", "direction": "B_TO_A",
         "protocols": ["tcp"], "dst_ports": ["23"]},
    ]
    c = FwCase("fw_allow_deny", {"firewall": {"default_a_to_b": "DENY",
                                              "default_b_to_a": "ALLOW", "rules": rules}}, """
Firewall: allow and deny rules by prefix, port and protocol with overlapping rules and
priorities; default DENY for flows from side A, ALLOW for flows from side B. Rules
(position in the config; priority p; evaluation order:
admin-web 0, deny-host-web 1, deny-src-9999 2, allow-web 3, allow-dns 4, deny-b-telnet 5,
deny-net9 6, allow-high 7):
 0 deny-host-web  p5  DENY  tcp 10.1.0.66 -> 10.2.0.0/16 :80
 1 allow-web      p10 ALLOW tcp 10.1.0.0/16 -> 10.2.0.0/16 :80,443
 2 allow-dns      p10 ALLOW udp any -> 10.2.0.53 :53
 3 deny-net9      p20 DENY  any protocol -> 10.2.9.0/24
 4 allow-high     p20 ALLOW tcp/udp A_TO_B -> any :1024-65535 (same priority as deny-net9,
                            listed after it: loses the tie)
 5 admin-web      p1  ALLOW tcp 10.1.0.66 -> 10.2.0.80 :80 (listed last, best priority)
 6 deny-src-9999  p8  DENY  udp sport 9999 (beats allow-dns p10)
 7 deny-b-telnet  p10 DENY  tcp B_TO_A :23
The "rule" field of a verdict is null for the side's default. Allowed
TCP flows: handshake + request + answer, all forwarded (the answers from B pass as return
traffic); denied TCP flows: SYN + retransmission, both dropped (firewall_deny) in one flow.""")
    T = lambda *a, **k: fw_tcp(c, *a, **k)
    T("A", "10.1.0.10", "10.2.0.80", 40001, 80, "w1", "rule 1 allow-web", True)
    T("A", "10.1.0.10", "10.2.0.80", 40002, 443, "w2", "rule 1 allow-web (port 443)", True)
    T("A", "10.1.0.66", "10.2.0.81", 40003, 80, "h1",
      "rule 0 deny-host-web (p5 beats allow-web p10)", False)
    T("A", "10.1.0.66", "10.2.0.80", 40004, 80, "h2",
      "rule 5 admin-web (p1, listed last, beats deny-host-web p5)", True)
    T("A", "10.1.0.66", "10.2.0.81", 40005, 443, "h3",
      "rule 1 allow-web (deny-host-web is port 80 only)", True)
    T("A", "10.3.0.10", "10.2.0.80", 40006, 80, "x1",
      "default deny (source outside 10.1.0.0/16, port < 1024)", False)
    T("A", "10.1.0.10", "10.2.9.5", 40007, 80, "n1",
      "rule 1 allow-web (p10 beats deny-net9 p20)", True)
    T("A", "10.1.0.10", "10.2.9.5", 40008, 8080, "n2",
      "rule 3 deny-net9 (ties allow-high at p20, listed first)", False)
    T("A", "10.1.0.10", "10.2.1.1", 40009, 8080, "p1", "rule 4 allow-high", True)
    T("A", "10.1.0.10", "10.2.1.1", 40010, 22, "p2", "default deny (port 22)", False)
    T("A", "10.1.0.10", "10.2.1.1", 40011, 23, "p3",
      "default deny (deny-b-telnet is B_TO_A only)", False)
    fw_udp(c, "A", "10.1.0.10", "10.2.0.53", 33001, 53, "F d1 new",
           "d1: udp 10.1.0.10:33001 -> 10.2.0.53:53, rule 2 allow-dns: query")
    fw_udp(c, "B", "10.2.0.53", "10.1.0.10", 53, 33001, "F d1", "d1: answer (return traffic)")
    fw_udp(c, "A", "10.1.0.10", "10.2.0.54", 33002, 53, "D firewall_deny d2 new",
           "d2: udp -> 10.2.0.54:53, default deny (allow-dns is for 10.2.0.53 only)")
    fw_udp(c, "A", "10.1.0.10", "10.2.0.54", 33002, 53, "D firewall_deny d2",
           "d2: second datagram, cached deny")
    fw_udp(c, "A", "10.1.0.10", "10.2.0.53", 9999, 53, "D firewall_deny d3 new",
           "d3: udp sport 9999 -> 10.2.0.53:53, rule 6 deny-src-9999 (p8 beats allow-dns p10)")
    fw_udp(c, "A", "10.1.0.10", "10.2.0.53", 33003, 80, "D firewall_deny d4 new",
           "d4: udp -> 10.2.0.53:80, default deny (allow-web is tcp only)")
    fw_udp(c, "A", "10.1.0.10", "10.2.1.1", 33004, 5000, "F d5 new",
           "d5: udp -> 10.2.1.1:5000, rule 4 allow-high (tcp and udp)")
    fw_udp(c, "B", "10.2.1.1", "10.1.0.10", 5000, 33004, "F d5", "d5: answer (return traffic)")
    fw_udp(c, "A", "10.1.0.10", "10.2.9.9", 33005, 5000, "D firewall_deny d6 new",
           "d6: udp -> 10.2.9.9:5000, rule 3 deny-net9 (tie with allow-high, listed first)")
    c.add(eth_a() / IP(src="10.1.0.10", dst="10.2.1.1") / ICMP(type=8, id=1, seq=1) /
          Raw(payload(32)), "D firewall_deny i1 new",
          "i1: ICMP echo 10.1.0.10 -> 10.2.1.1, default deny (no rule for icmp)")
    c.add(eth_a() / IP(src="10.1.0.10", dst="10.2.9.1") / ICMP(type=8, id=2, seq=1) /
          Raw(payload(32)), "D firewall_deny i2 new",
          "i2: ICMP echo -> 10.2.9.1, rule 3 deny-net9 (any protocol)")
    # flows opened from side B: default ALLOW
    T("B", "10.2.0.80", "10.1.0.10", 50001, 23, "b1",
      "rule 7 deny-b-telnet (B_TO_A)", False)
    T("B", "10.2.0.80", "10.1.0.10", 50002, 22, "b2", "default allow for side B", True)
    T("B", "10.2.0.80", "10.2.9.7", 50003, 22, "b3",
      "rule 3 deny-net9 (direction BOTH)", False)
    T("B", "10.2.0.80", "10.1.0.10", 50004, 8080, "b4",
      "default allow for side B (allow-high is A_TO_B only)", True)
    return c


def case_fw_stateful_return():
    c = FwCase("fw_stateful_return", {"firewall": {
        "default_a_to_b": "DENY", "default_b_to_a": "DENY",
        "rules": [{"id": "web-out", "priority": 10, "action": "ALLOW", "direction": "A_TO_B",
                   "protocols": ["tcp"], "dst_ports": ["80"]}]}}, """
Stateful firewall: one rule, 0 web-out: ALLOW tcp A_TO_B to port 80; default DENY both
ways. The answers from side B of the allowed flows pass without a rule (the flow's cached
verdict), through a whole session including FIN teardown; flows initiated from side B are
denied, even towards port 80 or from port 80 (a B segment that looks like an answer to a
connection that was never opened from A is a new flow from B).
t1, t2: A -> B tcp/80 sessions (rule 0), all packets forwarded both ways.
u1: A -> B udp/80: default deny (the rule is tcp only).
b1: B -> A tcp/80 SYN: default deny (the rule is A_TO_B).
b2: B -> A SYN-ACK from port 80 to an A client port with no flow: default deny.
b3: B -> A udp 53 -> 33001 (an "answer" without a query): default deny.
t3: after the B-initiated flows, another A -> B tcp/80 session still passes.""")
    ipc = lambda: IP(src="10.1.0.10", dst="10.2.0.80")
    ips = lambda: IP(src="10.2.0.80", dst="10.1.0.10")
    for n, (fl, port) in enumerate((("t1", 41000), ("t2", 41001))):
        t = Tcp(c, eth_a, eth_b, ipc, ips, port, 80, fl, cseq=1000 + n, side_c="A", side_s="B")
        t.c("S", f"F {fl} new", f"{fl}: SYN 10.1.0.10:{port} -> 10.2.0.80:80 (rule 0 web-out)")
        t.s("SA", note=f"{fl}: SYN-ACK from B (return traffic, no rule)")
        t.c("A")
        t.c("PA", data=b"GET / HTTP/1.1\r\nHost: b\r\n\r\n")
        t.s("A", note=f"{fl}: server ACK from B (return traffic)")
        t.s("PA", data=payload(600, n), note=f"{fl}: response from B (return traffic)")
        t.c("A")
        t.c("FA")
        t.s("FA", note=f"{fl}: server FIN from B (return traffic)")
        t.c("A", note=f"{fl}: last ACK")
    fw_udp(c, "A", "10.1.0.10", "10.2.0.80", 33000, 80, "D firewall_deny u1 new",
           "u1: udp 10.1.0.10:33000 -> 10.2.0.80:80, default deny (rule 0 is tcp)")
    fw_udp(c, "B", "10.2.0.80", "10.1.0.10", 80, 33000, "D firewall_deny u1",
           "u1: B answer of the denied A flow: same flow, cached deny")
    c.add(eth_b() / ips() / TCP(sport=45000, dport=80, flags="S", seq=7),
          "D firewall_deny b1 new", "b1: SYN 10.2.0.80:45000 -> 10.1.0.10:80 from B, default deny",
          side="B")
    c.add(eth_b() / ips() / TCP(sport=45000, dport=80, flags="S", seq=7),
          "D firewall_deny b1", "b1: SYN retransmission, cached deny", gap_us=3000, side="B")
    c.add(eth_b() / ips() / TCP(sport=80, dport=41999, flags="SA", seq=9000, ack=1001),
          "D firewall_deny b2 new",
          "b2: SYN-ACK 10.2.0.80:80 -> 10.1.0.10:41999 from B, no A flow: default deny",
          side="B")
    fw_udp(c, "B", "10.2.0.53", "10.1.0.10", 53, 33001, "D firewall_deny b3 new",
           "b3: udp 10.2.0.53:53 -> 10.1.0.10:33001 from B, default deny")
    t = Tcp(c, eth_a, eth_b, ipc, ips, 41002, 80, "t3", side_c="A", side_s="B")
    t.c("S", "F t3 new", "t3: SYN 10.1.0.10:41002 -> 10.2.0.80:80 (rule 0 web-out)")
    t.s("SA", note="t3: SYN-ACK from B (return traffic)")
    t.c("A")
    t.c("R", note="t3: client RST")
    return c


def case_fw_reject():
    c = FwCase("fw_reject", {"firewall": {"rules": [
        {"id": "rej-smtp", "priority": 10, "action": "REJECT", "protocols": ["tcp"],
         "dst_ports": ["25"]},
        {"id": "rej-snmp", "priority": 10, "action": "REJECT", "protocols": ["udp"],
         "dst_ports": ["161"]},
        {"id": "rej-icmp", "priority": 10, "action": "REJECT", "protocols": ["icmp"],
         "dst": ["10.2.0.99"]},
        {"id": "rej-v6", "priority": 10, "action": "REJECT", "protocols": ["tcp", "udp"],
         "dst": ["2001:db8:b::/64", "ff02::/16"], "dst_ports": ["7"]}]}}, """
REJECT rules (defaults ALLOW): 0 rej-smtp tcp :25, 1 rej-snmp udp :161, 2 rej-icmp icmp to
10.2.0.99, 3 rej-v6 tcp/udp to 2001:db8:b::/64 or ff02::/16 :7. A rejected packet gets the verdict
"reject" (reason firewall_reject) and is not forwarded; the appliance answers out of the
side the packet came from: TCP with a RST (RFC 793: to a segment without ACK, seq 0 and
ACK = its seq + length (+1 for SYN); to a segment with ACK, seq = its ACK and no ACK flag),
UDP / ICMP with an ICMP (v6) destination unreachable (administratively prohibited) quoting
the packet. Review expected_out_a.pcap (answers to side A frames) and expected_out.pcap
(answers to side B frames, plus the forwarded frames). No answer to a RST or to an ICMP
error (RFC 793 / RFC 1122), but those are still rejected (not forwarded). No answer either
to a packet sent to a broadcast or multicast address (IP or MAC), or from an unspecified
one: the answer would come from an address nobody owns (counted as reject_suppressed).
check_case.py checks that every frame leaving a side is either a forwarded frame or one
of the answers the rejects call for, and that their number is the summary's rst_sent +
icmp_sent.""")
    ipa = lambda: IP(src="10.1.0.10", dst="10.2.0.25")
    ipb = lambda: IP(src="10.2.0.25", dst="10.1.0.10")
    c.add(eth_a() / ipa() / TCP(sport=42000, dport=25, flags="S", seq=1000),
          "R r1 new", "r1: SYN 10.1.0.10:42000 -> :25 from A, rule 0: RST+ACK seq 0 ack 1001 out of A")
    c.add(eth_a() / ipa() / TCP(sport=42000, dport=25, flags="S", seq=1000),
          "R r1", "r1: SYN retransmission: cached reject, another RST", gap_us=3000)
    c.add(eth_a() / ipa() / TCP(sport=42001, dport=25, flags="PA", seq=2000, ack=3000) /
          Raw(payload(20)), "R r2 new",
          "r2: mid-stream data+ACK to :25, rule 0: RST seq 3000 (its ACK), no ACK flag")
    c.add(eth_a() / ipa() / TCP(sport=42002, dport=25, flags="R", seq=4000),
          "R -", "r3: bare RST to :25 (starts no flow), rule 0: rejected, no RST sent back")
    c.add(eth_a() / IP(src="10.1.0.10", dst="10.2.0.161") / UDP(sport=33000, dport=161) /
          Raw(payload(30)), "R r4 new",
          "r4: udp :161 from A, rule 1: ICMP unreachable out of A quoting it")
    c.add(eth_a() / IP(src="10.1.0.10", dst="10.2.0.99") / ICMP(type=8, id=9, seq=1) /
          Raw(payload(32)), "R r5 new",
          "r5: ICMP echo to 10.2.0.99, rule 2: ICMP unreachable out of A")
    quoted = raw(IP(src="10.2.0.99", dst="10.1.0.10") / UDP(sport=5, dport=6))[:28]
    c.add(eth_a() / IP(src="10.1.0.10", dst="10.2.0.99") / ICMP(type=3, code=3) / Raw(quoted),
          "R r6 new", "r6: ICMP port unreachable (an error) to 10.2.0.99, rule 2: no answer")
    c.add(eth_a() / IP(src="10.1.0.10", dst="10.2.0.80") / TCP(sport=42003, dport=80, flags="S"),
          "F ok1 new", "ok1: SYN to :80, no rule, default allow: forwarded")
    c.add(eth_b() / ipb() / TCP(sport=43000, dport=25, flags="S", seq=500),
          "R r7 new", "r7: SYN 10.2.0.25:43000 -> 10.1.0.10:25 from B, rule 0 (BOTH): RST out of B",
          side="B")
    c.add(eth_b() / IP(src="10.2.0.161", dst="10.1.0.10") / UDP(sport=33001, dport=161) /
          Raw(payload(10)), "R r8 new", "r8: udp :161 from B, rule 1: ICMP unreachable out of B", side="B")
    c.add(eth_a() / IPv6(src="2001:db8:a::1", dst="2001:db8:b::7") /
          TCP(sport=44000, dport=7, flags="S", seq=10), "R r9 new",
          "r9: IPv6 SYN to :7, rule 3: RST+ACK ack 11 out of A")
    c.add(eth_a() / IPv6(src="2001:db8:a::1", dst="2001:db8:b::7") /
          UDP(sport=44001, dport=7) / Raw(payload(12)), "R r10 new",
          "r10: IPv6 udp :7, rule 3: ICMPv6 unreachable (admin prohibited) out of A")
    c.add(eth_a() / IPv6(src="2001:db8:a::1", dst="2001:db8:c::7") /
          UDP(sport=44002, dport=7) / Raw(payload(12)), "F ok2 new",
          "ok2: IPv6 udp :7 outside 2001:db8:b::/64: default allow")
    c.add(eth_a() / IP(src="10.1.0.10", dst="255.255.255.255") /
          TCP(sport=42010, dport=25, flags="S", seq=1), "R r11 new",
          "r11: SYN to 255.255.255.255:25, rule 0: rejected, no RST (never from a broadcast)")
    c.add(eth_a() / IP(src="10.1.0.10", dst="224.0.0.251") /
          TCP(sport=42011, dport=25, flags="S", seq=1), "R r12 new",
          "r12: SYN to 224.0.0.251:25 (multicast), rule 0: rejected, no RST")
    c.add(eth_a() / IPv6(src="2001:db8:a::1", dst="ff02::1") /
          TCP(sport=44010, dport=7, flags="S", seq=1), "R r13 new",
          "r13: IPv6 SYN to ff02::1:7 (multicast), rule 3: rejected, no RST")
    c.add(Ether(src=MAC_A, dst=BCAST) / IP(src="10.1.0.10", dst="10.2.0.25") /
          TCP(sport=42012, dport=25, flags="S", seq=1), "R r14 new",
          "r14: SYN to 10.2.0.25:25 behind the broadcast MAC, rule 0: rejected, no RST")
    c.add(eth_a() / IP(src="0.0.0.0", dst="10.2.0.25") /
          TCP(sport=42013, dport=25, flags="S", seq=1), "R r15 new",
          "r15: SYN from 0.0.0.0 to :25, rule 0: rejected, no RST (nobody to answer)")
    c.add(eth_a() / IP(src="10.1.0.10", dst="255.255.255.255") / UDP(sport=33010, dport=161) /
          Raw(payload(8)), "R r16 new",
          "r16: udp :161 to 255.255.255.255, rule 1: rejected, no ICMP")
    return c


def case_fw_rule_change(keep):
    """A rule change while flows are open: replay --change commits a second config before
    input packet CUT (changes.tsv). keep=False: the default re-evaluates live flows on their
    next packet, so the new deny cuts the open SSH connection; keep=True
    (keep_established_on_change) lets allowed flows keep their verdict."""
    name = "fw_rule_change_keep" if keep else "fw_rule_change"
    fw1 = {"keep_established_on_change": keep, "rules": [
        {"id": "allow-all-tcp", "action": "ALLOW", "protocols": ["tcp"]}]}
    fw2 = {"keep_established_on_change": keep, "rules": [
        {"id": "deny-ssh", "priority": 1, "action": "DENY", "protocols": ["tcp"],
         "dst_ports": ["22"]},
        {"id": "allow-all-tcp", "priority": 5, "action": "ALLOW", "protocols": ["tcp"]}]}
    cut_verdict = "F s1" if keep else "D firewall_deny s1"
    c = FwCase(name, {"firewall": fw1}, f"""
Rule change under traffic. config.json allows all TCP ({'keep' if keep else 're-evaluate'}
established flows on change); changes.tsv commits change1.json (deny-ssh: TCP :22 denied,
priority 1, before allow-all-tcp) before packet 8, as a live apply would (a new generation:
the verdicts' "generation" goes 1 -> 2). s1 (SSH, open before the change) is
{'kept: allowed flows keep their verdict (keep_established_on_change)' if keep else
 'cut: its next packet is judged again by the new rules (deny-ssh), in both directions'};
w1 (HTTPS, open before) goes on under allow-all-tcp; s2 (a new SSH connection after the
change) is denied either way.""")
    c.changes = [(8, "change1.json", {"firewall": fw2})]
    s1 = Tcp(c, eth_a, eth_b, lambda: IP(src="10.1.0.10", dst="10.2.0.22"),
             lambda: IP(src="10.2.0.22", dst="10.1.0.10"), 40022, 22, "s1",
             side_c="A", side_s="B")
    w1 = Tcp(c, eth_a, eth_b, lambda: IP(src="10.1.0.10", dst="10.2.0.44"),
             lambda: IP(src="10.2.0.44", dst="10.1.0.10"), 40443, 443, "w1",
             side_c="A", side_s="B")
    s1.handshake("(generation 1: allow-all-tcp)")
    w1.handshake("(generation 1: allow-all-tcp)")
    s1.c("PA", note="s1: request before the change", data=payload(30, 1))
    s1.s("PA", note="s1: answer before the change", data=payload(60, 2))
    # --- change1.json committed here (before packet 8) ---
    s1.c("PA", cut_verdict, "s1: request after the change", data=payload(30, 3))
    s1.s("PA", cut_verdict, "s1: answer after the change (return traffic)", data=payload(60, 4))
    w1.c("PA", "F w1", "w1: request after the change (allow-all-tcp)", data=payload(40, 5))
    w1.s("PA", "F w1", "w1: answer after the change", data=payload(90, 6))
    s2 = Tcp(c, eth_a, eth_b, lambda: IP(src="10.1.0.11", dst="10.2.0.22"),
             lambda: IP(src="10.2.0.22", dst="10.1.0.11"), 40023, 22, "s2",
             side_c="A", side_s="B")
    s2.c("S", "D firewall_deny s2 new", "s2: new SSH after the change: deny-ssh")
    return c


MMDB = "../../../../shared/data/mmdb/maxmind+MaxMind-DB/test-data/GeoLite2-Country-Test.mmdb"


def case_fw_countries():
    c = FwCase("fw_countries", {
        "geoip": {"database": MMDB},
        "firewall": {"default_a_to_b": "ALLOW", "default_b_to_a": "DENY", "rules": [
            {"id": "deny-from-cn", "priority": 10, "action": "DENY", "src_countries": ["CN"]},
            {"id": "deny-udp-to-se", "priority": 10, "action": "DENY", "protocols": ["udp"],
             "dst_countries": ["SE"]},
            {"id": "allow-gb-from-b", "priority": 10, "action": "ALLOW", "direction": "B_TO_A",
             "src_countries": ["GB"]},
            {"id": "deny-us-to-ph", "priority": 10, "action": "DENY", "src_countries": ["US"],
             "dst_countries": ["PH"]},
            {"id": "allow-bt-tcp", "priority": 5, "action": "ALLOW", "protocols": ["tcp"],
             "src_countries": ["BT"], "dst_countries": ["CN", "SE"]}]}}, """
Country rules with the MaxMind test database GeoLite2-Country-Test.mmdb, referenced
relative to this folder (../../../../shared/data/mmdb/...: the checkout's ../shared).
Addresses and codes from shared/data/mmdb/expected/GeoLite2-Country-Test.lookups.tsv:
CN 111.235.161.236, US 50.114.3.92 and 214.78.31.21, SE 89.160.20.117 and 89.160.20.220,
GB 81.2.69.142 and 81.2.69.181, PH 202.196.236.172, BT 67.43.156.208, IPv6 GB
2002:5102:4590::1 (2002:5102:4590::/44); 10.x and 192.0.2.x have no country.
Defaults: A -> B ALLOW, B -> A DENY. Rules:
 0 deny-from-cn    p10 DENY  src CN
 1 deny-udp-to-se  p10 DENY  udp dst SE
 2 allow-gb-from-b p10 ALLOW B_TO_A src GB
 3 deny-us-to-ph   p10 DENY  src US and dst PH
 4 allow-bt-tcp    p5  ALLOW tcp src BT, dst CN or SE
(positions in the config; evaluation order: allow-bt-tcp 0,
deny-from-cn 1, deny-udp-to-se 2, allow-gb-from-b 3, deny-us-to-ph 4.)""")
    U = lambda *a, **k: fw_udp(c, *a, **k)
    U("A", "111.235.161.236", "81.2.69.142", 1000, 2000, "D firewall_deny c1 new",
      "c1: CN -> GB udp from A, rule 0 deny-from-cn")
    fw_tcp(c, "A", "111.235.161.236", "192.0.2.1", 1001, 80, "c2", "rule 0 deny-from-cn", False)
    U("A", "50.114.3.92", "89.160.20.117", 1002, 53, "D firewall_deny c3 new",
      "c3: US -> SE udp from A, rule 1 deny-udp-to-se")
    fw_tcp(c, "A", "50.114.3.92", "89.160.20.117", 1003, 443, "c4",
           "default allow (rule 1 is udp only)", True)
    U("A", "50.114.3.92", "202.196.236.172", 1004, 53, "D firewall_deny c5 new",
      "c5: US -> PH udp from A, rule 3 deny-us-to-ph")
    U("A", "214.78.31.21", "202.196.236.172", 1005, 53, "D firewall_deny c6 new",
      "c6: US (214.78.0.0/19) -> PH from A, rule 3 deny-us-to-ph")
    U("A", "81.2.69.142", "202.196.236.172", 1006, 53, "F c7 new",
      "c7: GB -> PH udp from A, default allow (rule 3 needs src US)")
    U("B", "202.196.236.172", "81.2.69.142", 53, 1006, "F c7", "c7: answer from B (return traffic)")
    U("A", "10.0.0.1", "81.2.69.142", 1007, 53, "F c8 new",
      "c8: no country -> GB from A, default allow")
    fw_tcp(c, "B", "81.2.69.181", "10.0.0.1", 1008, 22, "c9", "rule 2 allow-gb-from-b", True)
    fw_tcp(c, "B", "89.160.20.220", "10.0.0.1", 1009, 22, "c10",
           "default deny for B (SE is not GB)", False)
    U("B", "10.9.9.9", "81.2.69.142", 1010, 53, "D firewall_deny c11 new",
      "c11: no country -> GB from B, default deny (rule 2 is about the source)")
    U("B", "2002:5102:4590::1", "2001:db8::1", 1011, 53, "F c12 new",
      "c12: IPv6 GB (2002:5102:4590::/44) -> no country from B, rule 2 allow-gb-from-b")
    U("A", "2001:db8::1", "2002:5102:4590::1", 53, 1011, "F c12",
      "c12: answer from A (return traffic)")
    fw_tcp(c, "A", "67.43.156.208", "111.235.161.236", 1012, 80, "c13",
           "rule 4 allow-bt-tcp (src BT, dst CN)", True)
    fw_tcp(c, "B", "67.43.156.208", "89.160.20.117", 1013, 80, "c14",
           "rule 4 allow-bt-tcp from B (dst SE; default for B is deny)", True)
    U("A", "67.43.156.208", "89.160.20.117", 1014, 53, "D firewall_deny c15 new",
      "c15: BT -> SE udp from A, rule 1 deny-udp-to-se (rule 4 is tcp only)")
    fw_tcp(c, "B", "111.235.161.236", "67.43.156.208", 1015, 80, "c16",
           "rule 0 deny-from-cn (dst BT; rule 4 needs src BT)", False)
    return c


def case_fw_ipv6():
    c = FwCase("fw_ipv6", {"firewall": {"default_a_to_b": "DENY", "default_b_to_a": "DENY",
                                        "rules": [
        {"id": "deny-a1", "priority": 5, "action": "DENY", "src": ["2001:db8:a:1::/64"]},
        {"id": "allow-https", "priority": 10, "action": "ALLOW", "protocols": ["tcp"],
         "src": ["2001:db8:a::/48"], "dst": ["2001:db8:b::/64"], "dst_ports": ["443"]},
        {"id": "allow-dns", "priority": 10, "action": "ALLOW", "dst": ["2001:db8:b::53"],
         "dst_ports": ["53"]},
        {"id": "allow-icmpv6", "priority": 10, "action": "ALLOW", "protocols": ["icmpv6"]},
        {"id": "allow-v4-https", "priority": 10, "action": "ALLOW", "protocols": ["tcp"],
         "src": ["10.0.0.0/8"], "dst": ["any"], "dst_ports": ["443"]},
        {"id": "allow-b-high", "priority": 10, "action": "ALLOW", "direction": "B_TO_A",
         "src": ["2001:db8:b::/64"], "dst": ["2001:db8:a::/48", "10.0.0.0/8"],
         "src_ports": ["1024-65535"], "dst_ports": ["8000-8999"]}]}}, """
IPv6 prefixes and ports; default DENY both ways. Rules:
 0 deny-a1        p5  DENY  src 2001:db8:a:1::/64
 1 allow-https    p10 ALLOW tcp 2001:db8:a::/48 -> 2001:db8:b::/64 :443
 2 allow-dns      p10 ALLOW tcp/udp (ports, no protocol) -> 2001:db8:b::53 :53
 3 allow-icmpv6   p10 ALLOW icmpv6
 4 allow-v4-https p10 ALLOW tcp 10.0.0.0/8 -> any :443 (IPv4 source: "any" pairs as IPv4)
 5 allow-b-high   p10 ALLOW B_TO_A 2001:db8:b::/64 sport 1024-65535 -> 2001:db8:a::/48 or
                            10.0.0.0/8 :8000-8999 (families mixed; v6 pairs with v6)""")
    A, A1, B = "2001:db8:a::10", "2001:db8:a:1::10", "2001:db8:b::443"
    fw_tcp(c, "A", A, B, 50000, 443, "h1", "rule 1 allow-https", True)
    fw_tcp(c, "A", A1, B, 50001, 443, "h2", "rule 0 deny-a1 (p5 beats allow-https)", False)
    fw_tcp(c, "A", A, "2001:db8:b:1::443", 50002, 443, "h3",
           "default deny (dst outside 2001:db8:b::/64)", False)
    fw_tcp(c, "A", "2001:db8:c::10", B, 50003, 443, "h4",
           "default deny (src outside 2001:db8:a::/48; rule 4 is IPv4)", False)
    fw_tcp(c, "A", A, B, 50004, 80, "h5", "default deny (port 80)", False)
    fw_udp(c, "A", A, "2001:db8:b::53", 50005, 53, "F d1 new",
           "d1: udp -> 2001:db8:b::53:53, rule 2 allow-dns")
    fw_udp(c, "B", "2001:db8:b::53", A, 53, 50005, "F d1", "d1: answer (return traffic)")
    fw_tcp(c, "A", A, "2001:db8:b::53", 50006, 53, "d2", "rule 2 allow-dns (tcp too)", True)
    fw_udp(c, "A", A, "2001:db8:b::54", 50007, 53, "D firewall_deny d3 new",
           "d3: udp -> 2001:db8:b::54:53, default deny (rule 2 is a /128)")
    fw_udp(c, "A", A1, "2001:db8:b::53", 50008, 53, "D firewall_deny d4 new",
           "d4: udp from 2001:db8:a:1::/64 to DNS, rule 0 deny-a1")
    c.add(eth_a() / IPv6(src=A, dst=B) / ICMPv6EchoRequest(id=3, seq=1, data=payload(16)),
          "F e1 new", "e1: ICMPv6 echo from A, rule 3 allow-icmpv6")
    c.add(eth_b() / IPv6(src=B, dst=A) / ICMPv6EchoReply(id=3, seq=1, data=payload(16)),
          "F e1", "e1: echo reply (return traffic)", side="B")
    c.add(eth_a() / IP(src="10.1.0.10", dst="10.2.0.1") / ICMP(type=8, id=4, seq=1),
          "D firewall_deny e2 new", "e2: IPv4 ICMP echo, default deny (rule 3 is icmpv6 only)")
    fw_tcp(c, "A", "10.1.0.10", "10.2.0.1", 50009, 443, "v1", "rule 4 allow-v4-https", True)
    fw_tcp(c, "B", B, A, 2000, 8080, "b1", "rule 5 allow-b-high", True)
    fw_tcp(c, "B", B, A, 80, 8080, "b2", "default deny (sport 80 < 1024)", False)
    fw_tcp(c, "B", B, A, 2001, 9000, "b3", "default deny (dport 9000)", False)
    fw_tcp(c, "A", A, B, 2002, 8080, "b4", "default deny (rule 5 is B_TO_A)", False)
    return c


# --- lb --- load balancer cases (REWRITES: forwarded frames are rewritten by the LB).
def lb_backend(n, weight=None, port=None):
    b = {"id": f"be{n}", "ipv4": f"10.9.0.{n}", "ipv6": f"2001:db8:9::{n}",
         "mac": f"02:be:00:00:00:{n:02x}"}
    if weight is not None:
        b["weight"] = weight
    if port is not None:
        b["port"] = port
    return b


def lb_service(mode, backends, **kw):
    s = {"id": "web", "dst": ["192.0.2.10", "2001:db8::10"], "protocol": "tcp",
         "dst_ports": "80", "mode": mode, "table_size": 251, "backends": backends}
    s.update(kw)
    return {"lb": {"services": [s]}}


def lb_case_l2():
    c = Case("lb_l2", lb_service("LB_MODE_L2", [lb_backend(n) for n in range(1, 5)]), """
Load balancer, mode L2 (direct server return): 24 TCP clients open connections to the VIP
192.0.2.10:80; each flow's SYN picks a backend (Maglev table of 251 slots over be1..be4)
and every packet of the flow leaves with that backend's MAC (02:be:00:00:00:0N) as
destination, nothing else changed. Traffic to another address (192.0.2.11) and to another
port of the VIP is not balanced (forwarded as it is).""")
    for n in range(24):
        ip = lambda n=n: IP(src=f"10.0.1.{n + 1}", dst="192.0.2.10")
        fl = f"c{n}"
        c.add(eth_a() / ip() / TCP(sport=40000 + n, dport=80, flags="S", seq=100), f"F {fl} new",
              f"{fl}: SYN to the VIP")
        c.add(eth_a() / ip() / TCP(sport=40000 + n, dport=80, flags="A", seq=101, ack=1) /
              Raw(payload(40, n)), f"F {fl}", f"{fl}: data, same backend")
    c.add(eth_a() / IP(src="10.0.1.1", dst="192.0.2.11") / TCP(sport=1, dport=80, flags="S"),
          "F o1 new", "o1: not the VIP")
    c.add(eth_a() / IP(src="10.0.1.1", dst="192.0.2.10") / TCP(sport=2, dport=81, flags="S"),
          "F o2 new", "o2: the VIP, another port")
    return c


def lb_case_nat():
    c = Case("lb_nat", lb_service("LB_MODE_NAT", [lb_backend(1, port=8080)], protocol=""), """
Load balancer, mode NAT with one backend (be1 = 10.9.0.1:8080 / [2001:db8:9::1]:8080).
n1: TCP client on A -> VIP 192.0.2.10:80 leaves for 10.9.0.1:8080 (checksums fixed); be1
answers from 10.9.0.1:8080 on side B and the answer leaves on A from 192.0.2.10:80 through the
reverse entry of the flow table (a flow of its own, n1r). Live, the LB creates that entry when
it forwards the SYN, before the backend can answer; a replay judges the SYN and the answer
in one burst, so the flow stage creates n1r from the answer first (new) and the LB adopts it
for the translation. n6: the same over IPv6. u1: UDP. u2 / u3 (issue 30): UDP clients whose
port happens to be a default tunnel port (6081 Geneve, 4789 VXLAN): the backend's answers go TO
that port and their payload is no tunnel header (first byte 0x5a: Geneve version 1; 5 bytes:
shorter than a VXLAN header), so they are the plain UDP answers they are, translated back
(geneve_not_parsed / vxlan_not_parsed count them; dataplane.tunnels.strict would drop them).""")
    t = 1000
    def at(dt):
        nonlocal t
        t += dt
        return t
    for fl, ipc, ips, sport in (("n1", lambda: IP(src="10.0.2.1", dst="192.0.2.10"),
                                 lambda: IP(src="10.9.0.1", dst="10.0.2.1"), 41000),
                                ("n6", lambda: IPv6(src="2001:db8:2::1", dst="2001:db8::10"),
                                 lambda: IPv6(src="2001:db8:9::1", dst="2001:db8:2::1"), 41001)):
        c.add(eth_a() / ipc() / TCP(sport=sport, dport=80, flags="S", seq=10), f"F {fl} new",
              f"{fl}: SYN to the VIP", at_us=at(1000))
        c.add(eth_b() / ips() / TCP(sport=8080, dport=sport, flags="SA", seq=500, ack=11),
              f"F {fl}r new", f"{fl}: SYN-ACK from the backend, leaves from the VIP", side="B",
              at_us=at(500))
        c.add(eth_a() / ipc() / TCP(sport=sport, dport=80, flags="A", seq=11, ack=501) /
              Raw(payload(30)), f"F {fl}", f"{fl}: request", at_us=at(500))
        c.add(eth_b() / ips() / TCP(sport=8080, dport=sport, flags="PA", seq=501, ack=41) /
              Raw(payload(60, 1)), f"F {fl}r", f"{fl}: response", side="B", at_us=at(500))
    c.add(eth_a() / IP(src="10.0.2.2", dst="192.0.2.10") / UDP(sport=5000, dport=80) /
          Raw(payload(20)), "F u1 new", "u1: UDP to the VIP", at_us=at(1000))
    c.add(eth_b() / IP(src="10.9.0.1", dst="10.0.2.2") / UDP(sport=8080, dport=5000) /
          Raw(payload(20, 3)), "F u1r new", "u1: UDP answer", side="B", at_us=at(500))
    for fl, cip, cport, answer, what in (
            ("u2", "10.0.2.3", 6081, b"Z answer from be1 to :6081", "Geneve version 1"),
            ("u3", "10.0.2.4", 4789, b"hello", "5 bytes, no VXLAN header")):
        c.add(eth_a() / IP(src=cip, dst="192.0.2.10") / UDP(sport=cport, dport=80) /
              Raw(payload(20, 4)), f"F {fl} new", f"{fl}: UDP to the VIP from client port {cport}",
              at_us=at(1000))
        c.add(eth_b() / IP(src="10.9.0.1", dst=cip) / UDP(sport=8080, dport=cport) / Raw(answer),
              f"F {fl}r new", f"{fl}: answer to :{cport} ({what}): plain UDP, translated back",
              side="B", at_us=at(500))
    return c


def lb_case_ipip():
    c = Case("lb_ipip", lb_service("LB_MODE_IPIP", [lb_backend(1), lb_backend(2)],
                                   tunnel_src_v4="198.51.100.1", tunnel_src_v6="2001:db8:ff::1"), """
Load balancer, mode IP-in-IP: every packet to the VIP leaves wrapped in an outer IPv4
(protocol 4, 198.51.100.1 -> backend 10.9.0.N) or, for IPv6, an outer IPv6 (next header 41,
2001:db8:ff::1 -> 2001:db8:9::N) header, with the backend's MAC as destination.""")
    for n in range(6):
        c.add(eth_a() / IP(src=f"10.0.3.{n + 1}", dst="192.0.2.10") /
              TCP(sport=42000 + n, dport=80, flags="S", seq=7), f"F t{n} new", f"t{n}: IPv4 SYN")
        c.add(eth_a() / IPv6(src=f"2001:db8:3::{n + 1}", dst="2001:db8::10") /
              TCP(sport=42100 + n, dport=80, flags="S", seq=7), f"F s{n} new", f"s{n}: IPv6 SYN")
    return c


def lb_case_weights():
    c = Case("lb_weights", lb_service("LB_MODE_L2", [lb_backend(1, weight=1), lb_backend(2, weight=3)],
                                      protocol="udp", table_size=65537), """
Load balancer weights: be1 weight 1, be2 weight 3. 200 UDP flows to the VIP: the verdicts'
backend field (the backend id) shows about a quarter be1 and three quarters be2.""")
    for n in range(200):
        c.add(eth_a() / IP(src=f"10.4.{n // 200}.{n % 200 + 1}", dst="192.0.2.10") /
              UDP(sport=30000 + n, dport=80) / Raw(payload(16, n)), f"F w{n} new",
              f"w{n}: UDP flow", gap_us=100)
    return c


def lb_case_payload_key():
    svc = lb_service("LB_MODE_L2", [lb_backend(n) for n in range(1, 7)], protocol="udp",
                     dst_ports="7000", fallback="LB_FALLBACK_DROP",
                     key=[{"field": "raw", "anchor": "payload", "offset": 2, "length": 4}])
    c = Case("lb_payload_key", svc, """
Load balancer keyed on a session id in a UDP payload (4 bytes at payload offset 2) instead of
the 5-tuple: 8 sessions, each used by 3 different clients (other addresses and ports); all
flows of one session leave with the same backend MAC. A datagram too short to hold the
session id is dropped (fallback DROP, reason lb_key_missing).""")
    for sess in range(8):
        for k in range(3):
            n = sess * 3 + k
            body = b"\xaa\xbb" + struct.pack(">I", 0x5e550000 + sess) + payload(10, n)
            c.add(eth_a() / IP(src=f"10.5.0.{n + 1}", dst="192.0.2.10") /
                  UDP(sport=20000 + n, dport=7000) / Raw(body), f"F p{n} new",
                  f"p{n}: session {sess}, client {k}")
    c.add(eth_a() / IP(src="10.5.1.1", dst="192.0.2.10") / UDP(sport=1, dport=7000) / Raw(b"ab"),
          "D lb_key_missing k1 new", "k1: 2-byte payload, no session id (its flow is tracked)")
    return c


# An independent model of the LB's choice (rules/compiled/lb_hash.h, rules/compiled/lb.cc):
# the 64-bit hash, the 5-tuple key and the weighted Maglev table, so the intent of the drain
# and flush cases can say which flows sit on which backend.
_M64 = (1 << 64) - 1
_C1, _C2 = 0x87C37B91114253D5, 0x4CF5AD432745937F


def _lb_hash(b, seed):
    def rotl(x, r):
        return ((x << r) | (x >> (64 - r))) & _M64

    def mix(h, k):
        k = rotl((k * _C1) & _M64, 31)
        k = (k * _C2) & _M64
        return (rotl(h ^ k, 27) * 5 + 0x52DCE729) & _M64

    n = len(b)
    h = seed ^ ((n * _C2) & _M64)
    i = 0
    while i + 8 <= n:
        h = mix(h, int.from_bytes(b[i:i + 8], "little"))
        i += 8
    if i < n:
        h = mix(h, int.from_bytes(b[i:] + bytes(8 - (n - i)), "little"))
    k = h ^ n
    for mul in (0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53):
        k ^= k >> 33
        k = (k * mul) & _M64
    return k ^ (k >> 33)


def lb_table(ids, weights, m):
    """Maglev table (backend index per slot), turns in id order, weighted credits."""
    turns = []
    for i in sorted(range(len(ids)), key=lambda i: ids[i]):
        if weights[i] == 0:
            continue
        b = ids[i].encode()
        turns.append([_lb_hash(b, 0x6D61676C65765F6F) % m,
                      _lb_hash(b, 0x6D61676C65765F73) % (m - 1) + 1, weights[i], 0, i])
    if not turns:
        return []
    max_w = max(t[2] for t in turns)
    table, filled = [None] * m, 0
    while True:
        for t in turns:
            t[3] += t[2]
            while t[3] >= max_w:
                t[3] -= max_w
                c = t[0]
                while table[c] is not None:
                    c = (c + t[1]) % m
                table[c] = t[4]
                t[0] = (c + t[1]) % m
                filled += 1
                if filled == m:
                    return table


def lb_pick_v4(table, src, dst, sport, dport, proto):
    key = (bytes(int(x) for x in src.split(".")) + bytes(12) +
           bytes(int(x) for x in dst.split(".")) + bytes(12) +
           struct.pack(">HHB", sport, dport, proto))
    h = _lb_hash(key, 0x6C625F6B65795F31)
    return table[(h * len(table)) >> 64]


def lb_case_drain():
    ids = ["be1", "be2", "be3"]
    cfg = lb_service("LB_MODE_L2", [lb_backend(n) for n in (1, 2, 3)])
    drained = json.loads(json.dumps(cfg))
    drained["lb"]["services"][0]["backends"][1]["state"] = "LB_BACKEND_DRAINING"
    flushed = json.loads(json.dumps(cfg))
    del flushed["lb"]["services"][0]["backends"][1]
    c = Case("lb_drain", cfg, """
Drain, then flush, while flows are open (replay --change, changes.tsv). 12 TCP flows (c0..c11)
open on be1..be3. Before packet 12, change1.json sets be2 DRAINING: the data packet of every
open flow keeps its backend (the notes say which, from an independent model of the hash and
the Maglev table in gen_cases.py; the verdicts' backend field must agree), and 12 new flows
(d0..d11) avoid be2. Before packet 36, change2.json removes be2 (flush; orphans REHASH): the
flows that were on be2 move to the backend the new table gives them, the others stay.""")
    t_all = lb_table(ids, [1, 1, 1], 251)
    t_drain = lb_table(ids, [1, 0, 1], 251)
    t_flush = lb_table(["be1", "be3"], [1, 1], 251)
    ip = lambda n, p: IP(src=f"10.0.6.{n + 1}", dst="192.0.2.10")
    first = {}
    for n in range(12):
        be = lb_pick_v4(t_all, f"10.0.6.{n + 1}", "192.0.2.10", 43000 + n, 80, 6)
        first[n] = be
        c.add(eth_a() / ip(n, 0) / TCP(sport=43000 + n, dport=80, flags="S", seq=1),
              f"F c{n} new", f"c{n}: SYN -> {ids[be]}")
    for n in range(12):
        c.add(eth_a() / ip(n, 0) / TCP(sport=43000 + n, dport=80, flags="A", seq=2, ack=1) /
              Raw(payload(20, n)), f"F c{n}", f"c{n}: data after be2 drains -> still {ids[first[n]]}")
    for n in range(12):
        src = f"10.0.7.{n + 1}"
        be = lb_pick_v4(t_drain, src, "192.0.2.10", 44000 + n, 80, 6)
        assert be != 1
        c.add(eth_a() / IP(src=src, dst="192.0.2.10") / TCP(sport=44000 + n, dport=80, flags="S"),
              f"F d{n} new", f"d{n}: new flow while be2 drains -> {ids[be]}")
    moved = 0
    for n in range(12):
        if first[n] == 1:
            be = ["be1", "be3"][lb_pick_v4(t_flush, f"10.0.6.{n + 1}", "192.0.2.10", 43000 + n, 80, 6)]
            moved += 1
        else:
            be = ids[first[n]]
        c.add(eth_a() / ip(n, 0) / TCP(sport=43000 + n, dport=80, flags="A", seq=22, ack=1) /
              Raw(payload(20, n)), f"F c{n}",
              f"c{n}: data after be2 is removed -> {be}" + (" (re-hashed)" if first[n] == 1 else ""))
    assert 0 < moved < 12
    c.changes = [(12, "change1.json", drained), (36, "change2.json", flushed)]
    return c


def lb_case_flush_reset():
    ids = ["be1", "be2", "be3"]
    cfg = lb_service("LB_MODE_L2", [lb_backend(n) for n in (1, 2, 3)])
    reset = json.loads(json.dumps(cfg))
    del reset["lb"]["services"][0]["backends"][0]
    reset["lb"]["services"][0]["orphans"] = "LB_ORPHANS_RESET"
    c = Case("lb_flush_reset", cfg, """
Flush with reset: 12 TCP flows open on be1..be3; before packet 12, change1.json removes be1
with orphans RESET. The flows that were on be1 (per the model of the hash in gen_cases.py) get
every later packet dropped (lb_flow_reset); the others keep their backend. A new flow after
the change never lands on be1.""")
    t_all = lb_table(ids, [1, 1, 1], 251)
    first = {}
    for n in range(12):
        src = f"10.0.8.{n + 1}"
        first[n] = lb_pick_v4(t_all, src, "192.0.2.10", 45000 + n, 80, 6)
        c.add(eth_a() / IP(src=src, dst="192.0.2.10") / TCP(sport=45000 + n, dport=80, flags="S"),
              f"F c{n} new", f"c{n}: SYN -> {ids[first[n]]}")
    on1 = 0
    for rnd in range(2):
        for n in range(12):
            pkt = (eth_a() / IP(src=f"10.0.8.{n + 1}", dst="192.0.2.10") /
                   TCP(sport=45000 + n, dport=80, flags="A", seq=1 + 20 * rnd, ack=1) /
                   Raw(payload(20, n)))
            if first[n] == 0:
                on1 += rnd == 0
                c.add(pkt, f"D lb_flow_reset c{n}", f"c{n}: was on be1 (removed, reset)")
            else:
                c.add(pkt, f"F c{n}", f"c{n}: stays on {ids[first[n]]}")
    assert 0 < on1 < 12
    c.add(eth_a() / IP(src="10.0.8.200", dst="192.0.2.10") / TCP(sport=1, dport=80, flags="S"),
          "F n1 new", "n1: new flow after the change")
    c.changes = [(12, "change1.json", reset)]
def lb_case_fragments():
    ids = [f"be{n}" for n in range(1, 6)]
    web = {"id": "web", "dst": ["192.0.2.10", "2001:db8::10"], "protocol": "udp",
           "mode": "LB_MODE_L2", "table_size": 251, "backends": [lb_backend(n) for n in range(1, 6)]}
    nat = {"id": "nat", "dst": ["192.0.2.20"], "protocol": "udp", "mode": "LB_MODE_NAT",
           "table_size": 251, "backends": [lb_backend(n, port=8080) for n in range(1, 6)]}
    tun = {"id": "tun", "dst": ["192.0.2.30"], "protocol": "udp", "mode": "LB_MODE_IPIP",
           "tunnel_src_v4": "198.51.100.1", "table_size": 251,
           "backends": [lb_backend(n) for n in range(1, 6)]}
    c = Case("lb_fragments", {"lb": {"services": [web, nat, tun]}}, """
IP fragments to load-balanced services (be1..be5, Maglev 251 slots, 5-tuple key). The
5-tuple is only in a datagram's first fragment: the first fragment picks the backend, and
every later fragment of the datagram goes to that backend with the same rewrite, whether it
arrives after the first fragment or before it (held, then released with it). Which backend:
from the independent model of the hash and the table in gen_cases.py (notes below); in the
output every fragment of a datagram has that backend's MAC 02:be:00:00:00:0N.
g0..g7: service web (L2), UDP datagrams of 1200 bytes in 3 fragments from 8 clients; odd ones
    arrive last fragment first, middle, then first.
v6: web over IPv6, 3 fragments in reverse order (the model covers IPv4 only; the verdicts'
    backend field and the MACs in the output must agree among the three).
n0..n2: service nat (NAT to port 8080): the first fragment gets the backend's address and
    port 8080 with the UDP checksum fixed for the whole datagram, the later fragments the
    backend's address (header checksum fixed); reassembled, the datagram verifies.
    n0r: the backend's fragmented answer to n0 (from 10.9.0.N:8080) leaves with the VIP
    192.0.2.20 as source in every fragment (reverse entry of the flow table).
t0..t1: service tun (IPIP): every fragment wrapped in an outer IPv4 header
    198.51.100.1 -> 10.9.0.N.""")
    t5 = lb_table(ids, [1] * 5, 251)
    for n in range(8):
        src = f"10.0.9.{n + 1}"
        be = ids[lb_pick_v4(t5, src, "192.0.2.10", 46000 + n, 9000, 17)]
        fr = ipv4_fragments(udp4(src, "192.0.2.10", 46000 + n, 9000, 1200, 0x100 + n, n), [400, 400])
        order = [2, 1, 0] if n % 2 else [0, 1, 2]
        for k in order:
            off, more, pkt = fr[k]
            c.add(eth_a() / pkt, f"F g{n} new" if off == 0 else f"F g{n}",
                  f"g{n}: fragment offset {off} -> {be}", gap_us=100)
    for k, fr in reversed(list(enumerate(ipv6_fragments(
            "2001:db8:9::77", "2001:db8::10", UDP(sport=46100, dport=9000) / Raw(payload(1200)),
            0x6006, [400, 400])))):
        c.add(eth_a() / fr, "F v6 new" if k == 0 else "F v6", f"v6: IPv6 fragment {k + 1} of 3",
              gap_us=100)
    nat_be = {}
    for n in range(3):
        src = f"10.0.10.{n + 1}"
        b = lb_pick_v4(t5, src, "192.0.2.20", 47000 + n, 9000, 17)
        nat_be[n] = b
        fr = ipv4_fragments(udp4(src, "192.0.2.20", 47000 + n, 9000, 1000, 0x200 + n, n), [400, 400])
        order = [1, 0, 2] if n == 1 else [0, 1, 2]
        for k in order:
            off, more, pkt = fr[k]
            c.add(eth_a() / pkt, f"F n{n} new" if off == 0 else f"F n{n}",
                  f"n{n}: fragment offset {off} -> {ids[b]} (10.9.0.{b + 1}:8080)", gap_us=100)
    b = nat_be[0]
    ans = ipv4_fragments(udp4(f"10.9.0.{b + 1}", "10.0.10.1", 8080, 47000, 900, 0x300, 7), [400, 400])
    t_ans = c.now("A")
    for k in (2, 0, 1):
        off, more, pkt = ans[k]
        t_ans += 100
        c.add(eth_b() / pkt, "F n0r",
              f"n0r: answer fragment offset {off}, leaves from 192.0.2.20 (the reverse entry "
              f"the LB made for n0)", side="B", at_us=t_ans)
    for n in range(2):
        src = f"10.0.11.{n + 1}"
        b = lb_pick_v4(t5, src, "192.0.2.30", 48000 + n, 9000, 17)
        fr = ipv4_fragments(udp4(src, "192.0.2.30", 48000 + n, 9000, 1000, 0x400 + n, n), [400, 400])
        for k in ([2, 0, 1] if n else [0, 1, 2]):
            off, more, pkt = fr[k]
            c.add(eth_a() / pkt, f"F t{n} new" if off == 0 else f"F t{n}",
                  f"t{n}: fragment offset {off} -> wrapped to 10.9.0.{b + 1} ({ids[b]})", gap_us=100)
    return c


# --------------------------------------------------------------------------------------
# --- dpi --- YARA rules in TCP/UDP payload (intent notation as for the fw_* cases).
# --------------------------------------------------------------------------------------

DPI_RULES = r"""
rule split_drop { meta: action = "drop" strings: $a = "EVIL-PAYLOAD-SPLIT" condition: $a }
rule ooo_alert { strings: $a = "OUT-OF-ORDER-MARKER" condition: $a }
rule udp_alert { strings: $a = "UDP-BAD" condition: $a }
rule hex_drop { meta: action = "drop" strings: $h = { 13 37 ?? 42 [0-4] FE } condition: $h }
rule server_count { strings: $a = "tick" condition: #a >= 3 }
"""


def case_dpi_streams():
    c = FwCase("dpi_streams", {"dpi": {"rule_files": ["rules.yar"], "ooo_buffer_bytes": 4096}}, """
DPI with YARA rules (rules.yar, indices in evaluation order): 0 split_drop (meta action drop,
"EVIL-PAYLOAD-SPLIT"), 1 ooo_alert ("OUT-OF-ORDER-MARKER", alert), 2 udp_alert ("UDP-BAD",
alert), 3 hex_drop ({ 13 37 ?? 42 [0-4] FE }, drop), 4 server_count (#a >= 3 of "tick", alert).
Matches are found across TCP segments (one Hyperscan stream per flow direction); the TCP
stream engine hands DPI each byte once in sequence order: a segment beyond a hole is forwarded
and kept, and scanned with the segment that fills the hole, a retransmission with other bytes
is dropped (tcp_overlap_different, first copy wins); UDP datagrams are scanned one by one. A drop rule drops the packet where the
match completes and every later packet of the flow (both directions); alerts are events
(event_type "alert", rule = index above).""")
    os.makedirs(os.path.join(HERE, "dpi_streams"), exist_ok=True)
    with open(os.path.join(HERE, "dpi_streams", "rules.yar"), "w") as f:
        f.write(DPI_RULES.lstrip())
    ipc = lambda: IP(src="10.1.0.10", dst="10.2.0.80")
    ips = lambda: IP(src="10.2.0.80", dst="10.1.0.10")
    # t1: the match is split over two segments: dropped where it completes, flow blocked.
    t = Tcp(c, eth_a, eth_b, ipc, ips, 40001, 80, "t1", side_c="A", side_s="B")
    t.handshake("t1: split match -> drop")
    t.c("PA", note="t1: GET ... EVIL-PAY (first half of the match)", data=b"GET /x HTTP/1.1\r\nX: EVIL-PAY")
    t.c("PA", "D dpi_drop t1", "t1: LOAD-SPLIT completes the match: dropped (rule 0)",
        data=b"LOAD-SPLIT\r\n\r\n")
    t.s("PA", "D dpi_drop t1", "t1: server answer: the flow is blocked", data=b"HTTP/1.1 200 OK\r\n\r\n")
    t.c("PA", "D dpi_drop t1", "t1: more client data: blocked", data=b"more")
    # t2: out of order: the second segment arrives first, is buffered; alert when reassembled.
    t = Tcp(c, eth_a, eth_b, lambda: IP(src="10.1.0.11", dst="10.2.0.80"),
            lambda: IP(src="10.2.0.80", dst="10.1.0.11"), 40002, 80, "t2", side_c="A", side_s="B")
    t.handshake("t2: out of order -> alert")
    first = b"hello OUT-OF-"
    second = b"ORDER-MARKER bye"
    base = t.cseq
    t.cseq = base + len(first)
    t.c("PA", note="t2: second segment first (beyond a hole): forwarded, kept", data=second)
    t.cseq = base
    t.c("PA", note="t2: first segment: fills the hole, scanned with the kept bytes: alert (rule 1)",
        data=first)
    t.c("PA", note="t2: second segment retransmitted: nothing new", data=second)
    t.s("PA", note="t2: server answer forwarded (alert only)", data=b"ok")
    # t3: retransmission with other bytes: the first copy was scanned, the new bytes are not.
    t = Tcp(c, eth_a, eth_b, lambda: IP(src="10.1.0.12", dst="10.2.0.80"),
            lambda: IP(src="10.2.0.80", dst="10.1.0.12"), 40003, 80, "t3", side_c="A", side_s="B")
    t.handshake("t3: retransmission not rescanned")
    t.c("PA", note="t3: 18 harmless bytes", data=b"harmless-bytes-xyz")
    t.cseq -= 18
    t.c("PA", "D tcp_overlap_different t3",
        "t3: same sequence range, other bytes (EVIL-PAYLOAD-SPLIT): dropped (first copy wins)",
        data=b"EVIL-PAYLOAD-SPLIT")
    # t4: hex string with a wildcard and a jump, split 1 byte at a time at the end.
    t = Tcp(c, eth_a, eth_b, lambda: IP(src="10.1.0.13", dst="10.2.0.81"),
            lambda: IP(src="10.2.0.81", dst="10.1.0.13"), 40004, 443, "t4", side_c="A", side_s="B")
    t.handshake("t4: hex string over segments -> drop")
    t.c("PA", note="t4: 13 37", data=b"\x00\x13\x37")
    t.c("PA", note="t4: 99 42 (?? then 42)", data=b"\x99\x42")
    t.c("PA", note="t4: two jump bytes", data=b"\x01\x02")
    t.c("PA", "D dpi_drop t4", "t4: FE completes { 13 37 ?? 42 [0-4] FE }: dropped (rule 3)",
        data=b"\xfe")
    # t5: a count condition on the server side (the other direction of the stream).
    t = Tcp(c, eth_a, eth_b, lambda: IP(src="10.1.0.14", dst="10.2.0.82"),
            lambda: IP(src="10.2.0.82", dst="10.1.0.14"), 40005, 8080, "t5", side_c="A", side_s="B")
    t.handshake("t5: #a >= 3 on the server's stream")
    t.s("PA", note="t5: tick tick", data=b"tick tick ")
    t.c("PA", note="t5: client says tick (other direction: not counted)", data=b"tick")
    t.s("PA", note="t5: ti (the third tick begins)", data=b"ti")
    t.s("PA", note="t5: ck! completes the third tick in the server stream: alert (rule 4)", data=b"ck!")
    # u1/u2: UDP datagrams are scanned one by one.
    c.add(eth_a() / IP(src="10.1.0.20", dst="10.2.0.53") / UDP(sport=5000, dport=5353) /
          Raw(b"data UDP-BAD data"), "F u1 new",
          "u1: udp UDP-BAD in one datagram: alert (rule 2), forwarded")
    c.add(eth_a() / IP(src="10.1.0.21", dst="10.2.0.53") / UDP(sport=5001, dport=5353) / Raw(b"xx UDP-"),
          "F u2 new", "u2: udp UDP- ...")
    c.add(eth_a() / IP(src="10.1.0.21", dst="10.2.0.53") / UDP(sport=5001, dport=5353) / Raw(b"BAD xx"),
          "F u2", "u2: ... BAD in the next datagram: no alert (datagrams are scanned on their own)")
    return c


DPI_END_RULES = r"""
rule tail_marker { strings: $a = /GOODBYE-MARKER$/ condition: $a }
rule word_at_end { strings: $a = "quit" fullword condition: $a }
"""


def case_dpi_flow_end():
    cfg = {"dpi": {"rule_files": ["rules.yar"]},
           "dataplane": {"flow_table": {"capacity_per_worker": 1024, "aging_slice": 4096},
                         "timeouts": {"tcp_established_s": 10}}}
    c = FwCase("dpi_flow_end", cfg, """
DPI matches that exist only when a stream ends (rules.yar: 0 tail_marker, a regex ending in
$ = the end of the data; 1 word_at_end, "quit" fullword, true at the very end too). They are
alerts raised when the flow ends, each about the flow direction whose bytes made it true:
its flow id, the side those bytes came from, its sender as source; and counted in the
summary (dpi alerts, the rules' matches). Config: tcp established timeout 10 s, the whole
flow table aged on every loop.
e2: the client sends "... please quit" and goes idle; at t=20 s 40 packets of a UDP flow p
run the aging sweep: e2 expires, alert about the client's direction (side A).
e3: "quitting" and "GOODBYE-MARKER and more": not at the end, no alert (e3 expires too).
e1 (after the sweep): the server's answer ends with GOODBYE-MARKER, then a FIN teardown; the
closed flow is still in the table when the replay ends: alert at shutdown (side B,
10.2.0.80:80 -> client).
Every packet is forwarded: the alerts come after the data has passed.""")
    os.makedirs(os.path.join(HERE, "dpi_flow_end"), exist_ok=True)
    with open(os.path.join(HERE, "dpi_flow_end", "rules.yar"), "w") as f:
        f.write(DPI_END_RULES.lstrip())
    t = Tcp(c, eth_a, eth_b, lambda: IP(src="10.1.0.11", dst="10.2.0.81"),
            lambda: IP(src="10.2.0.81", dst="10.1.0.11"), 41002, 23, "e2", side_c="A", side_s="B")
    t.handshake("e2: client ends with quit, then idle")
    t.c("PA", note="e2: client data ending in 'quit' (fullword at the end of the stream)",
        data=b"ls -l; please quit")
    t.s("A", note="e2: server ACK")
    t = Tcp(c, eth_a, eth_b, lambda: IP(src="10.1.0.12", dst="10.2.0.82"),
            lambda: IP(src="10.2.0.82", dst="10.1.0.12"), 41003, 80, "e3", side_c="A", side_s="B")
    t.handshake("e3: near misses")
    t.c("PA", note="e3: quitting (not a whole word)", data=b"we are quitting")
    t.s("PA", note="e3: the marker, then more bytes (not at the end)", data=b"GOODBYE-MARKER and more")
    for n in range(40):
        c.add(eth_a() / IP(src="10.1.0.20", dst="10.2.0.53") / UDP(sport=5000, dport=5353) /
              Raw(b"tick %02d" % n), "F p new" if n == 0 else "F p",
              f"p: packet {n + 1} of 40 at 20 s (runs the aging sweep: e2 and e3 expire)",
              at_us=20_000_000 + n * 1000)
    t = Tcp(c, eth_a, eth_b, lambda: IP(src="10.1.0.10", dst="10.2.0.80"),
            lambda: IP(src="10.2.0.80", dst="10.1.0.10"), 41001, 80, "e1", side_c="A", side_s="B")
    t.handshake("e1: answer ends with the marker")
    t.c("PA", note="e1: request", data=b"GET / HTTP/1.1\r\n\r\n")
    t.s("PA", note="e1: answer ending in GOODBYE-MARKER (alert only when the stream ends)",
        data=b"HTTP/1.1 200 OK\r\n\r\nGOODBYE-MARKER")
    t.fin_teardown()
    return c


DPI_RESET_RULES = r"""
rule kill_switch : c2 exfil {
  meta:
    author = "soc team"
    action = "reset"
    severity = 3
  strings:
    $a = "KILL-SWITCH"
  condition:
    $a
}
rule reset_by_config { strings: $a = "RESET-BY-CONFIG" condition: $a }
rule watch_only : audit { meta: ref = "T1041" strings: $a = "WATCH-ME" condition: $a }
"""


def case_dpi_reset():
    c = FwCase("dpi_reset", {"dpi": {"rule_files": ["rules.yar"],
                                     "actions": [{"rule": "reset_by_config", "action": "DPI_RESET"}]}}, """
DPI action reset (rules.yar, indices in evaluation order): 0 kill_switch ("KILL-SWITCH", meta
action reset, tags c2 exfil), 1 reset_by_config ("RESET-BY-CONFIG", reset from dpi.actions),
2 watch_only ("WATCH-ME", alert, tag audit). A reset drops the packet where the match completes
(verdict reject, reason dpi_reset), sends a TCP RST back out of the packet's ingress side and,
for a segment with ACK, one toward the other end (out of the other side), exactly like a
firewall reject; every later packet of the flow is dropped (reason dpi_drop), nothing more is
sent. On UDP a reset is a drop. Alert events carry the rule's tags and metadata. A config
change before packet 15 adds rules2.yar (late_rule): rule match counters carry over by id.""")
    os.makedirs(os.path.join(HERE, "dpi_reset"), exist_ok=True)
    with open(os.path.join(HERE, "dpi_reset", "rules.yar"), "w") as f:
        f.write(DPI_RESET_RULES.lstrip())
    # r1: the client sends the match in one segment: reset both ways, then the flow is dead.
    t = Tcp(c, eth_a, eth_b, lambda: IP(src="10.1.0.10", dst="10.2.0.80"),
            lambda: IP(src="10.2.0.80", dst="10.1.0.10"), 41001, 80, "r1", side_c="A", side_s="B")
    t.handshake("r1: client sends KILL-SWITCH -> reset")
    t.c("PA", note="r1: harmless request", data=b"GET / HTTP/1.1\r\n\r\n")
    t.s("PA", note="r1: harmless answer", data=b"HTTP/1.1 200 OK\r\n\r\n")
    t.c("PA", "X dpi_reset r1", "r1: KILL-SWITCH (rule 0): RST to 10.1.0.10 out of A, RST to "
        "10.2.0.80 out of B", data=b"POST /x KILL-SWITCH now")
    t.s("PA", "D dpi_drop r1", "r1: the server's late data: the flow is blocked, no RST",
        data=b"late")
    t.cseq -= 23
    t.c("PA", "D dpi_drop r1", "r1: client retransmits the segment: dropped, no second RST",
        data=b"POST /x KILL-SWITCH now")
    # r2: the match split over two server segments (server -> client direction).
    t = Tcp(c, eth_a, eth_b, lambda: IP(src="10.1.0.11", dst="10.2.0.80"),
            lambda: IP(src="10.2.0.80", dst="10.1.0.11"), 41002, 80, "r2", side_c="A", side_s="B")
    t.handshake("r2: server sends KILL- then SWITCH -> reset")
    t.c("PA", note="r2: request", data=b"GET /y HTTP/1.1\r\n\r\n")
    t.s("PA", note="r2: KILL- (first half)", data=b"HTTP/1.1 200 OK\r\n\r\nKILL-")
    t.s("PA", "X dpi_reset r2", "r2: SWITCH completes rule 0: RST to 10.2.0.80 out of B, RST to "
        "10.1.0.11 out of A", data=b"SWITCH")
    t.c("A", "D dpi_drop r2", "r2: the client's ACK: blocked")
    # Before r3 (packet 15) a config change adds rules2.yar: a new rule set (a new runtime);
    # the per-rule match counters carry over by rule id (summary dpi_rules: kill_switch 3).
    with open(os.path.join(HERE, "dpi_reset", "rules2.yar"), "w") as f:
        f.write('rule late_rule { strings: $a = "LATE-RULE" condition: $a }\n')
    c.changes = [(15, "change1.json", {"dpi": {"rule_files": ["rules.yar", "rules2.yar"],
                                               "actions": [{"rule": "reset_by_config",
                                                            "action": "DPI_RESET"}]}})]
    # r3: the action comes from dpi.actions (the rule has no meta action).
    t = Tcp(c, eth_a, eth_b, lambda: IP(src="10.1.0.12", dst="10.2.0.81"),
            lambda: IP(src="10.2.0.81", dst="10.1.0.12"), 41003, 8080, "r3", side_c="A", side_s="B")
    t.handshake("r3: reset from dpi.actions")
    t.c("PA", "X dpi_reset r3", "r3: RESET-BY-CONFIG (rule 1, action from the config): RSTs "
        "both ways", data=b"xx RESET-BY-CONFIG xx")
    # a1: an alert-only rule: forwarded, its event carries tags and metadata.
    t = Tcp(c, eth_a, eth_b, lambda: IP(src="10.1.0.13", dst="10.2.0.82"),
            lambda: IP(src="10.2.0.82", dst="10.1.0.13"), 41004, 80, "a1", side_c="A", side_s="B")
    t.handshake("a1: alert with tags and metadata")
    t.c("PA", note="a1: WATCH-ME (rule 2): alert event, forwarded", data=b"hi WATCH-ME")
    t.s("PA", note="a1: answer forwarded", data=b"ok")
    # u1: reset on UDP: dropped, nothing sent.
    c.add(eth_a() / IP(src="10.1.0.20", dst="10.2.0.53") / UDP(sport=5000, dport=5353) /
          Raw(b"data KILL-SWITCH data"), "D dpi_drop u1 new",
          "u1: udp KILL-SWITCH: reset on UDP is a drop (no RST, no ICMP)")
    return c


# ---- DNS filtering ---------------------------------------------------------------------
# Answers the appliance makes are checked beyond the byte comparison by check_dns_answers.py
# (tshark decodes them; CI installs tshark): see each case's DNS_ANSWERS file.

def dns_q(name, qtype="A", ident=0x1000, rd=1):
    return raw(DNS(id=ident, rd=rd, qd=DNSQR(qname=name, qtype=qtype)))


def dns_resp(name, chain, ident, addr="192.0.2.10"):
    """A resolver answer for `name`: CNAME chain name -> chain[0] -> ... -> an A record."""
    rrs = []
    owner = name
    for t in chain:
        rrs.append(DNSRR(rrname=owner, type="CNAME", ttl=300, rdata=t))
        owner = t
    rrs.append(DNSRR(rrname=owner, type="A", ttl=300, rdata=addr))
    an = rrs[0]
    for r in rrs[1:]:
        an = an / r
    return raw(DNS(id=ident, qr=1, rd=1, ra=1, qd=DNSQR(qname=name, qtype="A"), an=an,
                   ancount=len(rrs)))


DNS_LISTS = {"lists": [
    {"name": "ads", "action": "DNS_NXDOMAIN", "format": "DNS_FORMAT_ADBLOCK",
     "names": ["||ads.example^", "@@||cdn.ads.example^"]},
    {"name": "trackers", "action": "DNS_NODATA", "names": ["tracker.example"]},
    {"name": "sinkhole", "action": "DNS_SINKHOLE", "format": "DNS_FORMAT_WILDCARD",
     "names": ["*.malware.example"], "sinkhole_v4": ["192.0.2.66"],
     "sinkhole_v6": ["2001:db8::66"], "ttl": 120},
    {"name": "refused", "action": "DNS_REFUSE", "names": ["refused.example"]},
    {"name": "dropped", "action": "DNS_DROP", "format": "DNS_FORMAT_RPZ",
     "names": ["drop.example CNAME rpz-drop."]},
    {"name": "allow", "action": "DNS_ALLOW", "names": ["good.malware.example"]},
], "extra_ports": [5353]}


def udp_dns(c, side, src, dst, sport, dport, msg, exp, note):
    eth = eth_a if side == "A" else eth_b
    ip = IPv6 if ":" in src else IP
    c.add(eth() / ip(src=src, dst=dst) / UDP(sport=sport, dport=dport) / Raw(msg), exp, note,
          side=side)


def case_dns_udp_actions():
    c = FwCase("dns_udp_actions", {"dns": DNS_LISTS}, """
DNS filtering over UDP (clients on side A, resolver 10.2.0.53 / 2001:db8:b::53 on side B).
Lists: 0 ads NXDOMAIN (||ads.example^, allow @@||cdn.ads.example^), 1 trackers NODATA
(tracker.example, exact), 2 sinkhole (*.malware.example -> 192.0.2.66 / 2001:db8::66, ttl
120), 3 refused REFUSED (refused.example), 4 dropped (RPZ rpz-drop.), 5 allow
(good.malware.example); extra port 5353. A blocked query is dropped (reason dns_answered /
dns_dropped) and answered back out of side A with the query's ID and question (see
DNS_ANSWERS, checked with tshark); clean and allowed queries are forwarded.""")
    a4, r4 = "10.1.0.10", "10.2.0.53"
    udp_dns(c, "A", a4, r4, 40001, 53, dns_q("www.ads.example", ident=0x0101),
            "D dns_answered q1 new", "q1: www.ads.example A -> NXDOMAIN (subtree of ||ads.example^)")
    udp_dns(c, "A", a4, r4, 40002, 53, dns_q("WWW.ADS.Example.", ident=0x0102),
            "D dns_answered q2 new", "q2: upper case -> NXDOMAIN, question echoed in its case")
    udp_dns(c, "A", a4, r4, 40003, 53, dns_q("img.cdn.ads.example", ident=0x0103),
            "F q3 new", "q3: @@||cdn.ads.example^ allow entry wins: forwarded")
    udp_dns(c, "A", a4, r4, 40004, 53, dns_q("tracker.example", "AAAA", ident=0x0104),
            "D dns_answered q4 new", "q4: tracker.example AAAA -> NODATA")
    udp_dns(c, "A", a4, r4, 40005, 53, dns_q("sub.tracker.example", ident=0x0105),
            "F q5 new", "q5: sub.tracker.example: the trackers entry is exact: forwarded")
    udp_dns(c, "A", a4, r4, 40006, 53, dns_q("x.malware.example", ident=0x0106),
            "D dns_answered q6 new", "q6: x.malware.example A -> sinkhole 192.0.2.66 ttl 120")
    udp_dns(c, "A", "2001:db8:a::10", "2001:db8:b::53", 40007, 53,
            dns_q("y.malware.example", "AAAA", ident=0x0107),
            "D dns_answered q7 new", "q7: IPv6, AAAA -> sinkhole 2001:db8::66")
    udp_dns(c, "A", a4, r4, 40008, 53, dns_q("malware.example", ident=0x0108),
            "F q8 new", "q8: malware.example itself is not under *.malware.example: forwarded")
    udp_dns(c, "A", a4, r4, 40009, 53, dns_q("good.malware.example", ident=0x0109),
            "F q9 new", "q9: allow list wins over *.malware.example: forwarded")
    udp_dns(c, "A", a4, r4, 40010, 53, dns_q("refused.example", "MX", ident=0x010a),
            "D dns_answered q10 new", "q10: refused.example MX -> REFUSED")
    udp_dns(c, "A", a4, r4, 40011, 53, dns_q("drop.example", ident=0x010b),
            "D dns_dropped q11 new", "q11: drop.example (rpz-drop.) -> dropped, no answer")
    udp_dns(c, "A", a4, r4, 40012, 5353, dns_q("ads.example", ident=0x010c),
            "D dns_answered q12 new", "q12: to port 5353 (extra port) -> NXDOMAIN")
    udp_dns(c, "A", a4, r4, 40013, 5354, dns_q("ads.example", ident=0x010d),
            "F q13 new", "q13: to port 5354, not a DNS port: forwarded")
    udp_dns(c, "A", a4, r4, 40014, 53, dns_q("clean.example", ident=0x010e),
            "F q14 new", "q14: clean.example: forwarded")
    udp_dns(c, "B", r4, a4, 53, 40014, dns_resp("clean.example", [], 0x010e),
            "F q14", "q14: the resolver's answer (no CNAME): forwarded")
    loop = bytes.fromhex("0201 0100 0001 0000 0000 0000 c00c 0001 0001".replace(" ", ""))
    udp_dns(c, "A", a4, r4, 40015, 53, loop,
            "F q15 new", "q15: malformed (self pointer): counted, forwarded (default policy)")
    notify = raw(DNS(id=0x0202, opcode=4, qd=DNSQR(qname="ads.example", qtype="SOA")))
    udp_dns(c, "A", a4, r4, 40016, 53, notify,
            "F q16 new", "q16: NOTIFY (opcode 4) is not a standard query: counted nonstandard, forwarded uninspected (dns.nonstandard follows dns.malformed: FORWARD)")
    return c


def case_dns_cname_cloaking():
    c = FwCase("dns_cname_cloaking", {"dns": DNS_LISTS}, """
CNAME cloaking: the resolver's answers (side B) are inspected; a CNAME chain that reaches a
blocked name (here t.ads.example, under ||ads.example^) is dropped (dns_cloaked) and an
NXDOMAIN with the answer's ID and question goes on to the client out of side A in its
place. Chains of clean names, and chains through the allowed cdn.ads.example, pass.""")
    a4, r4 = "10.1.0.10", "10.2.0.53"
    udp_dns(c, "A", a4, r4, 41001, 53, dns_q("www.shop.example", ident=0x0301),
            "F c1 new", "c1: www.shop.example A: clean, forwarded")
    udp_dns(c, "B", r4, a4, 53, 41001,
            dns_resp("www.shop.example", ["shop.edge.example", "t.ads.example"], 0x0301),
            "D dns_cloaked c1", "c1: answer CNAME -> shop.edge.example -> t.ads.example: NXDOMAIN instead")
    udp_dns(c, "A", a4, r4, 41002, 53, dns_q("news.example", ident=0x0302),
            "F c2 new", "c2: news.example: forwarded")
    udp_dns(c, "B", r4, a4, 53, 41002, dns_resp("news.example", ["news.cdn.example"], 0x0302),
            "F c2", "c2: answer CNAME -> news.cdn.example (clean): forwarded")
    udp_dns(c, "A", a4, r4, 41003, 53, dns_q("img.example", ident=0x0303),
            "F c3 new", "c3: img.example: forwarded")
    udp_dns(c, "B", r4, a4, 53, 41003, dns_resp("img.example", ["x.cdn.ads.example"], 0x0303),
            "F c3", "c3: answer CNAME -> x.cdn.ads.example (allow entry wins): forwarded")
    return c


def case_dns_tcp():
    c = FwCase("dns_tcp", {"dns": DNS_LISTS}, """
DNS over TCP port 53 (2-byte length prefix). t1: a blocked query in one segment: dropped,
the client gets the NXDOMAIN answer in one segment (seq = the query's ACK, ack = its end,
PSH|ACK|FIN) out of side A, the server a RST out of side B; later packets of t1 are dropped
(dns_tcp_closed). t2: two clean queries in one segment, then a clean query split over three
segments, all forwarded with the server's answers; then a blocked query split in two: the
first part is forwarded, the second dropped and answered (and the server reset).
t3: CNAME cloaking over TCP: the server's answer to a clean query has a CNAME to a blocked name:
dropped, the client gets NXDOMAIN (with the SOA) in its place, the server a RST.
t4: the same for an answer split in two segments: the first reached the client, so the
client gets a RST instead of an answer.
t5: a 910-byte answer split over three segments whose CNAME chain reaches pixel.ads.example
(blocked) past byte 300: reassembled whole and read; the first two segments reached the
client, so the third is dropped, the client and the server get a RST.
t6: a clean 730-byte answer split over two segments: reassembled, read, forwarded whole (tshark
decodes it from the output, DNS_ANSWERS).""")
    a4, r4 = "10.1.0.10", "10.2.0.53"
    def framed(m):
        return struct.pack("!H", len(m)) + m
    t1 = Tcp(c, eth_a, eth_b, lambda: IP(src=a4, dst=r4), lambda: IP(src=r4, dst=a4),
             42001, 53, "t1", side_c="A", side_s="B")
    t1.handshake("to :53")
    t1.c("PA", "D dns_answered t1", "t1: query www.ads.example -> NXDOMAIN over TCP + RST to server",
         data=framed(dns_q("www.ads.example", ident=0x0401)))
    t1.c("A", "D dns_tcp_closed t1", "t1: the client's ACK after our FIN: connection closed by the appliance")
    t2 = Tcp(c, eth_a, eth_b, lambda: IP(src=a4, dst=r4), lambda: IP(src=r4, dst=a4),
             42002, 53, "t2", side_c="A", side_s="B")
    t2.handshake("to :53")
    two = framed(dns_q("one.example", ident=0x0501)) + framed(dns_q("two.example", ident=0x0502))
    t2.c("PA", "F t2", "t2: two clean queries in one segment", data=two)
    t2.s("A", "F t2", "t2: server ACK")
    three = framed(dns_q("three.example", ident=0x0503))
    t2.c("PA", "F t2", "t2: query three.example, first byte", data=three[:1])
    t2.c("PA", "F t2", "t2: bytes 1..9 (length and part of the header)", data=three[1:10])
    t2.c("PA", "F t2", "t2: the rest", data=three[10:])
    ans = framed(dns_resp("three.example", [], 0x0503))
    t2.s("PA", "F t2", "t2: server answer (not inspected over TCP)", data=ans)
    bad = framed(dns_q("z.ads.example", ident=0x0504))
    t2.c("PA", "F t2", "t2: blocked query z.ads.example, first 7 bytes", data=bad[:7])
    t2.c("PA", "D dns_answered t2", "t2: its rest: dropped, NXDOMAIN to the client, RST to the server",
         data=bad[7:])
    # CNAME cloaking over TCP: the resolver's answers are read too.
    t3 = Tcp(c, eth_a, eth_b, lambda: IP(src=a4, dst=r4), lambda: IP(src=r4, dst=a4),
             42003, 53, "t3", side_c="A", side_s="B")
    t3.handshake("to :53")
    t3.c("PA", "F t3", "t3: query www.shop.example (clean)", data=framed(dns_q("www.shop.example", ident=0x0601)))
    t3.s("PA", "D dns_cloaked t3",
         "t3: answer www.shop.example CNAME shop.ads.example (blocked): dropped, NXDOMAIN to the "
         "client in its place (same seq, FIN), RST to the server",
         data=framed(dns_resp("www.shop.example", ["shop.ads.example"], 0x0601)))
    t3.c("A", "D dns_tcp_closed t3", "t3: the client's ACK: connection closed by the appliance")
    t4 = Tcp(c, eth_a, eth_b, lambda: IP(src=a4, dst=r4), lambda: IP(src=r4, dst=a4),
             42004, 53, "t4", side_c="A", side_s="B")
    t4.handshake("to :53")
    t4.c("PA", "F t4", "t4: query img.example (clean)", data=framed(dns_q("img.example", ident=0x0602)))
    cl = framed(dns_resp("img.example", ["img.cdn.example", "x.ads.example"], 0x0602))
    t4.s("PA", "F t4", "t4: first 20 bytes of an answer (cannot be judged yet): forwarded", data=cl[:20])
    t4.s("PA", "D dns_cloaked t4",
         "t4: the rest: CNAME chain reaches x.ads.example; the client already has the start of "
         "the message, so it gets a RST (no answer), the server a RST", data=cl[20:])
    # Responses over 300 bytes split across segments: reassembled whole (per-flow buffer).
    chain5 = [f"edge-{k}-{'x' * 40}.cdn{k}.example" for k in range(1, 7)] + ["pixel.ads.example"]
    long5 = framed(dns_resp("news.example", chain5, 0x0603))
    assert len(long5) > 900 and long5.find(b"\x05pixel") > 302, len(long5)
    t5 = Tcp(c, eth_a, eth_b, lambda: IP(src=a4, dst=r4), lambda: IP(src=r4, dst=a4),
             42005, 53, "t5", side_c="A", side_s="B")
    t5.handshake("to :53")
    t5.c("PA", "F t5", "t5: query news.example (clean)", data=framed(dns_q("news.example", ident=0x0603)))
    t5.s("PA", "F t5", f"t5: answer ({len(long5)} bytes with its length), bytes 0..149: buffered, forwarded",
         data=long5[:150])
    t5.s("PA", "F t5", "t5: bytes 150..319 (the first 300 bytes hold no blocked name): forwarded",
         data=long5[150:320])
    t5.s("PA", "D dns_cloaked t5",
         "t5: the rest: the whole answer's CNAME chain reaches pixel.ads.example: dropped; the "
         "client has the start of the message, so it gets a RST, the server a RST",
         data=long5[320:])
    t5.c("A", "D dns_tcp_closed t5", "t5: the client's ACK: connection closed by the appliance")
    chain6 = [f"edge-{k}-{'y' * 40}.cdn{k}.example" for k in range(1, 6)]
    long6 = framed(dns_resp("video.example", chain6, 0x0604, addr="192.0.2.20"))
    assert len(long6) > 400, len(long6)
    t6 = Tcp(c, eth_a, eth_b, lambda: IP(src=a4, dst=r4), lambda: IP(src=r4, dst=a4),
             42006, 53, "t6", side_c="A", side_s="B")
    t6.handshake("to :53")
    t6.c("PA", "F t6", "t6: query video.example (clean)", data=framed(dns_q("video.example", ident=0x0604)))
    t6.s("PA", "F t6", "t6: clean answer, first 200 bytes", data=long6[:200])
    t6.s("PA", "F t6", f"t6: the rest ({len(long6) - 200} bytes): read whole, clean, forwarded",
         data=long6[200:])
    t6.c("A", "F t6", "t6: client ACK")
    return c



# ---- Evasion by IP fragments (issue 16): reassembled for inspection ---------------------

EVASION_RULES = r"""
rule frag_evil { meta: action = "drop" strings: $a = "EVIL-FRAGMENTED-PAYLOAD" condition: $a }
"""


def udp4_bytes(src, dst, sport, dport, data, ident):
    """An IPv4 UDP datagram (scapy IP, checksums right) carrying `data`."""
    return IP(raw(IP(src=src, dst=dst, id=ident, ttl=64) / UDP(sport=sport, dport=dport) /
                  Raw(data)))


def frag4_at(full, off, n, more, body=None):
    """The fragment of `full` (scapy IP) at payload offset `off`, n bytes (from `body`
    when given: other bytes at the same place)."""
    b = raw(full.payload) if body is None else body
    return frag4(full, off, more, b[off:off + n])


def frag6_at(src, dst, upper_body, ident, off, n, more):
    return (IPv6(src=src, dst=dst, nh=44) /
            IPv6ExtHdrFragment(nh=17, offset=off // 8, m=1 if more else 0, id=ident) /
            Raw(upper_body[off:off + n]))


def udp6_body(src, dst, sport, dport, data):
    return raw(IPv6(raw(IPv6(src=src, dst=dst) / UDP(sport=sport, dport=dport) / Raw(data))).payload)


def evasion_send(c, frags, order, blocked_reason, label, eth=None, side="A"):
    """Sends fragments `frags` (scapy IP/IPv6 packets) in `order` (indices). The fragment
    that arrives last completes the datagram: it carries the verdict of the reassembled
    datagram (blocked_reason, or forward) and creates the flow; the others were held and
    follow it."""
    eth = eth or eth_a
    for k, idx in enumerate(order):
        last = k == len(order) - 1
        if blocked_reason is None:
            exp = f"F {label} new" if last else f"F {label}"
        else:
            exp = (f"D {blocked_reason} {label} new" if last
                   else f"D fragment_datagram_dropped {label}")
        what = "completes the datagram" if last else "held until the datagram is complete"
        c.add(eth() / frags[idx], exp, f"{label}: fragment {idx + 1}/{len(frags)}, {what}",
              side=side)


def case_evasion_fragments():
    c = FwCase("evasion_fragments", {"dns": DNS_LISTS, "dpi": {"rule_files": ["rules.yar"]}}, """
Evasion by IP fragments (issue 16). DNS lists of dns_udp_actions (www.ads.example ->
NXDOMAIN) and a DPI drop rule frag_evil ("EVIL-FRAGMENTED-PAYLOAD", UDP). With DNS / DPI
configured every fragmented datagram is reassembled for inspection: its fragments are held
until it is complete, the reassembled datagram is judged, and every fragment gets the
verdict (the one completing the datagram carries it and creates the flow; the held ones
follow: fragment_datagram_dropped when blocked). Blocked queries are answered once, from
the reassembled query (DNS_ANSWERS). Each technique once for a blocked and once for a clean
datagram, IPv4 and IPv6: in order, out of order, tiny 8-byte fragments, overlap with
different data (the whole datagram dropped: fragment_overlap_conflict), identical overlap
(accepted), IPv6 atomic fragment (judged alone), a fragmented resolver answer whose CNAME
reaches a blocked name (cloaking).""")
    os.makedirs(os.path.join(HERE, "evasion_fragments"), exist_ok=True)
    with open(os.path.join(HERE, "evasion_fragments", "rules.yar"), "w") as f:
        f.write(EVASION_RULES.lstrip())
    a4, r4, s4 = "10.1.0.10", "10.2.0.53", "10.2.0.80"
    a6, r6, s6 = "2001:db8:a::10", "2001:db8:b::53", "2001:db8:b::80"
    bad_q = lambda i: dns_q("www.ads.example", ident=i)
    ok_q = lambda i: dns_q("www.abc.example", ident=i)   # same length, other name
    evil = b"hello " * 4 + b"EVIL-FRAGMENTED-PAYLOAD" + b" bye" * 6
    good = b"hello " * 4 + b"GOOD-FRAGMENTED-PAYLOAD" + b" bye" * 6
    port = [41000]

    def nport():
        port[0] += 1
        return port[0]

    def v4(data, dport, ident, sizes, order, reason, label):
        full = udp4_bytes(a4, r4 if dport == 53 else s4, nport(), dport, data, ident)
        frags = [f for _, _, f in ipv4_fragments(full, sizes)]
        evasion_send(c, frags, order or list(range(len(frags))), reason, label)

    def v6(data, dport, ident, sizes, order, reason, label):
        frags = ipv6_fragments(a6, r6 if dport == 53 else s6,
                               UDP(sport=nport(), dport=dport) / Raw(data), ident, sizes)
        evasion_send(c, frags, order or list(range(len(frags))), reason, label)

    # In order, out of order, tiny: DNS then DPI, blocked then clean, IPv4 then IPv6.
    for fam, fn in (("v4", v4), ("v6", v6)):
        n = 0x10 if fam == "v4" else 0x20
        fn(bad_q(n + 1), 53, 0x100 + n + 1, [16, 16], None, "dns_answered", f"{fam}_dns_inorder")
        fn(ok_q(n + 2), 53, 0x100 + n + 2, [16, 16], None, None, f"{fam}_dns_inorder_ok")
        fn(bad_q(n + 3), 53, 0x100 + n + 3, [16, 16], [2, 0, 1], "dns_answered", f"{fam}_dns_ooo")
        fn(ok_q(n + 4), 53, 0x100 + n + 4, [16, 16], [2, 1, 0], None, f"{fam}_dns_ooo_ok")
        fn(bad_q(n + 5), 53, 0x100 + n + 5, [8] * 5, [5, 3, 1, 0, 2, 4], "dns_answered",
           f"{fam}_dns_tiny")
        fn(ok_q(n + 6), 53, 0x100 + n + 6, [8] * 5, None, None, f"{fam}_dns_tiny_ok")
        fn(evil, 9000, 0x100 + n + 7, [24, 24], None, "dpi_drop", f"{fam}_dpi_inorder")
        fn(good, 9000, 0x100 + n + 8, [24, 24], None, None, f"{fam}_dpi_inorder_ok")
        fn(evil, 9000, 0x100 + n + 9, [24, 24], [1, 2, 0], "dpi_drop", f"{fam}_dpi_ooo")
        fn(good, 9000, 0x100 + n + 10, [24, 24], [2, 0, 1], None, f"{fam}_dpi_ooo_ok")
        fn(evil, 9000, 0x100 + n + 11, [8] * 7, [7, 6, 5, 4, 3, 2, 1, 0], "dpi_drop",
           f"{fam}_dpi_tiny")
        fn(good, 9000, 0x100 + n + 12, [8] * 7, None, None, f"{fam}_dpi_tiny_ok")

    # Overlap with different data: the clean copy first, then the blocked bytes over it
    # (a host keeping the last copy would read the blocked name): the whole datagram is
    # dropped. UDP checksum 0 (IPv4) so both versions have the same header.
    def overlap4(clean, bad, dport, ident, label, identical=False):
        sp = nport()
        dst = r4 if dport == 53 else s4
        ip = lambda d: IP(raw(IP(src=a4, dst=dst, id=ident, ttl=64) /
                             UDP(sport=sp, dport=dport, chksum=0) / Raw(d)))
        full = ip(clean)
        other = raw(ip(bad).payload)
        body = raw(full.payload)
        # The names differ at UDP bytes 25-27, the DPI payloads at 32-54.
        split = 32 if dport == 53 else 56
        f0 = frag4(full, 0, True, body[0:split])
        over = frag4(full, 24, True, other[24:split])
        f1 = frag4(full, split, False, body[split:])
        if identical:
            dup = frag4(full, 24, True, body[24:split])
            c.add(eth_a() / f0, f"F {label}", f"{label}: fragment 1/2 (bytes 0-{split - 1}), held")
            c.add(eth_a() / dup, f"F {label}",
                  f"{label}: bytes 24-{split - 1} again, identical: accepted, held")
            c.add(eth_a() / f1, f"F {label} new", f"{label}: last fragment completes it: forwarded")
            return
        c.add(eth_a() / f0, "D fragment_datagram_dropped",
              f"{label}: fragment 1/2 (clean bytes 0-{split - 1}), held, dropped with its datagram")
        c.add(eth_a() / over, "D fragment_overlap_conflict",
              f"{label}: bytes 24-{split - 1} again with the blocked bytes: the datagram is dropped")
        c.add(eth_a() / f1, "D fragment_datagram_dropped",
              f"{label}: last fragment of the dropped datagram")

    overlap4(ok_q(0x31), bad_q(0x31), 53, 0x131, "v4_dns_overlap")
    overlap4(good, evil, 9000, 0x132, "v4_dpi_overlap")
    overlap4(ok_q(0x33), ok_q(0x33), 53, 0x133, "v4_dns_overlap_same", identical=True)

    def overlap6(clean, bad, dport, ident, label):
        sp = nport()
        dst = r6 if dport == 53 else s6
        body = udp6_body(a6, dst, sp, dport, clean)
        other = udp6_body(a6, dst, sp, dport, bad)
        split = 32 if dport == 53 else 56
        f0 = frag6_at(a6, dst, body, ident, 0, split, True)
        over = frag6_at(a6, dst, other, ident, 24, split - 24, True)
        f1 = frag6_at(a6, dst, body, ident, split, len(body) - split, False)
        c.add(eth_a() / f0, "D fragment_datagram_dropped",
              f"{label}: fragment 1/2 (clean bytes 0-{split - 1}), held, dropped with its datagram")
        c.add(eth_a() / over, "D fragment_overlap_conflict",
              f"{label}: bytes 24-{split - 1} again with the blocked bytes: the datagram is dropped")
        c.add(eth_a() / f1, "D fragment_datagram_dropped",
              f"{label}: last fragment of the dropped datagram")

    overlap6(ok_q(0x41), bad_q(0x41), 53, 0x141, "v6_dns_overlap")
    overlap6(good, evil, 9000, 0x142, "v6_dpi_overlap")

    # IPv6 atomic fragments (offset 0, M clear): a whole datagram, judged alone.
    for data, dport, exp, label in ((bad_q(0x51), 53, "D dns_answered v6_atomic_dns new",
                                     "v6_atomic_dns"),
                                    (ok_q(0x52), 53, "F v6_atomic_dns_ok new", "v6_atomic_dns_ok"),
                                    (evil, 9000, "D dpi_drop v6_atomic_dpi new", "v6_atomic_dpi")):
        sp = nport()
        dst = r6 if dport == 53 else s6
        body = udp6_body(a6, dst, sp, dport, data)
        c.add(eth_a() / IPv6(src=a6, dst=dst, nh=44) /
              IPv6ExtHdrFragment(nh=17, offset=0, m=0, id=0x5000 + sp) / Raw(body), exp,
              f"{label}: IPv6 atomic fragment")

    # A fragmented resolver answer whose CNAME chain reaches a blocked name: dropped,
    # NXDOMAIN onward to the client in its place (cloaking), built from the reassembled answer.
    q = dns_q("news.example", ident=0x61)
    sp = nport()
    c.add(eth_a() / IP(src=a4, dst=r4) / UDP(sport=sp, dport=53) / Raw(q), "F v4_cloak new",
          "v4_cloak: clean query news.example: forwarded")
    resp = dns_resp("news.example", ["x.ads.example"], 0x61)
    full = udp4_bytes(r4, a4, 53, sp, resp, 0x161)
    frags = [f for _, _, f in ipv4_fragments(full, [32])]
    c.add(eth_b() / frags[1], "D fragment_datagram_dropped v4_cloak",
          "v4_cloak: answer, last fragment first: held", side="B")
    c.add(eth_b() / frags[0], "D dns_cloaked v4_cloak",
          "v4_cloak: answer's first fragment completes it: CNAME x.ads.example is blocked: "
          "NXDOMAIN to the client", side="B")
    return c

# --- tcp stream --- Evasion: the same blocked things delivered by TCP tricks. The stream engine
# (dataplane/normalize/tcp_stream.h) hands DNS and DPI each byte once, in sequence order, as
# the receiver accepts it; what it refuses is dropped (tcp_* reasons, stage flow).

def tcp_at(t, from_client, flags, seq, data=b"", exp=None, note="", bad_csum=False, ack=None):
    """One segment of connection `t` at sequence number `seq` (the connection's counters are
    left alone); bad_csum: a wrong TCP checksum."""
    keep = (t.cseq, t.sseq)
    if from_client:
        t.cseq = seq
    else:
        t.sseq = seq
    p = t.seg(from_client, flags, data)
    t.cseq, t.sseq = keep
    if ack is not None:
        p[TCP].ack = ack % 2**32
    if bad_csum:
        p = p.__class__(raw(p))
        good = p[TCP].chksum
        p[TCP].chksum = (good + 0x1111) & 0xffff
    t.case.add(p, exp or f"F {t.flow}", note, side=t.side_c if from_client else t.side_s)


def case_evasion_tcp_dns():
    c = FwCase("evasion_tcp_dns", {"dns": DNS_LISTS}, """
DNS over TCP against the stream tricks of issue 16. Blocked: www.ads.example (ads list,
NXDOMAIN); clean: www.abc.example (same length) and news.example. Every blocked query must be
answered (dns_answered: NXDOMAIN to the client, RST to the server), every clean byte forwarded
unchanged. o1/o2: a query in two segments, second first: the early segment is forwarded and
kept (the server cannot read past the hole), inspected with the segment that fills the hole:
the blocked query is answered there.
v1: overlap with different data: the clean query, then the blocked one at the same sequence
numbers: dropped (tcp_overlap_different; the receiver keeps the first copy). r1: repacketized
retransmission: the clean query again plus a blocked query after it in one segment: the new
bytes are inspected. c1: bad-checksum decoy: a clean query with a wrong TCP checksum (dropped,
tcp_bad_checksum: the server would discard it), then the blocked query at the same sequence
number. c2: the decoy followed by the clean query: forwarded. b1/b2: 1-byte segments. s1/s2:
query on the SYN (TCP Fast Open): s1 blocked: the client gets a SYN-ACK and the answer from the
appliance; s2 clean: forwarded. w1/w2: queries across the sequence-number wrap. p1: pipelined:
the server answered a first query; the second (blocked) query still acknowledges only the
server's SYN: the answer continues after the server's first answer (seq = server's next byte).
x1: IPv6, blocked query out of order.""")
    a4, r4 = "10.1.0.10", "10.2.0.53"

    def framed(m):
        return struct.pack("!H", len(m)) + m

    blocked = framed(dns_q("www.ads.example", ident=0x0701))
    clean = framed(dns_q("www.abc.example", ident=0x0702))
    assert len(blocked) == len(clean)

    def conn(port, flow, cseq=1000, v6=False):
        if v6:
            ipc = lambda: IPv6(src="2001:db8:1::10", dst="2001:db8:2::53")
            ips = lambda: IPv6(src="2001:db8:2::53", dst="2001:db8:1::10")
        else:
            ipc = lambda: IP(src=a4, dst=r4)
            ips = lambda: IP(src=r4, dst=a4)
        return Tcp(c, eth_a, eth_b, ipc, ips, port, 53, flow, cseq=cseq, side_c="A", side_s="B")

    # o1: blocked query, out of order.
    t = conn(43001, "o1")
    t.handshake("to :53")
    base = t.cseq
    tcp_at(t, True, "PA", base + 9, blocked[9:], None,
           "o1: second part first (beyond a hole): forwarded, kept")
    tcp_at(t, True, "PA", base, blocked[:9], "D dns_answered o1",
           "o1: first part fills the hole: with the kept part, www.ads.example: answered")
    tcp_at(t, True, "PA", base + 9, blocked[9:], "D dns_tcp_closed o1",
           "o1: second part retransmitted: the connection is closed")
    # o2: clean query, out of order.
    t = conn(43002, "o2")
    t.handshake("to :53")
    base = t.cseq
    tcp_at(t, True, "PA", base + 9, clean[9:], None, "o2: second part first: forwarded, kept")
    tcp_at(t, True, "PA", base, clean[:9], None, "o2: first part fills the hole: forwarded")
    tcp_at(t, True, "PA", base + 9, clean[9:], None, "o2: second part retransmitted: forwarded")
    t.cseq = base + len(clean)
    t.s("PA", "F o2", "o2: server answer", data=framed(dns_resp("www.abc.example", [], 0x0702)))
    # v1: overlap with different data.
    t = conn(43003, "v1")
    t.handshake("to :53")
    base = t.cseq
    tcp_at(t, True, "PA", base, clean, None, "v1: clean query: forwarded")
    tcp_at(t, True, "PA", base, blocked, "D tcp_overlap_different v1",
           "v1: blocked query at the same sequence numbers: dropped (first copy wins)")
    tcp_at(t, True, "PA", base, clean, None, "v1: the clean query retransmitted: forwarded")
    # r1: repacketized retransmission.
    t = conn(43004, "r1")
    t.handshake("to :53")
    base = t.cseq
    tcp_at(t, True, "PA", base, clean, None, "r1: clean query: forwarded")
    tcp_at(t, True, "PA", base, clean + blocked, "D dns_answered r1",
           "r1: the clean query again + a blocked query: the new bytes are read: answered")
    # c1 / c2: bad-checksum decoys.
    t = conn(43005, "c1")
    t.handshake("to :53")
    base = t.cseq
    tcp_at(t, True, "PA", base, clean, "D tcp_bad_checksum c1",
           "c1: clean query, bad TCP checksum: dropped", bad_csum=True)
    tcp_at(t, True, "PA", base, blocked, "D dns_answered c1",
           "c1: blocked query at the same sequence number: answered")
    t = conn(43006, "c2")
    t.handshake("to :53")
    base = t.cseq
    tcp_at(t, True, "PA", base, blocked, "D tcp_bad_checksum c2",
           "c2: blocked query, bad TCP checksum: dropped", bad_csum=True)
    tcp_at(t, True, "PA", base, clean, None, "c2: clean query at the same sequence number: forwarded")
    # b1 / b2: 1-byte segments.
    for flow, port, q, last in (("b1", 43007, blocked, "D dns_answered b1"), ("b2", 43008, clean, None)):
        t = conn(port, flow)
        t.handshake("to :53")
        for k in range(len(q)):
            t.c("PA", last if k == len(q) - 1 else None, f"{flow}: byte {k}", data=q[k:k + 1])
    # s1 / s2: data on SYN (TCP Fast Open).
    t = conn(43009, "s1")
    t.c("S", "D dns_answered s1 new",
        "s1: SYN carrying the blocked query: answered (SYN-ACK + NXDOMAIN from the appliance)",
        data=blocked)
    t = conn(43010, "s2")
    t.c("S", "F s2 new", "s2: SYN carrying the clean query: forwarded", data=clean)
    t.s("SA", "F s2", "s2: SYN-ACK acknowledging the data")
    t.c("A", "F s2", "s2: ACK")
    # w1 / w2: across the sequence-number wrap.
    t = conn(43011, "w1", cseq=2**32 - 10)
    t.handshake("to :53 (ISN 2^32-10)")
    t.c("PA", None, "w1: first 12 bytes (up to the wrap and past it)", data=blocked[:12])
    t.c("PA", "D dns_answered w1", "w1: the rest: answered", data=blocked[12:])
    t = conn(43012, "w2", cseq=2**32 - 10)
    t.handshake("to :53 (ISN 2^32-10)")
    t.c("PA", None, "w2: clean query, first 12 bytes", data=clean[:12])
    t.c("PA", None, "w2: the rest", data=clean[12:])
    # p1: pipelined: the answer to the second query continues after the server's first answer.
    t = conn(43013, "p1")
    t.handshake("to :53")
    syn_ack_next = t.sseq
    t.c("PA", None, "p1: first query news.example", data=framed(dns_q("news.example", ident=0x0703)))
    t.s("PA", None, "p1: server answer", data=framed(dns_resp("news.example", [], 0x0703)))
    tcp_at(t, True, "PA", t.cseq, blocked, "D dns_answered p1",
           "p1: second query (blocked), ACK still the server's ISN+1: answered at the server's next seq",
           ack=syn_ack_next)
    # x1: IPv6, out of order.
    t = conn(43014, "x1", v6=True)
    t.handshake("to :53 (IPv6)")
    base = t.cseq
    tcp_at(t, True, "PA", base + 5, blocked[5:], None, "x1: second part first: forwarded, kept")
    tcp_at(t, True, "PA", base, blocked[:5], "D dns_answered x1", "x1: first part fills the hole: answered")
    tcp_at(t, True, "PA", base + 5, blocked[5:], "D dns_tcp_closed x1", "x1: retransmitted: closed")
    return c


EVASION_DPI_RULES = r"""
rule split_drop { meta: action = "drop" strings: $a = "EVIL-PAYLOAD-SPLIT" condition: $a }
"""


def case_evasion_tcp_dpi():
    c = FwCase("evasion_tcp_dpi", {"dpi": {"rule_files": ["rules.yar"]}}, """
DPI against the stream tricks of issue 16. rules.yar: 0 split_drop ("EVIL-PAYLOAD-SPLIT",
action drop). Every delivery of the payload must be dropped (dpi_drop, the flow blocked
after it), every clean byte forwarded unchanged. d1: the payload in two segments, second first
(forwarded, kept beyond the hole): the first half fills the hole and is dropped (the match is
in it with the kept bytes), the retransmitted second half with the blocked flow. d2: overlap with
different data: 18 harmless bytes, then the payload at the same sequence numbers
(tcp_overlap_different). d3: repacketized retransmission: harmless bytes, then the same bytes
followed by the payload in one segment: the new bytes are scanned. d4: bad-checksum decoy
(harmless bytes with a wrong TCP checksum: tcp_bad_checksum), then the payload at the same
sequence number. d5: the payload in 1-byte segments. d6: the payload on a SYN (TCP Fast Open).
d7: the payload across the sequence-number wrap. Clean flows k1..k4: the same deliveries of
"HARMLESS-PAYLOAD-XY": forwarded. k5: an identical retransmission: forwarded.""")
    os.makedirs(os.path.join(HERE, "evasion_tcp_dpi"), exist_ok=True)
    with open(os.path.join(HERE, "evasion_tcp_dpi", "rules.yar"), "w") as f:
        f.write(EVASION_DPI_RULES.lstrip())
    evil = b"EVIL-PAYLOAD-SPLIT"
    good = b"HARMLESS-PAYLOAD-X"
    assert len(evil) == len(good)

    def conn(n, flow, cseq=1000):
        ipc = lambda: IP(src=f"10.1.0.{n}", dst="10.2.0.80")
        ips = lambda: IP(src="10.2.0.80", dst=f"10.1.0.{n}")
        return Tcp(c, eth_a, eth_b, ipc, ips, 41000 + n, 80, flow, cseq=cseq, side_c="A", side_s="B")

    for flow, n, data, done in (("d1", 1, evil, "D dpi_drop d1"), ("k1", 11, good, None)):
        t = conn(n, flow)
        t.handshake("out of order")
        base = t.cseq
        tcp_at(t, True, "PA", base + 9, data[9:], None, f"{flow}: second half first: forwarded, kept")
        tcp_at(t, True, "PA", base, data[:9], done, f"{flow}: first half fills the hole")
        tcp_at(t, True, "PA", base + 9, data[9:], done, f"{flow}: second half retransmitted")
    t = conn(2, "d2")
    t.handshake("overlap with different data")
    base = t.cseq
    tcp_at(t, True, "PA", base, good, None, "d2: harmless bytes: forwarded")
    tcp_at(t, True, "PA", base, evil, "D tcp_overlap_different d2", "d2: the payload over them: dropped")
    for flow, n, data, done in (("d3", 3, evil, "D dpi_drop d3"), ("k3", 13, good, None)):
        t = conn(n, flow)
        t.handshake("repacketized retransmission")
        base = t.cseq
        tcp_at(t, True, "PA", base, b"harmless-", None, f"{flow}: 9 harmless bytes")
        tcp_at(t, True, "PA", base, b"harmless-" + data, done, f"{flow}: the same 9 bytes + the payload")
    t = conn(4, "d4")
    t.handshake("bad checksum decoy")
    base = t.cseq
    tcp_at(t, True, "PA", base, good, "D tcp_bad_checksum d4", "d4: harmless bytes, bad checksum: dropped",
           bad_csum=True)
    tcp_at(t, True, "PA", base, evil, "D dpi_drop d4", "d4: the payload at the same sequence number")
    for flow, n, data, done in (("d5", 5, evil, "D dpi_drop d5"), ("k5b", 15, good, None)):
        t = conn(n, flow)
        t.handshake("1-byte segments")
        for k in range(len(data)):
            t.c("PA", done if k == len(data) - 1 else None, f"{flow}: byte {k}", data=data[k:k + 1])
    t = conn(6, "d6")
    t.c("S", "D dpi_drop d6 new", "d6: SYN carrying the payload: dropped", data=evil)
    t = conn(16, "k6")
    t.c("S", "F k6 new", "k6: SYN carrying harmless bytes: forwarded", data=good)
    t.s("SA", "F k6", "k6: SYN-ACK")
    t.c("A", "F k6", "k6: ACK")
    for flow, n, data, done in (("d7", 7, evil, "D dpi_drop d7"), ("k7", 17, good, None)):
        t = conn(n, flow, cseq=2**32 - 6)
        t.handshake("across the wrap (ISN 2^32-6)")
        t.c("PA", None, f"{flow}: first 10 bytes (past the wrap)", data=data[:10])
        t.c("PA", done, f"{flow}: the rest", data=data[10:])
    t = conn(18, "k8")
    t.handshake("identical retransmission")
    base = t.cseq
    tcp_at(t, True, "PA", base, good, None, "k8: harmless bytes")
    tcp_at(t, True, "PA", base, good, None, "k8: the same bytes again: forwarded (nothing new)")
    return c


def case_evasion_tcp_retransmit_after_drop():
    cfg = {"dns": dict(DNS_LISTS, nonstandard="DROP"), "dpi": {"rule_files": ["rules.yar"]}}
    c = FwCase("evasion_tcp_retransmit_after_drop", cfg, """
Issue 16 ("no bypass"): the stream engine takes a segment's bytes before DNS and DPI judge
them, so bytes a stage dropped count as inspected for it; their retransmission (what the
sender's stack does: the receiver never got them) is an identical overlap. It must never
reach the server: every DNS or DPI drop ends the connection for the stages. DNS with the
lists of dns_udp_actions and dns.nonstandard DROP; rules.yar: 0 split_drop
("EVIL-PAYLOAD-SPLIT", drop). q1: blocked query (answered, RST to the server), then its exact
retransmission, then a repacketized one (the query + a clean query): dns_tcp_closed. q2: a
nonstandard query (opcode STATUS: dns_nonstandard), then its retransmission: dns_tcp_closed.
d1: the DPI payload (dpi_drop), its exact retransmission, a repacketized one with more bytes,
and a segment holding its tail only: dpi_drop (the flow is blocked). k1 / k2: clean DNS query
and clean DPI bytes with identical retransmissions: forwarded (nothing new to read).""")
    os.makedirs(os.path.join(HERE, c.name), exist_ok=True)
    with open(os.path.join(HERE, c.name, "rules.yar"), "w") as f:
        f.write(EVASION_DPI_RULES.lstrip())

    def framed(m):
        return struct.pack("!H", len(m)) + m

    blocked = framed(dns_q("www.ads.example", ident=0x0801))
    clean = framed(dns_q("www.abc.example", ident=0x0802))
    status = bytearray(dns_q("www.abc.example", ident=0x0803))
    status[2] = (status[2] & 0x87) | (2 << 3)  # opcode 2 (STATUS)
    status = framed(bytes(status))
    evil = b"xx EVIL-PAYLOAD-SPLIT xx"
    good = b"xx HARMLESS-PAYLOAD-X xx"

    def conn(n, flow, dport):
        ipc = lambda: IP(src=f"10.1.1.{n}", dst="10.2.1.53")
        ips = lambda: IP(src="10.2.1.53", dst=f"10.1.1.{n}")
        return Tcp(c, eth_a, eth_b, ipc, ips, 42000 + n, dport, flow, cseq=1000, side_c="A", side_s="B")

    t = conn(1, "q1", 53)
    t.handshake("to :53")
    base = t.cseq
    tcp_at(t, True, "PA", base, blocked, "D dns_answered q1", "q1: blocked query: answered")
    tcp_at(t, True, "PA", base, blocked, "D dns_tcp_closed q1",
           "q1: the same query retransmitted: dropped (connection closed), never forwarded")
    tcp_at(t, True, "PA", base, blocked + clean, "D dns_tcp_closed q1",
           "q1: repacketized: the query + a clean one: dropped")
    t = conn(2, "q2", 53)
    t.handshake("to :53")
    base = t.cseq
    tcp_at(t, True, "PA", base, status, "D dns_nonstandard q2", "q2: opcode STATUS, nonstandard DROP")
    tcp_at(t, True, "PA", base, status, "D dns_tcp_closed q2", "q2: retransmitted: dropped")
    t = conn(3, "d1", 80)
    t.handshake("to :80")
    base = t.cseq
    tcp_at(t, True, "PA", base, evil, "D dpi_drop d1", "d1: the DPI payload: dropped")
    tcp_at(t, True, "PA", base, evil, "D dpi_drop d1", "d1: retransmitted: dropped (flow blocked)")
    tcp_at(t, True, "PA", base, evil + b"more", "D dpi_drop d1", "d1: repacketized with more bytes: dropped")
    tcp_at(t, True, "PA", base + 10, evil[10:], "D dpi_drop d1", "d1: its tail only: dropped")
    t = conn(4, "k1", 53)
    t.handshake("to :53")
    base = t.cseq
    tcp_at(t, True, "PA", base, clean, None, "k1: clean query: forwarded")
    tcp_at(t, True, "PA", base, clean, None, "k1: retransmitted: forwarded")
    t = conn(5, "k2", 80)
    t.handshake("to :80")
    base = t.cseq
    tcp_at(t, True, "PA", base, good, None, "k2: clean bytes: forwarded")
    tcp_at(t, True, "PA", base, good, None, "k2: retransmitted: forwarded")
    return c


# ---- PPPoE sessions ----------------------------------------------------------------------

PPPOE_DPI_RULES = r"""
rule split_drop { meta: action = "drop" strings: $a = "EVIL-PAYLOAD-SPLIT" condition: $a }
rule udp_alert { strings: $a = "UDP-BAD" condition: $a }
"""


def pppoe_l2(mac_src, mac_dst, session, v6=False):
    """Ethernet + PPPoE session header + PPP protocol (scapy computes the PPPoE length)."""
    return Ether(src=mac_src, dst=mac_dst) / PPPoE(sessionid=session) / PPP(proto=0x57 if v6 else 0x21)


def pppoe_raw(mac_src, mac_dst, session, ip_bytes, proto_bytes=b"\x00\x21", length=None):
    """A PPPoE session frame built byte by byte (compressed protocol field, lying lengths)."""
    ppp = proto_bytes + ip_bytes
    return raw(Ether(src=mac_src, dst=mac_dst, type=0x8864)) + struct.pack(
        ">BBHH", 0x11, 0, session, len(ppp) if length is None else length) + ppp


def case_pppoe_sessions():
    rules = [
        {"id": "rej-smtp", "priority": 5, "action": "REJECT", "protocols": ["tcp"],
         "dst_ports": ["25"]},
        {"id": "rej-snmp", "priority": 5, "action": "REJECT", "protocols": ["udp"],
         "dst_ports": ["161"]},
        {"id": "allow-web", "priority": 10, "action": "ALLOW", "protocols": ["tcp"],
         "dst": ["10.2.0.0/16", "2001:db8:b::/64"], "dst_ports": ["80"]},
        {"id": "allow-dns", "priority": 10, "action": "ALLOW", "protocols": ["udp"],
         "dst_ports": ["53"]},
    ]
    c = FwCase("pppoe_sessions", {
        "firewall": {"default_a_to_b": "DENY", "default_b_to_a": "DENY", "rules": rules},
        "dns": DNS_LISTS,
        "dpi": {"rule_files": ["rules.yar"]}}, """
IPv4 and IPv6 inside PPPoE sessions (RFC 2516, ethertype 0x8864, PPP protocol 0x0021 /
0x0057) are judged by every stage exactly as without PPPoE, and forwarded unchanged when they
pass; answers the appliance makes go back inside the same session with a PPPoE length that
fits them. PPPoE discovery (0x8863) and PPP control protocols (LCP, IPCP, PAP) are non-IP:
forwarded without a flow under the default dataplane.non_ip FORWARD, whatever the firewall
says (replay and validate warn about that combination). Subscribers on side A (sessions 0x11
and 0x22), the access concentrator and servers on side B. Firewall: defaults DENY both ways;
rules 0 rej-smtp REJECT tcp :25, 1 rej-snmp REJECT udp :161, 2 allow-web tcp to 10.2.0.0/16 and
2001:db8:b::/64 :80, 3 allow-dns udp :53. DNS lists as in dns_udp_actions (0 ads NXDOMAIN,
2 sinkhole *.malware.example). DPI (rules.yar): 0 split_drop (drop, "EVIL-PAYLOAD-SPLIT"),
1 udp_alert ("UDP-BAD", alert). The PPPoE session id is part of the flow key (like a VLAN
id): the same 5-tuple outside PPPoE or in another session is another flow. Malformed PPPoE
frames are dropped with their reason.""")
    os.makedirs(os.path.join(HERE, "pppoe_sessions"), exist_ok=True)
    with open(os.path.join(HERE, "pppoe_sessions", "rules.yar"), "w") as f:
        f.write(PPPOE_DPI_RULES.lstrip())
    A = lambda v6=False, ses=0x11: pppoe_l2(MAC_A, MAC_B, ses, v6)
    B = lambda v6=False, ses=0x11: pppoe_l2(MAC_B, MAC_A, ses, v6)
    # Session set-up: discovery and PPP control frames, non-IP.
    c.add(Ether(src=MAC_A, dst=BCAST) / PPPoED(code=0x09, sessionid=0) /
          Raw(bytes([1, 1, 0, 0])), "F", "PADI (discovery, 0x8863): non-IP, forwarded")
    c.add(Ether(src=MAC_B, dst=MAC_A) / PPPoED(code=0x65, sessionid=0x11) /
          Raw(bytes([1, 1, 0, 0])), "F", "PADS session 0x11 (discovery): non-IP", side="B")
    c.add(Ether(src=MAC_A, dst=MAC_B) / PPPoE(sessionid=0x11) / PPP(proto=0xC021) /
          Raw(bytes([1, 1, 0, 10, 1, 4, 5, 0xD4, 0, 0])), "F",
          "LCP Configure-Request in session 0x11: PPP control, non-IP")
    c.add(Ether(src=MAC_B, dst=MAC_A) / PPPoE(sessionid=0x11) / PPP(proto=0x8021) /
          Raw(bytes([1, 1, 0, 10, 3, 6, 10, 1, 0, 10])), "F",
          "IPCP Configure-Request from the AC: PPP control, non-IP", side="B")
    # Firewall: allowed web flow in the session, forwarded unchanged both ways.
    ipc = lambda: IP(src="10.1.0.10", dst="10.2.0.80")
    ips = lambda: IP(src="10.2.0.80", dst="10.1.0.10")
    t = Tcp(c, A, B, ipc, ips, 40001, 80, "w1", side_c="A", side_s="B")
    t.handshake("w1: PPPoE IPv4 tcp :80, rule 2 allow-web")
    t.c("PA", note="w1: request", data=payload(40, 1))
    t.s("PA", note="w1: answer (return traffic)", data=payload(60, 2))
    # The same 5-tuple outside PPPoE, and in session 0x22: other flows, same verdict.
    c.add(eth_a() / ipc() / TCP(sport=40001, dport=80, flags="S", seq=1000), "F w2 new",
          "w2: the same SYN outside PPPoE: another flow (no session), allow-web")
    c.add(A(ses=0x22) / ipc() / TCP(sport=40001, dport=80, flags="S", seq=1000), "F w3 new",
          "w3: the same SYN in session 0x22: another flow, allow-web")
    # Default deny applies inside PPPoE as outside.
    c.add(A() / ipc() / TCP(sport=40002, dport=22, flags="S"), "D firewall_deny x1 new",
          "x1: PPPoE IPv4 SYN :22, default deny")
    c.add(eth_a() / ipc() / TCP(sport=40002, dport=22, flags="S"), "D firewall_deny x2 new",
          "x2: the same SYN outside PPPoE, default deny")
    c.add(pppoe_raw(MAC_A, MAC_B, 0x11, raw(ipc() / TCP(sport=40003, dport=22, flags="S")),
                    proto_bytes=b"\x21"), "D firewall_deny x3 new",
          "x3: PPP protocol field compressed to one byte (0x21): still IPv4, default deny")
    c.add(A(v6=True) / IPv6(src="2001:db8:a::10", dst="2001:db8:b::80") /
          ICMPv6EchoRequest(id=7, seq=1), "D firewall_deny x4 new",
          "x4: PPPoE IPv6 ICMPv6 echo, default deny (no rule for icmpv6)")
    c.add(B() / ips() / TCP(sport=80, dport=40009, flags="S"), "D firewall_deny x5 new",
          "x5: PPPoE IPv4 SYN from side B, default deny (B_TO_A)", side="B")
    # Reject: the answers go back inside the session (RST / ICMP(v6) unreachable).
    c.add(A() / IP(src="10.1.0.10", dst="10.2.0.25") / TCP(sport=40004, dport=25, flags="S",
                                                           seq=700),
          "R r1 new", "r1: PPPoE IPv4 SYN :25, rule 0 rej-smtp: RST+ACK inside session 0x11 out of A")
    c.add(A(v6=True) / IPv6(src="2001:db8:a::10", dst="2001:db8:b::25") /
          TCP(sport=40005, dport=25, flags="S", seq=900), "R r2 new",
          "r2: PPPoE IPv6 SYN :25, rule 0: RST+ACK inside the session")
    c.add(A() / IP(src="10.1.0.10", dst="10.2.0.161") / UDP(sport=40006, dport=161) /
          Raw(payload(30)), "R r3 new",
          "r3: PPPoE IPv4 udp :161, rule 1 rej-snmp: ICMP unreachable inside the session")
    c.add(A(v6=True) / IPv6(src="2001:db8:a::10", dst="2001:db8:b::161") /
          UDP(sport=40007, dport=161) / Raw(payload(12)), "R r4 new",
          "r4: PPPoE IPv6 udp :161, rule 1: ICMPv6 unreachable inside the session")
    # DNS filtering (allowed by allow-dns): answers inside the session.
    c.add(A() / IP(src="10.1.0.10", dst="10.2.0.53") / UDP(sport=41001, dport=53) /
          Raw(dns_q("www.ads.example", ident=0x0301)), "D dns_answered q1 new",
          "q1: PPPoE IPv4 query www.ads.example -> NXDOMAIN inside the session")
    c.add(A(v6=True) / IPv6(src="2001:db8:a::10", dst="2001:db8:b::53") /
          UDP(sport=41002, dport=53) / Raw(dns_q("y.malware.example", "AAAA", ident=0x0302)),
          "D dns_answered q2 new", "q2: PPPoE IPv6 AAAA y.malware.example -> sinkhole 2001:db8::66")
    c.add(A() / IP(src="10.1.0.10", dst="10.2.0.53") / UDP(sport=41003, dport=53) /
          Raw(dns_q("clean.example", ident=0x0303)), "F q3 new", "q3: clean.example: forwarded")
    c.add(B() / IP(src="10.2.0.53", dst="10.1.0.10") / UDP(sport=53, dport=41003) /
          Raw(dns_resp("clean.example", [], 0x0303)), "F q3", "q3: the resolver's answer",
          side="B")
    c.add(eth_a() / IP(src="10.1.0.10", dst="10.2.0.53") / UDP(sport=41001, dport=53) /
          Raw(dns_q("www.ads.example", ident=0x0304)), "D dns_answered q4 new",
          "q4: the same query outside PPPoE -> NXDOMAIN (plain Ethernet answer)")
    # DPI: a drop rule matched over two segments in the session; an alert on UDP.
    t = Tcp(c, A, B, lambda: IP(src="10.1.0.11", dst="10.2.0.80"),
            lambda: IP(src="10.2.0.80", dst="10.1.0.11"), 40010, 80, "t1", side_c="A", side_s="B")
    t.handshake("t1: PPPoE IPv4, split DPI match -> drop")
    t.c("PA", note="t1: GET ... EVIL-PAY (first half)", data=b"GET /x HTTP/1.1\r\nX: EVIL-PAY")
    t.c("PA", "D dpi_drop t1", "t1: LOAD-SPLIT completes the match: dropped (rule 0)",
        data=b"LOAD-SPLIT\r\n\r\n")
    t.s("PA", "D dpi_drop t1", "t1: server answer: the flow is blocked", data=b"HTTP/1.1 200 OK\r\n\r\n")
    t = Tcp(c, lambda: A(v6=True), lambda: B(v6=True),
            lambda: IPv6(src="2001:db8:a::11", dst="2001:db8:b::80"),
            lambda: IPv6(src="2001:db8:b::80", dst="2001:db8:a::11"), 40011, 80, "t2",
            side_c="A", side_s="B")
    t.handshake("t2: PPPoE IPv6, DPI match in one segment -> drop")
    t.c("PA", "D dpi_drop t2", "t2: EVIL-PAYLOAD-SPLIT in one segment: dropped (rule 0)",
        data=b"POST / HTTP/1.1\r\n\r\nEVIL-PAYLOAD-SPLIT")
    c.add(A() / IP(src="10.1.0.12", dst="10.2.0.53") / UDP(sport=41004, dport=53) /
          Raw(b"data UDP-BAD data"), "F u1 new",
          "u1: PPPoE udp :53, not DNS (malformed, forwarded by dns.malformed), UDP-BAD: alert (rule 1)")
    # Malformed PPPoE frames: dropped with their reason.
    ip_ok = raw(IP(src="10.1.0.10", dst="10.2.0.80") / TCP(sport=40020, dport=80, flags="S"))
    c.add(pppoe_raw(MAC_A, MAC_B, 0x11, ip_ok, length=2 + 30), "D bad_ipv4_total_length",
          "m1: PPPoE length shorter than the IPv4 packet it carries")
    c.add(pppoe_raw(MAC_A, MAC_B, 0x11, ip_ok, length=200), "D bad_pppoe_length",
          "m2: PPPoE length past the frame")
    c.add(raw(Ether(src=MAC_A, dst=MAC_B, type=0x8864)) + bytes([0x11, 0, 0, 0x11, 0, 2]),
          "D truncated_pppoe", "m3: PPPoE session header without its PPP protocol field (20 bytes, unpadded)",
          pad=False)
    cut = bytearray(raw(IP(src="10.1.0.10", dst="10.2.0.80", proto=6)))
    c.add(pppoe_raw(MAC_A, MAC_B, 0x11, bytes(cut)), "D truncated_tcp",
          "m4: PPPoE IPv4 protocol TCP, total length 20: no room for the TCP header")
    c.add(pppoe_raw(MAC_A, MAC_B, 0x11, raw(IP(src="10.1.0.10", dst="10.2.0.53", len=9000) /
                                            UDP(sport=41005, dport=53) / Raw(payload(20)))),
          "D bad_ipv4_total_length",
          "m5: PPPoE IPv4/UDP whose total length (9000) is far beyond the frame")
    # Keepalive: PPP control again.
    c.add(Ether(src=MAC_A, dst=MAC_B) / PPPoE(sessionid=0x11) / PPP(proto=0xC021) /
          Raw(bytes([9, 2, 0, 8, 0, 0, 0, 0])), "F", "LCP Echo-Request: non-IP")
    return c

TUNNEL_DPI_RULES = r"""
rule tun_drop { meta: action = "drop" strings: $a = "EVIL-IN-TUNNEL" condition: $a }
"""

VTEP_A, VTEP_B = "192.0.2.1", "192.0.2.2"
VTEP6_A, VTEP6_B = "2001:db8:ff::1", "2001:db8:ff::2"
IMAC_A, IMAC_B = "02:00:00:00:01:0a", "02:00:00:00:01:0b"


def case_tunnels():
    """Issue 16, tunnels: every stage judges the inner packet (docs/tunnels.md)."""
    from scapy.contrib.geneve import GENEVE
    from scapy.contrib.mpls import MPLS
    from scapy.layers.l2 import GRE
    from scapy.layers.vxlan import VXLAN
    rules = [
        {"id": "deny-ssh", "priority": 5, "action": "DENY", "protocols": ["tcp"],
         "dst_ports": ["22"]},
        {"id": "rej-smtp", "priority": 5, "action": "REJECT", "protocols": ["tcp"],
         "dst_ports": ["25"]},
        {"id": "rej-snmp", "priority": 5, "action": "REJECT", "protocols": ["udp"],
         "dst_ports": ["161"]},
    ]
    c = FwCase("tunnels", {
        "firewall": {"default_a_to_b": "ALLOW", "default_b_to_a": "ALLOW", "rules": rules},
        "dns": DNS_LISTS,
        "dpi": {"rule_files": ["rules.yar"]}}, """
Tunnels (dataplane.tunnels default: INSPECT, VXLAN 4789, Geneve 6081, max_depth 3): VXLAN,
Geneve, GRE (plain, keyed, checksum + sequence, Ethernet inside), IPv4/IPv6 in IPv4/IPv6, MPLS
over Ethernet, and tunnels nested twice. The firewall, DNS filter and DPI judge the inner
packet; a passing packet leaves unchanged; the tunnel id (VNI / GRE key) is in the flow key, so
the same inner 5-tuple in another VNI, or outside the tunnel, is another flow. Rejects and DNS
answers go back inside the tunnel (outer addresses and MACs swapped, lengths and checksums
fixed); through MPLS no answer is made (the reject still drops). Malformed encapsulations are
dropped with their reason (dataplane.malformed DROP); a datagram to the VXLAN / Geneve port
whose payload is no tunnel header (m1..m4) is the plain UDP datagram it is, a GRE header
that does not parse (m5, m6) the outer packet (issue 30: dataplane.tunnels.strict off),
forwarded and counted vxlan_not_parsed / geneve_not_parsed / gre_not_parsed. Firewall: defaults ALLOW; rules 0
deny-ssh tcp :22, 1 rej-smtp REJECT tcp :25, 2 rej-snmp REJECT udp :161. DNS lists as in
dns_udp_actions. DPI (rules.yar): tun_drop (drop, "EVIL-IN-TUNNEL").""")
    os.makedirs(os.path.join(HERE, "tunnels"), exist_ok=True)
    with open(os.path.join(HERE, "tunnels", "rules.yar"), "w") as f:
        f.write(TUNNEL_DPI_RULES.lstrip())

    def outer(side, v6=False):
        a, b = (VTEP6_A, VTEP6_B) if v6 else (VTEP_A, VTEP_B)
        ip = IPv6 if v6 else IP
        return (eth_a() / ip(src=a, dst=b)) if side == "A" else (eth_b() / ip(src=b, dst=a))

    def ieth(side):
        return Ether(src=IMAC_A, dst=IMAC_B) if side == "A" else Ether(src=IMAC_B, dst=IMAC_A)

    def vx(vni, side="A", v6=False, sport=49152):
        return lambda: outer(side, v6) / UDP(sport=sport, dport=4789) / VXLAN(vni=vni) / ieth(side)

    def gnv(vni, side="A", v6=False):
        return lambda: outer(side, v6) / UDP(sport=49153, dport=6081) / GENEVE(vni=vni, proto=0x6558) / ieth(side)

    def gre(side="A", key=None, csum=False, seq=None, proto=0x0800, v6=False):
        kw = {"proto": proto}
        if key is not None:
            kw.update(key_present=1, key=key)
        if csum:
            kw.update(chksum_present=1)
        if seq is not None:
            kw.update(seqnum_present=1, seqence_number=seq)
        return lambda: outer(side, v6) / GRE(**kw)

    def ipip(side="A", v6=False, inner_v6=False):
        a, b = (VTEP6_A, VTEP6_B) if v6 else (VTEP_A, VTEP_B)
        if side == "B":
            a, b = b, a
        e = eth_a if side == "A" else eth_b
        proto = 41 if inner_v6 else 4
        if v6:
            return lambda: e() / IPv6(src=a, dst=b, nh=proto)
        return lambda: e() / IP(src=a, dst=b, proto=proto)

    def mpls(side="A", labels=(100, 200)):
        e = eth_a if side == "A" else eth_b
        def f():
            p = e() / MPLS(label=labels[0], s=0 if len(labels) > 1 else 1, ttl=64)
            for i, l in enumerate(labels[1:]):
                p = p / MPLS(label=l, s=1 if i == len(labels) - 2 else 0, ttl=64)
            return p
        return f

    ic = lambda: IP(src="10.8.0.1", dst="10.9.0.80")
    is_ = lambda: IP(src="10.9.0.80", dst="10.8.0.1")
    ic6 = lambda: IPv6(src="2001:db8:8::1", dst="2001:db8:9::80")

    # Allowed web flow inside VXLAN 100, both directions: one flow, forwarded unchanged.
    t = Tcp(c, vx(100), vx(100, "B"), ic, is_, 40001, 80, "v1", side_c="A", side_s="B")
    t.handshake("v1: VXLAN 100, inner tcp :80, allowed (default)")
    t.c("PA", note="v1: request inside VXLAN", data=payload(40, 1))
    t.s("PA", note="v1: answer inside VXLAN (return traffic)", data=payload(60, 2))
    # The same inner SYN in VNI 200, outside any tunnel, and in GRE key 7: other flows.
    syn = lambda: TCP(sport=40001, dport=80, flags="S", seq=1000)
    c.add(vx(200)() / ic() / syn(), "F v2 new", "v2: the same inner SYN in VNI 200: another flow")
    c.add(eth_a() / ic() / syn(), "F v3 new", "v3: the same SYN without a tunnel: another flow")
    c.add(gre(key=7)() / ic() / syn(), "F v4 new", "v4: the same SYN in GRE key 7: another flow")
    c.add(vx(100, sport=50000)() / ic() / syn(), "F v1",
          "v1: VXLAN 100 from another outer source port (entropy): the same flow v1")
    # Firewall deny by the inner 5-tuple, in every tunnel type.
    ssh = lambda sp: TCP(sport=sp, dport=22, flags="S", seq=77)
    deny = [
        (vx(100)() / ic() / ssh(41001), "VXLAN over IPv4"),
        (vx(101, v6=True)() / ic6() / ssh(41002), "VXLAN over IPv6, inner IPv6"),
        (gnv(300)() / ic() / ssh(41003), "Geneve (Ethernet inside)"),
        (gre()() / ic() / ssh(41004), "GRE, IPv4 inside"),
        (gre(key=9, csum=True, seq=5, proto=0x86DD)() / ic6() / ssh(41005),
         "GRE with checksum, key 9 and sequence, IPv6 inside"),
        (gre(proto=0x6558, v6=True)() / ieth("A") / ic() / ssh(41006), "GRE over IPv6, Ethernet inside (0x6558)"),
        (ipip()() / ic() / ssh(41007), "IPv4 in IPv4"),
        (ipip(inner_v6=True)() / ic6() / ssh(41008), "IPv6 in IPv4"),
        (ipip(v6=True)() / ic() / ssh(41009), "IPv4 in IPv6"),
        (ipip(v6=True, inner_v6=True)() / ic6() / ssh(41010), "IPv6 in IPv6"),
        (mpls()() / ic() / ssh(41011), "MPLS, two labels, IPv4"),
        (mpls(labels=(300,))() / ic6() / ssh(41012), "MPLS, one label, IPv6"),
        (vx(102)() / IP(src=VTEP_A, dst=VTEP_B) / GRE(proto=0x0800) / ic() / ssh(41013),
         "nested twice: GRE inside VXLAN"),
        (gre(key=11, proto=0x6558)() / ieth("A") / IP(src=VTEP_A, dst=VTEP_B) /
         UDP(sport=49154, dport=4789) / VXLAN(vni=103) / ieth("A") / ic() / ssh(41014),
         "nested twice: VXLAN inside keyed GRE"),
        (ipip()() / IP(src="10.7.0.1", dst="10.7.0.2", proto=4) / ic() / ssh(41015),
         "nested twice: IPv4 in IPv4 in IPv4"),
    ]
    for i, (p, what) in enumerate(deny):
        c.add(p, f"D firewall_deny d{i} new", f"d{i}: inner SYN :22 in {what}: rule 0 deny-ssh")
    # The nested tunnels with an allowed inner packet pass unchanged.
    web = lambda sp: TCP(sport=sp, dport=80, flags="S", seq=78)
    c.add(vx(102)() / IP(src=VTEP_A, dst=VTEP_B) / GRE(proto=0x0800) / ic() / web(41016),
          "F n1 new", "n1: GRE inside VXLAN, inner SYN :80: allowed, forwarded unchanged")
    c.add(ipip()() / IP(src="10.7.0.1", dst="10.7.0.2", proto=4) / ic() / web(41017),
          "F n2 new", "n2: IPv4 in IPv4 in IPv4, inner SYN :80: allowed")
    # Rejects: answered inside the tunnel (RST / ICMP unreachable), none through MPLS.
    smtp = lambda sp: TCP(sport=sp, dport=25, flags="S", seq=500)
    snmp = lambda sp: UDP(sport=sp, dport=161) / Raw(payload(20))
    c.add(vx(100)() / ic() / smtp(42001), "R r1 new", "r1: VXLAN, SYN :25: RST+ACK inside VXLAN out of A")
    c.add(vx(101, v6=True)() / ic6() / snmp(42002), "R r2 new",
          "r2: VXLAN over IPv6, udp :161: ICMPv6 unreachable inside (outer UDP checksum computed)")
    c.add(gnv(300)() / ic() / snmp(42003), "R r3 new", "r3: Geneve, udp :161: ICMP unreachable inside Geneve")
    c.add(gre(key=9, csum=True, seq=5)() / ic() / smtp(42004), "R r4 new",
          "r4: GRE checksum+key+seq, SYN :25: RST inside GRE (GRE checksum recomputed)")
    c.add(ipip(v6=True)() / ic() / smtp(42005), "R r5 new", "r5: IPv4 in IPv6, SYN :25: RST inside")
    c.add(vx(102)() / IP(src=VTEP_A, dst=VTEP_B) / GRE(proto=0x0800) / ic() / smtp(42006),
          "R r6 new", "r6: GRE inside VXLAN, SYN :25: RST inside both layers")
    c.add(mpls()() / ic() / smtp(42007), "R r7 new",
          "r7: MPLS, SYN :25: rejected (dropped), no answer through MPLS (reject_suppressed)")
    # DNS filter inside Geneve and VXLAN: answers inside the tunnel.
    c.add(gnv(300)() / IP(src="10.8.0.1", dst="10.9.0.53") / UDP(sport=43001, dport=53) /
          Raw(dns_q("www.ads.example", ident=0x0701)), "D dns_answered q1 new",
          "q1: Geneve, query www.ads.example: NXDOMAIN inside Geneve out of A")
    c.add(vx(101, v6=True)() / IPv6(src="2001:db8:8::1", dst="2001:db8:9::53") /
          UDP(sport=43002, dport=53) / Raw(dns_q("x.malware.example", "AAAA", ident=0x0702)),
          "D dns_answered q2 new", "q2: VXLAN over IPv6, AAAA x.malware.example: sinkhole inside")
    c.add(gnv(300)() / IP(src="10.8.0.1", dst="10.9.0.53") / UDP(sport=43003, dport=53) /
          Raw(dns_q("clean.example", ident=0x0703)), "F q3 new", "q3: Geneve, clean.example: forwarded")
    c.add(gnv(300, "B")() / IP(src="10.9.0.53", dst="10.8.0.1") / UDP(sport=53, dport=43003) /
          Raw(dns_resp("clean.example", [], 0x0703)), "F q3", "q3: the resolver's answer inside Geneve",
          side="B")
    # DPI inside GRE (keyed): the match drops the inner flow.
    t = Tcp(c, gre(key=21), gre("B", key=21), lambda: IP(src="10.8.0.2", dst="10.9.0.80"),
            lambda: IP(src="10.9.0.80", dst="10.8.0.2"), 40020, 80, "t1", side_c="A", side_s="B")
    t.handshake("t1: GRE key 21, DPI match -> drop")
    t.c("PA", note="t1: clean request", data=b"GET / HTTP/1.1\r\n\r\n")
    t.c("PA", "D dpi_drop t1", "t1: EVIL-IN-TUNNEL: dropped (tun_drop)", data=b"xx EVIL-IN-TUNNEL xx")
    # Not opened: GRE version 1 (PPTP), an ARP frame inside VXLAN (non-IP, forwarded).
    c.add(eth_a() / IP(src=VTEP_A, dst=VTEP_B, proto=47) / Raw(bytes([0x30, 0x81, 0x88, 0x0B, 0, 0, 0, 1, 0, 0, 0, 1])),
          "F p1 new", "p1: enhanced GRE (version 1, PPTP): judged as the outer packet")
    c.add(vx(100)() / ARP(op=1, hwsrc=IMAC_A, psrc="10.8.0.1", pdst="10.8.0.9"), "F",
          "arp: ARP inside VXLAN: non-IP (dataplane.non_ip FORWARD), no flow")
    # Malformed encapsulations.
    c.add(eth_a() / IP(src=VTEP_A, dst=VTEP_B) / UDP(sport=49152, dport=4789) / Raw(b"\x08\x00\x00"),
          "F m1 new", "m1: 3 bytes on the VXLAN port: no VXLAN header, plain UDP (strict off)")
    c.add(eth_a() / IP(src=VTEP_A, dst=VTEP_B) / UDP(sport=49152, dport=4789) / VXLAN(flags=0, vni=5) /
          ieth("A") / ic() / web(44001), "F m1", "m2: VXLAN without the I flag: plain UDP, m1's flow")
    c.add(eth_a() / IP(src=VTEP_A, dst=VTEP_B) / UDP(sport=49153, dport=6081) /
          Raw(bytes([0x3F, 0, 0x65, 0x58, 0, 0, 1, 0])), "F m3 new",
          "m3: Geneve announcing 63 option words, none present: plain UDP (strict off)")
    c.add(eth_a() / IP(src=VTEP_A, dst=VTEP_B) / UDP(sport=49153, dport=6081) /
          GENEVE(version=1, vni=1, proto=0x6558) / ieth("A") / ic() / web(44002), "F m3",
          "m4: Geneve version 1: plain UDP, m3's flow")
    c.add(eth_a() / IP(src=VTEP_A, dst=VTEP_B, proto=47) / Raw(bytes([0x40, 0x00, 0x08, 0x00])) /
          ic() / web(44003), "F p1", "m5: GRE with the routing bit (RFC 1701 source route): the outer packet (strict off), p1's flow")
    c.add(eth_a() / IP(src=VTEP_A, dst=VTEP_B, proto=47) / Raw(bytes([0x20, 0x00, 0x08, 0x00, 0, 0])),
          "F p1", "m6: GRE announcing a key, cut inside it: the outer packet (strict off), p1's flow")
    c.add(eth_a() / IP(src=VTEP_A, dst=VTEP_B) / UDP(sport=49152, dport=4789) / VXLAN(vni=104) /
          ieth("A") / IP(src="10.8.0.1", dst="10.9.0.80", len=400) / web(44004), "D bad_ipv4_total_length",
          "m7: inner IPv4 total length beyond the VXLAN payload")
    c.add(ipip()() / IP(src="10.7.0.1", dst="10.7.0.2", proto=4) / IP(src="10.6.0.1", dst="10.6.0.2", proto=4) /
          IP(src="10.5.0.1", dst="10.5.0.2", proto=4) / ic() / web(44005), "D tunnel_too_deep",
          "m8: four nested IP-in-IP layers (max_depth 3)")
    c.add(raw(eth_a() / MPLS(label=100, s=0, ttl=64)) + bytes([0, 0x0C, 0x80]), "D truncated_mpls",
          "m9: MPLS label stack without a bottom of stack before the end (21 bytes, unpadded)", pad=False)
    return c


# --- http --- (docs/http.md) files of HTTP flows scanned by YARA rules with file offsets.
EICAR = b"X5O!P%@AP[4\\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*"
HTTP_RULES = r"""
rule pe_header { meta: action = "drop" condition: uint16(0) == 0x5A4D }
rule eicar { meta: action = "drop" strings: $e = "X5O!P%@AP[4\\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*" condition: $e }
"""


def pe_file(n):
    body = b"MZ" + bytes((0x90 + i) % 256 for i in range(n - 2))
    return body


def http_gzip(data):
    import zlib
    c = zlib.compressobj(9, zlib.DEFLATED, 16 + 15)
    return c.compress(data) + c.flush()


def http_deflate(data):
    import zlib
    return zlib.compress(data, 9)


def http_chunked(body, piece):
    out = b""
    for k in range(0, len(body), piece):
        part = body[k:k + piece]
        out += b"%x\r\n" % len(part) + part + b"\r\n"
    return out + b"0\r\n\r\n"


def http_file_check(kind, headers_and_body, decoded_expect):
    """Independent expectation: decode the message with Python's email / zlib libraries
    (not libhtp) and check what the rules must see in the file."""
    import email.parser
    import zlib
    head, _, body = headers_and_body.partition(b"\r\n\r\n")
    msg = email.parser.BytesHeaderParser().parsebytes(head.split(b"\r\n", 1)[1] + b"\r\n\r\n")
    if (msg.get("Transfer-Encoding") or "").lower() == "chunked":
        out, rest = b"", body
        while True:
            line, _, rest = rest.partition(b"\r\n")
            n = int(line, 16)
            if n == 0:
                break
            out, rest = out + rest[:n], rest[n + 2:]
        body = out
    for enc in reversed([e.strip() for e in (msg.get("Content-Encoding") or "").split(",") if e.strip()]):
        body = zlib.decompress(body, 16 + 15 if enc == "gzip" else 15)
    if (msg.get_content_type() or "") == "multipart/form-data":
        full = email.parser.BytesParser().parsebytes(head.split(b"\r\n", 1)[1] + b"\r\n\r\n" + body)
        files = [p.get_payload(decode=True) for p in full.walk() if p.get_filename()]
        body = files[0]
    assert body == decoded_expect, kind
    if kind == "pe":
        assert body[:2] == b"MZ"
    else:
        assert EICAR in body
    return body


def case_http_files():
    c = FwCase("http_files", {"dpi": {"rule_files": ["rules.yar"], "http": {"ports": [80]}}}, """
HTTP files (issue 17, docs/http.md): libhtp parses the flows to port 80 from the normalized
TCP stream; each request / response body, de-chunked and decompressed, is scanned as a file
of its own: offset 0 = the file's first byte. rules.yar: pe_header (uint16(0) == 0x5A4D,
action drop) and eicar (the EICAR string, action drop); both are in the default scope (files
on HTTP flows), so they never fire on the raw stream of these flows (h10). A rule firing on a
file drops the packet whose bytes completed the match and blocks the flow (both ways). The
generator checks every file with Python's email / zlib decoding before writing this intent.""")
    os.makedirs(os.path.join(HERE, "http_files"), exist_ok=True)
    with open(os.path.join(HERE, "http_files", "rules.yar"), "w") as f:
        f.write(HTTP_RULES.lstrip())
    n = [0]

    def conn(label, note):
        n[0] += 1
        ipc = lambda k=n[0]: IP(src=f"10.1.7.{k}", dst="10.2.7.80")
        ips = lambda k=n[0]: IP(src="10.2.7.80", dst=f"10.1.7.{k}")
        t = Tcp(c, eth_a, eth_b, ipc, ips, 41000 + n[0], 80, label, side_c="A", side_s="B")
        t.handshake(note)
        return t

    def get(t, path):
        t.c("PA", note=f"{t.flow}: GET {path}", data=b"GET " + path.encode() + b" HTTP/1.1\r\nHost: files.test\r\n\r\n")

    pe = pe_file(600)
    # h1: chunked PE: the first chunk carries MZ: dropped there, the rest of the flow too.
    t = conn("h1", "h1: chunked PE download")
    get(t, "/h1.exe")
    body = http_chunked(pe, 200)
    msg = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + body
    http_file_check("pe", msg, pe)
    t.s("PA", note="h1: response headers", data=msg[:msg.index(b"\r\n\r\n") + 4])
    rest = msg[msg.index(b"\r\n\r\n") + 4:]
    t.s("PA", "D dpi_drop h1", "h1: first chunk (MZ at file offset 0): pe_header drops it", data=rest[:205])
    t.s("PA", "D dpi_drop h1", "h1: next chunks: the flow is blocked", data=rest[205:])
    # h2 gzip, h3 deflate, h4 gzip inside chunked, h5 two gzip layers: the body in one segment.
    for label, what, enc_headers, encode in [
            ("h2", "gzip PE", b"Content-Encoding: gzip\r\n", lambda b: http_gzip(b)),
            ("h3", "deflate EICAR", b"Content-Encoding: deflate\r\n", lambda b: http_deflate(b)),
            ("h4", "gzip inside chunked PE", b"Content-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n",
             lambda b: http_chunked(http_gzip(b), 97)),
            ("h5", "two gzip layers PE", b"Content-Encoding: gzip, gzip\r\n", lambda b: http_gzip(http_gzip(b)))]:
        kind = "eicar" if "EICAR" in what else "pe"
        plain = (b"eicar test file: " + EICAR + b" end") if kind == "eicar" else pe
        t = conn(label, f"{label}: {what}")
        get(t, f"/{label}.bin")
        payload_ = encode(plain)
        length = b"" if b"chunked" in enc_headers else b"Content-Length: %d\r\n" % len(payload_)
        msg = b"HTTP/1.1 200 OK\r\n" + enc_headers + length + b"\r\n" + payload_
        http_file_check(kind, msg, plain)
        t.s("PA", note=f"{label}: response headers", data=msg[:msg.index(b"\r\n\r\n") + 4])
        t.s("PA", f"D dpi_drop {label}", f"{label}: {what} body: decoded file matches ({kind}): dropped",
            data=msg[msg.index(b"\r\n\r\n") + 4:])
        t.c("A", f"D dpi_drop {label}", f"{label}: client ACK: the flow is blocked")
    # h6: multipart upload: the file part of the POST body is the file (not the whole body).
    t = conn("h6", "h6: multipart/form-data upload of a PE")
    mp = (b"--XyZ\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nhello\r\n"
          b"--XyZ\r\nContent-Disposition: form-data; name=\"up\"; filename=\"tool.exe\"\r\n"
          b"Content-Type: application/octet-stream\r\n\r\n" + pe + b"\r\n--XyZ--\r\n")
    msg = (b"POST /upload HTTP/1.1\r\nHost: files.test\r\nContent-Type: multipart/form-data; boundary=XyZ\r\n"
           b"Content-Length: %d\r\n\r\n" % len(mp)) + mp
    http_file_check("pe", msg, pe)
    cut = msg.index(b"filename=")
    t.c("PA", note="h6: POST headers and the first part", data=msg[:cut])
    t.c("PA", "D dpi_drop h6", "h6: the file part (MZ at its offset 0): dropped", data=msg[cut:])
    # h7: pipelined requests: the first response is clean, the second a PE.
    t = conn("h7", "h7: two pipelined requests")
    t.c("PA", note="h7: GET /a.txt and GET /b.exe in one segment",
        data=b"GET /a.txt HTTP/1.1\r\nHost: files.test\r\n\r\nGET /b.exe HTTP/1.1\r\nHost: files.test\r\n\r\n")
    t.s("PA", note="h7: first response (text): forwarded", data=b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
    msg = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(pe) + pe
    http_file_check("pe", msg, pe)
    t.s("PA", "D dpi_drop h7", "h7: second response (PE): dropped", data=msg)
    # h8: 206 partial content from byte 0: the range is scanned from its first byte.
    t = conn("h8", "h8: 206 range 0-99 of a PE")
    get(t, "/h8.exe")
    msg = b"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-99/600\r\nContent-Length: 100\r\n\r\n" + pe[:100]
    http_file_check("pe", msg, pe[:100])
    t.s("PA", "D dpi_drop h8", "h8: the range's bytes (MZ at offset 0): dropped", data=msg)
    # h9: EICAR split over two chunks in two segments: dropped where the match completes.
    t = conn("h9", "h9: EICAR split across chunks")
    get(t, "/h9.com")
    body = http_chunked(EICAR, 30)
    msg = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + body
    http_file_check("eicar", msg, EICAR)
    split = msg.index(b"\r\n\r\n") + 4 + 4 + 30 + 2  # headers, first chunk ("1e\r\n" + 30 + CRLF)
    t.s("PA", note="h9: headers and the first 30 bytes of EICAR", data=msg[:split])
    t.s("PA", "D dpi_drop h9", "h9: the rest of EICAR (match completes in the file)", data=msg[split:])
    # h10: EICAR only in a request header and a clean download: no file matches; the raw
    # stream of an HTTP flow reports only stream-scoped rule sets (none here): forwarded.
    t = conn("h10", "h10: EICAR in a header only, clean download")
    t.c("PA", note="h10: GET with the EICAR string in a header (not a file): forwarded",
        data=b"GET /readme.txt HTTP/1.1\r\nHost: files.test\r\nX-Test: " + EICAR + b"\r\n\r\n")
    t.s("PA", note="h10: clean text file: forwarded", data=b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\nhello world\n")
    t.fin_teardown()
    return c


def case_http_default(name, http):
    """Issue 30: a config that names only a YARA rule file parses HTTP (default ports, 3
    content-encoding layers); `dpi.http.enabled: false` does not, and the summary says so."""
    cfg = {"dpi": {"rule_files": ["rules.yar"]}}
    if http is not None:
        cfg["dpi"]["http"] = http
    off = http is not None and http.get("enabled") is False
    c = FwCase(name, cfg, ("""
HTTP parsing turned off (dpi.http.enabled false): every rule runs on the raw TCP stream, as
without HTTP parsing; the summary warns that file rules see only raw stream bytes. The chunked
PE (d1), the gzip EICAR (d2) and the three-layer gzip PE (d3) are not seen; the plain EICAR
body (d4) is, on the stream; so is the EICAR string in a request header (d5).""" if off else """
HTTP parsed by default (issue 30): the config names only a rule file (rules.yar as in
http_files: pe_header and eicar, action drop) and no dpi.http section, so flows to the default
HTTP ports are parsed with the defaults (3 content-encoding layers) and the rule set, which
names no scope, inspects both the files and the raw stream of HTTP flows (what it saw before
stays seen). d1: a chunked PE download (MZ at file offset 0), d2: a gzip EICAR, d3: a PE in
three gzip layers: dropped on the decoded file; d4: a plain EICAR body; d5: the EICAR string
in a request header only, caught on the raw stream."""))
    os.makedirs(os.path.join(HERE, name), exist_ok=True)
    with open(os.path.join(HERE, name, "rules.yar"), "w") as f:
        f.write(HTTP_RULES.lstrip())
    n = [0]

    def conn(label, note, port=80):
        n[0] += 1
        ipc = lambda k=n[0]: IP(src=f"10.1.9.{k}", dst="10.2.9.80")
        ips = lambda k=n[0]: IP(src="10.2.9.80", dst=f"10.1.9.{k}")
        t = Tcp(c, eth_a, eth_b, ipc, ips, 43000 + n[0], port, label, side_c="A", side_s="B")
        t.handshake(note)
        return t

    pe = pe_file(600)
    eicar_body = b"eicar test file: " + EICAR + b" end"
    deliveries = [
        ("d1", "chunked PE", "pe", pe, b"Transfer-Encoding: chunked\r\n", lambda b: http_chunked(b, 200)),
        ("d2", "gzip EICAR", "eicar", eicar_body, b"Content-Encoding: gzip\r\n", http_gzip),
        ("d3", "PE in three gzip layers", "pe", pe, b"Content-Encoding: gzip, gzip, gzip\r\n",
         lambda b: http_gzip(http_gzip(http_gzip(b)))),
        ("d4", "plain EICAR", "eicar", eicar_body, b"", lambda b: b),
    ]
    for label, what, kind, plain, enc_headers, encode in deliveries:
        port = 8080 if label == "d2" else 80  # 8080: another default port
        t = conn(label, f"{label}: {what} to :{port}", port)
        t.c("PA", note=f"{label}: GET", data=b"GET /" + label.encode() + b" HTTP/1.1\r\nHost: f.test\r\n\r\n")
        body = encode(plain)
        length = b"" if b"chunked" in enc_headers else b"Content-Length: %d\r\n" % len(body)
        msg = b"HTTP/1.1 200 OK\r\n" + enc_headers + length + b"\r\n" + body
        http_file_check(kind, msg, plain)
        head = msg[:msg.index(b"\r\n\r\n") + 4]
        t.s("PA", note=f"{label}: response headers", data=head)
        seen = (not off) or label == "d4"  # off: only the plain body is visible on the stream
        if seen:
            t.s("PA", f"D dpi_drop {label}", f"{label}: {what}: {kind} matches: dropped", data=msg[len(head):])
            t.c("A", f"D dpi_drop {label}", f"{label}: client ACK: the flow is blocked")
        else:
            t.s("PA", note=f"{label}: {what}: encoded on the stream, no file: forwarded", data=msg[len(head):])
            t.c("A", note=f"{label}: client ACK")
    t = conn("d5", "d5: EICAR in a request header")
    t.c("PA", f"D dpi_drop d5", "d5: the raw stream of the HTTP flow still sees it: dropped",
        data=b"GET /x HTTP/1.1\r\nHost: f.test\r\nX-Test: " + EICAR + b"\r\n\r\n")
    return c


def case_http_no_slot(policy):
    name = f"http_no_slot_{policy.lower()}"
    c = FwCase(name, {"dpi": {"rule_files": ["rules.yar"], "http": {"ports": [80], "flow_slots_per_worker": 1}},
                      "dataplane": {"tcp": {"dpi_fail": policy}}}, f"""
HTTP flow slots exhausted (docs/http.md): one libhtp slot per worker; a first HTTP flow takes
it, a second one open at the same time finds none. dataplane.tcp.dpi_fail = {policy}:
""" + ("""FORWARD: the second flow is inspected as a flow that is not HTTP (every rule on its raw
stream: the EICAR string in its response body still drops, the PE header, at stream offset 0
only in a file, does not), an `uninspected` event (reason http_no_slot) says so.""" if policy == "FORWARD" else
"""DROP: every payload packet of the second flow is dropped (reason http_no_slot), with a drop
event; the first flow is parsed and its PE download dropped (pe_header on the file)."""))
    os.makedirs(os.path.join(HERE, name), exist_ok=True)
    with open(os.path.join(HERE, name, "rules.yar"), "w") as f:
        f.write(HTTP_RULES.lstrip())
    pe = pe_file(300)
    t1 = Tcp(c, eth_a, eth_b, lambda: IP(src="10.1.8.1", dst="10.2.8.80"), lambda: IP(src="10.2.8.80", dst="10.1.8.1"),
             42001, 80, "s1", side_c="A", side_s="B")
    t2 = Tcp(c, eth_a, eth_b, lambda: IP(src="10.1.8.2", dst="10.2.8.80"), lambda: IP(src="10.2.8.80", dst="10.1.8.2"),
             42002, 80, "s2", side_c="A", side_s="B")
    t1.handshake("s1: first HTTP flow")
    t2.handshake("s2: second HTTP flow, open at the same time")
    t1.c("PA", note="s1: GET (takes the only slot)", data=b"GET /a.exe HTTP/1.1\r\nHost: h\r\n\r\n")
    if policy == "FORWARD":
        t2.c("PA", note="s2: GET: no slot, forwarded, inspected as a raw stream (uninspected event)",
             data=b"GET /b.exe HTTP/1.1\r\nHost: h\r\n\r\n")
        t2.s("PA", note="s2: a PE download: the raw stream's offset 0 is the request, pe_header cannot fire: forwarded",
             data=b"HTTP/1.1 200 OK\r\nContent-Length: 300\r\n\r\n" + pe)
        t2.s("PA", "D dpi_drop s2", "s2: a second response with EICAR: the raw stream still sees the string: dropped",
             data=b"HTTP/1.1 200 OK\r\nContent-Length: 68\r\n\r\n" + EICAR)
    else:
        t2.c("PA", "D http_no_slot s2", "s2: GET: no slot under DROP: dropped",
             data=b"GET /b.exe HTTP/1.1\r\nHost: h\r\n\r\n")
        t2.c("PA", "D http_no_slot s2", "s2: its retransmission: dropped again (the flow stays blocked)",
             data=b"GET /b.exe HTTP/1.1\r\nHost: h\r\n\r\n")
    t1.s("PA", "D dpi_drop s1", "s1: PE download in one segment: pe_header on the file: dropped",
         data=b"HTTP/1.1 200 OK\r\nContent-Length: 300\r\n\r\n" + pe)
    return c


HOLD_RULES = r"""
rule small_pe { meta: action = "drop" condition: uint16(0) == 0x5A4D and filesize < 4000 }
rule evil_end { meta: action = "drop" strings: $e = /EVIL-TRAILER$/ condition: $e }
"""


def case_http_hold():
    c = FwCase("http_hold", {"dpi": {"rule_files": ["rules.yar"], "http": {"ports": [80]}}}, """
Hold-back of a file's last packet (issue 17, docs/http.md "Verdicts"). rules.yar: small_pe
(uint16(0) == 0x5A4D and filesize < 4000, drop) reads filesize and evil_end (/EVIL-TRAILER$/,
drop) matches only at the end of the data: both are decided at a file's end. While a file is
open the last packet carrying the server's bytes is held: the next one releases it (it leaves
first, the order is kept), the file's end drops it with the flow when a rule fires there. So
the file's last data segment never reaches the client when the end is a separate packet (a
last chunk, the server's FIN of a body delimited by the close); clean twins pass whole.
Without the hold-back those last data segments were forwarded (the verdict came one packet
later). The generator checks each body with Python before writing this intent.""")
    os.makedirs(os.path.join(HERE, "http_hold"), exist_ok=True)
    with open(os.path.join(HERE, "http_hold", "rules.yar"), "w") as f:
        f.write(HOLD_RULES.lstrip())
    n = [0]

    def conn(label, note):
        n[0] += 1
        ipc = lambda k=n[0]: IP(src=f"10.1.9.{k}", dst="10.2.9.80")
        ips = lambda k=n[0]: IP(src="10.2.9.80", dst=f"10.1.9.{k}")
        t = Tcp(c, eth_a, eth_b, ipc, ips, 43000 + n[0], 80, label, side_c="A", side_s="B")
        t.handshake(note)
        t.c("PA", note=f"{label}: GET", data=b"GET /" + label.encode() + b" HTTP/1.1\r\nHost: files.test\r\n\r\n")
        return t

    def chunk(d):
        return b"%x\r\n" % len(d) + d + b"\r\n"

    small_pe = pe_file(1600)
    clean = b"ZM" + bytes((0x61 + i % 26) for i in range(1598))
    # Independent expectation: what each rule must say about each body.
    assert small_pe[:2] == b"MZ" and len(small_pe) < 4000      # small_pe true at the end
    assert clean[:2] != b"MZ"                                   # no rule on the twin
    for label, body, bad in (("k1", small_pe, True), ("k2", clean, False)):
        t = conn(label, f"{label}: chunked {'small PE' if bad else 'text (clean twin)'}, last chunk apart")
        D = f"D dpi_drop {label}" if bad else None
        t.s("PA", None, f"{label}: headers and the first 1000 bytes: held, released by the next segment",
            data=b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk(body[:1000]))
        t.s("PA", D, f"{label}: the last 600 bytes: held until the file's end" +
            (", dropped with it (never reach the client)" if bad else ", then released"), data=chunk(body[1000:]))
        t.s("PA", D, f"{label}: the 0-chunk: the file ends (1600 bytes)" +
            (": small_pe fires: dropped, the flow blocked" if bad else ": no rule, forwarded"), data=b"0\r\n\r\n")
        t.c("A", D, f"{label}: client ACK" + (": the flow is blocked" if bad else ""))
    evil = b"<html>first part " + b"x" * 300 + b" second part EVIL-TRAILER"
    fine = b"<html>first part " + b"x" * 300 + b" second part EVIL-TRAILER and more"
    assert evil.endswith(b"EVIL-TRAILER") and not fine.endswith(b"EVIL-TRAILER")
    for label, body, bad in (("k3", evil, True), ("k4", fine, False)):
        t = conn(label, f"{label}: body delimited by the connection's close, {'ends in EVIL-TRAILER' if bad else 'clean twin'}")
        D = f"D dpi_drop {label}" if bad else None
        t.s("PA", None, f"{label}: headers (HTTP/1.0, no length) and the first bytes: held, then released",
            data=b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n" + body[:100])
        t.s("PA", D, f"{label}: the rest of the body: held until the server's FIN" +
            (", dropped with it" if bad else ", then released"), data=body[100:])
        t.s("FA", D, f"{label}: the server's FIN ends the file" +
            (": evil_end fires: dropped, the flow blocked" if bad else ": forwarded"))
        t.c("FA", D, f"{label}: client FIN" + (": the flow is blocked" if bad else ""))
        if not bad:
            t.s("A", None, f"{label}: last ACK")
    # k5: Content-Length: the end is known with the last data segment itself, which the rule
    # drops; the segment held before it goes with the blocked flow.
    t = conn("k5", "k5: small PE with Content-Length in two segments")
    msg = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(small_pe) + small_pe
    t.s("PA", "D dpi_drop k5", "k5: headers and the first bytes: held; the next segment blocks the flow: dropped with it",
        data=msg[:900])
    t.s("PA", "D dpi_drop k5", "k5: the last bytes: the file ends in this segment: small_pe drops it", data=msg[900:])
    return c


REORDER_RULES = r"""
rule stream_marker { meta: action = "drop" strings: $a = "REORDERED-STREAM-MARKER-0123456789" condition: $a }
rule eicar { meta: action = "drop" strings: $e = "X5O!P%@AP[4\\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*" condition: $e }
"""


def case_tcp_reorder(name="tcp_reorder", hold=False):
    cfg = {"dns": DNS_LISTS, "dpi": {"rule_files": ["rules.yar"], "http": {"ports": [80]}}}
    if hold:
        cfg["dataplane"] = {"tcp": {"hold_out_of_order": True}}
    hold_note = """
Hold mode (dataplane.tcp.hold_out_of_order): the same sessions, but a segment beyond a hole is
held, not forwarded: it leaves after the segment that fills the hole, or is dropped with it
(same reason: the receiver never gets a byte of a blocked session). v1: the held harmless
segment stays held while the contradicting filler is dropped, and leaves after the true one.
""" if hold else ""
    c = FwCase(name, cfg, hold_note + """
Sessions delivered out of order, as captured (no retransmission follows), issue 30: a segment
beyond a hole is forwarded and its bytes kept (the receiver cannot hand them to its
application before the hole fills); the segment that fills the hole is inspected together
with the kept bytes behind it, in order, once, and the verdict acts on it. Each reordered
session has an in-order twin with the same bytes: the same thing is found, one packet per
flow dropped where the stream first holds the whole match. rules.yar: stream_marker
("REORDERED-STREAM-MARKER-0123456789", drop; raw stream of non-HTTP flows) and eicar (the
EICAR string, drop; files of HTTP flows). DNS: www.ads.example is blocked (NXDOMAIN).
r1/i1: raw-stream DPI, four segments, order 3 1 2 0 / 0 1 2 3. r2/i2: a blocked DNS query
over TCP in three segments, reversed / in order. r3/i3: an HTTP response with a gzip EICAR
file in four segments, order 2 3 1 0 / in order. k1..k3: clean twins of r1..r3, reordered:
forwarded whole. v1: a hole filler that repeats kept bytes with other content (the marker
written over harmless kept bytes): dropped (tcp_overlap_different, the kept copy was
forwarded first), then the true filler: forwarded.""")
    os.makedirs(os.path.join(HERE, name), exist_ok=True)
    with open(os.path.join(HERE, name, "rules.yar"), "w") as f:
        f.write(REORDER_RULES.lstrip())
    n = [0]

    def conn(label, port, note):
        n[0] += 1
        ipc = lambda k=n[0]: IP(src=f"10.1.30.{k}", dst="10.2.30.80")
        ips = lambda k=n[0]: IP(src="10.2.30.80", dst=f"10.1.30.{k}")
        t = Tcp(c, eth_a, eth_b, ipc, ips, 45000 + n[0], port, label, side_c="A", side_s="B")
        t.handshake(note)
        return t

    def split(data, cuts):
        out, prev = [], 0
        for x in list(cuts) + [len(data)]:
            out.append((prev, data[prev:x]))
            prev = x
        return out

    def send(t, from_client, base, segs, order, exps, what):
        """Segments `segs` ((offset, bytes)) at base + offset in `order`; exps[k]: the
        expectation of the k-th one sent."""
        for k, idx in enumerate(order):
            off, d = segs[idx]
            tcp_at(t, from_client, "PA", base + off, d, exps[k],
                   f"{t.flow}: {what} segment {idx} ({len(d)} bytes at +{off})")

    marker = b"REORDERED-STREAM-MARKER-0123456789"
    evil = b"some prefix bytes, then " + marker + b" and a tail"
    good = b"some prefix bytes, then " + b"reordered-stream-harmless-01234567" + b" and a tail"
    assert len(evil) == len(good)
    cuts = (10, 30, 45)  # the marker (24 .. 58) spans segments 1, 2 and 3
    # r1 / k1: order 3 1 2 0: three kept, the filler completes the match with them.
    for label, data, last in (("r1", evil, "D dpi_drop r1"), ("k1", good, None)):
        t = conn(label, 9000, f"{label}: raw stream, reordered")
        base = t.cseq
        send(t, True, base, split(data, cuts), [3, 1, 2, 0], [last if hold else None] * 3 + [last], "stream")
        if last:
            tcp_at(t, True, "PA", base, data[:10], "D dpi_drop r1",
                   "r1: the filler retransmitted: the flow is blocked")
        else:
            t.cseq = base + len(data)
            t.s("A", "F k1", "k1: the server acknowledges every byte")
    # i1: in order: dropped where the marker completes (segment 3).
    t = conn("i1", 9000, "i1: raw stream, in order")
    send(t, True, t.cseq, split(evil, cuts), [0, 1, 2, 3], [None, None, None, "D dpi_drop i1"], "stream")

    def framed(m):
        return struct.pack("!H", len(m)) + m

    blocked = framed(dns_q("www.ads.example", ident=0x3001))
    clean = framed(dns_q("www.abc.example", ident=0x3002))
    dcuts = (7, 20)
    for label, q, last in (("r2", blocked, "D dns_answered r2"), ("k2", clean, None)):
        t = conn(label, 53, f"{label}: DNS over TCP, reversed")
        base = t.cseq
        send(t, True, base, split(q, dcuts), [2, 1, 0], [last if hold else None] * 2 + [last], "query")
        if last:
            tcp_at(t, True, "PA", base + 7, q[7:20], "D dns_tcp_closed r2",
                   "r2: a kept segment retransmitted: the connection is closed")
        else:
            t.cseq = base + len(q)
            t.s("PA", "F k2", "k2: server answer", data=framed(dns_resp("www.abc.example", [], 0x3002)))
    t = conn("i2", 53, "i2: DNS over TCP, in order")
    send(t, True, t.cseq, split(blocked, dcuts), [0, 1, 2], [None, None, "D dns_answered i2"], "query")

    payload_ = http_gzip(b"eicar test file: " + EICAR + b" end")
    clean_ = http_gzip(b"plain test file: " + b"no virus here, just a long enough line" * 2 + b" end")
    for label, body, order, exps in (
            ("r3", payload_, [2, 3, 1, 0], [None, None, None, "D dpi_drop r3"]),
            ("k3", clean_, [2, 3, 1, 0], [None, None, None, None]),
            ("i3", payload_, [0, 1, 2, 3], [None, None, None, "D dpi_drop i3"])):
        t = conn(label, 80, f"{label}: HTTP gzip file, order {' '.join(map(str, order))}")
        t.c("PA", note=f"{label}: GET", data=b"GET /" + label.encode() + b".txt HTTP/1.1\r\nHost: files.test\r\n\r\n")
        msg = (b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(body)) + body
        if body is payload_:
            http_file_check("eicar", msg, b"eicar test file: " + EICAR + b" end")
        h = msg.index(b"\r\n\r\n") + 4
        rest = len(msg) - h
        segs = split(msg, (h, h + rest // 3, h + 2 * rest // 3))
        if hold and order != [0, 1, 2, 3]:  # the held segments go with the filler
            exps = [exps[-1]] * 3 + [exps[-1]]
        send(t, False, t.sseq, segs, order, exps, "response")
        t.sseq += len(msg)
        t.c("A", f"D dpi_drop {label}" if exps[-1] else f"F {label}",
            f"{label}: client ACK" + (": the flow is blocked" if exps[-1] else ""))
    # v1: the filler repeats kept bytes with other content.
    t = conn("v1", 9000, "v1: filler overlapping kept bytes with other bytes")
    base = t.cseq
    tcp_at(t, True, "PA", base + 24, good[24:], None, "v1: harmless bytes beyond a hole: kept")
    tcp_at(t, True, "PA", base, evil[:40], "D tcp_overlap_different v1",
           "v1: a filler whose tail differs from the kept bytes (the marker): dropped")
    tcp_at(t, True, "PA", base, good[:24], None, "v1: the true filler: forwarded with the kept bytes")
    return c


CASES = {
    "tcp_session": case_tcp_session,
    "tcp_reorder_hold": lambda: case_tcp_reorder("tcp_reorder_hold", True),
    "udp_icmp": case_udp_icmp,
    "ipv6_ext_headers": case_ipv6_ext_headers,
    "vlan_qinq": case_vlan_qinq,
    "fragments_in_order": case_fragments_in_order,
    "fragments_out_of_order": case_fragments_out_of_order,
    "fragments_overlap": case_fragments_overlap,
    "fragments_overlap_forward": case_fragments_overlap_forward,
    "tiny_fragment": case_tiny_fragment,
    "malformed": lambda: case_malformed("malformed", False),
    "malformed_forward": lambda: case_malformed("malformed_forward", True),
    "non_ip": case_non_ip,
    "tcp_midstream_drop": case_tcp_midstream_drop,
    "flow_timeouts": case_flow_timeouts,
    "two_sided": case_two_sided,
    "flow_table_full": case_flow_table_full,
    "fw_allow_deny": case_fw_allow_deny,
    "fw_stateful_return": case_fw_stateful_return,
    "fw_reject": case_fw_reject,
    "fw_rule_change": lambda: case_fw_rule_change(False),
    "fw_rule_change_keep": lambda: case_fw_rule_change(True),
    "fw_countries": case_fw_countries,
    "fw_ipv6": case_fw_ipv6,
    # --- lb ---
    "lb_l2": lb_case_l2,
    "lb_nat": lb_case_nat,
    "lb_ipip": lb_case_ipip,
    "lb_weights": lb_case_weights,
    "lb_payload_key": lb_case_payload_key,
    "lb_drain": lb_case_drain,
    "lb_flush_reset": lb_case_flush_reset,
    "lb_fragments": lb_case_fragments,
    "dpi_streams": case_dpi_streams,  # --- dpi ---
    "dpi_reset": case_dpi_reset,  # --- dpi ---
    "dpi_flow_end": case_dpi_flow_end,  # --- dpi --- alerts at a stream's end
    # DNS filtering
    "dns_udp_actions": case_dns_udp_actions,
    "dns_cname_cloaking": case_dns_cname_cloaking,
    "dns_tcp": case_dns_tcp,
    "evasion_fragments": case_evasion_fragments,  # issue 16: reassembled for inspection
    # --- tcp stream ---
    "evasion_tcp_dns": case_evasion_tcp_dns,
    "evasion_tcp_dpi": case_evasion_tcp_dpi,
    "evasion_tcp_retransmit_after_drop": case_evasion_tcp_retransmit_after_drop,
    "pppoe_sessions": case_pppoe_sessions,
    "http_files": case_http_files,  # --- http ---
    "http_no_slot_forward": lambda: case_http_no_slot("FORWARD"),
    "http_no_slot_drop": lambda: case_http_no_slot("DROP"),
    "http_hold": case_http_hold,  # --- http --- hold-back of a file's last packet
    "http_default": lambda: case_http_default("http_default", None),  # issue 30: on with rules
    "http_off": lambda: case_http_default("http_off", {"enabled": False}),
    "tunnels": case_tunnels,  # issue 16: tunnels opened, inner packets judged
    "tcp_reorder": case_tcp_reorder,  # issue 30: out-of-order sessions inspected, not dropped
}


def main():
    names = sys.argv[1:] or list(CASES)
    for n in names:
        if n not in CASES:
            sys.exit(f"unknown case {n}; known: {' '.join(CASES)}")
        CASES[n]().write()


if __name__ == "__main__":
    main()
