#!/usr/bin/python3
"""Writes examples/example.pcap: the traffic of the demo (`scripts/demo.sh`), made to show
every stage of examples/config.json at work.

Deterministic: fixed timestamps, addresses, ports and payloads, so running it again writes
the same bytes (check with sha256sum). Needs scapy (Debian: python3-scapy). Usage:

    /usr/bin/python3 examples/gen_example.py [OUT.pcap]   # default: examples/example.pcap

The capture is what a tap on the client side sees: both directions of every conversation
arrive on side A (`replay --in`). Clients are 10.0.0.0/24, the server network 192.0.2.0/24,
the Internet 203.0.113.0/24. In this order:
  1. plain traffic, allowed: ARP, ICMP echo to the gateway, an NTP exchange, an HTTPS
     session (handshake, TLS-looking bytes, FIN teardown), an IPv6 ping
  2. an SSH attempt to 192.0.2.22:22, SYN sent 3 times (the client retries): firewall rule
     ssh-block (deny) drops all three
  3. a telnet attempt to 192.0.2.23:23: firewall rule telnet-reject answers a TCP reset
  4. DNS to the resolver 192.0.2.53: www.example.com (allowed, answered by the resolver),
     then update.malware.example (list malware, match_subdomains: the appliance answers
     NXDOMAIN itself and drops the query)
  5. an HTTP download from 203.0.113.50 of the EICAR test file: YARA rule EICAR_test_file
     (action reset) resets the flow when the body arrives; the client's next packets of the
     flow are dropped
  6. 8 clients open HTTP connections to the web service 192.0.2.80:80 (SYN, then a
     request): the load balancer spreads them over backends web-1..web-3 (NAT to
     192.0.2.81-83:8080); one request carries "User-Agent: sqlmap": YARA rule
     sqlmap_scanner (action alert) raises an alert and the request passes
INTENT (below) says what the demo must show; tests/docs/demo_test.py checks the replay
against it.
"""
import os
import sys

from scapy.all import (ARP, DNS, DNSQR, DNSRR, ICMP, IP, TCP, UDP, Ether,
                       ICMPv6EchoReply, ICMPv6EchoRequest, IPv6, Raw, wrpcap)
from scapy.all import conf as scapy_conf

scapy_conf.verb = 0

BASE = 1_700_000_000  # 2023-11-14T22:13:20Z
MAC_CLIENT = "02:00:00:00:0a:01"
MAC_GW = "02:00:00:00:0c:01"
EICAR = rb"X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*"

# What the demo must show, independent of the appliance's output: the packets the generator
# wrote for each point, by index in the capture (filled in by build()).
INTENT = {
    "firewall_deny": {"rule": "ssh-block", "server": "192.0.2.22", "dport": 22,
                      "flows": 1, "packets": []},
    "firewall_reject": {"rule": "telnet-reject", "server": "192.0.2.23", "dport": 23,
                        "flows": 1, "packets": []},
    "dns_blocked": {"name": "update.malware.example", "list": "malware", "rcode": 3,
                    "packets": []},
    "dns_allowed": {"name": "www.example.com", "packets": []},
    "dpi_reset": {"rule": "EICAR_test_file", "action": "reset", "packets": []},
    "dpi_alert": {"rule": "sqlmap_scanner", "action": "alert", "packets": []},
    "lb": {"service": "web", "vip": "192.0.2.80", "backends": ["web-1", "web-2", "web-3"],
           "addresses": ["192.0.2.81", "192.0.2.82", "192.0.2.83"], "port": 8080,
           "flows": 8, "packets": []},
    "allowed": {"packets": []},
}


class Capture:
    def __init__(self):
        self.frames = []

    def add(self, pkt, *intents):
        """Appends a frame 1 ms after the previous one; notes its index under `intents`."""
        pkt.time = BASE + len(self.frames) / 1000
        for k in intents:
            INTENT[k]["packets"].append(len(self.frames))
        self.frames.append(pkt)


def eth(fwd=True):
    return Ether(src=MAC_CLIENT, dst=MAC_GW) if fwd else Ether(src=MAC_GW, dst=MAC_CLIENT)


def tcp_session(cap, cli, srv, sport, dport, request, response, intent="allowed", close=True):
    """A whole TCP conversation: handshake, request, response, FIN teardown."""
    c, s = 1000, 5000
    cap.add(eth() / IP(src=cli, dst=srv) / TCP(sport=sport, dport=dport, flags="S", seq=c), intent)
    cap.add(eth(False) / IP(src=srv, dst=cli) / TCP(sport=dport, dport=sport, flags="SA", seq=s,
                                                    ack=c + 1), intent)
    c += 1
    s += 1
    cap.add(eth() / IP(src=cli, dst=srv) / TCP(sport=sport, dport=dport, flags="A", seq=c, ack=s),
            intent)
    cap.add(eth() / IP(src=cli, dst=srv) / TCP(sport=sport, dport=dport, flags="PA", seq=c,
                                               ack=s) / Raw(request), intent)
    c += len(request)
    cap.add(eth(False) / IP(src=srv, dst=cli) / TCP(sport=dport, dport=sport, flags="PA", seq=s,
                                                    ack=c) / Raw(response), intent)
    s += len(response)
    cap.add(eth() / IP(src=cli, dst=srv) / TCP(sport=sport, dport=dport, flags="A", seq=c, ack=s),
            intent)
    if close:
        cap.add(eth() / IP(src=cli, dst=srv) / TCP(sport=sport, dport=dport, flags="FA", seq=c,
                                                   ack=s), intent)
        cap.add(eth(False) / IP(src=srv, dst=cli) / TCP(sport=dport, dport=sport, flags="FA",
                                                        seq=s, ack=c + 1), intent)
        cap.add(eth() / IP(src=cli, dst=srv) / TCP(sport=sport, dport=dport, flags="A",
                                                   seq=c + 1, ack=s + 1), intent)


def build():
    for v in INTENT.values():
        v["packets"].clear()
    cap = Capture()
    # 1. plain traffic
    cap.add(Ether(src=MAC_CLIENT, dst="ff:ff:ff:ff:ff:ff") /
            ARP(op=1, hwsrc=MAC_CLIENT, psrc="10.0.0.21", pdst="10.0.0.1"), "allowed")
    cap.add(Ether(src=MAC_GW, dst=MAC_CLIENT) /
            ARP(op=2, hwsrc=MAC_GW, psrc="10.0.0.1", hwdst=MAC_CLIENT, pdst="10.0.0.21"), "allowed")
    for i in range(2):
        cap.add(eth() / IP(src="10.0.0.21", dst="192.0.2.1") / ICMP(id=0x77, seq=i + 1) /
                Raw(b"ping" * 8), "allowed")
        cap.add(eth(False) / IP(src="192.0.2.1", dst="10.0.0.21") /
                ICMP(type=0, id=0x77, seq=i + 1) / Raw(b"ping" * 8), "allowed")
    cap.add(eth() / IP(src="10.0.0.21", dst="192.0.2.123") / UDP(sport=123, dport=123) /
            Raw(b"\x23" + bytes(47)), "allowed")  # NTP v4 client request
    cap.add(eth(False) / IP(src="192.0.2.123", dst="10.0.0.21") / UDP(sport=123, dport=123) /
            Raw(b"\x24\x02" + bytes(46)), "allowed")  # NTP v4 server answer, stratum 2
    hello = b"\x16\x03\x01\x00\x30" + bytes(range(48))
    server_hello = b"\x16\x03\x03\x00\x40" + bytes(range(64, 128))
    tcp_session(cap, "10.0.0.21", "203.0.113.10", 50100, 443, hello, server_hello)
    cap.add(Ether(src=MAC_CLIENT, dst=MAC_GW) / IPv6(src="2001:db8:a::21", dst="2001:db8:b::1") /
            ICMPv6EchoRequest(id=7, seq=1, data=b"v6 ping"), "allowed")
    cap.add(Ether(src=MAC_GW, dst=MAC_CLIENT) / IPv6(src="2001:db8:b::1", dst="2001:db8:a::21") /
            ICMPv6EchoReply(id=7, seq=1, data=b"v6 ping"), "allowed")
    # 2. SSH into the server network: the SYN and two retries, all denied
    for _ in range(3):
        cap.add(eth() / IP(src="10.0.0.22", dst="192.0.2.22") /
                TCP(sport=50200, dport=22, flags="S", seq=7000), "firewall_deny")
    # 3. telnet: rejected (TCP reset back to the client)
    cap.add(eth() / IP(src="10.0.0.23", dst="192.0.2.23") / TCP(sport=50300, dport=23, flags="S",
                                                                seq=8000), "firewall_reject")
    # 4. DNS: an allowed name (query and the resolver's answer), then a blocked one
    q = DNS(id=0x1111, rd=1, qd=DNSQR(qname="www.example.com", qtype="A"))
    cap.add(eth() / IP(src="10.0.0.24", dst="192.0.2.53") / UDP(sport=50400, dport=53) / q,
            "dns_allowed")
    cap.add(eth(False) / IP(src="192.0.2.53", dst="10.0.0.24") / UDP(sport=53, dport=50400) /
            DNS(id=0x1111, qr=1, rd=1, ra=1, qd=DNSQR(qname="www.example.com", qtype="A"),
                an=DNSRR(rrname="www.example.com", type="A", ttl=300, rdata="203.0.113.80")),
            "dns_allowed")
    cap.add(eth() / IP(src="10.0.0.24", dst="192.0.2.53") / UDP(sport=50401, dport=53) /
            DNS(id=0x2222, rd=1, qd=DNSQR(qname="update.malware.example", qtype="A")),
            "dns_blocked")
    # 5. the EICAR download: reset by DPI when the body arrives
    body = EICAR
    response = (b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                b"Content-Length: %d\r\n\r\n" % len(body)) + body
    request = (b"GET /eicar.com HTTP/1.1\r\nHost: files.example\r\nUser-Agent: curl/7.88.1\r\n"
               b"Accept: */*\r\n\r\n")
    tcp_session(cap, "10.0.0.25", "203.0.113.50", 50500, 80, request, response, "dpi_reset")
    # 6. eight clients to the web service; the third is sqlmap
    for k in range(8):
        cli, sport = "10.0.0.%d" % (30 + k), 51000 + k * 7
        ua = b"sqlmap/1.7.2#stable (https://sqlmap.org)" if k == 2 else b"Mozilla/5.0"
        intent = ("lb", "dpi_alert") if k == 2 else ("lb",)
        cap.add(eth() / IP(src=cli, dst="192.0.2.80") / TCP(sport=sport, dport=80, flags="S",
                                                            seq=9000), *intent)
        cap.add(eth() / IP(src=cli, dst="192.0.2.80") /
                TCP(sport=sport, dport=80, flags="PA", seq=9001, ack=1) /
                Raw(b"GET /?id=%d HTTP/1.1\r\nHost: www.example\r\nUser-Agent: %s\r\n\r\n"
                    % (k, ua)), *intent)
    return cap.frames


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__),
                                                              "example.pcap")
    wrpcap(out, build())


if __name__ == "__main__":
    main()
