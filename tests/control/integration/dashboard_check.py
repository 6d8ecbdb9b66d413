#!/usr/bin/python3
"""Checks that every metric the example Grafana dashboard and Prometheus alert rules query
is one the appliance exports.

usage: dashboard_check.py METRICS_SCRAPE FILE...   (FILE: *.json dashboards, *.yml rules)

METRICS_SCRAPE is a /metrics body of a running appliance with every feature configured. A
name counts as exported when the scrape has a '# TYPE' line for it (a histogram's or
summary's _bucket/_sum/_count series count as their family). Exits 1 listing every unknown
name with the file and the query that uses it; also fails when a file has no query at all
(a parser that finds nothing must not pass)."""
import json
import re
import sys

NAME = re.compile(r"\b(dpu_[A-Za-z0-9_:]+)\b")


def families(scrape):
    fams = {}
    for line in open(scrape, encoding="utf-8"):
        if line.startswith("# TYPE "):
            parts = line.split()
            if len(parts) >= 4:
                fams[parts[2]] = parts[3]
    return fams


def exported(name, fams):
    if name in fams:
        return True
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix) and fams.get(name[: -len(suffix)]) in ("histogram", "summary"):
            return True
    return False


def queries_of_dashboard(path):
    doc = json.load(open(path, encoding="utf-8"))
    out = []

    def walk(node):
        if isinstance(node, dict):
            for k, v in node.items():
                if k in ("expr", "query") and isinstance(v, str):
                    out.append(v)
                else:
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(doc)
    return out


def queries_of_rules(path):
    # Prometheus rule files: one `expr:` per rule, on one line in ours (checked: a folded or
    # block expression would leave `expr:` with nothing after it, and that fails below).
    out = []
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        m = re.match(r"\s*expr:\s*(.*)$", line)
        if m:
            if not m.group(1).strip() or m.group(1).strip() in ("|", ">"):
                sys.exit(f"{path}:{n}: multi-line expr is not supported by this check")
            out.append(m.group(1))
    return out


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    fams = families(sys.argv[1])
    if not fams:
        sys.exit(f"{sys.argv[1]}: no '# TYPE' line: not a metrics scrape")
    bad = []
    total = 0
    for path in sys.argv[2:]:
        qs = queries_of_dashboard(path) if path.endswith(".json") else queries_of_rules(path)
        names = {n for q in qs for n in NAME.findall(q)}
        if not names:
            bad.append(f"{path}: no dpu_ metric found in any query")
        for q in qs:
            for n in NAME.findall(q):
                total += 1
                if not exported(n, fams):
                    bad.append(f"{path}: {n} is not exported (query: {q})")
        print(f"{path}: {len(qs)} queries, {len(names)} metric names")
    for b in bad:
        print(b, file=sys.stderr)
    if bad:
        sys.exit(1)
    print(f"all {total} metric references exported")


if __name__ == "__main__":
    main()
