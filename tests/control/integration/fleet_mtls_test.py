#!/usr/bin/python3
"""A fleet on an etcd that requires client certificates (docs/fleet.md: --etcd-ca, --etcd-cert,
--etcd-key), real processes, certificates made here with the openssl CLI (a CA, etcd's server
certificate with IP SAN 127.0.0.1, a client certificate; another CA and a client certificate
of it):

  etcd refuses etcdctl and dpuctl without a client certificate (sanity: it does require one);
  a node with the CA and a client certificate follows the fleet: `dpuctl fleet apply` over
  mTLS, the node reports the version applied (fleet status and its own GetStatus);
  a node without a client certificate and one with a certificate of another CA are refused by
  etcd: each keeps running (its gRPC API answers, with fleet.etcd_connected false and the
  error), its log says the TLS handshake failed on the certificate, it never shows in the
  fleet's status, and it stops cleanly on SIGTERM;
  no key material anywhere in what the nodes publish: `dpuctl fleet status --json`, every key
  under the fleet's prefix as etcdctl reads it raw, each node's own GetStatus, the nodes' logs
  and fleet state files (no "PRIVATE KEY", no PEM block, no line of the key or certificate
  files).

No veths: the nodes run on net_null (this test moves no traffic).

usage: fleet_mtls_test.py DPU_APPLIANCE DPUCTL
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fleet_lib import Lab, skip, wait_for  # noqa: E402


def ok(msg):
    print(f"ok   fleet_mtls_test: {msg}", flush=True)


def openssl(pki, *args):
    r = subprocess.run(["openssl", *args], cwd=pki, capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"openssl {' '.join(args)}: rc {r.returncode}: {r.stderr}")


def make_pki(pki):
    """ca, otherca; server (ca: SAN IP 127.0.0.1, localhost), client (ca), intruder (otherca)."""
    os.makedirs(pki, mode=0o700)

    def ca(name):
        openssl(pki, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                "-subj", f"/CN=fleet-mtls-{name}",
                "-addext", "basicConstraints=critical,CA:TRUE",
                "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                "-keyout", f"{name}.key", "-out", f"{name}.pem")

    def cert(name, signer, ext):
        openssl(pki, "req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN=fleet-mtls-{name}",
                "-keyout", f"{name}.key", "-out", f"{name}.csr")
        with open(os.path.join(pki, f"{name}.ext"), "w") as f:
            f.write(ext + "\n")
        openssl(pki, "x509", "-req", "-in", f"{name}.csr", "-CA", f"{signer}.pem",
                "-CAkey", f"{signer}.key", "-CAcreateserial", "-days", "2",
                "-extfile", f"{name}.ext", "-out", f"{name}.pem")

    ca("ca")
    ca("otherca")
    # clientAuth too: etcd's own gRPC gateway dials etcd with the server certificate (else
    # etcd logs a rejected connection of its own, "incompatible key usage").
    cert("server", "ca", "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
         "extendedKeyUsage=serverAuth,clientAuth")
    cert("client", "ca", "extendedKeyUsage=clientAuth")
    cert("intruder", "otherca", "extendedKeyUsage=clientAuth")
    for k in glob.glob(os.path.join(pki, "*.key")):
        os.chmod(k, 0o600)
    openssl(pki, "verify", "-CAfile", "ca.pem", "client.pem")
    r = subprocess.run(["openssl", "verify", "-CAfile", "ca.pem", "intruder.pem"], cwd=pki,
                       capture_output=True)
    assert r.returncode != 0, "the intruder's certificate verifies against the CA"
    return {n: os.path.join(pki, n) for n in os.listdir(pki)}


def secret_needles(files):
    """What must never show in a status: PEM markers and every base64 line of the keys and
    certificates (a key or certificate inlined, JSON-escaped or not, contains them)."""
    needles = {"PRIVATE KEY", "BEGIN CERTIFICATE", "-----BEGIN", "-----END"}
    for f in files:
        for line in open(f).read().splitlines():
            line = line.strip()
            if line and not line.startswith("-----") and len(line) >= 16:
                needles.add(line)
    return needles


def assert_no_secret(what, text, needles):
    found = [n for n in needles if n in text]
    assert not found, f"{what} holds key material: {found[:3]} ...\n{text[:2000]}"


def main():
    appliance, dpuctl = sys.argv[1], sys.argv[2]
    if shutil.which("openssl") is None:
        skip("openssl CLI not found (apt-get install openssl)")
    if shutil.which("etcd") is None or shutil.which("etcdctl") is None:
        skip("etcd not installed (apt-get install etcd-server etcd-client)")
    # The PKI is made before the Lab (whose constructor starts etcd with its files), in a
    # directory of its own, removed at the end.
    pki_root = tempfile.mkdtemp(prefix="dpu_fleet_mtls_pki_")
    try:
        run(appliance, dpuctl, pki_root)
    finally:
        shutil.rmtree(pki_root, ignore_errors=True)


def run(appliance, dpuctl, pki_root):
    p = make_pki(os.path.join(pki_root, "pki"))
    ca, cert, key = p["ca.pem"], p["client.pem"], p["client.key"]
    client_tls = ["--etcd-ca", ca, "--etcd-cert", cert, "--etcd-key", key]
    extra = os.environ.get("FLEET_RUN_EXTRA", "--poll idle --idle-sleep-max-us 2000").split()
    lab = Lab(appliance, dpuctl, fleet="mtls", run_extra=extra, need_root=False,
              etcd_tls={"cert": p["server.pem"], "key": p["server.key"], "client_ca": ca,
                        "ca": ca, "client_cert": cert, "client_key": key},
              ctl_tls=client_tls)
    assert lab.etcd.url.startswith("https://127.0.0.1:"), lab.etcd.url
    ok(f"etcd with --client-cert-auth on {lab.etcd.url}")

    # --- etcd does require a client certificate (else the rest proves nothing) ---
    r = lab.etcd.ctl("--dial-timeout=5s", "--command-timeout=10s", "get", "/", "--prefix",
                     "--keys-only", check=False, tls=[f"--cacert={ca}"])
    assert r.returncode != 0, f"etcdctl without a client certificate was served: {r.stdout}"
    r = lab.etcd.ctl("--dial-timeout=5s", "--command-timeout=10s", "get", "/", "--prefix",
                     "--keys-only", check=False,
                     tls=[f"--cacert={ca}", f"--cert={p['intruder.pem']}", f"--key={p['intruder.key']}"])
    assert r.returncode != 0, f"etcdctl with a certificate of another CA was served: {r.stdout}"
    r = lab.fleetctl("status", check=False, tls=["--etcd-ca", ca])
    assert r.returncode != 0, f"dpuctl fleet without a client certificate was served: {r.stdout}"
    r = lab.fleetctl("status", check=False, endpoint=lab.etcd.endpoint, tls=[])
    assert r.returncode != 0, f"dpuctl fleet in plaintext was served: {r.stdout}"
    ok("etcd refuses etcdctl and dpuctl fleet without a client certificate of its CA, and plaintext")

    # --- three nodes: the right certificate, none, another CA's ---
    good = lab.node("good", "canary", veth=False, etcd_opts=client_tls)
    nocert = lab.node("nocert", "canary", veth=False, etcd_opts=["--etcd-ca", ca])
    intruder = lab.node("intruder", "canary", veth=False,
                        etcd_opts=["--etcd-ca", ca, "--etcd-cert", p["intruder.pem"],
                                   "--etcd-key", p["intruder.key"]])
    for n in (good, nocert, intruder):
        n.start()
    wait_for("good live in the fleet's status", lambda: "good" in lab.statuses())
    fs = good.status()["fleet"]
    assert fs.get("etcd_connected", False), fs
    ok("a node with a client certificate of etcd's CA follows the fleet (etcd_connected)")

    # --- a version applied over mTLS, reported by the node ---
    doc = os.path.join(lab.work, "v1.json")
    with open(doc, "w") as f:
        json.dump({"firewall": {"rules": [
            {"id": "telnet", "action": "DENY", "protocols": ["tcp"], "dst_ports": ["23"]}]}}, f)
    r = lab.fleetctl("apply", doc, "--comment", "over mTLS")
    assert "version 1 applied to every node" in r.stdout, r.stdout
    lab.wait_versions({"good": 1}, "good to report version 1 applied")
    fs = good.status()["fleet"]
    assert int(fs["applied_version"]) == 1 and fs.get("etcd_connected", False), fs
    assert "telnet" in good.ctl("fw", "list").stdout
    ok("dpuctl fleet apply over mTLS: version 1 applied on the node (fleet status, GetStatus, fw list)")

    # --- the nodes without the right certificate: refused, say so, keep running ---
    for n, why in ((nocert, "no client certificate"), (intruder, "a certificate of another CA")):
        def refused(n=n):
            if n.proc.poll() is not None:
                raise AssertionError(f"{n.name} exited ({n.proc.returncode}):\n{n.tail()}")
            fs = n.status()["fleet"]
            return (not fs.get("etcd_connected", False) and fs.get("etcd_error")
                    and "relisting in" in open(n.log, errors="replace").read()
                    and open(n.log, errors="replace").read().count("relisting in") >= 3 and fs)
        fs = wait_for(f"{n.name} to report etcd unreachable after a few attempts", refused)
        log = open(n.log, errors="replace").read()
        # gRPC's TLS layer logs the alert etcd sent: the handshake failed on the certificate.
        assert re.search(r"alert (bad certificate|certificate required|unknown ca|certificate unknown)",
                         log), f"{n.name}'s log does not say the certificate was refused:\n{n.tail()}"
        assert fs.get("state") != "synced" and int(fs.get("applied_version", 0)) == 0, fs
        assert n.name not in lab.statuses(), lab.statuses()
        err = fs["etcd_error"]
        # The node's own error says it is TLS / the certificate, not just "unreachable".
        assert re.search(r"(\btls\b|\bssl\b|certificate|handshake|--etcd-cert)", err, re.I), err
        ok(f"{n.name} ({why}) refused by etcd: alive, GetStatus etcd_connected false "
           f"({err[:90]}...), its log has the TLS alert 'bad certificate', not in fleet status")
    elog = open(lab.etcd.log, errors="replace").read()
    assert "rejected connection" in elog, "etcd's log does not show the rejected connections"
    reasons = sorted({m.group(1) for m in re.finditer(r'rejected connection from [^(]*\(error "([^"]*)"', elog)})
    for want in ("didn't provide a certificate", "signed by unknown authority"):
        assert any(want in r for r in reasons), (want, reasons)
    ok("etcd's log shows the rejected connections: " + "; ".join(reasons))

    # --- no key material in anything the nodes publish ---
    needles = secret_needles([p[f] for f in ("client.key", "client.pem", "intruder.key",
                                             "intruder.pem", "ca.pem", "server.key", "server.pem")])
    assert len(needles) > 20, needles
    st = lab.fleetctl("status", "--json").stdout
    assert '"good"' in st, st
    assert_no_secret("dpuctl fleet status --json", st, needles)
    raw = lab.etcd.ctl("get", "--prefix", f"/dpu/fleet/{lab.fleet}/").stdout
    assert f"/dpu/fleet/{lab.fleet}/nodes/good" in raw, raw
    assert_no_secret("etcdctl get --prefix /dpu/fleet/mtls/", raw, needles)
    node_raw = lab.etcd.ctl("get", f"/dpu/fleet/{lab.fleet}/nodes/good", "--print-value-only").stdout
    json.loads(node_raw)  # the status as stored: protobuf JSON
    for w in (key, cert, p["intruder.key"]):  # not even the files' paths
        assert w not in node_raw, (w, node_raw)
    for n in (good, nocert, intruder):
        assert_no_secret(f"{n.name}'s GetStatus", n.ctl("--json", "status").stdout, needles)
        assert_no_secret(f"{n.name}'s log", open(n.log, errors="replace").read(), needles)
        for f in glob.glob(os.path.join(n.state, "fleet", "*.json")):
            assert_no_secret(f, open(f).read(), needles)
    ok(f"no key material ({len(needles)} needles: PEM markers, every line of the keys and "
       "certificates) in fleet status --json, the raw etcd keys, GetStatus, logs, state files")

    # --- every node stops cleanly; the good one's lease is revoked at once ---
    for n in (nocert, intruder):
        n.stop()
    good.stop()
    wait_for("good gone from status (lease revoked)", lambda: not lab.statuses(), timeout=60)
    ok("every node stopped on SIGTERM with exit 0; the good node's lease was revoked")
    lab.close()
    print("PASS fleet_mtls_test")


if __name__ == "__main__":
    main()
