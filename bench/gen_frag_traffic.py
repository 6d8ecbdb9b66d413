#!/usr/bin/python3
"""Fragment-heavy replay input for the reassembly cost (docs/fragments.md, RESULTS.md).

    bench/gen_frag_traffic.py OUT.pcap [--datagrams N] [--size BYTES] [--frag BYTES]

N UDP datagrams (half IPv4, half IPv6; a DNS query to port 53 padded to BYTES of UDP
payload, every other one to port 9000 with text), each cut into fragments of FRAG bytes of
IP payload (a multiple of 8); one datagram in four is sent last fragment first. Distinct
flows (source port = datagram index), 1 µs apart. Deterministic; standard library only.
"""
import argparse
import struct


def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def dns_query(ident, pad):
    name = b"".join(bytes([len(l)]) + l for l in (b"www", b"example%d" % (ident % 1000), b"org")) + b"\0"
    msg = struct.pack("!HHHHHH", ident & 0xFFFF, 0x0100, 1, 0, 0, 0) + name + struct.pack("!HH", 1, 1)
    return msg + b"\0" * max(0, pad - len(msg))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--datagrams", type=int, default=20000)
    ap.add_argument("--size", type=int, default=1200)
    ap.add_argument("--frag", type=int, default=400)
    a = ap.parse_args()
    assert a.frag % 8 == 0
    eth4 = bytes.fromhex("02000000000b02000000000a0800")
    eth6 = bytes.fromhex("02000000000b02000000000a86dd")
    src4, dst4 = bytes([10, 1, 0, 10]), bytes([10, 2, 0, 53])
    src6 = bytes.fromhex("20010db8000a00000000000000000010")
    dst6 = bytes.fromhex("20010db8000b00000000000000000053")
    with open(a.out, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        t = 1_700_000_000 * 1_000_000
        for i in range(a.datagrams):
            v6 = i % 2 == 1
            sport, dport = 10000 + i % 50000, 53 if i % 4 < 2 else 9000
            data = dns_query(i, a.size) if dport == 53 else (b"payload %d " % i * 200)[:a.size]
            ulen = 8 + len(data)
            if v6:
                pseudo = src6 + dst6 + struct.pack("!IxxxB", ulen, 17)
            else:
                pseudo = src4 + dst4 + struct.pack("!xBH", 17, ulen)
            udp = struct.pack("!HHHH", sport, dport, ulen, 0) + data
            c = csum(pseudo + udp) or 0xFFFF
            udp = udp[:6] + struct.pack("!H", c) + udp[8:]
            frags = []
            for off in range(0, len(udp), a.frag):
                part = udp[off:off + a.frag]
                more = off + len(part) < len(udp)
                if v6:
                    fh = struct.pack("!BBHI", 17, 0, (off // 8) << 3 | (1 if more else 0), i)
                    ip = (struct.pack("!IHBB", 0x60000000, 8 + len(part), 44, 64) + src6 + dst6 +
                          fh + part)
                    frags.append(eth6 + ip)
                else:
                    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(part), i & 0xFFFF,
                                    (0x2000 if more else 0) | off // 8, 64, 17, 0, src4, dst4)
                    h = h[:10] + struct.pack("!H", csum(h)) + h[12:]
                    frags.append(eth4 + h + part)
            if i % 4 == 3:
                frags = frags[-1:] + frags[:-1]
            for fr in frags:
                t += 1
                f.write(struct.pack("<IIII", t // 1_000_000, t % 1_000_000, len(fr), len(fr)) + fr)


if __name__ == "__main__":
    main()
