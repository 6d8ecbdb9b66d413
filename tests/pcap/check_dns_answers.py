#!/usr/bin/env python3
"""DNS filtering: decodes the DNS responses in a case's expected output pcaps with tshark and
compares them with the case's DNS_ANSWERS (written by a person).

    check_dns_answers.py CASE_DIR

run_case.sh already requires the appliance's outputs to equal the expected_out*.pcap files
byte for byte; this check says those frames are valid DNS as an independent decoder sees
them: tshark (Wireshark's dissector) must decode every DNS response without a malformed-
packet mark, with IPv4 / UDP / TCP checksums verified good, and each response must match
its DNS_ANSWERS line, in file order:

    FILE  ID  RCODE  QNAME  ANSWERS  AUTHORITY

FILE is expected_out_a.pcap or expected_out.pcap, ID the DNS id (0x1234), RCODE the numeric
rcode, QNAME as tshark prints it, ANSWERS "-" or a comma list of A / AAAA addresses and TTLs
("192.0.2.66/120"), AUTHORITY "-" (no authority records) or the SOA record of a negative
answer (RFC 2308) as "SOA mname rname serial refresh retry expire minimum/ttl", e.g.
"SOA dns-filter.invalid hostmaster.dns-filter.invalid 1 1800 900 604800 300/300" (the record
must be the only authority record). Lines starting with '#' are comments. tshark is required: without it the
check fails (CI installs it; scripts/install-deps.sh).
"""
import os
import shutil
import subprocess
import sys

FIELDS = ["frame.number", "dns.id", "dns.flags.rcode", "dns.qry.name", "dns.a", "dns.aaaa",
          "dns.resp.ttl", "dns.resp.type", "dns.count.auth_rr", "dns.soa.mname",
          "dns.soa.rname", "dns.soa.serial_number", "dns.soa.refresh_interval",
          "dns.soa.retry_interval", "dns.soa.expire_limit", "dns.soa.minimum_ttl",
          "ip.checksum.status", "udp.checksum.status",
          "tcp.checksum.status", "_ws.malformed", "_ws.expert.severity"]


def decode(path):
    cmd = ["tshark", "-n", "-r", path, "-o", "ip.check_checksum:TRUE",
           "-o", "udp.check_checksum:TRUE", "-o", "tcp.check_checksum:TRUE",
           "-Y", "dns.flags.response == 1", "-T", "fields", "-E", "separator=\t",
           "-E", "occurrence=a", "-E", "aggregator=,"]
    for f in FIELDS:
        cmd += ["-e", f]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        cols = line.split("\t")
        cols += [""] * (len(FIELDS) - len(cols))
        rows.append(dict(zip(FIELDS, cols)))
    return rows


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    case = sys.argv[1]
    name = os.path.basename(os.path.normpath(case))
    if shutil.which("tshark") is None:
        print(f"FAIL {name}: tshark not found; the DNS answers cannot be checked. Install it "
              f"(apt-get install tshark, scripts/install-deps.sh).")
        return 1
    want = {}
    with open(os.path.join(case, "DNS_ANSWERS")) as f:
        for line in f:
            if not line.strip() or line.startswith("#"):
                continue
            file, ident, rcode, qname, answers, authority = line.rstrip("\n").split("\t")
            want.setdefault(file, []).append((int(ident, 16), int(rcode), qname, answers,
                                              authority))
    problems = []
    for file in ("expected_out_a.pcap", "expected_out.pcap"):
        path = os.path.join(case, file)
        exp = want.get(file, [])
        if not os.path.exists(path):
            if exp:
                problems.append(f"{file}: missing, but DNS_ANSWERS lists {len(exp)} responses")
            continue
        got = decode(path)
        if len(got) != len(exp):
            problems.append(f"{file}: {len(got)} DNS responses, DNS_ANSWERS lists {len(exp)}")
        for k, (g, e) in enumerate(zip(got, exp)):
            where = f"{file} frame {g['frame.number']} (response {k})"
            ident, rcode, qname, answers, authority = e
            if g["_ws.malformed"] or "error" in g["_ws.expert.severity"].split(","):
                problems.append(f"{where}: tshark marks it malformed / with an error")
            for proto in ("ip", "udp", "tcp"):
                st = g[f"{proto}.checksum.status"]
                if st and st not in ("1", "2"):  # 1 good, 2 unverified (e.g. UDP zero)
                    problems.append(f"{where}: {proto} checksum status {st} (bad)")
            if int(g["dns.id"], 16) != ident:
                problems.append(f"{where}: id {g['dns.id']}, expected {ident:#06x}")
            if int(g["dns.flags.rcode"] or -1) != rcode:
                problems.append(f"{where}: rcode {g['dns.flags.rcode']}, expected {rcode}")
            if g["dns.qry.name"] != qname:
                problems.append(f"{where}: qname {g['dns.qry.name']!r}, expected {qname!r}")
            addrs = [a for a in (g["dns.a"].split(",") + g["dns.aaaa"].split(",")) if a]
            ttls = [t for t in g["dns.resp.ttl"].split(",") if t]
            got_answers = ",".join(f"{a}/{t}" for a, t in zip(addrs, ttls)) or "-"
            if answers != "?" and got_answers != answers:
                problems.append(f"{where}: answers {got_answers}, expected {answers}")
            nauth = int(g["dns.count.auth_rr"] or 0)
            if g["dns.soa.mname"]:
                if nauth != 1:
                    problems.append(f"{where}: {nauth} authority records with an SOA, expected 1")
                soa_ttl = ttls[-1] if ttls and not addrs else "?"
                got_auth = " ".join(["SOA", g["dns.soa.mname"], g["dns.soa.rname"],
                                     g["dns.soa.serial_number"], g["dns.soa.refresh_interval"],
                                     g["dns.soa.retry_interval"], g["dns.soa.expire_limit"],
                                     f"{g['dns.soa.minimum_ttl']}/{soa_ttl}"])
            else:
                got_auth = "-" if nauth == 0 else f"{nauth} records, no SOA"
            if got_auth != authority:
                problems.append(f"{where}: authority {got_auth!r}, expected {authority!r}")
    for p in problems:
        print(f"FAIL {name}: {p}")
    if not problems:
        n = sum(len(v) for v in want.values())
        print(f"ok {name}: {n} DNS responses decoded by tshark as expected")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
