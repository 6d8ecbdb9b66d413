#!/usr/bin/python3
"""--- http --- libyara differential on the decoded HTTP files (issue 17, docs/http.md).

    tests/http/http_file_differential.py APPLIANCE ORACLE [--shard K/N] [--sample M] [--keep DIR]

The appliance's matches on a file must equal libyara's on the same decoded bytes. Replays
real HTTP captures through `APPLIANCE replay --extract-files DIR --events E` with a rule set
of file-oriented rules (uint16(0) == 0x5A4D, $a at 0, filesize conditions, EICAR, magic
numbers; FILE_RULES below) plus rule files of ../shared/data/yara/Yara-Rules+rules (those
libyara 4.2 compiles, per its MANIFEST.tsv), every rule action alert:
  - evader: the http-evader development captures (one replay of all merged, as
    http_evader.py does), TCP checksums not verified, 3 content-encoding layers;
  - http_files: the tests/pcap/http_files case (both sides);
  - downloads: real downloads of lists/http_file_downloads_detail.tsv (a PE, a PDF, a zip,
    cab files, 206 ranges, a multipart upload with 100-continue), merged. (No capture of
    ../shared/data has a PE over HTTP: PE downloads come from the http_files case.)
Every closed or truncated file has a `fileinfo` event (sha256, size) and its bytes in
DIR/<sha256> (what the rules scanned). ORACLE (tests/http/http_file_oracle.cc: libyara
linked in-process) scans each extracted file, restricted to the rules our engine accepts.
For every file instance (flow, direction, transaction, file name) the set of rules the
appliance alerted on it must equal libyara's set for its bytes: a miss or an invented match
fails, naming the capture, file and rule. Checks that keep it from passing vacuously: files
from every group, the EICAR rule on every evader capture's file, pe_header / filesize
rules matching somewhere. The extraction itself is checked independently: the bodies of the
http_files case and of the PE / PDF / zip downloads are decoded here with Python's zlib /
email libraries from the captures' TCP payload and must be extracted files, byte for byte,
with the sha256 of their fileinfo event.

--shard K/N: the real rule files whose index is K modulo N (the file rules always), so ctest
runs the work as several entries; --sample M: then only every M-th of those (the sanitizer
build, where each compile and scan is many times slower). Without the data directories it
prints SKIPPED and exits 77. Leaves nothing behind (a temporary directory; --keep DIR keeps
the work in DIR instead).
"""
import argparse
import collections
import email.parser
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
SHARED = os.path.normpath(os.path.join(ROOT, "..", "shared", "data"))
PCAPS = os.path.join(SHARED, "pcap")
EVADER = os.path.join(PCAPS, "OISF+suricata-verify", "tests", "http-evader")
YARA = os.path.join(SHARED, "yara")
HTTP_FILES = os.path.join(ROOT, "tests", "pcap", "http_files")
EICAR = b"X5O!P%@AP[4\\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*"
# Real downloads (lists/http_file_downloads_detail.tsv), Ethernet, IPv4.
DOWNLOADS = [
    "OISF+suricata-verify/tests/filemagic-flowbits/pdf-dl.pcap",
    "zeek+zeek/testing/btest/Traces/zip/a.zip.pcap",
    "zeek+zeek/testing/btest/Traces/http/vnd.ms-cab-compressed-multi-conn.pcap",
    "OISF+suricata-verify/tests/http-range-file/input.pcap",
    "OISF+suricata-verify/tests/issue-3703/input.pcap",
    "OISF+suricata-verify/tests/http-multiple100/input.pcap",
    "OISF+suricata-verify/tests/bug-3616-ips/input.pcap",
    "zeek+zeek/testing/btest/Traces/http/m57-long-49583-80.pcap",
]
# Independently decoded (below): complete captures (no lost segments) of plain bodies.
DECODE_DOWNLOADS = [DOWNLOADS[0], DOWNLOADS[1], DOWNLOADS[4], DOWNLOADS[6]]

FILE_RULES = r"""
rule pe_header { condition: uint16(0) == 0x5A4D }
rule mz_at_0 { strings: $mz = "MZ" condition: $mz at 0 }
rule pe_small { condition: uint16(0) == 0x5A4D and filesize < 200KB }
rule pe_signature { strings: $pe = { 50 45 00 00 } condition: uint16(0) == 0x5A4D and $pe in (0x40..0x400) }
rule eicar { strings: $e = "X5O!P%@AP[4\\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*" condition: $e }
rule eicar_file { strings: $e = "X5O!P%@AP[4\\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*" condition: $e at 0 and filesize < 128 }
rule eicar_inside { strings: $e = "EICAR-STANDARD" condition: $e and not $e in (0..40) }
rule pdf { strings: $p = "%PDF-" condition: $p at 0 }
rule zip_local_header { condition: uint32(0) == 0x04034B50 }
rule cab { strings: $c = "MSCF" condition: $c at 0 and filesize > 1KB }
rule jpeg { condition: uint16be(0) == 0xFFD8 }
rule html_head { strings: $h = "<html" nocase condition: $h in (0..512) }
rule tiny_file { condition: filesize < 16 }
rule big_file { condition: filesize > 10KB }
rule mid_size { condition: filesize >= 1000 and filesize <= 10000 }
rule two_eicar_words { strings: $e = "EICAR" condition: #e >= 2 }
rule letters { strings: $t = /[A-Za-z]{40}/ condition: $t }
rule starts_with_text { strings: $t = /^[A-Za-z0-9 ]{8}/ condition: $t at 0 }
"""
# starts_with_text is refused by our engine (the position of a variable-length regex): as for
# every refused rule, libyara's matches of it are left out (the oracle prints accepted rules).


def rule_files(shard, sample):
    """Yara-Rules files libyara 4.2 compiles (MANIFEST.tsv), sliced for the shard."""
    out = []
    with open(os.path.join(YARA, "MANIFEST.tsv")) as f:
        head = f.readline().rstrip("\n").split("\t")
        col = {n: i for i, n in enumerate(head)}
        for line in f:
            r = line.rstrip("\n").split("\t")
            if not r[0].startswith("Yara-Rules+rules/") or r[col["yara_4_2_3_compiles"]] != "True":
                continue
            if r[col["externals_used"]] != "[]":
                continue
            p = os.path.join(YARA, r[0])
            if os.path.isfile(p):
                out.append(p)
    out.sort()
    k, n = shard
    out = out[k::n]
    return out[::sample]


def run(cmd, what):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(f"FAIL {what}: exit {r.returncode}: {r.stderr.strip()[-2000:]}")
    return r.stdout


def tcp_streams(pcaps):
    """{(client ip, client port, server ip, server port): [bytes to server, bytes to client]}
    from the captures' TCP payload, in sequence order (each segment once). The client is
    the side that sent the SYN (else the side not on port 80)."""
    from scapy.all import IP, TCP, PcapReader
    segs = collections.defaultdict(dict)
    client = {}
    for p in pcaps:
        for pkt in PcapReader(p):
            if IP not in pkt or TCP not in pkt:
                continue
            ip, t = pkt[IP], pkt[TCP]
            a, b = (ip.src, t.sport), (ip.dst, t.dport)
            key = tuple(sorted([a, b]))
            if t.flags & 0x02 and not t.flags & 0x10:
                client[key] = a
            data = bytes(t.payload)
            if data:
                segs[(key, a)].setdefault(t.seq, data)
    out = {}
    for (key, src), d in segs.items():
        c = client.get(key) or (key[0] if key[1][1] == 80 else key[1])
        s = key[1] if key[0] == c else key[0]
        ent = out.setdefault((c[0], c[1], s[0], s[1]), [b"", b""])
        base = min(d)
        buf = bytearray()
        for seq in sorted(d, key=lambda q: (q - base) & 0xffffffff):
            off = (seq - base) & 0xffffffff
            if off > len(buf):
                break  # a hole: the rest is not this check's business
            buf[off:off + len(d[seq])] = d[seq]
        ent[0 if src == c else 1] = bytes(buf)
    return out


def decode_messages(stream, responses):
    """Bodies of the HTTP/1.x messages of one direction, decoded with email / zlib (not
    libhtp): chunked, Content-Length, or (responses) to the end; gzip / deflate layers;
    multipart/form-data parts with a file name. Empty bodies are left out."""
    bodies = []
    rest = stream
    while rest:
        head, sep, rest = rest.partition(b"\r\n\r\n")
        if not sep:
            break
        start, _, fields = head.partition(b"\r\n")
        if responses and start.split(b" ")[1:2] in ([b"100"], [b"304"]):
            continue
        msg = email.parser.BytesHeaderParser().parsebytes(fields + b"\r\n\r\n")
        if (msg.get("Transfer-Encoding") or "").lower() == "chunked":
            body = b""
            while True:
                line, _, rest = rest.partition(b"\r\n")
                n = int(line.split(b";")[0], 16)
                if n == 0:
                    rest = rest.partition(b"\r\n")[2]
                    break
                body, rest = body + rest[:n], rest[n + 2:]
        elif msg.get("Content-Length") is not None:
            n = int(msg.get("Content-Length"))
            body, rest = rest[:n], rest[n:]
        elif responses:
            body, rest = rest, b""
        else:
            body = b""
        for enc in reversed([e.strip().lower() for e in (msg.get("Content-Encoding") or "").split(",") if e.strip()]):
            body = zlib.decompress(body, 16 + 15 if enc == "gzip" else 15)
        if msg.get_content_type() == "multipart/form-data":
            full = email.parser.BytesParser().parsebytes(fields + b"\r\n\r\n" + body)
            bodies += [p.get_payload(decode=True) for p in full.walk() if p.get_filename()]
        elif body:
            bodies.append(body)
    return bodies


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("appliance")
    ap.add_argument("oracle")
    ap.add_argument("--shard", default="0/1")
    ap.add_argument("--sample", type=int, default=1)
    ap.add_argument("--keep", help="work in this directory and keep it")
    a = ap.parse_args()
    shard = tuple(int(x) for x in a.shard.split("/"))
    for d in (EVADER, YARA, HTTP_FILES):
        if not os.path.isdir(d):
            print(f"SKIPPED: no {d}")
            return 77
    sys.path.insert(0, HERE)
    from http_evader import merge

    work = a.keep or tempfile.mkdtemp(prefix="http_file_diff_")
    os.makedirs(work, exist_ok=True)
    try:
        return differential(a, shard, work, merge)
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


def differential(a, shard, work, merge):
    files_dir = os.path.join(work, "files")
    cache = os.path.join(work, "hscache")
    os.makedirs(files_dir)
    os.makedirs(cache)
    with open(os.path.join(work, "files.yar"), "w") as f:
        f.write(FILE_RULES)
    real = rule_files(shard, a.sample)
    cfg = {"dpi": {"rule_files": [os.path.join(work, "files.yar")] + real, "unlimited_depth": True,
                   "cache_dir": cache, "default_action": "DPI_ALERT",
                   "http": {"ports": [80], "decompress_layers": 3}},
           "dataplane": {"tcp": {"skip_checksum": True}}}
    config = os.path.join(work, "config.json")
    with open(config, "w") as f:
        json.dump(cfg, f)

    evader = sorted(os.path.join(EVADER, t, "input.pcap") for t in os.listdir(EVADER)
                    if os.path.isfile(os.path.join(EVADER, t, "input.pcap")))
    downloads = [os.path.join(PCAPS, p) for p in DOWNLOADS]
    groups = []  # (name, --in, --in-b, {ip: capture name} or None)
    ev_pcap = os.path.join(work, "evader.pcap")
    owner = merge(evader, ev_pcap)
    groups.append(("evader", ev_pcap, None, {ip: os.path.basename(os.path.dirname(evader[k]))
                                              for ip, k in owner.items()}))
    groups.append(("http_files", os.path.join(HTTP_FILES, "input_a.pcap"),
                   os.path.join(HTTP_FILES, "input_b.pcap"), None))
    dl_pcap = os.path.join(work, "downloads.pcap")
    owner = merge(downloads, dl_pcap)
    groups.append(("downloads", dl_pcap, None, {ip: DOWNLOADS[k] for ip, k in owner.items()}))

    instances = []  # dicts: group, capture, key, sha256, size, state
    alerts = collections.defaultdict(set)  # (group, flow, dir, tx, filename) -> rule ids
    for name, pin, pin_b, owners in groups:
        ev = os.path.join(work, f"{name}.events.jsonl")
        cmd = [a.appliance, "replay", "--config", config, "--in", pin, "--events", ev,
               "--extract-files", files_dir, "--quiet"]
        if pin_b:
            cmd += ["--in-b", pin_b]
        run(cmd, f"replay of {name}")
        with open(ev) as f:
            for line in f:
                e = json.loads(line)
                fi = e.get("fileinfo")
                if fi is None:
                    continue
                key = (name, e.get("flow_id"), fi["direction"], fi["tx_id"], fi["filename"])
                if e["event_type"] == "alert":
                    alerts[key].add(e["alert"]["rule"])
                elif e["event_type"] == "fileinfo":
                    cap = (owners or {}).get(e.get("src_ip"), (owners or {}).get(e.get("dest_ip"), name))
                    instances.append({"group": name, "capture": cap, "key": key, "sha256": fi.get("sha256"),
                                      "size": fi["size"], "state": fi["state"]})

    oracle = collections.defaultdict(set)
    accepted = set()
    for line in run([a.oracle, config, files_dir], "libyara oracle").splitlines():
        f = line.split("\t")
        if f[0] == "accepted":
            accepted.add(f[1])
        elif f[0] == "match":
            oracle[f[1]].add(f[2])

    fails = []
    keys = collections.Counter(i["key"] for i in instances)
    ambiguous = {k for k, n in keys.items() if n > 1}
    known = set(keys)
    for k, rules in alerts.items():
        if k not in known:
            fails.append(f"alert(s) {sorted(rules)} on a file without a fileinfo event: {k}")
    checked = 0
    per_rule = collections.Counter()
    for i in instances:
        if i["key"] in ambiguous:
            continue  # two files of one transaction with one name: alerts cannot be told apart
        sha = i["sha256"]
        path = os.path.join(files_dir, sha or "-")
        if not sha or not os.path.isfile(path):
            fails.append(f"{i['capture']}: {i['key']}: no extracted file {sha}")
            continue
        if os.path.getsize(path) != i["size"]:
            fails.append(f"{i['capture']}: {i['key']}: extracted {os.path.getsize(path)} bytes, fileinfo says {i['size']}")
        ours, theirs = alerts.get(i["key"], set()), oracle.get(sha, set())
        checked += 1
        per_rule.update(ours)
        for r in sorted(theirs - ours):
            fails.append(f"{i['capture']}: {i['key'][1:]} ({i['state']}, {i['size']} B, sha256 {sha}): "
                         f"libyara matches {r}, the appliance did not alert")
        for r in sorted(ours - theirs):
            fails.append(f"{i['capture']}: {i['key'][1:]} ({i['state']}, {i['size']} B, sha256 {sha}): "
                         f"the appliance alerted {r}, libyara does not match")

    # Not vacuous: files from every group, EICAR on every evader capture, file rules firing.
    by_group = collections.Counter(i["group"] for i in instances)
    for g, _, _, _ in groups:
        if by_group[g] == 0:
            fails.append(f"no file in group {g}")
    eicar_caps = {i["capture"] for i in instances
                  if i["group"] == "evader" and "files.yar:eicar" in oracle.get(i["sha256"], set())}
    if len(eicar_caps) < len(evader):
        fails.append(f"EICAR in the extracted files of {len(eicar_caps)} of {len(evader)} evader captures")
    for r in ("pe_header", "mz_at_0", "pe_small", "eicar", "eicar_file", "pdf",
              "zip_local_header", "cab", "big_file", "mid_size", "tiny_file"):
        if per_rule[f"files.yar:{r}"] == 0:
            fails.append(f"files.yar:{r} never matched (the captures should make it match)")

    # The extraction itself: bodies decoded here with email / zlib.
    decoded = 0
    sha_by_group = collections.defaultdict(set)
    for i in instances:
        sha_by_group[i["group"]].add(i["sha256"])
    for g, pcaps in (("http_files", [os.path.join(HTTP_FILES, "input_a.pcap"), os.path.join(HTTP_FILES, "input_b.pcap")]),
                     ("downloads", [os.path.join(PCAPS, p) for p in DECODE_DOWNLOADS])):
        for conn, (up, down) in sorted(tcp_streams(pcaps).items()):
            for body in decode_messages(up, False) + decode_messages(down, True):
                h = hashlib.sha256(body).hexdigest()
                path = os.path.join(files_dir, h)
                if h not in sha_by_group[g] or not os.path.isfile(path):
                    fails.append(f"{g} {conn}: the body decoded with zlib/email ({len(body)} B, sha256 {h}) "
                                 f"is not an extracted file of a fileinfo event")
                    continue
                with open(path, "rb") as f:
                    if f.read() != body:
                        fails.append(f"{g} {conn}: extracted file {h} differs from the decoded body")
                decoded += 1
    if decoded < 14:
        fails.append(f"only {decoded} bodies decoded independently (expected at least 14)")

    real_rules = sum(1 for r in accepted if not r.startswith("files.yar:"))
    print(f"http file differential (shard {shard[0]}/{shard[1]}, sample 1/{a.sample}): "
          f"{len(real)} real rule files, {len(accepted)} rules accepted ({real_rules} real), "
          f"{len(instances)} files ({dict(by_group)}), {checked} compared, {len(ambiguous)} ambiguous keys, "
          f"{sum(per_rule.values())} file matches, {decoded} bodies decoded independently")
    print("  matches per rule: " + ", ".join(f"{r}={n}" for r, n in sorted(per_rule.items())))
    for f in fails[:60]:
        print("FAIL " + f)
    if len(fails) > 60:
        print(f"FAIL ... and {len(fails) - 60} more")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
