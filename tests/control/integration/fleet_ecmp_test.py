#!/usr/bin/python3
"""ECMP through a fleet of appliances, in network namespaces (docs/fleet.md, docs/lb-guide.md).

               ┌─c1── box n1 (dpu-appliance: A | B) ──┐
  client ns ───┼─c2── box n2 (dpu-appliance: A | B) ──┼── bridge (lan ns) ── backends be1..be4
  (10.98.0.1)  └─c3── box n3 (dpu-appliance: A | B) ──┘          │         (VIP 10.99.0.10 on
       ^                                                         │          lo, a ns each)
       └──────────────────── cr (return path, DSR) ──────────────┘

The client reaches the service VIP 10.99.0.10:8080 over a resilient `ip nexthop` group
(L4 hash, fib_multipath_hash_policy=1) whose three next hops are the three boxes, each a
bump in the wire (side A towards the client, side B on the LAN bridge). The boxes follow one
fleet on a real etcd; the fleet's config has an LB service in LB_MODE_L2 (direct server
return: the box rewrites the destination MAC to the backend's, the backend answers the
client itself over the return path, which crosses no box) and a DPI rule that resets a
connection carrying a signature. Every box computes the same Maglev table from the same
config, so a flow gets the same backend whichever box it crosses.

Each run opens long-lived TCP connections (a request every 50 ms, each answer names the
backend), kills one box with SIGKILL mid-transfer and takes its client link down (what BFD
or a routing protocol would do): the group's buckets of that box move to the two others
(resilient hashing: no other flow moves). Then it counts the connections that survive.

  run 1, dataplane.tcp.midstream FORWARD: every moved connection is picked up mid-stream
    by its new box, gets the same backend, and survives; none of the others is disturbed.
    DPI stream state does not move with the flow: a signature split across the move (first
    half through the dead box, second half through the new one) is not matched, while the
    same split signature on a connection that did not move is matched (reset); the new box
    does inspect the moved flow (a whole signature sent after the move is matched).
  run 2, dataplane.tcp.midstream DROP (a new fleet version; the killed box of run 1 is
    restarted and comes back with it): every moved connection dies (its packets are dropped
    as tcp_midstream by the surviving boxes) and every other connection survives.

Run 2's first connections reuse the source ports of run 1's DPI-reset probes (the rest have
ports of their own from 21000): a new connection on the 5-tuple of one the appliance reset
itself is a new flow (the reset closed the tracked state). Before that was fixed the reset flow
kept its state (syn_sent: a box in a DSR path never sees the SYN-ACK) and its reject verdict,
and a new SYN on it was dropped (dpi_drop) for as long as its retries kept the flow alive.
ECMP_REUSE_RESET_PORTS=0 gives run 2 fresh ports only.

usage: fleet_ecmp_test.py DPU_APPLIANCE DPUCTL      (exit 0 pass, 77 skipped, else failed)
Environment: ECMP_CONNS (main connections per run, default 48), ECMP_PMD (af_packet or pcap;
default af_packet, then pcap if af_packet does not start), KEEP_WORK=1 (keep a copy of the
work directory on failure), FLEET_RUN_EXTRA (run options of the boxes).
"""
import atexit
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fleet_lib import Fatal, Lab, Node, Relay, wait_for, skip  # noqa: E402

VIP, VPORT = "10.99.0.10", 8080
CLIENT = "10.98.0.1"
RET_NET, RET_CLIENT = "10.96.0", "10.96.0.1"   # the LAN (return path) subnet
NBOX, NBACK = 3, 4
BACKEND_MAC = "02:be:00:00:00:{:02x}"
GW_MAC = "02:ec:00:00:fe:{:02x}"  # the client's "router" MAC per path (the box rewrites it)
# The DPI signature: split in two halves across the move by the probes.
SIGNATURE = "EcmpSplitSignature-7f3a9c1e-dpi-stream-state"
HALF = len(SIGNATURE) // 2
THIS = os.path.abspath(__file__)
PY = "/usr/bin/python3"


# ------------------------------------------------------------------------------------------
# Roles run inside the namespaces (this file, started with --role): server and client.
# ------------------------------------------------------------------------------------------

def role_server(name, ready):
    import socketserver

    class H(socketserver.BaseRequestHandler):
        def handle(self):
            s, buf, n = self.request, b"", 0
            try:
                while True:
                    d = s.recv(65536)
                    if not d:
                        return
                    buf += d
                    while b"\n" in buf:
                        line, _, buf = buf.partition(b"\n")
                        cmd, _, arg = line.decode(errors="replace").partition(" ")
                        if cmd == "REQ":
                            n += 1
                            s.sendall(f"{name} {arg.split(' ')[0]} {'x' * 3000}\n".encode())
                        elif cmd == "HELLO":
                            s.sendall(f"{name} HELLO\n".encode())
                        elif cmd == "SPLIT":
                            ok = arg == SIGNATURE
                            s.sendall(f"{name} SPLIT {'intact' if ok else 'mangled'}\n".encode())
                        elif cmd == "BYE":
                            s.sendall(f"{name} BYE {n}\n".encode())
                            return
            except OSError:
                return

    class S(socketserver.ThreadingTCPServer):
        allow_reuse_address = True
        daemon_threads = True
        request_queue_size = 256

    srv = S((VIP, VPORT), H)
    open(ready, "w").write("ready\n")
    srv.serve_forever()


class ClientConn:
    def __init__(self, i, kind, port=0):
        self.i, self.kind = i, kind
        self.s = socket.socket()
        self.s.bind((CLIENT, port))
        self.sport = self.s.getsockname()[1]
        self.buf = b""
        self.backend = None
        self.backends = set()
        self.responses = 0
        self.last = None          # time of the last answer
        self.max_gap = 0.0        # longest time between two answers
        self.gap_at = None        # when that gap ended
        self.status = "open"
        self.error = ""
        self.probe = None         # probes: result of each step

    def line(self, deadline, stop=None):
        while b"\n" not in self.buf:
            if time.time() > deadline or (stop is not None and stop()):
                raise TimeoutError("no answer")
            try:
                d = self.s.recv(65536)
            except socket.timeout:
                continue
            if not d:
                raise EOFError("connection closed by the peer")
            self.buf += d
        ln, _, self.buf = self.buf.partition(b"\n")
        return ln.decode(errors="replace")

    def answered(self, backend):
        t = time.time()
        if self.last is not None and t - self.last > self.max_gap:
            self.max_gap, self.gap_at = t - self.last, t
        self.last = t
        self.responses += 1
        self.backends.add(backend)

    def report(self):
        return {"i": self.i, "kind": self.kind, "sport": self.sport, "backend": self.backend,
                "backends": sorted(self.backends), "responses": self.responses,
                "last": self.last, "max_gap": round(self.max_gap, 3), "gap_at": self.gap_at,
                "status": self.status, "error": self.error, "probe": self.probe}


def outq(s):
    import fcntl
    import termios
    import array
    a = array.array("i", [0])
    fcntl.ioctl(s.fileno(), termios.TIOCOUTQ, a, True)
    return a[0]


def role_client(nconns, nprobes, interval, finish_timeout, base, ports=()):
    out_lock = threading.Lock()

    def emit(obj):
        with out_lock:
            sys.stdout.write(json.dumps(obj) + "\n")
            sys.stdout.flush()

    # Source ports base, base + 1, ...: each run its own (no 5-tuple of an earlier run).
    conns = [ClientConn(i, "main", ports[i] if i < len(ports) else base + i) for i in range(nconns)] + \
            [ClientConn(nconns + i, "probe", base + nconns + i) for i in range(nprobes)]
    for c in conns:
        try:
            c.s.settimeout(60)
            c.s.connect((VIP, VPORT))
            c.s.settimeout(0.5)
            c.s.sendall(f"HELLO {c.kind} {c.i}\n".encode())
            ln = c.line(time.time() + 60)
        except Exception as e:
            emit({"ev": "connect_failed", "sport": c.sport, "error": f"{type(e).__name__}: {e}"})
            raise
        c.backend = ln.split()[0]
        c.answered(c.backend)
    finish = threading.Event()

    def run_main(c):
        seq, pending = 0, False
        try:
            while not finish.is_set():
                if not pending:
                    seq += 1
                    c.s.sendall(f"REQ {seq} {'r' * 200}\n".encode())
                    pending = True
                ln = c.line(float("inf"), stop=finish.is_set)
                w = ln.split()
                if len(w) < 2 or w[1] != str(seq):
                    raise AssertionError(f"answer {ln[:60]!r} to request {seq}")
                c.answered(w[0])
                pending = False
                time.sleep(interval)
        except TimeoutError:  # finish came while an answer was awaited
            pass
        except Exception as e:  # noqa: BLE001 - any failure breaks the connection
            c.status, c.error = "broken", f"{type(e).__name__}: {e} (at {time.time():.3f})"
            c.s.close()
            return
        deadline = time.time() + finish_timeout
        try:
            if pending:
                ln = c.line(deadline)
                if ln.split()[1:2] != [str(seq)]:
                    raise AssertionError(f"answer {ln[:60]!r} to request {seq}")
                c.answered(ln.split()[0])
            c.s.sendall(b"BYE\n")
            ln = c.line(deadline)
            if ln.split()[1:2] != ["BYE"]:
                raise AssertionError(f"answer {ln[:60]!r} to BYE")
            c.answered(ln.split()[0])
            c.status = "ok"
        except Exception as e:  # noqa: BLE001
            c.status, c.error = "broken", f"{type(e).__name__}: {e} (at finish)"
        finally:
            c.s.close()

    threads = []
    for c in conns:
        if c.kind == "main":
            t = threading.Thread(target=run_main, args=(c,), daemon=True)
            t.start()
            threads.append(t)
    emit({"ev": "ready", "conns": [c.report() for c in conns]})

    probes = [c for c in conns if c.kind == "probe"]

    def probe_answer(c, step):
        try:
            ln = c.line(time.time() + 20)
            c.probe[step] = ln.split(" ", 1)[1] if " " in ln else ln
            c.answered(ln.split()[0])
        except (ConnectionResetError, EOFError) as e:
            c.probe[step] = "reset" if isinstance(e, ConnectionResetError) else "closed"
            c.status = "reset"
        except Exception as e:  # noqa: BLE001
            c.probe[step] = f"{type(e).__name__}: {e}"

    for cmd in sys.stdin:
        cmd = cmd.strip()
        if cmd == "half1":   # the signature's first half, no newline yet
            for c in probes:
                c.probe = {}
                c.s.sendall(f"SPLIT {SIGNATURE[:HALF]}".encode())
            end = time.time() + 60
            while time.time() < end and any(outq(c.s) for c in probes):
                time.sleep(0.05)
            emit({"ev": "half1", "unacked": [outq(c.s) for c in probes]})
        elif cmd == "half2":  # the rest of the signature
            ts = []
            for c in probes:
                try:
                    c.s.sendall(f"{SIGNATURE[HALF:]}\n".encode())
                except OSError as e:
                    c.probe["split"] = f"send: {e}"
                    continue
                t = threading.Thread(target=probe_answer, args=(c, "split"))
                t.start()
                ts.append(t)
            for t in ts:
                t.join()
            emit({"ev": "half2", "conns": [c.report() for c in probes]})
        elif cmd == "whole":  # probes still open: the whole signature in one segment
            ts = []
            for c in probes:
                if c.status == "reset":
                    continue
                c.s.sendall(f"SPLIT {SIGNATURE}\n".encode())
                t = threading.Thread(target=probe_answer, args=(c, "whole"))
                t.start()
                ts.append(t)
            for t in ts:
                t.join()
            emit({"ev": "whole", "conns": [c.report() for c in probes]})
        elif cmd == "status":
            emit({"ev": "status", "now": time.time(), "conns": [c.report() for c in conns]})
        elif cmd == "finish":
            finish.set()
            for t in threads:
                t.join()
            for c in probes:
                c.s.close()
            emit({"ev": "done", "conns": [c.report() for c in conns]})
            return


# ------------------------------------------------------------------------------------------
# The lab: namespaces, veths, bridge, boxes.
# ------------------------------------------------------------------------------------------

def ok(msg):
    print(f"ok   fleet_ecmp_test: {msg}", flush=True)


def sh(*cmd, check=True):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)}: rc {r.returncode}: {r.stderr.strip()}")
    return r


class Box(Node):
    """A fleet node (fleet_lib.Node) between two veth ends of this lab: side A towards the
    client, side B on the LAN bridge."""

    def __init__(self, lab, name, group, a_if, b_if):  # pylint: disable=super-init-not-called
        self.lab, self.name, self.group = lab, name, group
        self.state = os.path.join(lab.work, f"state-{name}")
        self.relay = Relay(lab.etcd.port)
        self.prefix = f"dpuecmp_{os.getpid()}_{len(lab.nodes)}"
        self.log = os.path.join(lab.work, f"{name}.log")
        self.proc = self.addr = self.tx = None
        self.a_if, self.b_if = a_if, b_if
        self.etcd_opts, self.vdevs = [], []
        self.pmd = None
        lab.nodes.append(self)

    def start(self, extra=None, pmd=None):
        pmds = [pmd or self.pmd] if (pmd or self.pmd) else \
            [os.environ["ECMP_PMD"]] if os.environ.get("ECMP_PMD") else ["af_packet", "pcap"]
        last = None
        for p in pmds:
            try:
                self._start(p, extra)
                self.pmd = p
                return
            except Fatal as e:
                last = e
                print(f"{self.name}: net_{p} did not start:\n{e}", flush=True)
        raise last

    def _start(self, pmd, extra):
        self.vdevs = [a for k, i in enumerate((self.a_if, self.b_if))
                      for a in ("--vdev", f"net_{pmd}{k},iface={i}")]
        Node.start(self, extra)

    def flows(self):
        d = json.loads(self.ctl("--json", "flows", "--dst", VIP, "--proto", "tcp",
                                "--limit", "100000").stdout)
        return {int(f["src_port"]): f for f in d.get("flows", []) if f.get("src_ip") == CLIENT}

    def stats(self):
        return json.loads(self.ctl("--json", "stats").stdout)


def drops(stats, reason):
    """Packets dropped for `reason` (GetStats total.drops, a map by reason name)."""
    return int(stats.get("total", {}).get("drops", {}).get(reason, 0))


class Topo:
    """Namespaces (client, lan, one per backend), the veths between them and the boxes'
    veth ends in the root namespace. close() removes all of it."""

    def __init__(self, work):
        tag = os.getpid() % 100000
        self.work = work
        self.ns_cli = f"dpuecmp{tag}c"
        self.ns_lan = f"dpuecmp{tag}l"
        self.ns_be = [f"dpuecmp{tag}b{k + 1}" for k in range(NBACK)]
        self.a_if = [f"ec{tag}a{i + 1}" for i in range(NBOX)]  # root ns: box side A
        self.b_if = [f"ec{tag}b{i + 1}" for i in range(NBOX)]  # root ns: box side B
        self.made_ns, self.made_links, self.procs = [], [], []

    # -- helpers --
    def ns(self, ns, *cmd, check=True):
        return sh("ip", "netns", "exec", ns, *cmd, check=check)

    def sysctl(self, ns, *kv):
        for x in kv:
            self.ns(ns, "sysctl", "-qw", x)

    def offloads_off(self, dev, ns=None):
        cmd = ["ethtool", "-K", dev, "tx", "off", "tso", "off", "gso", "off", "gro", "off"]
        r = self.ns(ns, *cmd, check=False) if ns else sh(*cmd, check=False)
        if r.returncode != 0:
            raise AssertionError(f"ethtool -K {dev} ... failed: {r.stderr.strip()}")

    def addns(self, name):
        self.made_ns.append(name)
        sh("ip", "netns", "add", name)
        sh("ip", "-n", name, "link", "set", "lo", "up")
        self.sysctl(name, "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1",
                    "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0")

    def mac(self, ns, dev):
        return json.loads(sh("ip", "-n", ns, "-j", "link", "show", dev).stdout)[0]["address"]

    # -- build --
    def build(self):
        cli, lan = self.ns_cli, self.ns_lan
        for n in [cli, lan, *self.ns_be]:
            self.addns(n)
        self.sysctl(cli, "net.ipv4.fib_multipath_hash_policy=1")
        sh("ip", "-n", cli, "addr", "add", f"{CLIENT}/32", "dev", "lo")
        sh("ip", "-n", lan, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", lan, "link", "set", "br0", "up")
        # Return path: the backends answer the client here, no box on the way (DSR).
        sh("ip", "-n", cli, "link", "add", "cr", "type", "veth", "peer", "name", "crp", "netns", lan)
        sh("ip", "-n", cli, "addr", "add", f"{RET_CLIENT}/24", "dev", "cr")
        sh("ip", "-n", cli, "link", "set", "cr", "up")
        sh("ip", "-n", lan, "link", "set", "crp", "master", "br0", "up")
        cr_mac = self.mac(cli, "cr")
        sh("bridge", "-n", lan, "fdb", "add", cr_mac, "dev", "crp", "master", "static")
        # The boxes' wires: client c<i> -- a<i> [box i] b<i> -- bp<i> on the bridge.
        for i in range(NBOX):
            a, b, k = self.a_if[i], self.b_if[i], i + 1
            self.made_links += [a, b]
            sh("ip", "link", "add", a, "type", "veth", "peer", "name", f"c{k}", "netns", cli)
            sh("ip", "link", "add", b, "type", "veth", "peer", "name", f"bp{k}", "netns", lan)
            for dev in (a, b):
                self.offloads_off(dev)
                sh("sysctl", "-qw", f"net.ipv6.conf.{dev}.disable_ipv6=1")
                sh("ip", "link", "set", dev, "arp", "off", "up")
            self.offloads_off(f"c{k}", cli)
            self.offloads_off(f"bp{k}", lan)
            sh("ip", "-n", cli, "addr", "add", f"10.97.{k}.1/24", "dev", f"c{k}")
            self.sysctl(cli, f"net.ipv4.conf.c{k}.arp_ignore=1")
            sh("ip", "-n", lan, "link", "set", f"bp{k}", "master", "br0", "up")
            # Nothing reaches a box from the LAN side: no flooding towards it, no learning.
            sh("bridge", "-n", lan, "link", "set", "dev", f"bp{k}", "flood", "off",
               "mcast_flood", "off", "learning", "off")
            sh("bridge", "-n", lan, "link", "set", "dev", f"bp{k}", "bcast_flood", "off", check=False)
        self.links_up()
        # Backends: the VIP on lo, no ARP for it, the client's address via the return path.
        for k, ns in enumerate(self.ns_be, 1):
            mac = BACKEND_MAC.format(k)
            sh("ip", "-n", ns, "link", "add", "e0", "address", mac, "type", "veth",
               "peer", "name", f"be{k}", "netns", lan)
            self.offloads_off("e0", ns)
            self.offloads_off(f"be{k}", lan)
            self.sysctl(ns, "net.ipv4.conf.all.arp_ignore=1", "net.ipv4.conf.all.arp_announce=2",
                        "net.ipv4.conf.e0.rp_filter=0")
            sh("ip", "-n", ns, "addr", "add", f"{VIP}/32", "dev", "lo")
            sh("ip", "-n", ns, "addr", "add", f"{RET_NET}.{10 + k}/24", "dev", "e0")
            sh("ip", "-n", ns, "link", "set", "e0", "up")
            sh("ip", "-n", ns, "neigh", "replace", RET_CLIENT, "lladdr", cr_mac, "dev", "e0",
               "nud", "permanent")
            sh("ip", "-n", ns, "route", "add", f"{CLIENT}/32", "via", RET_CLIENT, "dev", "e0")
            sh("ip", "-n", lan, "link", "set", f"be{k}", "master", "br0", "up")
            sh("bridge", "-n", lan, "fdb", "add", mac, "dev", f"be{k}", "master", "static")
            # The client answers the backends' ARP for its return address, if ever asked.
            sh("ip", "-n", cli, "neigh", "replace", f"{RET_NET}.{10 + k}",
               "lladdr", mac, "dev", "cr", "nud", "permanent")

    def links_up(self):
        for i in range(NBOX):
            sh("ip", "-n", self.ns_cli, "link", "set", f"c{i + 1}", "up")

    def routes(self, boxes):
        """The VIP over a resilient nexthop group of the given boxes (indexes), rebuilt."""
        cli = self.ns_cli
        sh("ip", "-n", cli, "route", "del", f"{VIP}/32", check=False)
        sh("ip", "-n", cli, "nexthop", "flush", check=False)
        for i in boxes:
            k = i + 1
            sh("ip", "-n", cli, "neigh", "replace", f"10.97.{k}.254", "lladdr", GW_MAC.format(k),
               "dev", f"c{k}", "nud", "permanent")
            sh("ip", "-n", cli, "nexthop", "add", "id", str(k), "via", f"10.97.{k}.254", "dev", f"c{k}")
        sh("ip", "-n", cli, "nexthop", "add", "id", "100", "group",
           "/".join(str(i + 1) for i in boxes), "type", "resilient", "buckets", "96")
        sh("ip", "-n", cli, "route", "add", f"{VIP}/32", "nhid", "100", "src", CLIENT)

    def path_down(self, i):
        sh("ip", "-n", self.ns_cli, "link", "set", f"c{i + 1}", "down")

    def buckets(self):
        out = sh("ip", "-n", self.ns_cli, "-j", "nexthop", "bucket", "show", "id", "100").stdout
        n = {}
        for b in json.loads(out or "[]"):
            nh = b.get("bucket", b).get("nhid")
            n[nh] = n.get(nh, 0) + 1
        return n

    def spawn(self, ns, args, **kw):
        p = subprocess.Popen(["ip", "netns", "exec", ns, PY, THIS, "--role", *args], **kw)
        self.procs.append(p)
        return p

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
        self.procs = []
        for n in self.made_ns:
            sh("ip", "netns", "del", n, check=False)
        for link in self.made_links:
            if os.path.exists(f"/sys/class/net/{link}"):
                sh("ip", "link", "del", link, check=False)
        self.made_ns, self.made_links = [], []


class ConnectFailed(AssertionError):
    def __init__(self, sport, error):
        super().__init__(f"client: connection from {CLIENT}:{sport} to {VIP}:{VPORT} failed: {error}")
        self.sport = sport


class Client:
    """The client role in the client namespace; talks JSON lines over its stdin/stdout."""

    def __init__(self, topo, nconns, nprobes, finish_timeout, base, ports=()):
        self.p = topo.spawn(topo.ns_cli, ["client", str(nconns), str(nprobes), "0.05",
                                          str(finish_timeout), str(base), ",".join(map(str, ports))],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=open(os.path.join(topo.work, "client.err"), "ab"), text=True)
        self.q = queue.Queue()
        self.err = os.path.join(topo.work, "client.err")
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            try:
                self.q.put(json.loads(line))
            except ValueError:
                self.q.put({"ev": "garbage", "line": line})
        self.q.put({"ev": "eof"})

    def cmd(self, c, want, timeout=300):
        if c:
            self.p.stdin.write(c + "\n")
            self.p.stdin.flush()
        end = time.time() + timeout
        while True:
            try:
                m = self.q.get(timeout=max(0.1, end - time.time()))
            except queue.Empty:
                raise AssertionError(f"client: no '{want}' within {timeout} s") from None
            if m["ev"] == want:
                return m
            if m["ev"] == "connect_failed":
                raise ConnectFailed(m["sport"], m["error"])
            if m["ev"] == "eof":
                raise AssertionError(f"client exited (rc {self.p.wait()}) waiting for '{want}':\n"
                                     + open(self.err, errors="replace").read()[-3000:])


# ------------------------------------------------------------------------------------------

class EcmpLab:
    def __init__(self, appliance, dpuctl):
        extra = os.environ.get("FLEET_RUN_EXTRA", "--poll idle --idle-sleep-max-us 2000").split()
        self.lab = Lab(appliance, dpuctl, fleet=f"ecmp{os.getpid()}", run_extra=extra)
        self.topo = Topo(self.lab.work)
        atexit.register(self.close)  # runs before the lab's close (boxes, etcd, dirs)
        self.boxes = []
        self.version = 0
        self.results = []
        self.used = {}  # client port -> how an earlier run used it

    def close(self):
        for b in self.boxes:  # before their wires go
            try:
                b.kill9()
            except Exception:  # noqa: BLE001
                pass
        self.topo.close()

    def setup(self):
        t = self.topo
        t.build()
        ok(f"namespaces {t.ns_cli} (client), {t.ns_lan} (bridge), {', '.join(t.ns_be)} (backends)")
        for k, ns in enumerate(t.ns_be, 1):
            ready = os.path.join(self.lab.work, f"be{k}.ready")
            p = t.spawn(ns, ["server", f"be{k}", ready],
                        stdout=open(os.path.join(self.lab.work, f"be{k}.log"), "ab"),
                        stderr=subprocess.STDOUT)

            def up(p=p, ready=ready):
                if p.poll() is not None:
                    raise Fatal(f"backend server exited: {p.returncode}")
                return os.path.exists(ready)
            wait_for(f"backend be{k} to listen", up)
        for i in range(NBOX):
            self.boxes.append(Box(self.lab, f"n{i + 1}", "prod", t.a_if[i], t.b_if[i]))
        for b in self.boxes:
            b.start()
        wait_for("three live nodes", lambda: len(self.lab.statuses()) == NBOX)
        ok(f"three boxes follow fleet {self.lab.fleet} (net_{self.boxes[0].pmd}, --poll idle)")

    def apply(self, midstream):
        doc = {
            "dataplane": {"tcp": {"midstream": midstream}},
            "lb": {"services": [{
                "id": "web", "dst": [VIP], "protocol": "tcp", "dst_ports": str(VPORT),
                "mode": "LB_MODE_L2",
                "backends": [{"id": f"be{k}", "mac": BACKEND_MAC.format(k)}
                             for k in range(1, NBACK + 1)]}]},
            "dpi": {"rule_sets": [{"name": "ecmp", "text":
                                   'rule split_signature {\n  meta:\n    action = "reset"\n'
                                   f'  strings:\n    $s = "{SIGNATURE}"\n  condition:\n    $s\n}}\n'}]},
        }
        path = os.path.join(self.lab.work, f"midstream-{midstream}.json")
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)
        self.lab.fleetctl("apply", path, "--comment", f"midstream {midstream}")
        self.version += 1
        return path

    def sync(self):
        self.lab.wait_versions({b.name: self.version for b in self.boxes},
                               f"every box on version {self.version}")

    def where(self, conns):
        """sport -> (box index, flow) for every connection, from each box's flow table."""
        want = {c["sport"] for c in conns}

        def listed():
            found = {}
            for i, b in enumerate(self.boxes):
                if b.proc.poll() is not None:
                    continue
                for sport, f in b.flows().items():
                    if sport in want:
                        if sport in found:
                            raise AssertionError(f"flow :{sport} on {self.boxes[found[sport][0]].name} and {b.name}")
                        found[sport] = (i, f)
            return found if want <= set(found) else None
        return wait_for("every connection in one box's flow table", listed, timeout=120, interval=0.5)

    def run(self, midstream, nconns, nprobes, victim=None, agree=False):
        t0 = time.time()
        t = self.topo
        print(f"== run: dataplane.tcp.midstream {midstream}, {nconns} connections"
              f"{f', {nprobes} DPI probes' if nprobes else ''}", flush=True)
        buckets = t.buckets()
        finish_timeout = 15.0  # for the last answer and the BYE of each connection
        ports = []
        if os.environ.get("ECMP_REUSE_RESET_PORTS", "1") != "0":
            # The first connections come from the ports of earlier connections that DPI reset
            # (see the docstring): they must connect like any other.
            ports = [p for p, u in self.used.items() if u[3] == "reset"][:8]
            print(f"   reusing the source ports of DPI-reset connections "
                  f"{[(p, self.used[p][2]) for p in ports]}", flush=True)
        cl = Client(t, nconns, nprobes, finish_timeout, 20000 + 1000 * len(self.results), ports)
        try:
            ready = cl.cmd(None, "ready", timeout=300)
        except ConnectFailed as e:
            for b in self.boxes:
                if b.proc.poll() is None:
                    fl = b.ctl("--json", "flows", "--sport", str(e.sport), check=False).stdout
                    st = b.stats().get("total", {})
                    print(f"   {b.name}: flows of :{e.sport}: {fl.strip()}\n   {b.name}: drops "
                          f"{st.get('drops')}", flush=True)
            print(f"   :{e.sport} used before: {self.used.get(e.sport, 'no')}", flush=True)
            r = sh("ip", "netns", "exec", t.ns_cli, "ip", "route", "get", VIP, "from", CLIENT,
                   "ipproto", "tcp", "sport", str(e.sport), "dport", str(VPORT), check=False)
            print(f"   route of :{e.sport}: {r.stdout.strip()} {r.stderr.strip()}", flush=True)
            raise
        conns = ready["conns"]
        main = [c for c in conns if c["kind"] == "main"]
        probes = [c for c in conns if c["kind"] == "probe"]
        backend_of = {c["sport"]: c["backend"] for c in conns}
        loc = self.where(conns)
        box_of = {s: i for s, (i, _) in loc.items()}
        # The box's choice is the backend that answered: the Maglev pick, per flow.
        for s, (i, f) in loc.items():
            assert f.get("backend") == backend_of[s] and f.get("service") == "web", \
                (self.boxes[i].name, s, f, backend_of[s])
        per_box = [sum(1 for c in main if box_of[c["sport"]] == i) for i in range(NBOX)]
        per_be = {}
        for c in main:
            per_be[c["backend"]] = per_be.get(c["backend"], 0) + 1
        ok(f"{len(conns)} connections up; main connections per box "
           f"{dict(zip((b.name for b in self.boxes), per_box))}, per backend {dict(sorted(per_be.items()))}; "
           f"each box's flow names the backend that answers (buckets per next hop {buckets})")
        if agree:  # every box would give every connection the backend that answers it
            n = 0
            for b in self.boxes:
                for c in main:
                    r = json.loads(b.ctl("--json", "explain", "--src", CLIENT, "--dst", VIP, "--proto",
                                         "tcp", "--sport", str(c["sport"]), "--dport", str(VPORT),
                                         "--flags", "S").stdout)
                    assert r.get("backend") == c["backend"], (b.name, c, r)
                    n += 1
            ok(f"explain on every box: the same backend for each of the {len(main)} connections "
               f"({n} checks; one Maglev table from one fleet config)")
        if victim is None:  # the box with the most probes (DPI), else the most connections
            pb = [sum(1 for c in probes if box_of[c["sport"]] == i) for i in range(NBOX)]
            victim = max(range(NBOX), key=lambda i: (pb[i], per_box[i]))
        vbox = self.boxes[victim]
        moved = {s for s, i in box_of.items() if i == victim}
        moved_main = [c for c in main if c["sport"] in moved]
        assert moved_main and len(moved_main) < len(main), (per_box, victim)
        if nprobes:
            pm = sum(1 for c in probes if c["sport"] in moved)
            assert 0 < pm < len(probes), f"probes on {vbox.name}: {pm} of {len(probes)}"
            h = cl.cmd("half1", "half1", timeout=120)
            assert not any(h["unacked"]), f"first halves not acknowledged: {h}"
        time.sleep(2.0)  # transfers going on every box
        surv_idx = [i for i in range(NBOX) if i != victim]
        before = {i: self.boxes[i].stats() for i in surv_idx}
        t_kill = time.time()
        vbox.kill9()
        time.sleep(0.3)
        t.path_down(victim)
        t_down = time.time()
        nb = t.buckets()
        # Resilient hashing: only the dead next hop's buckets moved.
        assert (victim + 1) not in nb and sum(nb.values()) == sum(buckets.values()), nb
        print(f"   killed {vbox.name} (SIGKILL) at +{t_kill - t0:.1f} s, its client link down "
              f"{t_down - t_kill:.2f} s later; buckets now {nb}", flush=True)

        unmoved_main = [c for c in main if c["sport"] not in moved]

        def progressed(cs):
            st = cl.cmd("status", "status", timeout=60)
            by = {c["sport"]: c for c in st["conns"]}
            late = [c["sport"] for c in cs if (by[c["sport"]]["last"] or 0) <= t_down]
            return (not late) and st
        # The connections that did not move go on at once.
        wait_for("the connections on the surviving boxes to go on", lambda: progressed(unmoved_main),
                 timeout=120, interval=0.5)
        if midstream == "FORWARD":
            wait_for("every moved connection to answer again", lambda: progressed(moved_main),
                     timeout=180, interval=0.5)
            t_recovered = time.time()
        else:
            # Every packet of a moved flow is dropped by its new box (tcp_midstream): wait for
            # the retransmissions of each to be seen there, and a while more.
            def dropped():
                n = sum(drops(self.boxes[i].stats(), "tcp_midstream") - drops(before[i], "tcp_midstream")
                        for i in surv_idx)
                return n >= 2 * len(moved) and n
            wait_for("the moved connections' packets dropped as tcp_midstream", dropped, timeout=120)
            time.sleep(max(0.0, t_down + 10.0 - time.time()))
            t_recovered = None
        dpi = None
        if nprobes:
            probes_moved = [c for c in probes if c["sport"] in moved]
            h2 = cl.cmd("half2", "half2", timeout=120)
            res = {c["sport"]: c for c in h2["conns"]}
            wh = cl.cmd("whole", "whole", timeout=120)
            res2 = {c["sport"]: c for c in wh["conns"]}
            dpi = {"moved": len(probes_moved), "unmoved": len(probes) - len(probes_moved),
                   "split_matched_moved": sum(1 for c in probes_moved if res[c["sport"]]["probe"].get("split") == "reset"),
                   "split_intact_moved": sum(1 for c in probes_moved if res[c["sport"]]["probe"].get("split") == "SPLIT intact"),
                   "split_matched_unmoved": sum(1 for c in probes if c["sport"] not in moved
                                                and res[c["sport"]]["probe"].get("split") == "reset"),
                   "whole_matched_moved": sum(1 for c in probes_moved
                                              if (res2[c["sport"]]["probe"] or {}).get("whole") == "reset"),
                   "detail": {c["sport"]: res2[c["sport"]]["probe"] for c in probes}}
        # Where the flows are now (every connection has sent since the move).
        after = {i: self.boxes[i].flows() for i in surv_idx}
        mid = {s: (i, f) for i in surv_idx for s, f in after[i].items() if s in box_of}
        for s, (i, f) in mid.items():  # nothing that stayed changed box
            if s not in moved:
                assert box_of[s] == i and not f.get("midstream"), (s, self.boxes[i].name, f)
        picked = {s: (i, f) for s, (i, f) in mid.items() if s in moved}
        done = cl.cmd("finish", "done", timeout=300)
        cl.p.wait(timeout=60)
        fin = {c["sport"]: c for c in done["conns"]}
        for c in conns:
            self.used[c["sport"]] = (midstream, c["kind"], self.boxes[box_of[c["sport"]]].name,
                                     fin[c["sport"]]["status"], (fin[c["sport"]].get("probe") or {}))
        after_stats = {i: self.boxes[i].stats() for i in surv_idx}
        mdrops = sum(drops(after_stats[i], "tcp_midstream") - drops(before[i], "tcp_midstream")
                     for i in surv_idx)

        def count(cs, status):
            return sum(1 for c in cs if fin[c["sport"]]["status"] == status)
        same = sum(1 for c in main if fin[c["sport"]]["backends"] == [c["backend"]])
        gaps = [fin[c["sport"]]["max_gap"] for c in moved_main if fin[c["sport"]]["status"] == "ok"]
        ugaps = [fin[c["sport"]]["max_gap"] for c in unmoved_main if fin[c["sport"]]["status"] == "ok"]
        r = {"midstream": midstream, "victim": vbox.name,
             "per_box": dict(zip((b.name for b in self.boxes), per_box)),
             "main": len(main), "moved": len(moved_main),
             "moved_ok": count(moved_main, "ok"), "moved_broken": count(moved_main, "broken"),
             "unmoved": len(unmoved_main), "unmoved_ok": count(unmoved_main, "ok"),
             "unmoved_broken": count(unmoved_main, "broken"), "same_backend": same,
             "picked_up": sum(1 for s, (i, f) in picked.items() if f.get("midstream")),
             "picked_same_backend": sum(1 for s, (i, f) in picked.items() if f.get("backend") == backend_of[s]),
             "picked_where": {self.boxes[i].name: sum(1 for _, (j, _) in picked.items() if j == i) for i in surv_idx},
             "tcp_midstream_drops": mdrops,
             "max_gap_moved": max(gaps) if gaps else None,
             "max_gap_unmoved": max(ugaps) if ugaps else None,
             "moved_flows": len(moved), "moved_probes": len(moved) - len(moved_main),
             "recovered_after": (t_recovered - t_kill) if t_recovered else None,
             "dpi": dpi, "seconds": time.time() - t0}
        self.results.append(r)
        broken = {c["sport"]: fin[c["sport"]]["error"] for c in main if fin[c["sport"]]["status"] != "ok"}
        print(f"   moved {r['moved']} of {r['main']} connections (all of {vbox.name}'s): "
              f"{r['moved_ok']} survived, {r['moved_broken']} broken; not moved: {r['unmoved_ok']} "
              f"survived, {r['unmoved_broken']} broken; picked up mid-stream on "
              f"{r['picked_where']}; tcp_midstream drops on the survivors {mdrops}", flush=True)
        if broken:
            print("   broken: " + "; ".join(f":{s} {e}" for s, e in sorted(broken.items())[:8]), flush=True)

        # --- what each run must show ---
        assert r["unmoved_ok"] == r["unmoved"], f"connections that did not move broke: {broken}"
        if midstream == "FORWARD":
            assert r["moved_ok"] == r["moved"], f"moved connections broke with midstream FORWARD: {broken}"
            assert same == len(main), "a connection saw another backend"
            moved_all = {c["sport"] for c in conns if c["sport"] in moved}
            assert set(picked) == moved_all and r["picked_up"] == len(moved_all) and \
                r["picked_same_backend"] == len(moved_all), (sorted(moved_all), picked)
            ok(f"midstream FORWARD: all {len(moved_all)} flows of the killed box ({r['moved']} connections, "
               f"{len(moved_all) - r['moved']} DPI probes) moved to {r['picked_where']}, were picked up "
               f"mid-stream with the same backend (Maglev), and survived: all answered again "
               f"{r['recovered_after']:.1f} s after the kill (seen by polling), longest pause "
               f"{r['max_gap_moved']:.2f} s ({r['max_gap_unmoved']:.2f} s on the {r['unmoved']} that did not move)")
        else:
            assert r["moved_broken"] == r["moved"], \
                f"with midstream DROP moved connections survived: {r['moved_ok']} of {r['moved']}"
            assert not picked, f"flows of moved connections on the survivors: {picked}"
            assert mdrops >= len(moved), mdrops
            ok(f"midstream DROP: all {r['moved']} moved connections died (their {mdrops} packets "
               f"dropped as tcp_midstream by the new boxes); the {r['unmoved']} others survived")
        if dpi:
            d = dpi
            assert d["split_matched_unmoved"] == d["unmoved"], d
            assert d["split_matched_moved"] == 0 and d["split_intact_moved"] == d["moved"], d
            assert d["whole_matched_moved"] == d["moved"], d
            ok(f"DPI stream state does not move: a signature split across the move reached the backend "
               f"intact on {d['split_intact_moved']}/{d['moved']} moved connections (not matched), was "
               f"matched (reset) on {d['split_matched_unmoved']}/{d['unmoved']} that did not move; the "
               f"whole signature after the move was matched on {d['whole_matched_moved']}/{d['moved']}")
        return victim

    def revive(self, i):
        """Brings box i back: its link up, the group rebuilt with every box, the box restarted."""
        self.topo.links_up()
        self.topo.routes(range(NBOX))
        self.boxes[i].start()


def summary(results, runtime):
    print("\nsummary (connections, per run)")
    hdr = f"{'midstream':<10} {'per box before the kill':<26} {'killed':<6} {'moved':>5} " \
          f"{'survived':>8} {'broken':>6} | {'not moved':>9} {'survived':>8} {'broken':>6} | " \
          f"{'longest pause':>13}  {'tcp_midstream drops':>19}"
    print(hdr)
    for r in results:
        pb = " ".join(f"{k}:{v}" for k, v in r["per_box"].items())
        gap = f"{r['max_gap_moved']:.2f} s" if r["max_gap_moved"] is not None else "-"
        ugap = f" (not moved: {r['max_gap_unmoved']:.2f} s)" if r["max_gap_unmoved"] is not None else ""
        print(f"{r['midstream']:<10} {pb:<26} {r['victim']:<6} {r['moved']:>5} {r['moved_ok']:>8} "
              f"{r['moved_broken']:>6} | {r['unmoved']:>9} {r['unmoved_ok']:>8} {r['unmoved_broken']:>6} | "
              f"{gap:>13}  {r['tcp_midstream_drops']:>19}{ugap}")
    for r in results:
        if r["dpi"]:
            d = r["dpi"]
            print(f"DPI probes (split signature, first half before the kill, second after the move): "
                  f"moved {d['moved']}: matched {d['split_matched_moved']}, reached the backend intact "
                  f"{d['split_intact_moved']} (stream state lost with the box); not moved {d['unmoved']}: "
                  f"matched {d['split_matched_unmoved']}; whole signature after the move on the moved "
                  f"ones: matched {d['whole_matched_moved']}")
    print("what does not survive a box failure: firewall-tracked TCP state (the new box has no "
          "flow; midstream FORWARD picks it up, DROP kills the connection) and DPI stream state "
          "(a match in progress is forgotten); the LB choice survives (same Maglev table everywhere)")
    print(f"runtime {runtime:.0f} s")


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--role":
        if sys.argv[2] == "server":
            return role_server(sys.argv[3], sys.argv[4])
        return role_client(int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6]),
                           int(sys.argv[7]), [int(x) for x in sys.argv[8].split(",") if x])
    if len(sys.argv) != 3:
        print("usage: fleet_ecmp_test.py DPU_APPLIANCE DPUCTL", file=sys.stderr)
        sys.exit(2)
    t0 = time.time()
    if os.geteuid() != 0:
        skip("fleet_ecmp_test: needs root (network namespaces, veths, routes); CI runs it as root")
    for tool in ("ip", "bridge", "ethtool"):
        if shutil.which(tool) is None:
            skip(f"fleet_ecmp_test: '{tool}' is not installed (iproute2, ethtool)")
    probe = f"dpuecmp{os.getpid() % 100000}probe"
    r = sh("ip", "netns", "add", probe, check=False)
    if r.returncode != 0:
        skip(f"fleet_ecmp_test: network namespaces unavailable: {r.stderr.strip()}")
    sh("ip", "netns", "del", probe, check=False)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda s, f: sys.exit(128 + s))
    appliance, dpuctl = (os.path.abspath(a) for a in sys.argv[1:3])
    e = EcmpLab(appliance, dpuctl)
    try:
        body(e, t0)
    except BaseException:
        for b in e.boxes:
            print(f"---- {b.name} log (last lines)\n{b.tail(25)}", flush=True)
        err = os.path.join(e.lab.work, "client.err")
        if os.path.exists(err) and os.path.getsize(err):
            print("---- client stderr\n" + open(err, errors="replace").read()[-3000:], flush=True)
        if os.environ.get("KEEP_WORK"):
            kept = e.lab.work + ".kept"
            shutil.copytree(e.lab.work, kept, ignore=shutil.ignore_patterns("etcd", "*.sock"),
                            dirs_exist_ok=True)
            print(f"work directory kept: {kept}", flush=True)
        raise


def body(e, t0):
    e.setup()
    e.topo.routes(range(NBOX))
    nconns = int(os.environ.get("ECMP_CONNS", "48"))
    e.apply("FORWARD")
    e.sync()
    ok("version 1 (midstream FORWARD, LB web in L2/DSR over be1..be4, DPI reset rule) on every box")
    v = e.run("FORWARD", nconns, 12, agree=True)
    e.apply("DROP")
    e.revive(v)
    e.sync()
    ok(f"version 2 (midstream DROP) on every box; {e.boxes[v].name} restarted and came back with it")
    e.run("DROP", nconns, 0)
    summary(e.results, time.time() - t0)
    for b in e.boxes:
        b.stop()
    e.close()
    e.lab.close()
    print("PASS fleet_ecmp_test")


if __name__ == "__main__":
    main()
