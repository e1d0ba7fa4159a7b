#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""plot_vs_bonsai.py: time per dt_s (four steps of dt_h) against N from a
`hytree bench --csv` file, next to Bonsai's measured whole steps on the same
kind of GPU (Bonsai run by us on an H100: Plummer, 2^20, 2^22, 2^24; four
steps per dt_s). Usage: plot_vs_bonsai.py BENCH.csv OUT.png"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

BONSAI_STEP = {2**20: 0.009, 2**22: 0.032, 2**24: 0.134}  # whole step [s], H100


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    rows = {}
    with open(sys.argv[1], newline="") as f:
        for r in csv.DictReader(f):
            rows.setdefault(r["scheme"], []).append((int(r["N"]), float(r["t_per_dts"]), r["device"]))
    fig, ax = plt.subplots(figsize=(6, 4.2))
    style = {"hybrid": ("o-", "hytree hybrid (1 soft + 3 hard steps)"), "tree": ("s--", "hytree tree (4 steps)")}
    device = ""
    for scheme, pts in sorted(rows.items()):
        pts.sort()
        device = pts[0][2]
        mk, label = style.get(scheme, ("x-", scheme))
        ax.plot([p[0] for p in pts], [p[1] for p in pts], mk, label=label)
    bn = sorted(BONSAI_STEP)
    ax.plot(bn, [4 * BONSAI_STEP[n] for n in bn], "^:", color="k", label="Bonsai, 4 whole steps")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("N (Plummer sphere)")
    ax.set_ylabel("time per dt_s = 4 dt_h [s]")
    ax.set_title(f"one GPU: {device}", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=120)


if __name__ == "__main__":
    main()
