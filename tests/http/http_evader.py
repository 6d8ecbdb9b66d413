#!/usr/bin/python3
"""--- http --- EICAR detection on the http-evader development captures (issue 17, docs/http.md).

    tests/http/http_evader.py BINARY [--mode files|default|stream] [--min N] [--list] [--jobs J]

Replays every capture of ../shared/data/pcap/OISF+suricata-verify/tests/http-evader (each
delivers the EICAR test file through an HTTP trick) through `BINARY replay` with one YARA
rule (the EICAR string, action alert) and counts the captures on which it raised an alert:
  --mode files   dpi.http on port 80: bodies de-chunked / decompressed by libhtp, scanned
                 as files (the rule set's default scope: files on HTTP flows)
  --mode default no dpi.http section (issue 30): HTTP parsed with its defaults because there
                 is a rule (default ports, 3 content-encoding layers; the rule set then
                 inspects files and the raw stream)
  --mode stream  dpi.http.enabled false: the rule runs over the raw TCP stream (the
                 behaviour before issue 17, and of a config without dpi.http before issue 30)
Every mode skips TCP checksum verification (the captures were made with bad checksums;
Suricata's own tests run them with -k none); files mode decodes up to 3 content-encoding
layers, as Suricata's test configuration does (3 is also the default). --min N fails (exit 1) when fewer than N captures alert
(the regression test). Without the data directory it prints SKIPPED and exits 77.
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "data", "pcap",
                                     "OISF+suricata-verify", "tests", "http-evader"))
EICAR_RULE = r"""
rule eicar { strings: $e = "X5O!P%@AP[4\\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*" condition: $e }
"""


def run_one(binary, config, pcap):
    with tempfile.TemporaryDirectory(prefix="http_evader_") as d:
        ev = os.path.join(d, "events.jsonl")
        r = subprocess.run([binary, "replay", "--config", config, "--in", pcap, "--events", ev, "--quiet"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            return pcap, None, r.stderr.strip()[-300:]
        alerts = 0
        with open(ev) as f:
            for line in f:
                e = json.loads(line)
                if e.get("event_type") == "alert" and e.get("alert", {}).get("rule", "").endswith(":eicar"):
                    alerts += 1
        return pcap, alerts, ""


def merge(pcaps, out):
    """All captures in one pcap (one replay instead of one per capture): capture k's packets
    shifted to start at k * 100 s, its IPv4 addresses mapped to 10.<k/256>.<k%256>.<n> (n:
    1, 2, ... in order of appearance) so no two captures share a flow. Returns {ip: k}."""
    from scapy.all import IP, PcapReader, PcapWriter
    owner = {}
    w = PcapWriter(out, linktype=1, sync=False)
    for k, p in enumerate(pcaps):
        m = {}
        t0 = None
        for pkt in PcapReader(p):
            if t0 is None:
                t0 = float(pkt.time)
            if IP in pkt:
                ip = pkt[IP]
                for f in ("src", "dst"):
                    a = getattr(ip, f)
                    if a not in m:
                        m[a] = f"10.{k // 256}.{k % 256}.{len(m) + 1}"
                        owner[m[a]] = k
                    setattr(ip, f, m[a])
                del ip.chksum  # recomputed; TCP checksums stay as captured (skip_checksum)
            pkt.time = 1_700_000_000 + k * 100 + (float(pkt.time) - t0)
            w.write(pkt)
    w.close()
    return owner


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--mode", choices=["files", "default", "stream"], default="files")
    ap.add_argument("--min", type=int, default=0)
    ap.add_argument("--list", action="store_true", help="print the captures without an alert")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--separate", action="store_true",
                    help="one replay per capture (slow) instead of one replay of all of them merged")
    a = ap.parse_args()
    if not os.path.isdir(DATA):
        print(f"SKIPPED: no http-evader captures at {DATA}")
        return 77
    pcaps = sorted(os.path.join(DATA, t, "input.pcap") for t in os.listdir(DATA)
                   if os.path.isfile(os.path.join(DATA, t, "input.pcap")))
    with tempfile.TemporaryDirectory(prefix="http_evader_cfg_") as d:
        with open(os.path.join(d, "eicar.yar"), "w") as f:
            f.write(EICAR_RULE)
        cfg = {"dpi": {"rule_files": [os.path.join(d, "eicar.yar")], "unlimited_depth": True},
               "dataplane": {"tcp": {"skip_checksum": True}}}
        if a.mode == "files":
            cfg["dpi"]["http"] = {"ports": [80], "decompress_layers": 3}
        elif a.mode == "stream":
            cfg["dpi"]["http"] = {"enabled": False}
        config = os.path.join(d, "config.json")
        with open(config, "w") as f:
            json.dump(cfg, f)
        if a.separate:
            with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
                results = list(ex.map(lambda p: run_one(a.binary, config, p), pcaps))
        else:
            merged = os.path.join(d, "merged.pcap")
            owner = merge(pcaps, merged)
            ev = os.path.join(d, "events.jsonl")
            r = subprocess.run([a.binary, "replay", "--config", config, "--in", merged, "--events", ev,
                                "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if r.returncode != 0:
                print(f"ERROR replay: {r.stderr.strip()[-500:]}")
                return 1
            count = [0] * len(pcaps)
            with open(ev) as f:
                for line in f:
                    e = json.loads(line)
                    if e.get("event_type") == "alert" and e.get("alert", {}).get("rule", "").endswith(":eicar"):
                        k = owner.get(e.get("src_ip"), owner.get(e.get("dest_ip")))
                        if k is not None:
                            count[k] += 1
            results = [(p, count[k], "") for k, p in enumerate(pcaps)]
    errors = [(p, err) for p, n, err in results if n is None]
    hit = [p for p, n, _ in results if n]
    miss = [p for p, n, _ in results if n == 0]
    for p, err in errors:
        print(f"ERROR {os.path.basename(os.path.dirname(p))}: {err}")
    if a.list:
        for p in miss:
            print(f"no alert: {os.path.basename(os.path.dirname(p))}")
    print(f"http-evader EICAR ({a.mode}): {len(hit)} of {len(pcaps)} captures alert")
    if errors:
        return 1
    if len(hit) < a.min:
        print(f"FAIL: fewer than {a.min} captures alert (regression)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
