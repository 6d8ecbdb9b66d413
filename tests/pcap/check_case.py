#!/usr/bin/env python3
"""Consistency and intent checks for one replayed pcap case (Python 3 standard library only).

    check_case.py CASE_DIR RUN_DIR

RUN_DIR holds what `dpu-appliance replay` wrote for the case: verdicts.jsonl, summary.json,
out_b.pcap (frames sent out of side B) and out_a.pcap (out of side A). These checks do not
depend on the expected_* files, so they also guard a REGEN=1 run:

1. Inputs vs verdicts: one verdict per input frame, indices 0..n-1, and the side of verdict
   i is the side of the i-th frame of the timestamp merge of the inputs (side A first on
   equal timestamps).
2. Forwarding: the frames leaving side B are exactly the frames arriving on side A with a
   forward verdict, byte for byte and with their input timestamps (as a multiset: held
   fragments leave after their first fragment), and the same for side B -> side A. Skipped
   when CASE_DIR has a file REWRITES (a config that changes packets).
3. Summary vs verdicts: verdict totals, drops per reason, rx per side, tx per side, and
   flows.created == number of new_flow verdicts.
4. Intent (CASE_DIR/intent.tsv, written with the case by a person): for every listed index,
   side, verdict and drop reason; the flow label: packets with the same label share one
   non-null flow_id, different labels have different flow_ids, "-" means flow_id null, "?"
   means not checked; new = 1 means new_flow true, 0 false.
Prints every problem found and exits 1 if there is any.
"""
import collections
import json
import os
import struct
import sys


def read_pcap(path):
    """Returns [(ts_us, bytes)] for a classic pcap file (micro- or nanosecond)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24:
        raise ValueError(f"{path}: too short for a pcap header")
    magic = data[:4]
    table = {
        b"\xd4\xc3\xb2\xa1": ("<", 1), b"\xa1\xb2\xc3\xd4": (">", 1),
        b"\x4d\x3c\xb2\xa1": ("<", 1000), b"\xa1\xb2\x3c\x4d": (">", 1000),
    }
    if magic not in table:
        raise ValueError(f"{path}: not a classic pcap file (magic {magic.hex()})")
    endian, div = table[magic]
    frames = []
    off = 24
    while off + 16 <= len(data):
        sec, frac, caplen, _ = struct.unpack(endian + "IIII", data[off:off + 16])
        off += 16
        if off + caplen > len(data):
            break  # damaged tail: libpcap (and so the appliance) stops here as well
        frames.append((sec * 1000000 + frac // div, data[off:off + caplen]))
        off += caplen
    return frames


def merged_sides(a, b):
    """Side of each frame in the order the appliance reads them (ties: A first)."""
    out = []
    i = j = 0
    while i < len(a) or j < len(b):
        if j >= len(b) or (i < len(a) and a[i][0] <= b[j][0]):
            out.append(("A", a[i]))
            i += 1
        else:
            out.append(("B", b[j]))
            j += 1
    return out


def main():
    case, run = sys.argv[1], sys.argv[2]
    problems = []

    def bad(msg):
        problems.append(msg)

    if os.path.exists(os.path.join(case, "input.pcap")):
        in_a = read_pcap(os.path.join(case, "input.pcap"))
        in_b = []
    else:
        in_a = read_pcap(os.path.join(case, "input_a.pcap"))
        pb = os.path.join(case, "input_b.pcap")
        in_b = read_pcap(pb) if os.path.exists(pb) else []
    frames = merged_sides(in_a, in_b)

    verdicts = []
    with open(os.path.join(run, "verdicts.jsonl")) as f:
        for n, line in enumerate(f):
            try:
                verdicts.append(json.loads(line))
            except ValueError as e:
                bad(f"verdicts.jsonl line {n + 1}: not JSON: {e}")
    with open(os.path.join(run, "summary.json")) as f:
        summary = json.load(f)

    # 1. One verdict per frame, in merged input order.
    if len(verdicts) != len(frames):
        bad(f"{len(frames)} input frames but {len(verdicts)} verdicts")
    for i, v in enumerate(verdicts):
        if v.get("index") != i:
            bad(f"verdict line {i + 1} has index {v.get('index')}, expected {i}")
        if i < len(frames) and v.get("side") != frames[i][0]:
            bad(f"index {i}: side {v.get('side')}, but input frame {i} arrives on side "
                f"{frames[i][0]}")
        verdict = v.get("verdict")
        if verdict not in ("forward", "drop", "reject"):
            bad(f"index {i}: unknown verdict {verdict!r}")
        if verdict == "forward" and v.get("reason") is not None:
            bad(f"index {i}: forward with a drop reason {v.get('reason')!r}")
        if verdict == "drop" and (v.get("reason") is None or v.get("stage") is None):
            bad(f"index {i}: drop without a reason or stage")
        if v.get("new_flow") and v.get("flow_id") is None:
            bad(f"index {i}: new_flow without a flow_id")

    # 2. Forwarded frames leave unchanged on the other side.
    if not os.path.exists(os.path.join(case, "REWRITES")):
        for in_side, out_name in (("A", "out_b.pcap"), ("B", "out_a.pcap")):
            want = collections.Counter(
                frames[i][1] for i, v in enumerate(verdicts)
                if i < len(frames) and v.get("side") == in_side and v.get("verdict") == "forward")
            got = collections.Counter(read_pcap(os.path.join(run, out_name)))
            if want != got:
                missing = sum((want - got).values())
                extra = sum((got - want).values())
                bad(f"{out_name}: {sum(got.values())} frames; {missing} frame(s) forwarded from "
                    f"side {in_side} are missing or changed, {extra} frame(s) were not expected")

    # 3. Summary agrees with the verdicts.
    count = collections.Counter(v.get("verdict") for v in verdicts)
    for k in ("forward", "drop", "reject"):
        if summary["verdicts"].get(k) != count.get(k, 0):
            bad(f"summary verdicts.{k} = {summary['verdicts'].get(k)}, verdicts file has "
                f"{count.get(k, 0)}")
    reasons = collections.Counter(v.get("reason") for v in verdicts if v.get("verdict") != "forward")
    if dict(reasons) != summary["drops"]:
        bad(f"summary drops {summary['drops']} != drop reasons in verdicts {dict(reasons)}")
    sides = collections.Counter(v.get("side") for v in verdicts)
    fwd_from = collections.Counter(v.get("side") for v in verdicts if v.get("verdict") == "forward")
    for side, other in (("A", "B"), ("B", "A")):
        port = summary["ports"][side]
        if port["rx_packets"] != sides.get(side, 0):
            bad(f"summary ports.{side}.rx_packets = {port['rx_packets']}, verdicts from side "
                f"{side}: {sides.get(side, 0)}")
        if summary["ports"][other]["tx_packets"] != fwd_from.get(side, 0):
            bad(f"summary ports.{other}.tx_packets = {summary['ports'][other]['tx_packets']}, "
                f"forward verdicts from side {side}: {fwd_from.get(side, 0)}")
    new_flows = sum(1 for v in verdicts if v.get("new_flow"))
    if summary["flows"]["created"] != new_flows:
        bad(f"summary flows.created = {summary['flows']['created']}, new_flow verdicts: {new_flows}")

    # 4. Intent written by hand.
    intent_path = os.path.join(case, "intent.tsv")
    if not os.path.exists(intent_path):
        bad("intent.tsv missing: every case states the verdict its author expects per packet")
    else:
        label_of_flow = {}
        flow_of_label = {}
        listed = set()
        with open(intent_path) as f:
            rows = [line.rstrip("\n").split("\t") for line in f
                    if line.strip() and not line.startswith("#")]
        header = rows.pop(0)
        if header[:6] != ["index", "side", "verdict", "reason", "flow", "new"]:
            bad(f"intent.tsv: unexpected header {header}")
        for row in rows:
            idx, side, verdict, reason, flow, new = row[:6]
            note = row[6] if len(row) > 6 else ""
            i = int(idx)
            listed.add(i)
            where = f"index {i} ({note})" if note else f"index {i}"
            if i >= len(verdicts):
                bad(f"{where}: no verdict")
                continue
            v = verdicts[i]
            if v.get("side") != side:
                bad(f"{where}: side {v.get('side')}, intended {side}")
            if v.get("verdict") != verdict:
                bad(f"{where}: verdict {v.get('verdict')} (reason {v.get('reason')}), "
                    f"intended {verdict}" + (f" ({reason})" if reason != "-" else ""))
            elif (v.get("reason") or "-") != reason:
                bad(f"{where}: reason {v.get('reason')}, intended {reason}")
            fid = v.get("flow_id")
            if flow == "-":
                if fid is not None:
                    bad(f"{where}: flow_id {fid}, intended none")
            elif flow != "?":
                if fid is None:
                    bad(f"{where}: no flow_id, intended flow '{flow}'")
                else:
                    if flow in flow_of_label and flow_of_label[flow] != fid:
                        bad(f"{where}: flow_id {fid}, but flow '{flow}' has id "
                            f"{flow_of_label[flow]} elsewhere")
                    if fid in label_of_flow and label_of_flow[fid] != flow:
                        bad(f"{where}: flow_id {fid} is also flow '{label_of_flow[fid]}', "
                            f"intended a different flow '{flow}'")
                    flow_of_label.setdefault(flow, fid)
                    label_of_flow.setdefault(fid, flow)
            if new != "?" and bool(v.get("new_flow")) != (new == "1"):
                bad(f"{where}: new_flow {v.get('new_flow')}, intended {new == '1'}")
        unlisted = [i for i in range(len(verdicts)) if i not in listed]
        if unlisted:
            bad(f"intent.tsv does not cover {len(unlisted)} verdict(s), first index {unlisted[0]}")

    if problems:
        print(f"check_case: {os.path.basename(os.path.normpath(case))}: {len(problems)} problem(s):")
        for p in problems[:60]:
            print("  " + p)
        if len(problems) > 60:
            print(f"  ... and {len(problems) - 60} more")
        sys.exit(1)
    print(f"check_case: {os.path.basename(os.path.normpath(case))}: {len(verdicts)} verdicts "
          f"consistent with inputs, outputs, summary and intent.tsv")


if __name__ == "__main__":
    main()
