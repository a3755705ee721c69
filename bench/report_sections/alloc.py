"""1. Allocation: pinpool against jemalloc, mimalloc, tcmalloc and glibc on the shapes RDMA
programs have (alloc.json).

write(doc) appends the section to the page (a common.Page) and its targets to the Targets table (doc.target)."""
import os
import re

from report_sections.common import Results, fmt_size, fmt_ratio

# pinpool's two ways of being called (alloc_compare_benchmark's names): plain pointers, what the
# inline path costs (`Allocate(n).data()` + `Deallocate(p, n)` / `Deallocate(p)`), and the Block
# handle (sized) and the C API (by address).
PINPOOL = ["pinpoolptr", "pinpool"]
BASELINES = ["jemalloc", "mimalloc", "tcmalloc", "glibc"]
ALLOCATORS = PINPOOL + BASELINES
LABEL = {"pinpoolptr": "pinpool, pointers", "pinpool": "pinpool, Block / C API", "glibc": "glibc¹"}
# The target: each pinpool form within this factor of the fastest baseline, in every case.
BOUND = 1.25
WINDOWS = [("small", "64 B-1 KiB", 16), ("medium", "4-64 KiB", 256), ("64k", "64 KiB", 256),
           ("64k1024", "64 KiB", 1024), ("large", "1-4 MiB", 16)]


def write(doc):
    r = Results(os.path.join(doc.out, "alloc.json"), aggregate="min")
    doc.section("1. Allocation")
    if not r.present:
        return doc.not_measured(target=f"Allocation: pinpool within {BOUND}x of the fastest allocator")
    doc.measured("alloc")
    doc.w("Nanoseconds per allocate + free, per thread, the best of the repetitions (interference "
          "only adds time). Every allocator runs every case twice: with its **sized** free and with "
          "its free **by address**. pinpool runs in two forms, both through `libpinpool.so`: "
          "**pointers** is the C++ API holding plain pointers, `Allocate(n).data()` freed by "
          "`Deallocate(p, n)` (sized) or `Deallocate(p)` (by address), the forms "
          "[instruction-counts.md](instruction-counts.md) counts; **Block / C API** is "
          "`Allocate(n)` + `Deallocate(Block)` (sized: a 24-byte handle whose allocation also "
          "loads the block's chunk record for its keys) and `pinpool_malloc` + `pinpool_free` "
          "(by address: two calls into the library). jemalloc is a separate renamed static copy "
          "(default options; `sdallocx` / `free`); mimalloc (`mi_free_size` / `mi_free`) and "
          "tcmalloc (gperftools; `tc_free_sized` / `tc_free`) are Debian's shared libraries "
          "loaded `RTLD_LOCAL` and called through a pointer; glibc is the process's own `malloc`, "
          f"which none of them replaced (context: malloc from `{r.context.get('malloc', '?')}`), "
          "and has no sized free: its `free` stands in the sized rows. All in one process, "
          "benchmarks randomly interleaved, every random choice from sequences generated once "
          "with fixed seeds (the same for every allocator); blocks are never touched. Shapes: "
          "`pair` = one allocation freed at once; `batch` = 64 allocations, then the 64 frees "
          "(time / 64); `window` = W blocks outstanding, each step frees a random one and "
          "allocates a block of a random size (log-uniform in the range) in its place; "
          "`producer/consumer` = one thread allocates 64 B-64 KiB and passes each block through "
          "a 256-slot ring to another thread, which frees it (time per block). With 2 threads "
          "each thread runs its own loop (time per thread). Target: each pinpool form within "
          f"{BOUND}x of the fastest of jemalloc, mimalloc, tcmalloc and glibc in every case; "
          f"ratios above {BOUND} in bold.")
    doc.w()
    doc.alloc = {p: {"met": 0, "total": 0, "worst": None} for p in PINPOOL}
    doc.alloc_series = {}
    sizes = sorted({int(m.group(1)) for n in r.runs
                    for m in [re.match(r"pair/\w+/\w+/(\d+)/", n)] if m})
    header = ("| {0} | " + " | ".join(LABEL.get(a, a) for a in ALLOCATORS)
              + " | fastest baseline | pointers / fastest | Block·C / fastest |")
    sep = "|---|" + "---|" * (len(ALLOCATORS) + 3)
    doc.w("Each cell is *sized / by address*.")
    doc.w()
    for shape in ["pair", "batch"]:
        for threads in [1, 2]:
            doc.w(f"**{shape}, {threads} thread{'s' if threads > 1 else ''}** (ns)")
            doc.w()
            doc.w(header.format("size"))
            doc.w(sep)
            for size in sizes:
                row(doc, r, fmt_size(size),
                    lambda a, free: f"{shape}/{free}/{a}/{size}/real_time/threads:{threads}",
                    64 if shape == "batch" else 1, (shape, threads, size))
            doc.w()
    doc.w("**windows of outstanding blocks, and producer/consumer** (ns)")
    doc.w()
    doc.w(header.format("shape"))
    doc.w(sep)
    for name, label, window in WINDOWS:
        for threads in [1, 2]:
            row(doc, r, f"window {label}, W={window}, {threads} thr",
                lambda a, free: f"window/{name}/{free}/{a}/real_time/threads:{threads}", 1, None)
    row(doc, r, "producer/consumer 64 B-64 KiB, 2 thr",
        lambda a, free: f"prodcons/{free}/{a}/real_time/threads:2", 1, None)
    doc.w()
    doc.w("¹ glibc has no sized free: one figure, its `free`, compared in both.")
    doc.w()
    if r.errors:
        doc.w("Benchmarks that reported an error: "
              + "; ".join(f"`{k}`: {v}" for k, v in sorted(r.errors.items())))
        doc.w()
    for p, what in [("pinpoolptr", "pointers (`Deallocate(p, n)`, `Deallocate(p)`)"),
                    ("pinpool", "`Deallocate(Block)` and the C API")]:
        s = doc.alloc[p]
        worst = s["worst"]
        doc.target(f"Allocation, pinpool {what}: within {BOUND}x of the fastest of "
                   "jemalloc/mimalloc/tcmalloc/glibc",
                   "every shape, size, thread count, free flavour",
                   f"{s['met']} of {s['total']} cases"
                   + (f"; worst {worst[0]:.2f}x ({worst[1]}, {worst[2]} free, vs {worst[3]})"
                      if worst else ""),
                   s["met"] == s["total"] if s["total"] else None)
    # Figure: 2x2 panels (pair/batch x 1/2 threads), sized free, ns vs size.
    data = {}
    for (shape, threads, a), pts in doc.alloc_series.items():
        data[f"alloc_{shape}_{threads}_{a}.dat"] = "".join(f"{s} {v}\n" for s, v in pts if v)
    body = ['set multiplot layout 2,2 title "Allocate + free (sized free), ns per pair (lower is better)"',
            'set logscale xy', 'set xtics ("64" 64, "256" 256, "1K" 1024, "4K" 4096, "16K" 16384, "64K" 65536, "256K" 262144, "1M" 1048576, "4M" 4194304)',
            'set xlabel "block size (bytes)"', 'set ylabel "ns"', 'set key top left', 'set grid',
            'set bmargin 6']
    for shape in ["pair", "batch"]:
        for threads in [1, 2]:
            body.append(f'set title "{shape}, {threads} thread{"s" if threads > 1 else ""}"')
            body.append("plot " + ", ".join(
                f'"alloc_{shape}_{threads}_{a}.dat" using 1:2 with linespoints lw 2 title "{LABEL.get(a, a).rstrip("¹")}"'
                for a in ALLOCATORS))
    body.append("unset multiplot")
    doc.plot("alloc", {"body": "\n".join(body) + "\n", "height": 900}, data)


def row(doc, r, label, name_of, divide, series_key):
    """One table row: every allocator's figures for one case, sized / by address (`name_of(a,
    free)` names the benchmark), the fastest baseline and each pinpool form's ratio to it for
    both frees (each counted for the targets)."""
    cells = {a: [] for a in ALLOCATORS}
    best_of, ratios = [], {p: [] for p in PINPOOL}
    for free in ["sized", "address"]:
        vals = {}
        for a in ALLOCATORS:
            # glibc has no sized free: its free by address stands in the sized rows.
            v = r.ns(name_of(a, "address" if a == "glibc" else free))
            vals[a] = v / divide if v is not None else None
            if series_key and free == "sized":
                shape, threads, size = series_key
                doc.alloc_series.setdefault((shape, threads, a), []).append((size, vals[a]))
            if a != "glibc" or free == "address":
                cells[a].append(f"{vals[a]:.1f}" if vals[a] else "n/a")
        base = {a: vals[a] for a in BASELINES if vals[a] is not None}
        best = min(base, key=base.get) if base else None
        best_of.append(best or "n/a")
        for p in PINPOOL:
            ratio = vals[p] / base[best] if best and vals[p] else None
            if ratio is not None:
                s = doc.alloc[p]
                s["total"] += 1
                s["met"] += ratio <= BOUND
                if s["worst"] is None or ratio > s["worst"][0]:
                    s["worst"] = (ratio, label, free, best)
            text = fmt_ratio(ratio)
            ratios[p].append(f"**{text}**" if ratio is not None and ratio > BOUND else text)
    best = best_of[0] if best_of[0] == best_of[1] else " / ".join(best_of)
    doc.w(f"| {label} | " + " | ".join(" / ".join(cells[a]) for a in ALLOCATORS)
          + f" | {best} | " + " | ".join(" / ".join(ratios[p]) for p in PINPOOL) + " |")
