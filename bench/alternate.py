#!/usr/bin/env python3
"""Compares two or more builds of alloc_compare_benchmark shape by shape, each benchmark alone in
its own process, the builds alternating, so that a slow minute of a shared machine falls on
every build alike. Prints, per benchmark, each build's median and its runs, in ns, and for each
build after the first the median of its paired ratios: run i of the build over run i of the
first build, measured seconds apart. On a machine whose speed jumps between states for seconds
at a time (the AMD EPYC VM: 7.3 or 9.7 ns for one build's 16 KiB pair, run to run), the paired
ratio is steadier than the ratio of medians; use short runs (--min-time 0.05) and many of them.

    bench/alternate.py [--runs N] [--min-time S] TREE[,TREE...] NAME...

TREE is a checkout whose build/bench/alloc_compare_benchmark is built; NAME a benchmark's full
name (`--benchmark_list_tests` lists them), matched exactly. docs/instruction-counts.md quotes
its output where it compares one inline path with the next.
"""
import argparse
import json
import os
import statistics
import subprocess


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--runs', type=int, default=3)
    ap.add_argument('--min-time', default='0.3')
    ap.add_argument('trees')
    ap.add_argument('names', nargs='+')
    args = ap.parse_args()
    trees = args.trees.split(',')
    times = {}
    for _ in range(args.runs):
        for name in args.names:
            for tree in trees:
                out = subprocess.run(
                    [os.path.join(tree, 'build/bench/alloc_compare_benchmark'),
                     '--benchmark_filter=^' + name + '$',
                     '--benchmark_min_time=' + args.min_time, '--benchmark_format=json'],
                    capture_output=True, text=True, check=True).stdout
                found = json.loads(out)['benchmarks']
                if not found:
                    raise SystemExit(f'no benchmark named {name} in {tree}')
                times.setdefault((name, tree), []).extend(b['real_time'] for b in found)
    def label(tree):
        return os.path.basename(os.path.normpath(tree))
    for name in args.names:
        cells = [name]
        for tree in trees:
            runs = times[(name, tree)]
            cells.append('%s: %.2f [%s]' % (label(tree),
                                            statistics.median(runs),
                                            ' '.join('%.2f' % t for t in runs)))
        first = times[(name, trees[0])]
        for tree in trees[1:]:
            ratios = sorted(t / f for t, f in zip(times[(name, tree)], first))
            cells.append('%s / %s paired: %.3f (quartiles %.3f-%.3f)' % (
                label(tree), label(trees[0]), statistics.median(ratios),
                ratios[len(ratios) // 4], ratios[(3 * len(ratios)) // 4]))
        print(' | '.join(cells))


if __name__ == '__main__':
    main()
