#!/usr/bin/python3
"""Three appliances and one etcd on this machine (docs/fleet.md), real processes:

  apply -> every node reports the version (its files shipped by hash, rule ids intact);
  local edits refused on a follower; an invalid file refused by dpuctl before anything is
  written; a version only the nodes refuse -> every node reports the same precise error,
  nothing changes, traffic keeps flowing; a node cut off from etcd while versions move and
  etcd compacts -> it keeps forwarding, says so, and relists and converges when healed; etcd
  killed -> traffic continues through every node, status resumes after etcd restarts; a
  restart without etcd comes up with the last applied version; a rollout halts on a canary
  refusal and the other groups keep the old version; a good rollout; rollback; a killed node
  disappears from status when its lease expires; history and diff.

usage: fleet_test.py DPU_APPLIANCE DPUCTL
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fleet_lib import Lab, wait_for  # noqa: E402


def write(path, obj):
    with open(path, "w") as f:
        f.write(json.dumps(obj, indent=1) if not isinstance(obj, str) else obj)
    return path


def ok(msg):
    print(f"ok   fleet_test: {msg}", flush=True)


def main():
    appliance, dpuctl = sys.argv[1], sys.argv[2]
    # Three appliances and etcd share this machine's cores: the workers poll idle (they sleep
    # when nothing comes; docs/operations.md "Busy or idle polling").
    extra = os.environ.get("FLEET_RUN_EXTRA", "--poll idle --idle-sleep-max-us 2000").split()
    lab = Lab(appliance, dpuctl, run_extra=extra)
    w = lab.work
    n1, n2, n3 = lab.node("n1", "canary"), lab.node("n2", "prod"), lab.node("n3", "prod")
    for n in (n1, n2, n3):
        n.start()
    wait_for("three live nodes", lambda: len(lab.statuses()) == 3)
    st = lab.statuses()
    assert all(s["state"] == "idle" for s in st.values()), st
    ok("three nodes up, idle (no version yet)")
    if "idle" in extra:
        totals = json.loads(n1.ctl("--json", "stats").stdout).get("total", {})
        assert int(totals.get("idle_sleeps", 0)) > 0 and int(totals.get("idle_sleep_us", 0)) > 0, totals
        ok(f"--poll idle: the workers sleep while nothing comes ({totals['idle_sleeps']} sleeps)")

    # --- v1: a rule file shipped by hash ---
    rules = write(f"{w}/edge.rules", "deny udp any any -> any 9 id discard\n")
    v1 = write(f"{w}/v1.json", {"firewall": {"rules": [
        {"id": "telnet", "action": "DENY", "protocols": ["tcp"], "dst_ports": ["23"]}],
        "rule_files": [rules]}})
    r = lab.fleetctl("apply", v1, "--comment", "first")
    assert "version 1 applied to every node" in r.stdout, r.stdout
    lab.wait_versions({"n1": 1, "n2": 1, "n3": 1}, "v1 on every node")
    for n in (n1, n2, n3):
        fw = n.ctl("fw", "list").stdout
        assert "telnet" in fw and "edge.rules:1" in fw, fw
        fs = n.status()["fleet"]
        assert fs["applied_version"] in ("1", 1) and fs.get("etcd_connected", False), fs
    ok("v1 applied on every node; the rule file came from etcd (rule id edge.rules:1)")

    # --- local edits refused on a follower ---
    r = n2.ctl("fw", "add", "deny tcp any any -> any 25 id smtp", check=False)
    assert r.returncode != 0 and "follows fleet" in r.stderr, (r.returncode, r.stderr)
    ok("a local edit is refused: " + r.stderr.strip().splitlines()[0][:100])

    # --- an invalid file: dpuctl refuses it, nothing written ---
    bad = write(f"{w}/bad.json", {"firewall": {"rules": [
        {"id": "oops", "action": "DENY", "dst": ["10.0.0.300/8"]}]}})
    r = lab.fleetctl("apply", bad, check=False)
    assert r.returncode == 4 and "nothing written" in r.stderr and "oops" in r.stderr, r.stderr
    hist = json.loads(lab.fleetctl("history", "--json").stdout)
    assert len(hist) == 1, hist
    ok("an invalid file is refused before anything is written (exit 4)")

    # --- a version only the nodes refuse: same precise error everywhere, nothing changes ---
    before = {n.name: n.status()["config_version"] for n in (n1, n2, n3)}
    r = lab.fleetctl("apply", bad, "--no-validate")
    def all_refused():
        st = lab.statuses()
        return all(s["state"] == "refused" and int(s["last_error"]["version"]) == 2
                   for s in st.values()) and st
    st = wait_for("every node to refuse v2", all_refused)
    errs = {n: json.dumps(s["last_error"].get("errors", []), sort_keys=True) for n, s in st.items()}
    assert len(set(errs.values())) == 1, errs
    e0 = st["n1"]["last_error"]["errors"][0]
    assert e0.get("rule") == "oops" or "oops" in json.dumps(e0), e0
    assert all(int(s["applied_version"]) == 1 for s in st.values()), st
    for n in (n1, n2, n3):
        assert n.status()["config_version"] == before[n.name], (n.name, n.status())
        n.forwards()
    out = lab.fleetctl("status").stdout
    assert "version 2 refused" in out, out
    ok(f"v2 refused by every node with the same error ({e0.get('field')}: {e0.get('reason')}); "
       "all keep v1 and forward")

    # --- a node cut off from etcd while versions move and etcd compacts ---
    n3.relay.cut()
    wait_for("n3 to notice etcd is gone", lambda: not n3.status()["fleet"].get("etcd_connected", False))
    n3.forwards()
    v3 = write(f"{w}/v3.json", {"firewall": {"rules": [
        {"id": "telnet", "action": "DENY", "protocols": ["tcp"], "dst_ports": ["23"]},
        {"id": "rdp", "action": "DENY", "protocols": ["tcp"], "dst_ports": ["3389"]}],
        "rule_files": [rules]}})
    lab.fleetctl("apply", v3)
    lab.wait_versions({"n1": 3, "n2": 3}, "v3 on n1 and n2")
    # Versions 4 and 5 (the same document) and a compaction past all of them.
    lab.fleetctl("apply", v3, "--comment", "again")
    lab.fleetctl("apply", v3, "--comment", "and again")
    lab.wait_versions({"n1": 5, "n2": 5}, "v5 on n1 and n2")
    lab.etcd.ctl("compaction", str(lab.etcd.revision()))
    relists = int(n3.status()["fleet"].get("relists", 0))
    assert int(n3.status()["fleet"]["applied_version"]) == 1
    n3.relay.heal()
    lab.wait_versions({"n1": 5, "n2": 5, "n3": 5}, "n3 to converge on v5 after the partition")
    assert int(n3.status()["fleet"].get("relists", 0)) > relists, n3.status()["fleet"]
    ok("a node partitioned during v3..v5 and a compaction kept forwarding, relisted and converged")

    # --- etcd killed: traffic continues; status resumes after the restart ---
    lab.etcd.kill()
    for n in (n1, n2, n3):
        wait_for(f"{n.name} to notice etcd is gone",
                 lambda n=n: not n.status()["fleet"].get("etcd_connected", False))
        n.forwards()
    ok("etcd killed: every node forwards and reports etcd unreachable")
    # A node restarted while etcd is down comes up with what it applied.
    n2.stop()
    n2.start()
    fs = n2.status()["fleet"]
    assert int(fs["applied_version"]) == 5 and not fs.get("etcd_connected", False), fs
    assert "rdp" in n2.ctl("fw", "list").stdout
    n2.forwards()
    ok("a node restarted without etcd runs its last applied version (v5)")
    lab.etcd.start()
    wait_for("every node back in status",
             lambda: len(lab.statuses()) == 3 and all(
                 n.status()["fleet"].get("etcd_connected", False) for n in (n1, n2, n3)))
    lab.wait_versions({"n1": 5, "n2": 5, "n3": 5})
    ok("etcd restarted: every node reconnected and reports v5")

    # --- a rollout that halts on the canary's refusal ---
    lab.fleetctl("apply", bad, "--stage", "--no-validate")  # v6
    r = lab.fleetctl("rollout", "--groups", "canary,prod", "--group-timeout", "120", check=False)
    assert r.returncode == 1 and "halted at group canary: node n1 refused version 6" in r.stderr, \
        (r.returncode, r.stdout, r.stderr)
    st = lab.statuses()
    assert int(st["n2"]["applied_version"]) == 5 and int(st["n3"]["applied_version"]) == 5, st
    assert int(st["n2"]["desired_version"]) == 5, st
    ok("a rollout of a bad version halted at the canary; prod kept v5")
    r = lab.fleetctl("rollback")
    assert "rollout stopped" in r.stdout, r.stdout
    lab.wait_versions({"n1": 5, "n2": 5, "n3": 5}, "everyone on v5 after the rollback")

    # --- a good rollout, then rollback ---
    v7 = write(f"{w}/v7.json", {"firewall": {"rules": [
        {"id": "telnet", "action": "DENY", "protocols": ["tcp"], "dst_ports": ["23"]}],
        "rule_files": [rules]}, "dataplane": {"non_ip": "DROP"}})
    lab.fleetctl("apply", v7, "--stage")
    r = lab.fleetctl("rollout", "--groups", "canary,prod")
    assert "version 7 rolled out" in r.stdout and "group canary: 1/1" in r.stdout \
        and "group prod: 2/2" in r.stdout, r.stdout
    lab.wait_versions({"n1": 7, "n2": 7, "n3": 7})
    ok("v7 rolled out canary first, then prod")
    r = lab.fleetctl("diff", "5", "7")
    assert "dataplane.non_ip" in r.stdout and "rdp" in r.stdout, r.stdout
    hist = lab.fleetctl("history").stdout
    assert "target" in hist and "first" in hist, hist
    r = lab.fleetctl("rollback")
    assert "back to version 5" in r.stdout, r.stdout
    lab.wait_versions({"n1": 5, "n2": 5, "n3": 5}, "everyone on v5 after rolling back v7")
    ok("rollback of v7 -> v5 on every node; diff and history show the versions")

    # --- a killed node disappears when its lease expires ---
    n3.kill9()
    wait_for("n3 gone from status", lambda: "n3" not in lab.statuses(), timeout=60)
    ok("a killed node left status after its lease's TTL")

    for n in (n1, n2):
        n.stop()
    wait_for("stopped nodes gone at once (lease revoked)", lambda: not lab.statuses(), timeout=30)
    ok("stopped nodes revoked their leases")
    lab.close()
    print("PASS fleet_test")


if __name__ == "__main__":
    main()
