#!/usr/bin/python3
"""Applies a config file to a running appliance (like `dpuctl config apply FILE`).

usage: apply_config.py [--server unix:/var/lib/dpu-appliance/api.sock] CONFIG.json
PYTHONPATH must hold the built package: build/python (ninja -C build python_client)."""
import argparse
import sys

from dpu_client import Client, ConfigError, VersionConflict

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--server", default=None)
ap.add_argument("config")
a = ap.parse_args()
with Client(a.server) as c, open(a.config) as f:
    text = f.read()
    errors = c.validate_config(text)
    if errors:
        print("\n".join("error: " + e for e in errors), file=sys.stderr)
        sys.exit(4)
    try:
        r = c.apply_config(text)
    except VersionConflict as e:
        sys.exit("version conflict: %s" % e)
    except ConfigError as e:
        sys.exit(str(e))
    print("applied as version %s (generation %s)" % (r["version"], r["generation"]))
