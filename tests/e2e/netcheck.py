#!/usr/bin/env python3
"""Traffic checks for the bump-in-the-wire test (Python 3 standard library only, run as
root inside a network namespace). Every check prints one line and exits non-zero on failure.

  netcheck.py ping DST [--count N]                  ICMP / ICMPv6 echo over a raw socket;
                                                    every reply must come back intact
  netcheck.py tcp-serve BIND PORT READY_FILE [N]    accept N connections (default 1), one after
                                                    the other; on each receive until the peer
                                                    shuts down its side, answer with the
                                                    sha256 of what arrived, then send BYTES of
                                                    its own (first 8 bytes of the request)
  netcheck.py tcp-send DST PORT BYTES [--from SRC]  send BYTES, check the server's sha256 of
                                                    them and the sha256 of the server's data
  netcheck.py udp-serve BIND PORT READY_FILE N      echo N distinct datagrams back (distinct per
                                                    sender address and port), then exit
  netcheck.py udp-send DST PORT SIZE,SIZE,... [--from SRC]
                                                    send datagrams of those sizes (a size above
                                                    the MTU is sent as IP fragments), each must
                                                    come back unchanged
--from SRC binds the client socket to the local address SRC (a second address of the
namespace: another host pair, which software distribution may give to another worker).

Payloads are deterministic (derived from a counter with sha256), so a corrupted or
truncated byte anywhere is detected.
"""
import hashlib
import os
import select
import socket
import struct
import sys
import time


def det_bytes(n, label):
    """n deterministic pseudo-random bytes."""
    out = bytearray()
    counter = 0
    while len(out) < n:
        out += hashlib.sha256(f"{label}:{counter}".encode()).digest()
        counter += 1
    return bytes(out[:n])


def family_of(addr):
    return socket.AF_INET6 if ":" in addr else socket.AF_INET


def checksum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def ping(dst, count=3, timeout=2.0):
    fam = family_of(dst)
    if fam == socket.AF_INET:
        sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
        req_type, rep_type = 8, 0
    else:
        sock = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
        req_type, rep_type = 128, 129
    ident = os.getpid() & 0xFFFF
    got = 0
    for seq in range(1, count + 1):
        data = det_bytes(56, f"ping{seq}")
        hdr = struct.pack("!BBHHH", req_type, 0, 0, ident, seq)
        if fam == socket.AF_INET:
            hdr = struct.pack("!BBHHH", req_type, 0, checksum(hdr + data), ident, seq)
        # (the kernel fills in the ICMPv6 checksum on raw ICMPv6 sockets)
        sock.sendto(hdr + data, (dst, 0))
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                print(f"ping {dst}: no reply to seq {seq} within {timeout} s")
                return 1
            r, _, _ = select.select([sock], [], [], left)
            if not r:
                continue
            pkt, _ = sock.recvfrom(4096)
            if fam == socket.AF_INET:
                pkt = pkt[(pkt[0] & 0x0F) * 4:]  # raw IPv4 sockets deliver the IP header
            if len(pkt) < 8:
                continue
            t, _, _, rid, rseq = struct.unpack("!BBHHH", pkt[:8])
            if t == rep_type and rid == ident and rseq == seq:
                if pkt[8:] != data:
                    print(f"ping {dst}: reply to seq {seq} has a different payload")
                    return 1
                got += 1
                break
    print(f"ping {dst}: {got}/{count} echo replies, payloads intact")
    return 0


def tcp_serve(bind, port, ready_file, count=1):
    fam = family_of(bind)
    srv = socket.socket(fam, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((bind, port))
    srv.listen(8)
    srv.settimeout(60)
    with open(ready_file, "w") as f:
        f.write("ready\n")
    for _ in range(count):
        tcp_serve_one(srv)
    return 0


def tcp_serve_one(srv):
    conn, peer = srv.accept()
    conn.settimeout(60)
    h = hashlib.sha256()
    total = 0
    first = b""
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            break
        if len(first) < 8:
            first += chunk[:8 - len(first)]
        h.update(chunk)
        total += len(chunk)
    want_back = struct.unpack("!Q", first)[0] if len(first) == 8 else 0
    conn.sendall(h.hexdigest().encode() + b"\n")
    conn.sendall(det_bytes(want_back, "server"))
    conn.close()
    print(f"tcp-serve: received {total} bytes from {peer[0]}, sent {want_back} back")


def tcp_send(dst, port, nbytes, src=None):
    data = struct.pack("!Q", nbytes) + det_bytes(nbytes - 8, "client")
    s = socket.create_connection((dst, port), timeout=30,
                                 source_address=(src, 0) if src else None)
    s.settimeout(60)
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
    reply = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        reply += chunk
    s.close()
    nl = reply.find(b"\n")
    if nl != 64:
        print(f"tcp-send {dst}: bad reply header ({len(reply)} bytes received)")
        return 1
    theirs, back = reply[:64].decode(), reply[65:]
    ok = True
    if theirs != hashlib.sha256(data).hexdigest():
        print(f"tcp-send {dst}: server's sha256 of the {nbytes} bytes sent differs")
        ok = False
    expect = det_bytes(nbytes, "server")
    if hashlib.sha256(back).digest() != hashlib.sha256(expect).digest():
        print(f"tcp-send {dst}: {len(back)} bytes came back, expected {nbytes} with another sha256")
        ok = False
    if ok:
        print(f"tcp-send {dst}: {nbytes} bytes each way, sha256 match "
              f"({hashlib.sha256(data).hexdigest()[:16]}..., {hashlib.sha256(back).hexdigest()[:16]}...)")
    return 0 if ok else 1


def udp_serve(bind, port, ready_file, n):
    fam = family_of(bind)
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.bind((bind, port))
    s.settimeout(60)
    with open(ready_file, "w") as f:
        f.write("ready\n")
    seen = set()
    while len(seen) < n:
        data, peer = s.recvfrom(65535)
        s.sendto(data, peer)
        seen.add((peer, data[:4]))
    # Keep answering retransmissions for a moment, then stop.
    s.settimeout(2)
    try:
        while True:
            data, peer = s.recvfrom(65535)
            s.sendto(data, peer)
    except socket.timeout:
        pass
    print(f"udp-serve: echoed {len(seen)} distinct datagrams")
    return 0


def udp_send(dst, port, sizes, src=None):
    fam = family_of(dst)
    s = socket.socket(fam, socket.SOCK_DGRAM)
    if src:
        s.bind((src, 0))
    if fam == socket.AF_INET:
        # Let the kernel fragment datagrams larger than the MTU (no PMTU discovery DF bit).
        IP_MTU_DISCOVER, IP_PMTUDISC_DONT = 10, 0
        s.setsockopt(socket.IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DONT)
    else:
        IPV6_DONTFRAG = 62
        s.setsockopt(socket.IPPROTO_IPV6, IPV6_DONTFRAG, 0)
    s.connect((dst, port))
    for i, size in enumerate(sizes):
        data = struct.pack("!I", i) + det_bytes(size - 4, f"udp{i}")
        for attempt in range(3):
            s.send(data)
            deadline = time.monotonic() + 2
            echoed = None
            while time.monotonic() < deadline:
                r, _, _ = select.select([s], [], [], max(0, deadline - time.monotonic()))
                if not r:
                    break
                back = s.recv(65535)
                if back[:4] == data[:4]:
                    echoed = back
                    break
            if echoed is not None:
                break
        if echoed is None:
            print(f"udp-send {dst}: datagram {i} ({size} bytes) never came back (3 tries)")
            return 1
        if echoed != data:
            print(f"udp-send {dst}: datagram {i} ({size} bytes) came back changed "
                  f"({len(echoed)} bytes)")
            return 1
    print(f"udp-send {dst}: {len(sizes)} datagrams ({','.join(map(str, sizes))} bytes) "
          f"echoed intact")
    return 0


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    cmd, args = argv[1], argv[2:]
    src = None
    if "--from" in args:
        i = args.index("--from")
        src = args[i + 1]
        del args[i:i + 2]
    if cmd == "ping":
        count = int(args[args.index("--count") + 1]) if "--count" in args else 3
        return ping(args[0], count)
    if cmd == "tcp-serve":
        return tcp_serve(args[0], int(args[1]), args[2], int(args[3]) if len(args) > 3 else 1)
    if cmd == "tcp-send":
        return tcp_send(args[0], int(args[1]), int(args[2]), src)
    if cmd == "udp-serve":
        return udp_serve(args[0], int(args[1]), args[2], int(args[3]))
    if cmd == "udp-send":
        return udp_send(args[0], int(args[1]), [int(x) for x in args[2].split(",")], src)
    print(f"unknown command {cmd}")
    return 2


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except OSError as e:  # timeouts, refused connections, unreachable networks
        print(f"netcheck {' '.join(sys.argv[1:])}: {e.__class__.__name__}: {e}")
        sys.exit(1)
