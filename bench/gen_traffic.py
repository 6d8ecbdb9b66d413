#!/usr/bin/python3
"""Deterministic benchmark traffic: a pcap of Ethernet/IPv4 UDP and TCP frames over N flows.

  gen_traffic.py -o traffic.pcap [--flows 100000] [--packets P] [--tcp-share 0.5]
                 [--seed 1] [--size 60 | --imix] [--shuffle] [--verify K]

Every flow is a distinct, random-but-seeded 5-tuple: source in 10.0.0.0/8, destination in
172.16.0.0/12 (so no flow is the reverse of another), ports 1024-65535, protocol UDP or TCP
(TCP segments carry ACK, i.e. established traffic the appliance picks up mid-stream).
A UDP port that is a tunnel port of the appliance's defaults (VXLAN 4789, Geneve 6081) is
moved to the next one: such a datagram is parsed as a tunnel, and random bytes are a
malformed one (dropped as bad_vxlan / bad_geneve), which no benchmark flow should be.
Packet i belongs to flow i % flows (or a seeded shuffle of that with --shuffle); the default
is one packet per flow. Frames are 60 bytes (64 on the wire with the FCS, which pcap does
not hold); --imix uses the simple IMIX 7:4:1 of 60/590/1514-byte frames instead.

The file is written with struct (classic pcap, microsecond timestamps, LINKTYPE_ETHERNET):
scapy takes minutes for 100k packets. --verify K re-reads K packets spread over the file with
scapy and checks the headers, lengths and checksums against what was meant to be written.
Same arguments, same bytes.
"""
import argparse
import hashlib
import random
import struct
import sys

ETH_DST = bytes.fromhex("020000000002")
ETH_SRC = bytes.fromhex("020000000001")
ETHERTYPE_IPV4 = 0x0800
PROTO_TCP = 6
PROTO_UDP = 17
TCP_ACK = 0x10
IMIX = [(60, 7), (590, 4), (1514, 1)]  # frame sizes without FCS, weights
TS_BASE = 1_700_000_000


def csum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


# UDP ports the appliance opens as tunnels by default (dataplane settings vxlan_ports /
# geneve_ports, docs/tunnels.md).
TUNNEL_UDP_PORTS = (4789, 6081)


def make_flows(n, tcp_share, rng):
    flows = []
    seen = set()
    while len(flows) < n:
        src = (10 << 24) | rng.getrandbits(24)
        dst = (172 << 24) | (16 << 16) | rng.getrandbits(20)
        sport = rng.randint(1024, 65535)
        dport = rng.randint(1024, 65535)
        proto = PROTO_TCP if rng.random() < tcp_share else PROTO_UDP
        if proto == PROTO_UDP:
            sport += sport in TUNNEL_UDP_PORTS
            dport += dport in TUNNEL_UDP_PORTS
        key = (src, dst, sport, dport, proto)
        if key in seen:
            continue
        seen.add(key)
        flows.append(key)
    return flows


def build_frame(flow, size, ip_id, seq):
    src, dst, sport, dport, proto = flow
    l4_hlen = 20 if proto == PROTO_TCP else 8
    payload_len = size - 14 - 20 - l4_hlen
    if payload_len < 0:
        raise ValueError(f"frame size {size} too small")
    payload = bytes((ip_id + k) & 0xFF for k in range(payload_len))
    ip_len = 20 + l4_hlen + payload_len
    src_b = struct.pack("!I", src)
    dst_b = struct.pack("!I", dst)
    pseudo = src_b + dst_b + struct.pack("!BBH", 0, proto, l4_hlen + payload_len)
    if proto == PROTO_TCP:
        hdr = struct.pack("!HHIIBBHHH", sport, dport, seq, 1, 5 << 4, TCP_ACK, 65535, 0, 0)
    else:
        hdr = struct.pack("!HHHH", sport, dport, 8 + payload_len, 0)
    c = csum(pseudo + hdr + payload)
    if proto == PROTO_UDP and c == 0:
        c = 0xFFFF
    off = 16 if proto == PROTO_TCP else 6
    l4 = hdr[:off] + struct.pack("!H", c) + hdr[off + 2:] + payload
    iph = struct.pack("!BBHHHBBH4s4s", 0x45, 0, ip_len, ip_id & 0xFFFF, 0x4000, 64, proto, 0,
                      src_b, dst_b)
    iph = iph[:10] + struct.pack("!H", csum(iph)) + iph[12:]
    return ETH_DST + ETH_SRC + struct.pack("!H", ETHERTYPE_IPV4) + iph + l4


def plan(args):
    rng = random.Random(args.seed)
    flows = make_flows(args.flows, args.tcp_share, rng)
    npk = args.packets if args.packets else args.flows
    order = [i % args.flows for i in range(npk)]
    if args.shuffle:
        rng.shuffle(order)
    sizes = []
    if args.imix:
        pop = [s for s, _ in IMIX]
        w = [k for _, k in IMIX]
        sizes = rng.choices(pop, weights=w, k=npk)
    else:
        sizes = [args.size] * npk
    return flows, order, sizes


def write(args, flows, order, sizes):
    out = bytearray()
    out += struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    # TCP sequence numbers run on per flow (a flow's first segment at flow index * 1000, each
    # next one after the previous one's payload), so the DPI stage sees in-order streams.
    next_seq = {}
    for i, (f, size) in enumerate(zip(order, sizes)):
        seq = next_seq.get(f, (f * 1000) & 0xFFFFFFFF)
        frame = build_frame(flows[f], size, i, seq)
        next_seq[f] = (seq + size - 14 - 20 - 20) & 0xFFFFFFFF
        usec = i  # 1 Mpps nominal; timestamps are irrelevant for infinite_rx replay
        out += struct.pack("<IIII", TS_BASE + usec // 1_000_000, usec % 1_000_000, len(frame),
                           len(frame))
        out += frame
    with open(args.output, "wb") as fh:
        fh.write(out)
    return hashlib.sha256(out).hexdigest()


def verify(args, flows, order, sizes, k):
    from scapy.all import IP, TCP, UDP, Ether, rdpcap  # python3-scapy

    pkts = rdpcap(args.output)
    if len(pkts) != len(order):
        sys.exit(f"verify: {len(pkts)} packets in file, expected {len(order)}")
    step = max(1, len(order) // k)
    checked = 0
    for i in range(0, len(order), step):
        p = pkts[i]
        src, dst, sport, dport, proto = flows[order[i]]
        raw = bytes(p)
        if len(raw) != sizes[i]:
            sys.exit(f"verify: packet {i}: {len(raw)} bytes, expected {sizes[i]}")
        ip = p[IP]
        l4 = p[TCP] if proto == PROTO_TCP else p[UDP]
        want = (struct.pack("!I", src), struct.pack("!I", dst), sport, dport, proto)
        got = (bytes(map(int, ip.src.split("."))), bytes(map(int, ip.dst.split("."))),
               l4.sport, l4.dport, ip.proto)
        if got != want:
            sys.exit(f"verify: packet {i}: 5-tuple {got} != {want}")
        # scapy recomputes checksums when the field is deleted; compare with what we wrote.
        ref = Ether(raw)
        ic, lc = ref[IP].chksum, (ref[TCP] if proto == PROTO_TCP else ref[UDP]).chksum
        del ref[IP].chksum
        if proto == PROTO_TCP:
            del ref[TCP].chksum
        else:
            del ref[UDP].chksum
        ref = Ether(bytes(ref))
        rl4 = ref[TCP] if proto == PROTO_TCP else ref[UDP]
        if ref[IP].chksum != ic or rl4.chksum != lc:
            sys.exit(f"verify: packet {i}: checksum mismatch (ip {ic:#x}/{ref[IP].chksum:#x}, "
                     f"l4 {lc:#x}/{rl4.chksum:#x})")
        checked += 1
    return checked


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--flows", type=int, default=100_000)
    ap.add_argument("--packets", type=int, default=0, help="default: one per flow")
    ap.add_argument("--tcp-share", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--size", type=int, default=60, help="frame size without FCS")
    ap.add_argument("--imix", action="store_true", help="IMIX 7:4:1 of 60/590/1514 B frames")
    ap.add_argument("--shuffle", action="store_true")
    ap.add_argument("--verify", type=int, default=0, metavar="K",
                    help="re-read K packets with scapy and check them")
    args = ap.parse_args()
    if args.flows <= 0 or (args.packets and args.packets < 0):
        ap.error("--flows must be > 0")
    if not 0.0 <= args.tcp_share <= 1.0:
        ap.error("--tcp-share must be within [0, 1]")
    flows, order, sizes = plan(args)
    digest = write(args, flows, order, sizes)
    ntcp = sum(1 for f in flows if f[4] == PROTO_TCP)
    msg = (f"{args.output}: {len(order)} packets, {len(flows)} flows ({ntcp} TCP, "
           f"{len(flows) - ntcp} UDP), {'IMIX' if args.imix else f'{args.size}-byte frames'}, "
           f"seed {args.seed}, sha256 {digest[:16]}")
    if args.verify:
        msg += f", verified {verify(args, flows, order, sizes, args.verify)} with scapy"
    print(msg)


if __name__ == "__main__":
    main()
