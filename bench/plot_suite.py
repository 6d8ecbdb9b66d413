#!/usr/bin/python3
"""Plots bench/perf_suite.sh results: Mpps per configuration, the appliance beside
dpdk-testpmd io on the same vdevs and traffic, with the ratio over each pair of bars.

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
    tp = [float(r["testpmd_mpps"]) for r in rows]
    ap_ = [float(r["appliance_mpps"]) for r in rows]
    x = range(len(rows))
    w = 0.38
    fig, ax = plt.subplots(figsize=(max(6, 2.2 * len(rows)), 4.5))
    ax.bar([i - w / 2 for i in x], tp, w, label="dpdk-testpmd io", color="#9e9e9e")
    ax.bar([i + w / 2 for i in x], ap_, w, label="dpu-appliance", color="#1f77b4")
    for i, r in enumerate(rows):
        ax.text(i + w / 2, ap_[i], f"{float(r['ratio']):.2f}x", ha="center", va="bottom",
                fontsize=9)
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
