#!/usr/bin/env python3
"""Prints the results table of docs/performance.md from bench_arfusion's JSON outputs: per shape,
the median over the runs of each path (us per call), the range of Auto over the runs, Auto's plan
and its speedup over the NCCL path measured in the same runs.
Usage: bench_table.py run1.json [run2.json ...]"""
import collections
import json
import statistics
import sys

SHAPES = [(1, 4096), (16, 4096), (32, 4096), (1, 8192), (16, 8192), (128, 8192), (256, 8192), (512, 8192),
          (2048, 8192), (8192, 4096), (8192, 8192)]


def main(paths):
    times, labels = collections.defaultdict(list), {}
    for p in paths:
        for b in json.load(open(p))["benchmarks"]:
            if b.get("run_type") != "iteration" or b.get("error_occurred"):
                continue
            key = b["name"].split("/iterations")[0].replace("run/", "")
            times[key].append(b.get("us", b["real_time"]))
            labels[key] = b.get("label", "")

    def med(family, t, h):
        v = times.get(f"{family}/{t}/{h}/1")
        return (statistics.median(v), v) if v else (float("nan"), [])

    print("| shape (bf16) | bytes | NCCL path | add-RMSNorm alone | one-shot | two-shot | **Auto** (range) | Auto vs NCCL path |")
    print("|---|---|---|---|---|---|---|---|")
    for t, h in SHAPES:
        nccl, _ = med("nccl_path_fused", t, h)
        auto, runs = med("auto_fused", t, h)
        if not runs:
            continue
        one, _ = med("oneshot_fused", t, h)
        two, _ = med("twoshot_fused", t, h)
        norm, _ = med("add_rmsnorm", t, h)
        size = t * h * 2
        size_s = f"{size // 1024} KB" if size < 1 << 20 else f"{size >> 20} MB"
        pick = labels.get(f"auto_fused/{t}/{h}/1", "").split(" ")[0]
        print(f"| {t} x {h} | {size_s} | {nccl:.1f} | {norm:.1f} | {one:.1f} | {two:.1f} | **{auto:.1f}** "
              f"({min(runs):.1f}-{max(runs):.1f}, {pick}) | {nccl / auto:.2f}x |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    main(sys.argv[1:])
