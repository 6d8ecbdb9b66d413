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
   fragments leave after their first fragment), and the same for side B -> side A, plus the
   answers to rejected packets: every other frame leaving a side must be the answer to a
   "reject" verdict (a TCP RST with the rejected segment's addresses and ports swapped, out of
   its ingress side, and for a segment with ACK a second RST toward the receiver out of the
   other side; an ICMP / ICMPv6 unreachable to the sender otherwise; none between other than
   two unicast hosts; inside tunnels: the inner packet's addresses and ports, every outer
   layer's lengths and checksums consistent, none through MPLS), and their number must
   equal the summary's firewall rst_sent + icmp_sent (+ dpi rst_sent). Skipped when CASE_DIR has a file
   REWRITES (a config that changes packets). DNS filtering: frames the appliance makes for
   DNS (answers and TCP resets, the summary's dns.answers_sent + dns.resets_sent) may come on
   top; their number over both outputs must equal the summary's.
3. Summary vs verdicts: verdict totals, drops per reason, rx per side, tx per side (forwarded
   + answers + DNS frames), and flows.created == number of new_flow verdicts (+ the load
   balancer's NAT reverse entries, lb.nat_reverse_created).
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


VXLAN_PORTS, GENEVE_PORTS = (4789,), (6081,)  # dataplane.tunnels defaults


def _csum(data, s=0):
    if len(data) % 2:
        data = bytes(data) + b"\x00"
    for i in range(0, len(data), 2):
        s += (data[i] << 8) | data[i + 1]
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def open_frame(frame):
    """Walks an Ethernet frame down to its innermost IP packet, opening the tunnels the
    appliance opens with its default settings (VXLAN 4789 and Geneve 6081 with Ethernet
    inside, GRE version 0, IPv4 / IPv6 in IP, MPLS). Returns (ethertype, offset, layers)
    where layers lists ("vxlan" | "geneve" | "gre" | "ipip" | "mpls", ip_offset, header_offset,
    outer_v6) outermost first; ethertype is 0x0800 / 0x86DD for an IP packet at offset."""
    layers = []
    off, et = 12, int.from_bytes(frame[12:14], "big")
    while et in (0x8100, 0x88A8) and len(frame) >= off + 6:
        off += 4
        et = int.from_bytes(frame[off:off + 2], "big")
    off += 2
    if et == 0x8864:  # PPPoE session (RFC 2516): IPv4 / IPv6 inside, 2- or 1-byte PPP protocol
        if len(frame) < off + 7 or frame[off] != 0x11 or frame[off + 1] != 0:
            return None, off, layers
        plen = 1 if frame[off + 6] & 1 else 2
        ppp = int.from_bytes(frame[off + 6:off + 6 + plen], "big")
        et = {0x21: 0x0800, 0x57: 0x86DD}.get(ppp)
        off += 6 + plen
        return et, off, layers
    for _ in range(8):
        if et in (0x8847, 0x8848):
            start = off
            while len(frame) >= off + 4:
                bos = frame[off + 2] & 1
                off += 4
                if bos:
                    break
            layers.append(("mpls", 0, start, False))
            if len(frame) <= off:
                return None, off, layers
            et = {4: 0x0800, 6: 0x86DD}.get(frame[off] >> 4)
            continue
        if et == 0x6558:  # inner Ethernet
            if len(frame) < off + 14:
                return None, off, layers
            et = int.from_bytes(frame[off + 12:off + 14], "big")
            off += 14
            while et in (0x8100, 0x88A8) and len(frame) >= off + 4:
                et = int.from_bytes(frame[off + 2:off + 4], "big")
                off += 4
            continue
        if et == 0x0800 and len(frame) >= off + 20:
            ihl = (frame[off] & 15) * 4
            proto, l4, v6 = frame[off + 9], off + ihl, False
            if int.from_bytes(frame[off + 6:off + 8], "big") & 0x3FFF:
                return et, off, layers  # a fragment is not opened
        elif et == 0x86DD and len(frame) >= off + 40:
            proto, l4, v6 = frame[off + 6], off + 40, True
            while proto in (0, 43, 60) and len(frame) >= l4 + 8:
                proto, l4 = frame[l4], l4 + (frame[l4 + 1] + 1) * 8
        else:
            return et, off, layers
        if proto == 17 and len(frame) >= l4 + 16:
            dport = int.from_bytes(frame[l4 + 2:l4 + 4], "big")
            if dport in VXLAN_PORTS:
                layers.append(("vxlan", off, l4, v6))
                off, et = l4 + 16, 0x6558
                continue
            if dport in GENEVE_PORTS:
                layers.append(("geneve", off, l4, v6))
                et = int.from_bytes(frame[l4 + 10:l4 + 12], "big")
                off = l4 + 16 + (frame[l4 + 8] & 0x3F) * 4
                continue
        if proto == 47 and len(frame) >= l4 + 4:
            flags = int.from_bytes(frame[l4:l4 + 2], "big")
            if flags & 7 == 0:
                layers.append(("gre", off, l4, v6))
                et = int.from_bytes(frame[l4 + 2:l4 + 4], "big")
                off = l4 + 4 + 4 * sum(1 for b in (0x8000, 0x2000, 0x1000) if flags & b)
                continue
        if proto in (4, 41):
            layers.append(("ipip", off, l4, v6))
            off, et = l4, 0x0800 if proto == 4 else 0x86DD
            continue
        return et, off, layers
    return None, off, layers


def l3l4(frame):
    """(src, dst, proto, sport, dport, tcp_flags, icmp_type) of the innermost IP packet of an
    Ethernet frame (VLAN tags, PPPoE, tunnels: see open_frame); None when not IP."""
    et, off, _ = open_frame(frame)
    if et == 0x0800 and len(frame) >= off + 20:
        ihl = (frame[off] & 15) * 4
        proto, src, dst = frame[off + 9], frame[off + 12:off + 16], frame[off + 16:off + 20]
        l4 = off + ihl
    elif et == 0x86DD and len(frame) >= off + 40:
        proto, src, dst = frame[off + 6], frame[off + 8:off + 24], frame[off + 24:off + 40]
        l4 = off + 40
        while proto in (0, 43, 60) and len(frame) >= l4 + 8:
            proto, l4 = frame[l4], l4 + (frame[l4 + 1] + 1) * 8
    else:
        return None
    sport = dport = flags = itype = None
    if proto in (6, 17) and len(frame) >= l4 + 4:
        sport, dport = int.from_bytes(frame[l4:l4 + 2], "big"), int.from_bytes(frame[l4 + 2:l4 + 4], "big")
        if proto == 6 and len(frame) >= l4 + 14:
            flags = frame[l4 + 13]
    elif proto in (1, 58) and len(frame) > l4:
        itype = frame[l4]
    return (bytes(src), bytes(dst), proto, sport, dport, flags, itype)


def tunnel_ok(frame):
    """A frame the appliance made inside tunnels has consistent outer layers: every carrying
    IP header's length reaches the end of the frame (IPv4 header checksum valid), VXLAN /
    Geneve UDP lengths likewise with a valid checksum (or 0 over IPv4), GRE checksums valid.
    Frames outside tunnels: True."""
    et, off, layers = open_frame(frame)
    end = len(frame)
    for kind, ip, hdr, v6 in layers:
        if kind == "mpls":
            return False  # the appliance never answers through MPLS
        if v6:
            if int.from_bytes(frame[ip + 4:ip + 6], "big") != end - ip - 40:
                return False
        else:
            ihl = (frame[ip] & 15) * 4
            if int.from_bytes(frame[ip + 2:ip + 4], "big") != end - ip or _csum(frame[ip:ip + ihl]):
                return False
        if kind in ("vxlan", "geneve"):
            ulen = end - hdr
            if int.from_bytes(frame[hdr + 4:hdr + 6], "big") != ulen:
                return False
            if v6 or frame[hdr + 6:hdr + 8] != b"\x00\x00":
                a = frame[ip + 8:ip + 40] if v6 else frame[ip + 12:ip + 20]
                if _csum(frame[hdr:end], sum(int.from_bytes(a[i:i + 2], "big")
                                              for i in range(0, len(a), 2)) + 17 + ulen):
                    return False
        if kind == "gre" and frame[hdr] & 0x80 and _csum(frame[hdr:end]):
            return False
    return True


def in_mpls(frame):
    return any(l[0] == "mpls" for l in open_frame(frame)[2])


def unicast(addr):
    """A unicast host address: not broadcast, multicast, unspecified or loopback."""
    if len(addr) == 4:
        return addr[0] not in (0, 127) and addr[0] < 224
    return addr[0] != 0xFF and addr not in (bytes(16), bytes(15) + b"\x01")


def answer_keys(frame, in_side):
    """What the appliance sends for a rejected frame: [(out_side, key)], key = (src, dst,
    proto, sport, dport, kind) of the answer. No answer to a RST or an ICMP error, nor
    between anything but two unicast hosts (either MAC broadcast / multicast, either IP
    address broadcast, multicast, unspecified or loopback: the answer would come from an
    address nobody owns)."""
    p = l3l4(frame)
    if p is None:
        return []
    src, dst, proto, sport, dport, flags, itype = p
    if (frame[0] & 1) or (frame[6] & 1) or not unicast(src) or not unicast(dst):
        return []
    if in_mpls(frame):
        return []  # no answer through MPLS: the way back has other labels
    other = "B" if in_side == "A" else "A"
    if proto == 6:
        if flags is None or flags & 0x04:
            return []
        out = [(in_side, (dst, src, 6, dport, sport, "rst"))]
        if flags & 0x10:
            out.append((other, (src, dst, 6, sport, dport, "rst")))
        return out
    if proto in (1, 58) and (itype is None or (itype < 128 if proto == 58 else itype in (3, 4, 5, 11, 12))):
        return []  # ICMP errors are not answered (RFC 1122)
    icmp = 1 if len(src) == 4 else 58
    return [(in_side, (dst, src, icmp, None, None, "unreach"))]


def pppoe_length_ok(frame):
    """A frame the appliance made inside a PPPoE session carries a PPPoE length that is
    exactly its PPP protocol field plus its IP packet (other frames: True)."""
    off, et = 12, int.from_bytes(frame[12:14], "big")
    while et in (0x8100, 0x88A8) and len(frame) >= off + 6:
        off += 4
        et = int.from_bytes(frame[off:off + 2], "big")
    off += 2
    if et != 0x8864:
        return True
    plen = 1 if frame[off + 6] & 1 else 2
    ip = off + 6 + plen
    v = frame[ip] >> 4
    ip_len = int.from_bytes(frame[ip + 2:ip + 4], "big") if v == 4 else \
        40 + int.from_bytes(frame[ip + 4:ip + 6], "big")
    return int.from_bytes(frame[off + 4:off + 6], "big") == plen + ip_len


def answer_key_of(frame):
    """The key of a frame the appliance made, in answer_keys' terms; None if it is neither
    a TCP RST nor an ICMP / ICMPv6 destination unreachable (or, inside PPPoE, its PPPoE
    length does not fit it)."""
    p = l3l4(frame)
    if p is None or not pppoe_length_ok(frame) or not tunnel_ok(frame):
        return None
    src, dst, proto, sport, dport, flags, itype = p
    if proto == 6 and flags is not None and flags & 0x04:
        return (src, dst, 6, sport, dport, "rst")
    if (proto == 1 and itype == 3) or (proto == 58 and itype == 1):
        return (src, dst, proto, None, None, "unreach")
    return None


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

    # 2. Forwarded frames leave unchanged on the other side; the other frames leaving a
    # side are the answers to rejected packets.
    want_answers = {"A": collections.Counter(), "B": collections.Counter()}
    for i, v in enumerate(verdicts):
        if i < len(frames) and v.get("verdict") == "reject":
            for out_side, key in answer_keys(frames[i][1][1], v.get("side")):
                want_answers[out_side][key] += 1
    answers_out = {"A": 0, "B": 0}
    # DNS filtering: frames made for DNS (not answers to reject verdicts), per output side.
    dns_generated = 0
    if "dns" in summary:
        dns_generated = summary["dns"].get("answers_sent", 0) + summary["dns"].get("resets_sent", 0)
    dns_out = {"A": 0, "B": 0}
    if not os.path.exists(os.path.join(case, "REWRITES")):
        for in_side, out_side, out_name in (("A", "B", "out_b.pcap"), ("B", "A", "out_a.pcap")):
            want = collections.Counter(
                frames[i][1] for i, v in enumerate(verdicts)
                if i < len(frames) and v.get("side") == in_side and v.get("verdict") == "forward")
            got = collections.Counter(read_pcap(os.path.join(run, out_name)))
            extra_frames = got - want
            answers = collections.Counter()
            strays = 0
            for (_, frame), n in extra_frames.items():
                key = answer_key_of(frame)
                if key is None:
                    strays += n
                else:
                    answers[key] += n
            if dns_generated:
                # Frames beyond what the rejects call for (and unknown frames) are DNS's.
                surplus = answers - want_answers[out_side]
                answers = answers - surplus
                dns_out[out_side] = strays + sum(surplus.values())
                strays = 0
            answers_out[out_side] = sum(answers.values())
            missing = sum((want - got).values())
            if missing or strays:
                bad(f"{out_name}: {sum(got.values())} frames; {missing} frame(s) forwarded from "
                    f"side {in_side} are missing or changed, {strays} frame(s) were not expected")
            if answers != want_answers[out_side]:
                bad(f"{out_name}: answers to rejected packets {sorted(answers.items())} != the "
                    f"rejects call for {sorted(want_answers[out_side].items())}")
        if dns_out["A"] + dns_out["B"] != dns_generated:
            bad(f"{dns_out['A'] + dns_out['B']} frame(s) in the outputs are neither forwarded "
                f"inputs nor reject answers, but the summary says the appliance made "
                f"{dns_generated} for DNS (dns.answers_sent + dns.resets_sent)")
        fw = summary.get("firewall", {})
        # DPI resets go out through the same reject path, counted as dpi.rst_sent.
        sent = fw.get("rst_sent", 0) + fw.get("icmp_sent", 0) + summary.get("dpi", {}).get("rst_sent", 0)
        if sent != answers_out["A"] + answers_out["B"]:
            bad(f"summary firewall rst_sent + icmp_sent + dpi rst_sent = {sent}, answers in the "
                f"outputs: {answers_out['A'] + answers_out['B']}")

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
        if summary["ports"][other]["tx_packets"] != (fwd_from.get(side, 0) + answers_out[other] +
                                                     dns_out[other]):
            bad(f"summary ports.{other}.tx_packets = {summary['ports'][other]['tx_packets']}, "
                f"forward verdicts from side {side}: {fwd_from.get(side, 0)}, answers out of "
                f"side {other}: {answers_out[other]}, DNS frames: {dns_out[other]}")
    new_flows = sum(1 for v in verdicts if v.get("new_flow"))
    # Flows without a packet of their own: the load balancer's NAT reverse entries.
    made = summary.get("lb", {}).get("nat_reverse_created", 0)
    if summary["flows"]["created"] != new_flows + made:
        bad(f"summary flows.created = {summary['flows']['created']}, new_flow verdicts: {new_flows}"
            + (f" + {made} NAT reverse entries" if made else ""))

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
