#!/usr/bin/python3
"""Prints events as they happen (like `dpuctl events`), one eve.json-style line each.

usage: watch_events.py [--server ADDR] [--types drop,flow,config,alert,lb,dns] [--count N]"""
import argparse
import json

from dpu_client import Client

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--server", default=None)
ap.add_argument("--types", default="")
ap.add_argument("--count", type=int, default=0, help="stop after N events (0 = never)")
a = ap.parse_args()
with Client(a.server) as c:
    n = 0
    for ev in c.watch_events([t for t in a.types.split(",") if t]):
        print(json.dumps(ev.get("eve", ev), sort_keys=True), flush=True)
        n += 1
        if a.count and n >= a.count:
            break
