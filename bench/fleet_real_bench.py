#!/usr/bin/python3
"""Three real appliances (dpu-appliance live, net_pcap on veths, --poll idle) and a real etcd on
this machine: time from `dpuctl fleet apply FILE` to every node reporting the version synced
(from an `etcdctl watch` on the nodes' status keys), beside the peer: the same three
appliances started without --fleet and the same configs applied node by node with
`dpuctl config apply` (sequential, then all three at once). Configs alternate A, B, A, ... so
every apply is a real change. The nodes and etcd come from tests/control/integration/fleet_lib.py
(also what stops and removes everything at the end).

    fleet_real_bench.py DPU_APPLIANCE DPUCTL LABEL REPS A.json [B.json]

Prints one line per rep and the medians; appends label/path/median lines to $FLEET_BENCH_TSV.
$FLEET_APPLY_EXTRA: more arguments of `dpuctl fleet apply` (e.g. --no-validate).
"""
import json
import os
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "control", "integration"))
from fleet_lib import Lab, Node, wait_for, Fatal  # noqa: E402


class PeerNode(Node):
    """The same appliance without --fleet: configured through its own gRPC API."""

    def start(self, extra=None):
        cmd = [self.lab.appliance, "run", "--state-dir", self.state, *self.lab.run_extra, "--",
               "-l", "0,1", "--no-huge", "--no-pci", "--no-shconf", f"--file-prefix={self.prefix}",
               "-m", "512", "--log-level=lib.eal:error",
               "--vdev", f"net_pcap0,iface={self.veth}", "--vdev", "net_null0,no-rx=1"]
        self.proc = subprocess.Popen(cmd, stdout=open(self.log + ".out", "ab"),
                                     stderr=open(self.log, "ab"))
        self.lab.pids.append(self.proc)

        def listening():
            if self.proc.poll() is not None:
                raise Fatal(f"{self.name} exited during start-up:\n{self.tail()}")
            for line in open(self.log, errors="replace"):
                if "API listening on" in line:
                    self.addr = line.split("API listening on ")[1].split()[0]
                    return True
            return False
        wait_for(f"{self.name} to start", listening)


def main():
    appliance, dpuctl, label, reps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    configs = [os.path.abspath(p) for p in sys.argv[5:]]
    extra = ["--poll", "idle", "--idle-sleep-max-us", "2000"]
    lab = Lab(appliance, dpuctl, fleet="bench", run_extra=extra)
    tsv = os.environ.get("FLEET_BENCH_TSV")
    apply_extra = os.environ.get("FLEET_APPLY_EXTRA", "").split()  # e.g. --no-validate
    results = {}
    try:
        # --- peer: three appliances configured one by one over their own gRPC API ---
        peers = [lab.node(f"p{i}", "default") for i in range(3)]
        for n in peers:
            n.__class__ = PeerNode
            n.start()
        seq, par = [], []
        for rep in range(reps):
            for parallel in (False, True):
                cfg = configs[(2 * rep + int(parallel)) % len(configs)]
                cmds = [[dpuctl, "--timeout", "0", "--server", n.addr, "config", "apply", "--force", cfg]
                        for n in peers]
                t0 = time.monotonic()
                if parallel:
                    ps = [subprocess.Popen(c, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for c in cmds]
                    rcs = [p.wait() for p in ps]
                else:
                    rcs = [subprocess.run(c, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE).returncode
                           for c in cmds]
                dt = time.monotonic() - t0
                if any(rcs):
                    raise AssertionError(f"peer apply of {cfg} failed: {rcs}")
                (par if parallel else seq).append(dt)
                print(f"  peer rep {rep + 1} ({os.path.basename(cfg)}): "
                      f"{'parallel' if parallel else 'sequential'}, 3 x dpuctl config apply: {dt:.3f} s",
                      flush=True)
        for n in peers:
            n.stop()

        # --- fleet: the same three appliances following a fleet ---
        nodes = [lab.node(f"n{i}", "default") for i in range(3)]
        for n in nodes:
            n.relay.port = lab.etcd.port  # straight to etcd (the relay is for partition tests)
            n.start()
        wait_for("three live nodes", lambda: len(lab.statuses()) == 3)
        cli, conv = [], []
        for rep in range(reps):
            cfg = configs[rep % len(configs)]
            head = max([0] + [int(v.get("applied_version", 0)) for v in lab.statuses().values()])
            want = head + 1
            done = {}
            cli_s = {}

            def apply():
                r = lab.fleetctl("apply", cfg, "--comment", f"bench {rep + 1}", *apply_extra)
                cli_s["t"] = time.monotonic() - t0
                cli_s["out"] = r.stdout
            # The nodes' status keys, as etcd sends them (etcdctl watch: no polling cost).
            w = subprocess.Popen(["etcdctl", f"--endpoints={lab.etcd.endpoint}", "watch", "--prefix",
                                  f"/dpu/fleet/{lab.fleet}/nodes/"], stdout=subprocess.PIPE, text=True,
                                 env=dict(os.environ, ETCDCTL_API="3"))
            time.sleep(0.3)  # the watch is open before the apply
            t0 = time.monotonic()
            th = threading.Thread(target=apply)
            th.start()
            try:
                for line in w.stdout:
                    if not line.startswith("{"):
                        continue
                    now = time.monotonic() - t0
                    s = json.loads(line)
                    if int(s.get("applied_version", 0)) == want and s.get("state") == "synced":
                        done.setdefault(s["node"], now)
                    if s.get("state") == "refused":
                        raise AssertionError(f"{s['node']} refused: {s.get('last_error')}")
                    if len(done) == 3:
                        break
            finally:
                w.kill()
                w.wait()
            th.join()
            t_all = max(done.values())
            cli.append(cli_s["t"])
            conv.append(t_all)
            print(f"  fleet rep {rep + 1} ({os.path.basename(cfg)}): dpuctl fleet apply {cli_s['t']:.3f} s, "
                  f"every node synced {t_all:.3f} s", flush=True)
        results = {"fleet": statistics.median(conv), "fleet_cli": statistics.median(cli),
                   "peer_sequential": statistics.median(seq), "peer_parallel": statistics.median(par)}
        print(f"\nfleet_real_bench {label}, 3 real appliances, median of {reps}:")
        print(f"  fleet: dpuctl fleet apply {results['fleet_cli']:.3f} s; every node {results['fleet']:.3f} s")
        print(f"  peer: 3 x dpuctl config apply: sequential {results['peer_sequential']:.3f} s, "
              f"parallel {results['peer_parallel']:.3f} s")
        print(f"  ratio every-node fleet / peer: {results['fleet'] / results['peer_sequential']:.2f}x sequential, "
              f"{results['fleet'] / results['peer_parallel']:.2f}x parallel")
        if tsv:
            with open(tsv, "a") as f:
                for k in ("fleet", "peer_sequential", "peer_parallel"):
                    f.write(f"{label}\t3-real\t{k}\t{results[k]:.4f}\n")
    finally:
        lab.close()


if __name__ == "__main__":
    main()
