#!/usr/bin/env python3
"""Real tunnel captures (../shared/data/pcap lists vxlan, geneve, gre, ip_tunnel, mpls) replayed
with dataplane.tunnels INSPECT (the default): the inner flows must be tracked.

    replay_tunnel_captures.py BINARY [--all]

For each list, the Ethernet captures of at most MAX_BYTES (default 64 KiB; --all: every one)
are replayed (one process each) and checked against an independent decoding of every frame
(check_case.open_frame: the tunnels the appliance opens by default):
  - the replay exits 0 with one verdict per frame (no crash, no refusal);
  - frames whose innermost packet is an unfragmented IPv4/IPv6 packet inside at least one
    tunnel layer ("tunneled frames") exist in the list, and the appliance tracks flows for
    them (verdicts with a flow_id);
  - two tunneled frames in one flow_id have the same inner key (outer VLANs, tunnel id of the
    innermost layer with one, protocol, the two inner endpoints): distinct inner flows, also
    distinct only by VNI / GRE key, are never merged (a flow may split, e.g. after a timeout).
Prints a line per capture: frames, tunneled frames, inner keys, flows of tunneled frames,
flows created. Without the shared data it prints SKIPPED and exits 77.
"""
import collections
import csv
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_case import open_frame, read_pcap  # noqa: E402

DATA = os.environ.get("DPU_SHARED_DATA", os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "data"))
LISTS = ("vxlan", "geneve", "gre", "ip_tunnel", "mpls")
MAX_BYTES = int(os.environ.get("TUNNEL_CAPTURES_MAX_BYTES", 65536))
CONFIG = {"dataplane": {"flow_table": {"capacity_per_worker": 16384}}}


def vlans(frame):
    out, off = [], 12
    while int.from_bytes(frame[off:off + 2], "big") in (0x8100, 0x88A8, 0x9100) and len(frame) >= off + 6:
        out.append(int.from_bytes(frame[off + 2:off + 4], "big") & 0x0FFF)
        off += 4
    return tuple(out)


def inner_key(frame):
    """The appliance's flow key of a tunneled frame, or None (not tunneled, not IP, a
    fragment, cut short)."""
    et, off, layers = open_frame(frame)
    if not layers:
        return None
    tid = 0
    for kind, _, hdr, _ in layers:
        if kind in ("vxlan", "geneve") and len(frame) >= hdr + 16:
            tid = int.from_bytes(frame[hdr + 12:hdr + 15], "big")
        elif kind == "gre" and frame[hdr] & 0x20:
            at = hdr + 4 + (4 if frame[hdr] & 0x80 else 0)
            tid = int.from_bytes(frame[at:at + 4], "big")
    if et == 0x0800 and len(frame) >= off + 20:
        if int.from_bytes(frame[off + 6:off + 8], "big") & 0x3FFF:
            return None
        proto, src, dst, l4 = frame[off + 9], frame[off + 12:off + 16], frame[off + 16:off + 20], off + (frame[off] & 15) * 4
    elif et == 0x86DD and len(frame) >= off + 40:
        proto, src, dst, l4 = frame[off + 6], frame[off + 8:off + 24], frame[off + 24:off + 40], off + 40
        while proto in (0, 43, 60, 51) and len(frame) >= l4 + 8:
            step = (frame[l4 + 1] + 2) * 4 if proto == 51 else (frame[l4 + 1] + 1) * 8
            proto, l4 = frame[l4], l4 + step
        if proto == 44:
            return None
    else:
        return None
    sp = dp = 0
    if proto in (6, 17) and len(frame) >= l4 + 4:
        sp, dp = int.from_bytes(frame[l4:l4 + 2], "big"), int.from_bytes(frame[l4 + 2:l4 + 4], "big")
    elif proto in (1, 58) and len(frame) >= l4 + 8 and frame[l4] in ((0, 8) if proto == 1 else (128, 129)):
        sp = dp = int.from_bytes(frame[l4 + 4:l4 + 6], "big")
    ends = sorted([(bytes(src), sp), (bytes(dst), dp)])
    return (vlans(frame), tid, proto, tuple(ends))


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    binary, every = sys.argv[1], "--all" in sys.argv[2:]
    pcap_dir = os.path.join(DATA, "pcap")
    if not os.path.isdir(pcap_dir):
        print(f"SKIPPED: no shared data at {pcap_dir}")
        return 77
    index = {r["file"]: r for r in csv.DictReader(open(os.path.join(pcap_dir, "INDEX.tsv")), delimiter="\t")}
    problems = []
    seen = {}
    with tempfile.TemporaryDirectory() as work:
        cfg = os.path.join(work, "config.json")
        with open(cfg, "w") as f:
            json.dump(CONFIG, f)
        for name in LISTS:
            files = [l.strip() for l in open(os.path.join(pcap_dir, "lists", name + ".txt")) if l.strip()]
            files = [f for f in files if index.get(f, {}).get("encapsulation") == "ether" and
                     index[f]["file_type"] == "pcap" and (every or int(index[f]["size"]) <= MAX_BYTES)]
            tunneled = tracked = 0
            for rel in files:
                if rel in seen:  # a capture in several lists is replayed once
                    n_tun, n_tracked = seen[rel]
                    tunneled += n_tun
                    tracked += n_tracked
                    continue
                path = os.path.join(pcap_dir, rel)
                src = path
                if "," in path:  # DPDK device arguments are comma-separated
                    src = os.path.join(work, "in.pcap")
                    if os.path.lexists(src):
                        os.remove(src)
                    os.symlink(path, src)
                frames = [fr for _, fr in read_pcap(path)]
                v = os.path.join(work, "v.jsonl")
                s = os.path.join(work, "s.json")
                r = subprocess.run([binary, "replay", "--config", cfg, "--in", src, "--verdicts", v,
                                    "--summary-json", s, "--quiet"], capture_output=True, text=True)
                if r.returncode != 0:
                    problems.append(f"{rel}: replay exit {r.returncode}: {r.stderr.strip()[:300]}")
                    continue
                verdicts = [json.loads(l) for l in open(v)]
                summary = json.load(open(s))
                if len(verdicts) != len(frames):
                    problems.append(f"{rel}: {len(frames)} frames, {len(verdicts)} verdicts")
                    continue
                keys_of = collections.defaultdict(set)
                n_tun = n_tracked = 0
                keys = set()
                for fr, vd in zip(frames, verdicts):
                    k = inner_key(fr)
                    if k is None:
                        continue
                    n_tun += 1
                    keys.add(k)
                    if vd.get("flow_id") is not None:
                        n_tracked += 1
                        keys_of[vd["flow_id"]].add(k)
                merged = {fid: ks for fid, ks in keys_of.items() if len(ks) > 1}
                for fid, ks in list(merged.items())[:3]:
                    problems.append(f"{rel}: flow {fid} holds {len(ks)} distinct inner flows: {sorted(ks)[:2]}")
                tunneled += n_tun
                tracked += n_tracked
                seen[rel] = (n_tun, n_tracked)
                print(f"{name:9} {rel}: {len(frames)} frames, {n_tun} tunneled, {len(keys)} inner keys, "
                      f"{len(keys_of)} flows over tunneled frames ({n_tracked} frames tracked), "
                      f"flows created {summary['flows']['created']}, drops {summary['drops']}")
            if tunneled == 0:
                problems.append(f"list {name}: no tunneled IP frame in {len(files)} captures")
            elif tracked == 0:
                problems.append(f"list {name}: {tunneled} tunneled frames, none tracked in a flow")
    for p in problems:
        print("PROBLEM:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
