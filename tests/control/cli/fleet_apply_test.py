#!/usr/bin/python3
"""`dpuctl fleet apply` against a real etcd (no nodes needed): its validation before anything is
written, and what it does not validate again.

  - an invalid document: every error, exit 4, nothing written (no version, no blob);
  - a section that is the same as in the latest version, files included (same sha256), is not
    validated again when that version was validated, and the output says so;
  - the same section with a list file whose content changed (same path) IS validated again: a bad
    name in it is refused, nothing written;
  - after a version written with --no-validate nothing is taken as validated;
  - a change of the dataplane section validates everything again.

usage: fleet_apply_test.py DPUCTL
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from fleet_lib import Etcd  # noqa: E402


def main():
    dpuctl = sys.argv[1]
    if shutil.which("etcd") is None or shutil.which("etcdctl") is None:
        print("SKIPPED: etcd not installed (apt-get install etcd-server etcd-client)", flush=True)
        sys.exit(77)
    work = tempfile.mkdtemp(prefix="dpu_fleet_apply_")
    etcd = Etcd(work)
    try:
        etcd.start()

        def apply(*args):
            return subprocess.run([dpuctl, "fleet", "--etcd", etcd.endpoint, "--fleet", "t", "apply", *args],
                                  capture_output=True, text=True)

        def keys():
            return etcd.ctl("get", "--prefix", "--keys-only", "/dpu/fleet/t/").stdout.split()

        def write(name, text):
            p = os.path.join(work, name)
            with open(p, "w") as f:
                f.write(text)
            return p

        names = write("block.txt", "bad.example\nworse.example\n")
        doc = {"firewall": {"rules": [{"id": "r1", "action": "DENY", "protocols": ["udp"], "dst_ports": ["9"]}]},
               "dns": {"lists": [{"name": "block", "action": "DNS_NXDOMAIN", "files": [names]}]}}
        cfg = os.path.join(work, "c.json")

        def save(d):
            with open(cfg, "w") as f:
                json.dump(d, f)
            return cfg

        # Invalid: refused before anything is written.
        bad = json.loads(json.dumps(doc))
        bad["firewall"]["rules"][0]["dst_ports"] = ["99999"]
        r = apply(save(bad))
        assert r.returncode == 4, (r.returncode, r.stdout, r.stderr)
        assert "nothing written" in r.stderr and "99999" in r.stderr, r.stderr
        assert keys() == [], keys()
        print("ok   an invalid document: refused, nothing written")

        r = apply(save(doc))
        assert r.returncode == 0, r.stderr
        assert "not validated again" not in r.stdout, r.stdout
        # A rule change: the DNS section (and its file) is the same, not validated again.
        doc["firewall"]["rules"][0]["dst_ports"] = ["19"]
        r = apply(save(doc))
        assert r.returncode == 0, r.stderr
        assert "version 2" in r.stdout and "files included: dns)" in r.stdout, r.stdout
        print("ok   an unchanged dns section is not validated again")

        # The list file changed under the same path: validated again, a bad name refused.
        before = keys()
        write("block.txt", "bad.example\nno spaces allowed.example\n")
        doc["firewall"]["rules"][0]["dst_ports"] = ["29"]
        r = apply(save(doc))
        assert r.returncode == 4, (r.returncode, r.stdout, r.stderr)
        assert "nothing written" in r.stderr and "block.txt" in r.stderr, r.stderr
        assert keys() == before, "a refused apply wrote keys"
        print("ok   a list file changed under the same path is validated again (bad name refused)")

        # After --no-validate nothing counts as validated: the next apply checks every section.
        write("block.txt", "bad.example\n")
        r = apply(save(doc), "--no-validate")
        assert r.returncode == 0, r.stderr
        doc["firewall"]["rules"][0]["dst_ports"] = ["39"]
        r = apply(save(doc))
        assert r.returncode == 0 and "not validated again" not in r.stdout, r.stdout
        print("ok   a version written with --no-validate is not taken as validated")

        # A dataplane change: every section validated again.
        doc["dataplane"] = {"tcp": {"midstream": "DROP"}}
        r = apply(save(doc))
        assert r.returncode == 0 and "not validated again" not in r.stdout, r.stdout
        doc["firewall"]["rules"][0]["dst_ports"] = ["49"]
        r = apply(save(doc))
        assert r.returncode == 0 and "files included: dns)" in r.stdout, r.stdout
        print("ok   a dataplane change validates every section again")
    finally:
        etcd.kill()
        shutil.rmtree(work, ignore_errors=True)
    print("PASS fleet_apply_test")


if __name__ == "__main__":
    main()
