#!/usr/bin/env python3
"""Plots arfusion-bench results: latency and bus bandwidth against message size, log-log, one line
per path, one column per (dtype, hidden). Usage: plot_bench.py results.csv results.png"""
import csv
import sys

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("plot_bench.py: matplotlib is not installed; no plot", file=sys.stderr)
    sys.exit(1)

rows = list(csv.DictReader(open(sys.argv[1])))
paths = [k[:-3] for k in rows[0] if k.endswith("_us")]
groups = sorted({(r["dtype"], r["hidden"]) for r in rows})
fig, axes = plt.subplots(2, len(groups), figsize=(6 * len(groups), 9), squeeze=False)
for c, (dt, h) in enumerate(groups):
    sel = [r for r in rows if (r["dtype"], r["hidden"]) == (dt, h)]
    x = [int(r["bytes"]) for r in sel]
    for i, p in enumerate(paths):
        y = [float(r[p + "_us"]) for r in sel]
        if all(v != v for v in y):  # a path not timed (NCCL in a one-GPU local group)
            continue
        axes[0][c].plot(x, y, marker=".", label=p, color=f"C{i}")
        if p != "add_rmsnorm":  # one colour per path in both panels
            axes[1][c].plot(x, [b / (u * 1e-6) / 1e9 for b, u in zip(x, y)], marker=".", label=p, color=f"C{i}")
    for ax, yl in ((axes[0][c], "us per call"), (axes[1][c], "bus bandwidth GB/s (2 ranks: = algbw)")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message bytes")
        ax.set_ylabel(yl)
        ax.grid(True, which="both", alpha=0.3)
        ax.set_title(f"{dt}, hidden {h}")
    axes[0][c].legend(fontsize=8)
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=90)
print("wrote", sys.argv[2])
