"""Shared pieces of the fleet tests (docs/fleet.md): a real etcd on loopback ports with a temp
data dir, TCP relays that stand for a node's network path to etcd (cut and healed by the test:
a partition, not a mock), appliances in live mode following the fleet, and frames injected on a
veth so each node's forwarding can be checked at any time.

Everything started here is stopped by Lab.close() (and at exit): processes by PID, veths, DPDK
runtime dirs of the lab's file prefixes, temp dirs.
"""
import atexit
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

WAIT_S = float(os.environ.get("WAIT_S", "300"))


def skip(msg):
    print(f"SKIPPED: {msg}", flush=True)
    sys.exit(77)


class Fatal(AssertionError):
    """A failure no waiting can fix (a process exited)."""


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_for(what, fn, timeout=WAIT_S, interval=0.2):
    """Polls fn() until it returns a true value (returned) or timeout (AssertionError naming
    what was awaited and the last value)."""
    end = time.time() + timeout
    last = None
    while True:
        try:
            last = fn()
        except Fatal:  # a definite failure (e.g. the process exited)
            raise
        except Exception as e:  # the thing awaited may not answer yet
            last = e
        if last and not isinstance(last, Exception):
            return last
        if time.time() > end:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; last: {last!r}")
        time.sleep(interval)


class Relay:
    """A TCP relay 127.0.0.1:port -> etcd. cut() closes every connection and refuses new ones
    (the node's path to etcd is down); heal() accepts again."""

    def __init__(self, target_port):
        self.target = target_port
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.up = True
        self.conns = []
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            if not self.up:
                c.close()
                continue
            try:
                u = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                c.close()
                continue
            # No Nagle on the relay's own sockets (gRPC sets TCP_NODELAY on its ends): a small
            # answer held back for a delayed ACK costs ~40 ms per round trip.
            for s in (c, u):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.lock:
                self.conns += [c, u]
            threading.Thread(target=self._pipe, args=(c, u), daemon=True).start()
            threading.Thread(target=self._pipe, args=(u, c), daemon=True).start()

    def _pipe(self, a, b):
        try:
            while True:
                d = a.recv(65536)
                if not d:
                    break
                b.sendall(d)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        self.up = False
        with self.lock:
            for s in self.conns:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                    s.close()
                except OSError:
                    pass
            self.conns = []

    def heal(self):
        self.up = True

    def close(self):
        self.closed = True
        self.cut()
        self.sock.close()


class Etcd:
    """One etcd member on free loopback ports. tls: dict(cert=, key=) of the server and
    client_ca= (then --client-cert-auth with that CA: mTLS), plus ca=, client_cert=,
    client_key= for etcdctl here; the client URL is then https://."""

    def __init__(self, work, extra=None, tls=None):
        self.dir = os.path.join(work, "etcd")
        self.port, self.peer = free_port(), free_port()
        self.extra = extra or []
        self.tls = tls
        self.proc = None
        self.log = os.path.join(work, "etcd.log")

    @property
    def endpoint(self):
        return f"127.0.0.1:{self.port}"

    @property
    def url(self):
        return ("https://" if self.tls else "http://") + self.endpoint

    def start(self):
        cmd = ["etcd", "--name", "fleet-test", "--data-dir", self.dir,
               "--listen-client-urls", self.url,
               "--advertise-client-urls", self.url,
               "--listen-peer-urls", f"http://127.0.0.1:{self.peer}",
               "--initial-advertise-peer-urls", f"http://127.0.0.1:{self.peer}",
               "--initial-cluster", f"fleet-test=http://127.0.0.1:{self.peer}",
               "--experimental-watch-progress-notify-interval=2s"] + self.extra
        if self.tls:
            cmd += ["--cert-file", self.tls["cert"], "--key-file", self.tls["key"]]
            if self.tls.get("client_ca"):
                cmd += ["--client-cert-auth", "--trusted-ca-file", self.tls["client_ca"]]
        self.proc = subprocess.Popen(cmd, stdout=open(self.log, "ab"), stderr=subprocess.STDOUT)
        wait_for("etcd to answer", lambda: self.ctl("endpoint", "health", check=False).returncode == 0)

    def ctl(self, *args, check=True, tls=None):
        """etcdctl; with TLS the CA and client certificate of self.tls, or tls= (a list of
        etcdctl's --cacert/--cert/--key options) instead."""
        if tls is None and self.tls:
            tls = [f"--cacert={self.tls['ca']}"]
            if self.tls.get("client_cert"):
                tls += [f"--cert={self.tls['client_cert']}", f"--key={self.tls['client_key']}"]
        return subprocess.run(["etcdctl", f"--endpoints={self.url if self.tls else self.endpoint}",
                               *(tls or []), *args],
                              capture_output=True, text=True, check=check,
                              env=dict(os.environ, ETCDCTL_API="3"))

    def revision(self):
        out = self.ctl("endpoint", "status", "-w", "json").stdout
        return json.loads(out)[0]["Status"]["header"]["revision"]

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def ip_checksum(b):
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return (~s) & 0xFFFF


def udp_frame(src, dst, sport, dport, payload=b"x" * 32):
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0,
                     socket.inet_aton(src), socket.inet_aton(dst))
    ip = ip[:10] + struct.pack("!H", ip_checksum(ip)) + ip[12:]
    eth = bytes.fromhex("020000000002") + bytes.fromhex("020000000001") + b"\x08\x00"
    return eth + ip + udp


class Node:
    """An appliance following the lab's fleet through its own relay. veth=False: no veth
    (net_null on both sides, nothing to inject: no root needed). etcd_opts: more run options
    for its path to etcd (--etcd-ca/--etcd-cert/--etcd-key); with a TLS etcd its --etcd is
    https://."""

    def __init__(self, lab, name, group, veth=True, etcd_opts=None):
        self.lab, self.name, self.group = lab, name, group
        self.etcd_opts = list(etcd_opts or [])
        self.state = os.path.join(lab.work, f"state-{name}")
        self.relay = Relay(lab.etcd.port)
        n = len(lab.nodes)
        self.veth = f"flt{os.getpid() % 10000}{n}"
        self.peer = self.veth + "p"
        self.prefix = f"dpufleet_{os.getpid()}_{n}"
        self.log = os.path.join(lab.work, f"{name}.log")
        self.proc = None
        self.addr = None
        self.tx = None
        if not veth:
            self.veth = self.peer = None
            self.vdevs = ["--vdev", "net_null0,no-rx=1", "--vdev", "net_null1,no-rx=1"]
            return
        self.vdevs = ["--vdev", f"net_pcap0,iface={self.veth}", "--vdev", "net_null0,no-rx=1"]
        lab.run(["ip", "link", "add", self.veth, "type", "veth", "peer", "name", self.peer])
        lab.veths.append(self.veth)
        for i in (self.veth, self.peer):
            lab.run(["ip", "link", "set", i, "up"])
        # No IPv6 chatter of the kernel on the wire the counters read.
        for i in (self.veth, self.peer):
            subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{i}.disable_ipv6=1"], check=False)

    def start(self, extra=None):
        cmd = [self.lab.appliance, "run", "--state-dir", self.state, "--fleet", self.lab.fleet,
               "--etcd", f"{'https://' if self.lab.etcd.tls else ''}127.0.0.1:{self.relay.port}",
               *self.etcd_opts, "--node", self.name, "--group", self.group,
               "--fleet-lease-ttl", "3", *self.lab.run_extra, *(extra or []), "--",
               "-l", "0,1", "--no-huge", "--no-pci", "--no-shconf", f"--file-prefix={self.prefix}",
               "-m", "512", "--log-level=lib.eal:error", *self.vdevs]
        start = os.path.getsize(self.log) if os.path.exists(self.log) else 0
        self.proc = subprocess.Popen(cmd, stdout=open(self.log + ".out", "ab"),
                                     stderr=open(self.log, "ab"))
        self.lab.pids.append(self.proc)

        def lines():
            with open(self.log, errors="replace") as f:
                f.seek(start)
                return f.readlines()

        def listening():  # following the fleet, and its workers forwarding
            if self.proc.poll() is not None:
                raise Fatal(f"{self.name} exited during start-up:\n{self.tail()}")
            ls = lines()
            return any(l.startswith("dpu-appliance: following fleet") for l in ls) and \
                any("forwarding between" in l for l in ls)
        wait_for(f"{self.name} to start", listening)
        for line in lines():
            if "API listening on" in line:
                self.addr = line.split("API listening on ")[1].split()[0]

    def tail(self, n=40):
        try:
            return "".join(open(self.log, errors="replace").readlines()[-n:])
        except OSError:
            return "(no log)"

    def ctl(self, *args, check=True):
        r = subprocess.run([self.lab.dpuctl, "--server", self.addr, *args], capture_output=True,
                           text=True, env=dict(os.environ, DPUCTL_TIMEOUT="0"))
        if check and r.returncode != 0:
            raise AssertionError(f"dpuctl {' '.join(args)} on {self.name}: rc {r.returncode}: {r.stderr}")
        return r

    def status(self):
        return json.loads(self.ctl("--json", "status").stdout)

    def forwarded(self):
        d = json.loads(self.ctl("--json", "stats").stdout)
        return int(d.get("total", {}).get("forwarded", 0))

    def send(self, count=20, dport=5353):
        if self.tx is None:
            self.tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
            self.tx.bind((self.peer, 0))
        for i in range(count):
            self.tx.send(udp_frame("10.1.0.1", "10.2.0.1", 20000 + i, dport))

    def forwards(self, count=20, dport=5353):
        """Sends `count` frames and waits until the node's forwarded counter grew by them."""
        before = self.forwarded()
        self.send(count, dport)
        return wait_for(f"{self.name} to forward {count} frames",
                        lambda: self.forwarded() - before >= count)

    def kill9(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                rc = self.proc.wait(timeout=WAIT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"{self.name} did not stop on SIGTERM")
            if rc != 0:
                raise AssertionError(f"{self.name} exited with {rc}:\n{self.tail()}")


class Lab:
    """etcd_tls: Etcd's tls (an https etcd, mTLS with its client_ca); ctl_tls: dpuctl fleet's
    --etcd-ca/--etcd-cert/--etcd-key for fleetctl(). need_root=False: for nodes without veths."""

    def __init__(self, appliance, dpuctl, fleet="lab", run_extra=None, etcd_tls=None,
                 ctl_tls=None, need_root=True):
        if need_root and os.geteuid() != 0:
            skip("needs root (veth pairs for the nodes' traffic); CI runs it as root")
        if shutil.which("etcd") is None or shutil.which("etcdctl") is None:
            skip("etcd not installed (apt-get install etcd-server etcd-client)")
        self.appliance, self.dpuctl, self.fleet = appliance, dpuctl, fleet
        self.run_extra = run_extra or []
        self.work = tempfile.mkdtemp(prefix="dpu_fleet_")
        self.pids, self.veths, self.nodes = [], [], []
        self.ctl_tls = list(ctl_tls or [])
        self.etcd = Etcd(self.work, tls=etcd_tls)
        atexit.register(self.close)
        self.etcd.start()

    def run(self, cmd):
        subprocess.run(cmd, check=True, capture_output=True)

    def node(self, name, group, **kw):
        n = Node(self, name, group, **kw)
        self.nodes.append(n)
        return n

    def fleetctl(self, *args, check=True, endpoint=None, tls=None):
        """dpuctl fleet on the lab's etcd (or endpoint), with ctl_tls (or tls, a list)."""
        default = self.etcd.url if self.etcd.tls else self.etcd.endpoint
        r = subprocess.run([self.dpuctl, "fleet", "--etcd", endpoint or default,
                            "--fleet", self.fleet, *(self.ctl_tls if tls is None else tls), *args],
                           capture_output=True, text=True)
        if check and r.returncode != 0:
            raise AssertionError(f"dpuctl fleet {' '.join(args)}: rc {r.returncode}:\n{r.stdout}{r.stderr}")
        return r

    def statuses(self):
        d = json.loads(self.fleetctl("status", "--json").stdout)
        return {n["node"]: n for n in d["nodes"]}

    def wait_versions(self, want, what=None):
        """Waits until every node in `want` (name -> version) reports it applied and synced."""
        def ok():
            st = self.statuses()
            return all(int(st.get(n, {}).get("applied_version", 0)) == v and st[n]["state"] == "synced"
                       for n, v in want.items()) and st
        return wait_for(what or f"nodes on versions {want}", ok)

    def close(self):
        for n in self.nodes:
            try:
                n.kill9()
            except Exception:
                pass
            n.relay.close()
        self.etcd.kill()
        for v in self.veths:
            subprocess.run(["ip", "link", "del", v], capture_output=True)
        self.veths = []
        runtime = ["/var/run/dpdk", "/tmp/dpdk"]  # root; others: $XDG_RUNTIME_DIR or /tmp
        if os.environ.get("XDG_RUNTIME_DIR"):
            runtime.append(os.path.join(os.environ["XDG_RUNTIME_DIR"], "dpdk"))
        for n in self.nodes:
            for r in runtime if os.geteuid() != 0 else runtime[:1]:
                shutil.rmtree(os.path.join(r, n.prefix), ignore_errors=True)
        if os.environ.get("KEEP_WORK") and sys.exc_info()[0] is not None:
            print(f"work directory kept: {self.work}")
        else:
            shutil.rmtree(self.work, ignore_errors=True)
