#!/usr/bin/env python3
"""bench/report.py against a results directory made here (ctest bench.report_generator): the page
it writes states the run (date, commit, each part's load), computes each target from the results
(a case over the bound misses it, one within meets it), says which parts were skipped and why,
links the notes instead of pasting them, marks a --quick run as not results, and stays under 500
lines with every host section filled. The figures here are made up for the test: they exercise
the generator, they are not measurements.

    bench/report_test.py
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ALLOCATORS = ["pinpool", "pinpoolptr", "jemalloc", "mimalloc", "tcmalloc", "glibc"]
SIZES = [64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304]
WINDOWS = ["small", "medium", "64k", "64k1024", "large"]
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def bench(name, ns, **counters):
    return dict({"name": name, "run_name": name, "run_type": "iteration", "real_time": ns,
                 "time_unit": "ns"}, **counters)


def alloc_json(slow_case):
    """Every case of alloc_compare_benchmark: pinpool's forms 5 ns, the others 10 ns, but for
    `slow_case`, where pinpool's plain pointers take 30 ns (3x the fastest baseline)."""
    runs = []
    for a in ALLOCATORS:
        frees = ["address"] if a == "glibc" else ["sized", "address"]
        for free in frees:
            names = [f"{shape}/{free}/{a}/{size}/real_time/threads:{t}"
                     for shape in ("pair", "batch") for size in SIZES for t in (1, 2)]
            names += [f"window/{w}/{free}/{a}/real_time/threads:{t}" for w in WINDOWS for t in (1, 2)]
            names.append(f"prodcons/{free}/{a}/real_time/threads:2")
            for n in names:
                ns = 5.0 if a.startswith("pinpool") else 10.0
                if a == "pinpoolptr" and n == slow_case:
                    ns = 30.0
                runs.append(bench(n, ns))
    return {"context": {"malloc": "/lib/x86_64-linux-gnu/libc.so.6"}, "benchmarks": runs}


def make_results(d, quick):
    os.makedirs(d)
    with open(os.path.join(d, "machine.txt"), "w") as f:
        f.write("date=2026-01-01 00:00 UTC\ncommand=scripts/run-benchmarks.sh (test)\n"
                f"commit=abcdef0\ndirty=0\ncpu_model=Test CPU\ncpus=2\nquick={quick}\n")
    with open(os.path.join(d, "load.txt"), "w") as f:
        f.write("alloc_start 2026-01-01T00:00:00Z 0.50 0.40 0.30\n"
                "alloc_end 2026-01-01T00:09:00Z 1.25 0.90 0.50\n"
                "counts_start 2026-01-01T00:10:00Z 1.00 0.90 0.50\n"
                "counts_end 2026-01-01T00:15:00Z 1.00 0.90 0.50\n")
    with open(os.path.join(d, "skipped.txt"), "w") as f:
        f.write("guest=--no-guest\nthird_party=not asked for\n")
    with open(os.path.join(d, "alloc.json"), "w") as f:
        json.dump(alloc_json("pair/sized/pinpoolptr/64/real_time/threads:1"), f)
    with open(os.path.join(d, "overhead.json"), "w") as f:
        json.dump({"benchmarks": [bench("overhead", 1.0, requested=100.0, allocated=120.0,
                                        heap_active=125.0, mapped=130.0, pinned=130.0,
                                        metadata=1.0, blocks=10.0)]}, f)
    with open(os.path.join(d, "instruction_counts.md"), "w") as f:
        f.write("| size | pinpool/sized | tcmalloc/sized | sized / tc sized | address / tc address |\n"
                "|---|---|---|---|---|\n| 64 B | 80.0 | 72.0 | 1.11 | 1.30 |\n"
                "\ninstructions per allocate + free pair\n")
    with open(os.path.join(d, "python_alloc.json"), "w") as f:
        json.dump({"speed_ns": {"pool.allocate(4096).free()": 100.0, "numpy.empty(4096, uint8)": 300.0,
                                "torch.empty(4096, uint8)": 1500.0},
                   "waste": {"sizes": 10, "worst": 1.25, "worst_at": 4097, "geomean": 1.1,
                             "pin_memory_worst": 2.0, "pin_memory_geomean": 1.5, "packed": []}}, f)


def write_page(root, d):
    page = os.path.join(root, "page.md")
    figures = os.path.join(root, "figures")
    os.makedirs(figures, exist_ok=True)
    # A figure of an earlier run that this one does not draw must go.
    open(os.path.join(figures, "stale.png"), "w").close()
    r = subprocess.run([sys.executable, os.path.join(HERE, "report.py"), "--results", d,
                        "--command", "x", "--markdown", page, "--figures", figures],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"report.py failed: {r.stderr}")
    text = open(page).read() if os.path.exists(page) else ""
    return text, os.listdir(figures)


def target_row(text, start):
    return next((l for l in text.splitlines() if l.startswith("| " + start)), "")


def main():
    if shutil.which("gnuplot") is None:
        print("SKIP: gnuplot is not installed (scripts/setup-deps.sh installs it)")
        return 77
    root = tempfile.mkdtemp(prefix="report_test.")
    try:
        make_results(os.path.join(root, "full"), "no")
        text, figures = write_page(root, os.path.join(root, "full"))
        lines = text.splitlines()
        check(0 < len(lines) < 500, f"the page has {len(lines)} lines, not 1-499")
        check("2026-01-01 00:00 UTC" in text and "`abcdef0`" in text, "the run's date and commit")
        check("load average (1 min) 0.50 at the start, 1.25 at the end" in text,
              "the allocation section's load")
        row = target_row(text, "Allocation, pinpool pointers")
        check("93 of 94 cases" in row and "3.00x (64 B, sized free" in row and "**missed**" in row,
              f"the pointers' allocation target from the results: {row!r}")
        row = target_row(text, "Allocation, pinpool `Deallocate(Block)`")
        check("94 of 94 cases" in row and "**met**" in row, f"the Block / C API target: {row!r}")
        row = target_row(text, "Instructions per pair")
        check("worst 1.30x (by address, 64 B)" in row and "**missed**" in row,
              f"the instruction count target: {row!r}")
        row = target_row(text, "Python: pinned bytes per requested byte")
        check("worst 1.250" in row and "**missed**" in row, f"the Python waste target: {row!r}")
        row = target_row(text, "Python: allocate + free of a 4 KiB block within")
        check("0.33x" in row and "**met**" in row, f"the Python speed target: {row!r}")
        check("Not measured in this run: --no-guest." in text, "a skipped part says why")
        check("[benchmarks-notes.md](benchmarks-notes.md)" in text, "the notes are linked")
        check("## Reading the results" not in text and "### " not in text, "no notes pasted")
        check("not results" not in text, "a full run is not marked --quick")
        check("stale.png" not in figures and "alloc.png" in figures,
              f"figures drawn, stale ones removed: {sorted(figures)}")

        make_results(os.path.join(root, "quick"), "quick")
        text, _ = write_page(root, os.path.join(root, "quick"))
        check("A `--quick` run: these figures are not results." in text, "a --quick run says so")
    finally:
        shutil.rmtree(root)
    for f in failures:
        print("FAIL:", f)
    if not failures:
        print("report_test: the page states its run, computes its targets, links its notes")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
