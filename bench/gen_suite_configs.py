#!/usr/bin/python3
"""Configs for the end-to-end benchmarks (perf_suite.sh, live_change_bench.sh), written to
OUTDIR, all over the bench traffic of gen_traffic.py (10/8 -> 172.16/12):

  none.json            {} : no rules
  fw10k.json           10 000 firewall rules that never match (gen_rules.py variant 0)
  fw10k_b.json         another 10 000 (variant 1): a full rule-set swap
  fw10k_lb100.json     + the load-balancer service of lb_gen_config.py (172.16.0.0/12, any
                       protocol and port, L2 mode, 100 backends be1..be100)
  fw10k_lb100_dns.json + a DNS list of 1M names (names_1m.txt)
  fw10k_lb100_dns_b.json   the same with another 1M-name file (names_1m_b.txt): a list reload
  fw10k_b_lb100_dns.json   fw10k_lb100_dns with the other 10k rules: a rule-set swap
  full_imix.json       fw10k_lb100_dns + DPI with every .yar/.yara file under YARA_DIR except
                       those listed in OUTDIR/yara_rejected.txt

    gen_suite_configs.py OUTDIR [YARA_DIR]
"""
import glob
import json
import os
import subprocess
import sys


def names_file(path: str, tag: str) -> None:
    """1M distinct names that none of the bench traffic asks for."""
    with open(path, "w") as f:
        for i in range(1_000_000):
            f.write(f"h{i:07d}.d{i % 9973}.{tag}.bench-block.example\n")


def main() -> None:
    out = os.path.abspath(sys.argv[1])
    yara_dir = sys.argv[2] if len(sys.argv) > 2 else ""
    here = os.path.dirname(os.path.abspath(__file__))
    os.makedirs(out, exist_ok=True)
    for var, name in ((0, "fw10k"), (1, "fw10k_b")):
        subprocess.run([sys.executable, os.path.join(here, "gen_rules.py"), "10000", str(var),
                        os.path.join(out, f"{name}.rules")], check=True)
    fw = json.load(open(os.path.join(out, "fw10k.json")))
    with open(os.path.join(out, "none.json"), "w") as f:
        f.write("{}\n")
    # The 100-backend service of lb_gen_config.py (L2 mode, 5-tuple key, over 172.16.0.0/12).
    lb_file = os.path.join(out, "lb100.json")
    subprocess.run([sys.executable, os.path.join(here, "lb_gen_config.py"), "-o", lb_file,
                    "--backends", "100"], check=True)
    lb = json.load(open(lb_file))["lb"]
    json.dump(dict(fw, lb=lb), open(os.path.join(out, "fw10k_lb100.json"), "w"))
    for tag in ("a", "b"):
        p = os.path.join(out, f"names_1m{'' if tag == 'a' else '_b'}.txt")
        names_file(p, tag)
        dns = {"lists": [{"name": "bench-1m", "action": "DNS_NXDOMAIN",
                          "format": "DNS_FORMAT_PLAIN", "files": [p]}]}
        suffix = "" if tag == "a" else "_b"
        json.dump(dict(fw, lb=lb, dns=dns),
                  open(os.path.join(out, f"fw10k_lb100_dns{suffix}.json"), "w"))
        if tag == "a":
            dns_a = dns
    fw_b = json.load(open(os.path.join(out, "fw10k_b.json")))
    json.dump(dict(fw_b, lb=lb, dns=dns_a),
              open(os.path.join(out, "fw10k_b_lb100_dns.json"), "w"))
    if yara_dir:
        rules = sorted(glob.glob(os.path.join(yara_dir, "**", "*.yar"), recursive=True) +
                       glob.glob(os.path.join(yara_dir, "**", "*.yara"), recursive=True))
        # Files libyara rejects on their own (e.g. they use an identifier another file
        # defines), as listed by perf_suite.sh from rules/dpi-coverage, are left out.
        rejected_list = os.path.join(out, "yara_rejected.txt")
        if os.path.exists(rejected_list):
            bad = set(open(rejected_list).read().split())
            rules = [r for r in rules if r not in bad]
        if not rules:
            sys.exit(f"gen_suite_configs: no .yar files in {yara_dir}")
        cache = os.path.join(out, "dpi-cache")
        os.makedirs(cache, exist_ok=True)  # the appliance writes into it, does not create it
        # A stream per flow direction of the IMIX traffic (10k flows), not the default 4096.
        dpi = {"rule_files": rules, "cache_dir": cache, "streams_per_worker": 32768}
        json.dump(dict(fw, lb=lb, dns=dns_a, dpi=dpi),
                  open(os.path.join(out, "full_imix.json"), "w"))


if __name__ == "__main__":
    main()
