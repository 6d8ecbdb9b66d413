#!/usr/bin/python3
"""`dpu-appliance replay --rules FILE` (docs/signatures.md), end to end on a capture written
here with scapy: Suricata-format signatures on TCP stream bytes, HTTP request / response header buffers
(sticky and legacy forms) and bodies (decoded: a gzip download), dns.query and UDP
datagrams, the body-buffer pool running out (dpi_fail FORWARD: an uninspected event), eve.json
alert fields, pcap_cnt counting from 1, drop and reject verdicts, flowbits across packets of
a flow, refusals with sid / line / reason in the summary, and the run leaves nothing behind.

usage: replay_rules_test.py DPU_APPLIANCE
"""
import gzip
import json
import os
import subprocess
import sys
import tempfile

from scapy.all import IP, TCP, UDP, Ether, Raw, wrpcap  # noqa: E402

APP = sys.argv[1]
FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what)


def tcp_session(cli, srv, sport, dport, client_data, server_data, t0):
    """A TCP handshake, then client_data and server_data segments (lists), in order."""
    pkts = []
    c, s = 1000, 5000
    e = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
    pkts.append(e / IP(src=cli, dst=srv) / TCP(sport=sport, dport=dport, flags="S", seq=c))
    pkts.append(e / IP(src=srv, dst=cli) / TCP(sport=dport, dport=sport, flags="SA", seq=s, ack=c + 1))
    c += 1
    s += 1
    pkts.append(e / IP(src=cli, dst=srv) / TCP(sport=sport, dport=dport, flags="A", seq=c, ack=s))
    for cd, sd in zip(client_data, server_data):
        if cd:
            pkts.append(e / IP(src=cli, dst=srv) / TCP(sport=sport, dport=dport, flags="PA", seq=c, ack=s) / Raw(cd))
            c += len(cd)
        if sd:
            pkts.append(e / IP(src=srv, dst=cli) / TCP(sport=dport, dport=sport, flags="PA", seq=s, ack=c) / Raw(sd))
            s += len(sd)
    for i, p in enumerate(pkts):
        p.time = t0 + i * 0.001
    return pkts


RULES = r"""# test rules (written for this test)
alert tcp $HOME_NET any -> $EXTERNAL_NET 80 (msg:"login request"; flow:established,to_server; content:"POST /login"; startswith; flowbits:set,logged; flowbits:noalert; classtype:policy-violation; sid:1000001; rev:1;)
alert tcp $EXTERNAL_NET 80 -> $HOME_NET any (msg:"login accepted"; flow:established,to_client; content:"200 OK"; flowbits:isset,logged; classtype:policy-violation; sid:1000002; rev:3; metadata:created_at 2026_12_03, deployment Perimeter;)
drop tcp any any -> any any (msg:"exfil marker"; flow:to_server; content:"SECRET-"; pcre:"/^[0-9]{4}/R"; sid:1000003; rev:1;)
reject tcp any any -> any 8080 (msg:"admin panel"; content:"GET /admin"; sid:1000004; rev:1;)
alert udp any any -> any 53 (msg:"dns query for evil"; content:"|04|evil|03|com|00|"; nocase; sid:1000005; rev:1;)
alert tcp any any -> any any (msg:"never loaded"; tls.certs; content:"x"; sid:1000006; rev:1;)
alert http any any -> any any (msg:"needs TLS"; tls.sni; content:"x"; sid:1000007; rev:1;)
alert http $HOME_NET any -> any any (msg:"sqlmap on the shop"; flow:established,to_server; http.method; content:"GET"; http.uri; content:"/login.php?id="; startswith; http.user_agent; content:"sqlmap"; nocase; http.host; content:"shop.example"; bsize:12; sid:1000008; rev:1;)
alert http any any -> $HOME_NET any (msg:"redirect to evil"; flow:established,to_client; http.stat_code; content:"302"; http.location; content:"evil.example"; http.uri; content:"/login.php"; sid:1000009; rev:1;)
alert tcp any any -> any $HTTP_PORTS (msg:"legacy uri modifiers"; flow:to_server; content:"/login.php"; http_uri; content:"id=1"; http_uri; distance:0; sid:1000010; rev:1;)
alert http any any -> any any (msg:"not this host"; http.host; content:"other.example"; sid:1000011; rev:1;)
alert http any any -> any any (msg:"login form posted"; flow:to_server; http.method; content:"POST"; http.request_body; content:"user=admin"; content:"pass="; distance:0; sid:1000014; rev:1;)
alert http any any -> $HOME_NET any (msg:"marker in a gzip download"; flow:to_client; file.data; content:"MALWARE-MARKER"; sid:1000015; rev:1;)
alert http any any -> $HOME_NET any (msg:"raw gzip bytes never match"; flow:to_client; http.response_body; content:"|1f 8b 08|"; startswith; sid:1000016; rev:1;)
alert dns $HOME_NET any -> any any (msg:"query under evil.com"; dns.query; dotprefix; content:".evil.com"; endswith; nocase; sid:1000012; rev:1;)
alert dns $HOME_NET any -> any any (msg:"query for good.com"; dns.query; content:"good.com"; sid:1000013; rev:1;)
"""

CLASSIFICATION = "config classification: policy-violation,Potential Corporate Privacy Violation,1\n"


def main():
    with tempfile.TemporaryDirectory(prefix="replay_rules.") as d:
        rules = os.path.join(d, "test.rules")
        open(rules, "w").write(RULES)
        open(os.path.join(d, "classification.config"), "w").write(CLASSIFICATION)
        pk = []
        pk += tcp_session("10.0.0.5", "198.51.100.7", 40001, 80,
                          [b"POST /login HTTP/1.1\r\nHost: x\r\n\r\n"], [b"HTTP/1.1 200 OK\r\n\r\n"], 1000.0)
        # the same response on a flow without the login: no alert
        pk += tcp_session("10.0.0.5", "198.51.100.7", 40002, 80,
                          [b"GET / HTTP/1.1\r\n\r\n"], [b"HTTP/1.1 200 OK\r\n\r\n"], 1001.0)
        pk += tcp_session("10.0.0.6", "198.51.100.8", 40003, 443,
                          [b"data SECRET-12x", b"more SECRET-1234 tail"], [b"", b""], 1002.0)
        pk += tcp_session("10.0.0.7", "198.51.100.9", 40004, 8080, [b"GET /admin HTTP/1.1\r\n\r\n"], [b""], 1003.0)
        pk += tcp_session("10.0.0.9", "198.51.100.10", 40005, 80,
                          [b"GET /login.php?id=1 HTTP/1.1\r\nHost: Shop.Example\r\nUser-Agent: sqlmap/1.7\r\n\r\n"],
                          [b"HTTP/1.1 302 Found\r\nLocation: http://evil.example/\r\nContent-Length: 0\r\n\r\n"],
                          1003.5)
        body = b"MALWARE-MARKER " * 20
        gz = gzip.compress(body)
        pk += tcp_session("10.0.0.11", "198.51.100.11", 40006, 80,
                          [b"POST /signin HTTP/1.1\r\nHost: a\r\nContent-Length: 25\r\n\r\n", b"user=admin&pass=hunter2xx",
                           b"GET /f.bin HTTP/1.1\r\nHost: a\r\n\r\n"],
                          [b"", b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
                           b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(gz) + gz],
                          1003.7)
        e = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
        q = e / IP(src="10.0.0.8", dst="192.0.2.53") / UDP(sport=5353, dport=53) / Raw(
            b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x04EVIL\x03com\x00\x00\x01\x00\x01")
        q.time = 1004.0
        pk.append(q)
        pcap = os.path.join(d, "in.pcap")
        wrpcap(pcap, pk)
        ev, sj = os.path.join(d, "events.jsonl"), os.path.join(d, "summary.json")
        r = subprocess.run([APP, "replay", "--rules", rules, "--in", pcap, "--events", ev,
                            "--summary-json", sj, "--verdicts", os.path.join(d, "v.jsonl")],
                           capture_output=True, text=True)
        check(r.returncode == 0, "replay exit %d: %s" % (r.returncode, r.stderr))
        if r.returncode != 0:
            return
        print(r.stdout)
        events = [json.loads(line) for line in open(ev)]
        alerts = [x for x in events if x["event_type"] == "alert"]
        by_sid = {}
        for a in alerts:
            by_sid.setdefault(a["alert"].get("signature_id"), []).append(a)
        check(set(by_sid) == {1000002, 1000003, 1000004, 1000005, 1000008, 1000009, 1000010, 1000012,
                              1000014, 1000015},
              "alerting sids %s" % sorted(by_sid))
        # HTTP buffers: once per transaction, on the packet that completed the headers
        for sid in (1000008, 1000009, 1000010, 1000014, 1000015):
            check(len(by_sid.get(sid, [])) == 1, "%d once: %d" % (sid, len(by_sid.get(sid, []))))
        check(by_sid.get(1000009, [{}])[0].get("src_port") == 80, "1000009 on the response")
        a2 = by_sid.get(1000002, [{}])[0]
        al = a2.get("alert", {})
        check(al.get("gid") == 1 and al.get("rev") == 3 and al.get("signature") == "login accepted",
              "eve fields of 1000002: %s" % al)
        check(al.get("category") == "Potential Corporate Privacy Violation" and al.get("severity") == 1,
              "classification of 1000002: %s" % al)
        check(al.get("action") == "allowed", "1000002 allowed: %s" % al)
        check(al.get("metadata", {}).get("deployment") == ["Perimeter"], "metadata: %s" % al.get("metadata"))
        check(a2.get("src_port") == 80 and a2.get("dest_port") == 40001, "1000002 on the reply: %s" % a2)
        # pcap_cnt counts from 1: the response is the 5th packet of the capture
        check(a2.get("pcap_cnt") == 5, "pcap_cnt of the response %s" % a2.get("pcap_cnt"))
        check(len(by_sid.get(1000002, [])) == 1, "1000002 once (the second flow has no login)")
        a3 = by_sid.get(1000003, [{}])[0]
        check(a3.get("alert", {}).get("action") == "blocked" and a3.get("alert", {}).get("verdict") == "drop",
              "1000003 blocked: %s" % a3.get("alert"))
        check(len(by_sid.get(1000003, [])) == 1, "the pcre needs 4 digits: only the second segment")
        a4 = by_sid.get(1000004, [{}])[0]
        check(a4.get("alert", {}).get("verdict") == "reject", "1000004 rejected: %s" % a4.get("alert"))
        s = json.load(open(sj))["signatures"]
        check(s["accepted"] == 14, "accepted %s" % s["accepted"])
        refused = {x["sid"]: x for x in s["refused"]}
        check(set(refused) == {1000006, 1000007}, "refused %s" % s["refused"])
        check(refused.get(1000006, {}).get("line") == 7 and "tls.certs" in refused.get(1000006, {}).get("reason", ""),
              "refusal of 1000006: %s" % refused.get(1000006))
        check(refused.get(1000007, {}).get("line") == 8 and "tls.sni" in refused.get(1000007, {}).get("reason", ""),
              "refusal of 1000007: %s" % refused.get(1000007))
        fired = {x["sid"]: x["alerts"] for x in s["fired"]}
        check(fired == {1000002: 1, 1000003: 1, 1000004: 1, 1000005: 1, 1000008: 1, 1000009: 1, 1000010: 1,
                        1000012: 1, 1000014: 1, 1000015: 1},
              "fired %s" % fired)
        check(s["drops"] == 1 and s["rejects"] == 1, "drops/rejects %s" % s)
        # the flow of the drop rule: blocked from that packet on
        verdicts = [json.loads(line) for line in open(os.path.join(d, "v.jsonl"))]
        dropped = [v["index"] for v in verdicts if v["verdict"] == "drop"]
        check(len(dropped) >= 1 and all(v["stage"] == "dpi" for v in verdicts if v["verdict"] == "drop"),
              "dpi drops %s" % dropped)
        check("1:1000003" in [v["rule"] for v in verdicts if v["verdict"] == "drop"], "drop rule named 1:1000003")
        check("sig       14 signatures loaded (2 refused, not loaded), 10 fired" in r.stdout, "headline")
        # Body buffers run out (one per worker, two bodies open at once): dpi_fail FORWARD
        # passes the second body uninspected, with an event; counted.
        cfg = os.path.join(d, "one_buffer.json")
        json.dump({"dpi": {"signatures": {"files": [rules], "body_buffers_per_worker": 1}}}, open(cfg, "w"))
        a = tcp_session("10.0.0.12", "198.51.100.12", 40007, 80,
                        [b"POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 50\r\n\r\nuser=admin", b"&pass=" + b"x" * 34], [b"", b""], 2000.0)
        b2 = tcp_session("10.0.0.13", "198.51.100.12", 40008, 80,
                         [b"POST /b HTTP/1.1\r\nHost: a\r\nContent-Length: 50\r\n\r\nuser=admin", b"&pass=" + b"y" * 34], [b"", b""], 2000.0)
        # interleaved: both bodies start before either ends
        order = a[:4] + b2[:4] + a[4:] + b2[4:]
        for k, p in enumerate(order):
            p.time = 2000.0 + k * 0.001
        pcap2 = os.path.join(d, "two_bodies.pcap")
        wrpcap(pcap2, order)
        ev2, sj2 = os.path.join(d, "ev2.jsonl"), os.path.join(d, "s2.json")
        r2 = subprocess.run([APP, "replay", "--config", cfg, "--in", pcap2, "--events", ev2, "--summary-json", sj2],
                            capture_output=True, text=True)
        check(r2.returncode == 0, "replay with one body buffer: %s" % r2.stderr)
        if r2.returncode == 0:
            e2 = [json.loads(line) for line in open(ev2)]
            un = [x for x in e2 if x["event_type"] == "uninspected"]
            check(len(un) == 1 and un[0]["uninspected"]["reason"] == "sig_no_body_buffer" and un[0]["src_port"] == 40008,
                  "one uninspected body: %s" % un)
            al2 = [x["alert"]["signature_id"] for x in e2 if x["event_type"] == "alert"]
            check(al2 == [1000014], "the first body inspected: %s" % al2)
            h = json.load(open(sj2)).get("http", {})
            check(h.get("sig_no_body_buffer") == 1 and h.get("sig_bodies") == 1, "http counters %s" % h)
    if FAILS:
        print("%d failure(s)" % len(FAILS))
        sys.exit(1)
    print("replay_rules: all checks passed")


main()
