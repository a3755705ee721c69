#!/usr/bin/env python3
"""Reads Google Benchmark JSON from alloc_benchmark and prints, for each size and thread count,
the time per pair of each allocator and pinpool's ratio to each baseline (same run).
Uses the median of repetitions when there are several, else the single run."""
import json
import re
import sys
from collections import defaultdict


def main(path):
    data = json.load(open(path))
    runs = defaultdict(list)
    medians = {}
    for b in data["benchmarks"]:
        m = re.match(r"BM_(\w+)/(\d+)/real_time/threads:(\d+)", b["run_name"])
        if not m:
            continue
        key = (m.group(1), int(m.group(2)), int(m.group(3)))
        if b.get("aggregate_name") == "median":
            medians[key] = b["real_time"]
        elif b.get("run_type") == "iteration":
            runs[key].append(b["real_time"])
    times = {k: medians.get(k, sorted(v)[len(v) // 2]) for k, v in runs.items()}
    print("| size | threads | pinpool ns | jemalloc ns | glibc ns | pinpool/jemalloc | pinpool/glibc |")
    print("|---|---|---|---|---|---|---|")
    for size in sorted({k[1] for k in times}):
        for threads in sorted({k[2] for k in times}):
            p = times.get(("Pinpool", size, threads))
            j = times.get(("Jemalloc", size, threads))
            g = times.get(("Glibc", size, threads))
            if None in (p, j, g):
                continue
            print(f"| {size} | {threads} | {p:.1f} | {j:.1f} | {g:.1f} | {p / j:.2f} | {p / g:.2f} |")


if __name__ == "__main__":
    main(sys.argv[1])
