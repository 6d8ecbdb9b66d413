#!/usr/bin/python3
"""DPI benchmark traffic: a pcap of complete bidirectional TCP sessions with payload, IMIX.

  dpi_traffic.py -o traffic.pcap [--sessions 2000] [--concurrent 256] [--seed 1]

Every session is a distinct 5-tuple (client 10.0.0.0/8 -> server 172.16.0.0/12, port 80
or 443 or a random one) and 24 frames: SYN, SYN/ACK, ACK, 18 data segments in both
directions (random direction per segment, sequence numbers continuous per direction), FIN/ACK
from each side and the last ACK (so the appliance sees the connection closed, and a replay of
the file reuses the 5-tuple as a new connection: the DPI streams start again). Frame sizes are
the simple IMIX 7:4:1 of 64/570/1518 B on the wire (60/566/1514 B without the FCS, i.e. 6 /
512 / 1460 B of TCP payload): per session 14 x 60 B (the 6 control frames + 8 data segments of
6 B), 8 x 566 B, 2 x 1514 B. Payload: printable text from a seeded generator (HTTP-like
words, no rule strings planted), different for every segment.

Sessions are interleaved: `--concurrent` sessions are open at a time, their frames
round-robin, a finished session replaced by the next, so the flow table and the DPI stream
pools hold about 2 x concurrent directions. Classic pcap, microsecond timestamps. Same
arguments, same bytes.
"""
import argparse
import hashlib
import random
import struct

from gen_traffic import ETH_DST, ETH_SRC, ETHERTYPE_IPV4, PROTO_TCP, TS_BASE, csum

SYN, ACK, FIN, PSH = 0x02, 0x10, 0x01, 0x08
PAYLOAD = {60: 6, 566: 512, 1514: 1460}
WORDS = (b"GET POST HTTP/1.1 Host: Accept: text/html application/json Content-Length: "
         b"Cookie: session= user agent Mozilla/5.0 the of and to in is for on with as by "
         b"data value index page item list 200 OK 404 gzip deflate keep-alive close").split()


def text(rng, n):
    out = bytearray()
    while len(out) < n:
        out += rng.choice(WORDS) + b" "
    return bytes(out[:n])


def frame(src, dst, sport, dport, seq, ack, flags, payload, ip_id):
    hdr = struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 5 << 4,
                      flags, 65535, 0, 0)
    sb, db = struct.pack("!I", src), struct.pack("!I", dst)
    pseudo = sb + db + struct.pack("!BBH", 0, PROTO_TCP, 20 + len(payload))
    c = csum(pseudo + hdr + payload)
    l4 = hdr[:16] + struct.pack("!H", c) + hdr[18:] + payload
    iph = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 40 + len(payload), ip_id & 0xFFFF, 0x4000, 64,
                      PROTO_TCP, 0, sb, db)
    iph = iph[:10] + struct.pack("!H", csum(iph)) + iph[12:]
    f = ETH_DST + ETH_SRC + struct.pack("!H", ETHERTYPE_IPV4) + iph + l4
    return f + bytes(max(0, 60 - len(f)))  # Ethernet padding (IP total length excludes it)


def session(rng, key):
    """The 24 frames of one session, in order."""
    cli, srv, cport, sport = key
    iss_c, iss_s = rng.getrandbits(32), rng.getrandbits(32)
    sizes = [60] * 8 + [566] * 8 + [1514] * 2
    rng.shuffle(sizes)
    c_next, s_next = iss_c + 1, iss_s + 1  # next sequence number of each side
    out = []

    def c2s(flags, payload=b""):
        out.append(frame(cli, srv, cport, sport, c_next, s_next, flags, payload, rng.getrandbits(16)))

    def s2c(flags, payload=b""):
        out.append(frame(srv, cli, sport, cport, s_next, c_next, flags, payload, rng.getrandbits(16)))

    out.append(frame(cli, srv, cport, sport, iss_c, 0, SYN, b"", rng.getrandbits(16)))
    out.append(frame(srv, cli, sport, cport, iss_s, c_next, SYN | ACK, b"", rng.getrandbits(16)))
    c2s(ACK)
    for sz in sizes:
        p = text(rng, PAYLOAD[sz])
        if rng.random() < 0.5:
            c2s(ACK | PSH, p)
            c_next += len(p)
        else:
            s2c(ACK | PSH, p)
            s_next += len(p)
    c2s(FIN | ACK)
    c_next += 1
    s2c(FIN | ACK)
    s_next += 1
    c2s(ACK)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--sessions", type=int, default=2000)
    ap.add_argument("--concurrent", type=int, default=256)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if args.sessions <= 0 or args.concurrent <= 0:
        ap.error("--sessions and --concurrent must be > 0")
    rng = random.Random(args.seed)
    keys, seen = [], set()
    while len(keys) < args.sessions:
        k = ((10 << 24) | rng.getrandbits(24), (172 << 24) | (16 << 16) | rng.getrandbits(20),
             rng.randint(1024, 65535), rng.choice([80, 443, rng.randint(1024, 65535)]))
        if k not in seen:
            seen.add(k)
            keys.append(k)
    pending = iter(keys)
    active = []
    frames = []
    for _ in range(args.concurrent):
        k = next(pending, None)
        if k is not None:
            active.append(session(rng, k))
    while active:
        nxt = []
        for s in active:
            frames.append(s.pop(0))
            if s:
                nxt.append(s)
            else:
                k = next(pending, None)
                if k is not None:
                    nxt.append(session(rng, k))
        active = nxt
    out = bytearray(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    hist = {}
    for i, f in enumerate(frames):
        out += struct.pack("<IIII", TS_BASE + i // 1_000_000, i % 1_000_000, len(f), len(f)) + f
        hist[len(f)] = hist.get(len(f), 0) + 1
    with open(args.output, "wb") as fh:
        fh.write(out)
    mix = ", ".join(f"{n} x {s + 4} B" for s, n in sorted(hist.items()))
    print(f"{args.output}: {len(frames)} frames ({mix} on the wire), {args.sessions} TCP sessions, "
          f"{args.concurrent} concurrent, seed {args.seed}, sha256 {hashlib.sha256(out).hexdigest()[:16]}")


if __name__ == "__main__":
    main()
