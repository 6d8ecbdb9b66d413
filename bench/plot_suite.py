#!/usr/bin/python3
"""Plots bench/perf_suite.sh results: Mpps per configuration, the appliance beside
dpdk-testpmd io (the I/O floor) and, where the suite ran them, l3fwd --lookup=em / acl on the
same vdevs and traffic, with the appliance's ratio to testpmd over its bar (and to l3fwd em /
acl below it). Older TSVs without the l3fwd columns plot as before.

    plot_suite.py SUITE_TSV OUT_PNG [--title TEXT]
"""
import argparse
import csv

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("tsv")
    ap.add_argument("png")
    ap.add_argument("--title", default="dpu-appliance beside dpdk-testpmd io, one worker core")
    a = ap.parse_args()
    rows = list(csv.DictReader(open(a.tsv), delimiter="\t"))
    if not rows:
        raise SystemExit(f"{a.tsv}: no results")
    labels = [f"{r['config']}\n({r['traffic']})" for r in rows]
    num = lambda r, k: float(r[k]) if r.get(k) else 0.0
    series = [("testpmd_mpps", "dpdk-testpmd io", "#9e9e9e")]
    for k, name, color in (("l3fwd_em_mpps", "l3fwd --lookup=em", "#ff7f0e"),
                           ("l3fwd_acl_mpps", "l3fwd --lookup=acl (same 10k rules)", "#2ca02c")):
        if any(r.get(k) for r in rows):
            series.append((k, name, color))
    series.append(("appliance_mpps", "dpu-appliance", "#1f77b4"))
    x = range(len(rows))
    w = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(max(6, 2.6 * len(rows)), 4.8))
    for s, (k, name, color) in enumerate(series):
        off = (s - (len(series) - 1) / 2) * w
        ax.bar([i + off for i in x], [num(r, k) for r in rows], w, label=name, color=color)
    off = ((len(series) - 1) / 2) * w
    for i, r in enumerate(rows):
        text = f"{float(r['ratio']):.2f}x io"
        for k, tag in (("ratio_em", "em"), ("ratio_acl", "acl")):
            if r.get(k):
                text += f"\n{float(r[k]):.2f}x {tag}"
        ax.text(i + off, num(r, "appliance_mpps"), text, ha="center", va="bottom", fontsize=7)
    ax.axhline(14.88, color="#d62728", linestyle="--", linewidth=1)
    ax.text(len(rows) - 0.5, 14.88, "10GbE 64 B line rate", color="#d62728", ha="right",
            va="bottom", fontsize=8)
    ax.set_xticks(list(x))
    ax.set_xticklabels(labels, fontsize=9)
    ax.set_ylabel("Mpps (median of runs)")
    ax.set_title(a.title, fontsize=10)
    ax.legend(fontsize=9)
    fig.tight_layout()
    fig.savefig(a.png, dpi=110)
    print(f"plot_suite: wrote {a.png}")


if __name__ == "__main__":
    main()
