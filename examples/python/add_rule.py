#!/usr/bin/python3
"""Adds a firewall rule that denies TCP to a port, then lists the rules with their counters.

usage: add_rule.py [--server ADDR] ID PORT"""
import argparse

from dpu_client import Client

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--server", default=None)
ap.add_argument("id")
ap.add_argument("port")
a = ap.parse_args()
with Client(a.server) as c:
    _, version = c.get_config()
    r = c.add_firewall_rule({"id": a.id, "action": "DENY", "protocols": ["tcp"],
                             "dst_ports": [a.port]}, expected_version=version)
    print("version %s -> %s" % (version, r["version"]))
    for rule in c.firewall_rules():
        print("%-20s %-6s packets %s" % (rule["rule"]["id"], rule["rule"].get("action", ""),
                                         rule.get("packets", "0")))
