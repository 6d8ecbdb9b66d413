#!/usr/bin/python3
"""Rule files for DPDK's l3fwd example, the peer of the appliance in fwd_bench.sh:

  l3fwd_rules.py em PCAP V4 V6 [--port 1]
      an exact-match route (l3fwd --lookup=em --rule_ipv4/--rule_ipv6) for every distinct
      IPv4 5-tuple of PCAP, all to PORT: every packet of the bench traffic hits the hash
      (like the appliance's flow lookup of a known flow). l3fwd wants a non-empty IPv6
      file, so V6 holds one route no bench packet matches.
  l3fwd_rules.py acl RULES V4 V6 [--port 1]
      the appliance's firewall rule file RULES (text format, docs/firewall-guide.md)
      converted to l3fwd's ACL rule file format (--lookup=acl): a `deny` rule becomes an
      ACL line "@src/len dst/len sport_lo : sport_hi dport_lo : dport_hi proto/mask", an
      `allow` rule a route line "R... PORT"; lines in the appliance's precedence order
      (lowest priority value first, then file order), since l3fwd gives earlier lines the
      higher priority; then a catch-all route to PORT (the bench configs' default ALLOW).

Only the rule forms gen_rules.py writes are converted (action, tcp/udp/any, IPv4 prefix or
any, one port / range / any, prio, id); anything else stops the conversion with its line.
"""
import argparse
import ipaddress
import re
import struct
import sys

PROTO = {"tcp": (6, 0xFF), "udp": (17, 0xFF), "icmp": (1, 0xFF), "any": (0, 0)}
V6_DUMMY_EM = "R2001:db8::1 2001:db8::2 9 9 0x11 {port}\n"
V6_DUMMY_ACL = ("R2001:db8:0:0:0:0:0:1/128 2001:db8:0:0:0:0:0:2/128 9 : 9 9 : 9 0x11/0xff {port}\n")  # l3fwd wants all 8 groups


def em(args) -> None:
    seen = set()
    with open(args.src, "rb") as f:
        hdr = f.read(24)
        endian = "<" if hdr[:4] == b"\xd4\xc3\xb2\xa1" else ">"
        while True:
            h = f.read(16)
            if len(h) < 16:
                break
            incl = struct.unpack(endian + "IIII", h)[2]
            frame = f.read(incl)
            if len(frame) < 34 or frame[12:14] != b"\x08\x00":
                continue
            ihl = (frame[14] & 0x0F) * 4
            proto = frame[23]
            src, dst = frame[26:30], frame[30:34]
            sport = dport = 0
            if proto in (6, 17) and len(frame) >= 14 + ihl + 4:
                sport, dport = struct.unpack("!HH", frame[14 + ihl:14 + ihl + 4])
            seen.add((src, dst, sport, dport, proto))
    if not seen:
        sys.exit(f"l3fwd_rules: no IPv4 packet in {args.src}")
    with open(args.v4, "w") as out:
        # l3fwd's EM rule line: R<dst> <src> <dst_port> <src_port> <proto> <out port>
        for src, dst, sport, dport, proto in sorted(seen):
            out.write(f"R{ipaddress.IPv4Address(dst)} {ipaddress.IPv4Address(src)} "
                      f"{dport} {sport} {proto} {args.port}\n")
    with open(args.v6, "w") as out:
        out.write(V6_DUMMY_EM.format(port=args.port))
    print(f"l3fwd_rules: {len(seen)} exact-match routes to port {args.port}")


def net(tok: str, where: str) -> str:
    if tok == "any":
        return "0.0.0.0/0"
    n = ipaddress.ip_network(tok, strict=False)
    if n.version != 4:
        sys.exit(f"l3fwd_rules: {where}: only IPv4 is converted, got '{tok}'")
    return f"{n.network_address}/{n.prefixlen}"


def ports(tok: str, where: str) -> str:
    if tok == "any":
        return "0 : 65535"
    m = re.fullmatch(r"(\d+)(?:-(\d+))?", tok)
    if not m:
        sys.exit(f"l3fwd_rules: {where}: port '{tok}' is not a port, a range or any")
    lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
    return f"{lo} : {hi}"


def acl(args) -> None:
    rules = []
    line_re = re.compile(r"(allow|deny)\s+(\w+)\s+(\S+)\s+(\S+)\s+->\s+(\S+)\s+(\S+)"
                         r"(?:\s+prio\s+(-?\d+))?(?:\s+id\s+\S+)?\s*$")
    for n, line in enumerate(open(args.src), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{args.src}:{n}"
        m = line_re.fullmatch(line)
        if not m or m.group(2) not in PROTO:
            sys.exit(f"l3fwd_rules: {where}: cannot convert '{line}'")
        action, proto, src, sport, dst, dport, prio = m.groups()
        pv, pm = PROTO[proto]
        body = (f"{net(src, where)} {net(dst, where)} {ports(sport, where)} "
                f"{ports(dport, where)} 0x{pv:x}/0x{pm:x}")
        text = f"@{body}\n" if action == "deny" else f"R{body} {args.port}\n"
        rules.append((int(prio or 0), n, text))
    rules.sort(key=lambda r: (r[0], r[1]))
    with open(args.v4, "w") as out:
        out.writelines(r[2] for r in rules)
        out.write(f"R0.0.0.0/0 0.0.0.0/0 0 : 65535 0 : 65535 0x0/0x0 {args.port}\n")
    with open(args.v6, "w") as out:
        out.write(V6_DUMMY_ACL.format(port=args.port))
    print(f"l3fwd_rules: {len(rules)} ACL rules + a default route to port {args.port}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=("em", "acl"))
    ap.add_argument("src", help="PCAP (em) or appliance rule file (acl)")
    ap.add_argument("v4")
    ap.add_argument("v6")
    ap.add_argument("--port", type=int, default=1)
    args = ap.parse_args()
    (em if args.mode == "em" else acl)(args)


if __name__ == "__main__":
    main()
