#!/usr/bin/python3
"""Which queue of a multi-queue TAP device the kernel gives each packet (docs/operations.md,
"Many workers", net_tap).

    sudo bench/tap_queue_check.py [--queues 2] [--flows 400]

Creates a TAP device (dpuq<pid>) with QUEUES queues (IFF_MULTI_QUEUE, as DPDK's net_tap
opens them), sends frames into it from the kernel side through an AF_PACKET socket (the
kernel's tx path picks the queue: tun_select_queue -> tun_automq_select_queue), reads every
queue to see where each frame went, and reports, over FLOWS random flows:

  - TCP and UDP: both directions of a flow on the same queue?
  - IPv4 fragments: the first fragment, a later fragment and an unfragmented packet of the
    same flow on the same queue?
  - VXLAN: the two directions of an inner flow, with different outer source ports (as two
    VTEPs choose them), on the same queue?

Nothing is written back into the TAP (so the kernel's flow table, which remembers the queue
a flow was last written on, stays empty: this is the hash alone). The device is removed at
exit. Needs root. Standard library only.
"""
import argparse
import fcntl
import os
import random
import select
import socket
import struct
import subprocess
import sys

TUNSETIFF = 0x400454CA
IFF_TAP, IFF_NO_PI, IFF_MULTI_QUEUE = 0x0002, 0x1000, 0x0100
MAGIC = b"\xd9\xd9DQ"  # + flow index (4 bytes) + frame kind (2 bytes): 10 bytes


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return (~s) & 0xFFFF


def ipv4(src, dst, proto, payload, ident=1, frag_off=0, mf=False):
    flags = (0x2000 if mf else 0) | (frag_off // 8)
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), ident, flags, 64, proto, 0,
                    socket.inet_aton(src), socket.inet_aton(dst))
    h = h[:10] + struct.pack("!H", csum(h)) + h[12:]
    return h + payload


def eth(ip):
    return bytes.fromhex("020000000002020000000001") + b"\x08\x00" + ip


def tcp(sp, dp, marker):
    return struct.pack("!HHIIBBHHH", sp, dp, 1, 0, 0x50, 0x10, 1000, 0, 0) + marker


def udp(sp, dp, marker):
    return struct.pack("!HHHH", sp, dp, 8 + len(marker), 0) + marker


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--queues", type=int, default=2)
    ap.add_argument("--flows", type=int, default=400)
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("SKIPPED: needs root (TAP device)")
        return 77
    name = f"dpuq{os.getpid()}"
    fds = []
    for _ in range(a.queues):
        fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
        fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TAP | IFF_NO_PI | IFF_MULTI_QUEUE))
        fds.append(fd)
    try:
        with open(f"/proc/sys/net/ipv6/conf/{name}/disable_ipv6", "w") as f:
            f.write("1")
        subprocess.run(["ip", "link", "set", name, "arp", "off", "up"], check=True)
        tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        tx.bind((name, 0))
        rnd = random.Random(1)
        seen = {}

        def drain():
            while True:
                r, _, _ = select.select(fds, [], [], 0.2)
                if not r:
                    return
                for fd in r:
                    try:
                        while True:
                            f = os.read(fd, 65536)
                            m = f.find(MAGIC)
                            if m >= 0:
                                seen[f[m:m + 10]] = fds.index(fd)
                    except BlockingIOError:
                        pass

        def send(frame):
            tx.send(frame)

        def ip(i):
            return f"10.{rnd.randrange(256)}.{rnd.randrange(256)}.{1 + rnd.randrange(250)}"

        same = {"tcp": 0, "udp": 0, "frag_first": 0, "frag_later": 0, "vxlan": 0}
        for i in range(a.flows):
            s, d = ip(i), ip(i)
            sp, dp = 1024 + rnd.randrange(60000), 1 + rnd.randrange(1023)
            mk = lambda k: MAGIC + struct.pack("!IH", i, k)
            send(eth(ipv4(s, d, 6, tcp(sp, dp, mk(0)))))
            send(eth(ipv4(d, s, 6, tcp(dp, sp, mk(1)))))
            send(eth(ipv4(s, d, 17, udp(sp, dp, mk(2)))))
            send(eth(ipv4(d, s, 17, udp(dp, sp, mk(3)))))
            body = udp(sp, dp, mk(4) + b"x" * 14)  # 8 + 24 bytes: the first fragment
            send(eth(ipv4(s, d, 17, body[:24], ident=i + 1, mf=True)))
            send(eth(ipv4(s, d, 17, mk(5) + b"y" * 6, ident=i + 1, frag_off=24)))
            inner_ab = eth(ipv4(s, d, 6, tcp(sp, dp, mk(6))))
            inner_ba = eth(ipv4(d, s, 6, tcp(dp, sp, mk(7))))
            vx = lambda inner: b"\x08\0\0\0\0\0\x2a\0" + inner
            send(eth(ipv4("192.0.2.1", "192.0.2.2", 17, udp(49152 + rnd.randrange(16000), 4789, vx(inner_ab)))))
            send(eth(ipv4("192.0.2.2", "192.0.2.1", 17, udp(49152 + rnd.randrange(16000), 4789, vx(inner_ba)))))
            if i % 50 == 49:
                drain()
        drain()
        q = lambda i, k: seen.get(MAGIC + struct.pack("!IH", i, k))
        missing = 0
        for i in range(a.flows):
            qs = [q(i, k) for k in range(8)]
            if None in qs:
                missing += 1
                continue
            same["tcp"] += qs[0] == qs[1]
            same["udp"] += qs[2] == qs[3]
            same["frag_first"] += qs[4] == qs[2]
            same["frag_later"] += qs[5] == qs[2]
            same["vxlan"] += qs[6] == qs[7]
        n = a.flows - missing
        print(f"kernel {os.uname().release}, TAP {name} with {a.queues} queues, {n} flows "
              f"({missing} with a frame not seen)")
        print(f"  TCP, both directions on one queue:              {same['tcp']}/{n}")
        print(f"  UDP, both directions on one queue:              {same['udp']}/{n}")
        print(f"  first fragment on the flow's queue:             {same['frag_first']}/{n}")
        print(f"  later fragment on the flow's queue:             {same['frag_later']}/{n}")
        print(f"  VXLAN inner flow, both directions on one queue: {same['vxlan']}/{n}")
        print(f"  (by chance with {a.queues} queues: {n / a.queues:.0f}/{n})")
    finally:
        for fd in fds:
            os.close(fd)
        subprocess.run(["ip", "link", "del", name], stderr=subprocess.DEVNULL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
