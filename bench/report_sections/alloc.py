"""1. Allocation: pinpool against jemalloc, mimalloc, tcmalloc and glibc on the shapes RDMA
programs have (alloc.json).

write(doc) appends the section to the page (a common.Page) and its targets to doc.targets."""
import os
import re

from report_sections.common import Results, fmt_size, fmt_ratio


ALLOCATORS = ["pinpool", "jemalloc", "mimalloc", "tcmalloc", "glibc"]
BASELINES = ["jemalloc", "mimalloc", "tcmalloc", "glibc"]
WINDOWS = [("small", "64 B-1 KiB", 16), ("medium", "4-64 KiB", 256), ("64k", "64 KiB", 256),
           ("large", "1-4 MiB", 16)]

def write(doc):
    r = Results(os.path.join(doc.out, "alloc.json"), aggregate="min")
    doc.w("## 1. Allocation")
    doc.w()
    if not r.present:
        return doc.not_measured()
    doc.w("Nanoseconds per allocate + free, per thread, the best of the repetitions (other "
           "providerers' work shared the 2 CPUs and interference only adds time; the ratio of "
           "the medians is shown too). Every allocator runs every case twice: with its **sized** "
           "free and with its free **by address**. pinpool sized is `Pool::Allocate` + "
           "`Deallocate(Block)`, by address the C API's `pinpool_malloc` + `pinpool_free` "
           "(drop-in use), both through `libpinpool.so`; jemalloc is a separate renamed static "
           "copy (default options; `sdallocx` / `free`); mimalloc (`mi_free_size` / `mi_free`) "
           "and tcmalloc (gperftools; `tc_free_sized` / `tc_free`) are Debian's shared "
           "libraries loaded `RTLD_LOCAL` and called through a pointer; glibc is the process's "
           "own `malloc`, which none of them replaced "
           f"(context: malloc from `{r.context.get('malloc', '?')}`), and has no sized free: its "
           "`free` stands in the sized rows. All in one process, benchmarks randomly "
           "interleaved, every random choice from sequences generated once with fixed seeds "
           "(the same for every allocator); blocks are never touched. Shapes: `pair` = one "
           "allocation freed at once; `batch` = 64 allocations, then the 64 frees (time / 64); "
           "`window` = W blocks outstanding, each step frees a random one and allocates a "
           "block of a random size (log-uniform in the range) in its place; `producer/consumer`"
           " = one thread allocates 64 B-64 KiB and passes each block through a 256-slot ring "
           "to another thread, which frees it (time per block). With 2 threads each thread "
           "runs its own loop (time per thread). Target: pinpool within 1.5x of the fastest of "
           "jemalloc, mimalloc, tcmalloc and glibc in every case.")
    doc.w()
    doc.alloc_met = doc.alloc_total = 0
    doc.alloc_worst = None
    doc.alloc_series = {}
    sizes = sorted({int(m.group(1)) for n in r.runs
                    for m in [re.match(r"pair/\w+/\w+/(\d+)/", n)] if m})
    header = ("| {0} | free | " + " | ".join(a if a != "glibc" else "glibc¹" for a in ALLOCATORS)
              + " | fastest baseline | pinpool / fastest | ≤ 1.5x | same, medians |")
    sep = "|---|---|" + "---|" * (len(ALLOCATORS) + 4)
    for shape in ["pair", "batch"]:
        for threads in [1, 2]:
            doc.w(f"**{shape}, {threads} thread{'s' if threads > 1 else ''}** (ns)")
            doc.w()
            doc.w(header.format("size"))
            doc.w(sep)
            for size in sizes:
                for free in ["sized", "address"]:
                    names = {a: f"{shape}/{'address' if a == 'glibc' else free}/{a}/{size}/real_time/threads:{threads}"
                             for a in ALLOCATORS}
                    alloc_row(doc, r, fmt_size(size), free, names, 64 if shape == "batch" else 1,
                                   (shape, threads, size))
            doc.w()
    doc.w("**windows of outstanding blocks, and producer/consumer** (ns)")
    doc.w()
    doc.w(header.format("shape"))
    doc.w(sep)
    for name, label, window in WINDOWS:
        for threads in [1, 2]:
            for free in ["sized", "address"]:
                names = {a: f"window/{name}/{'address' if a == 'glibc' else free}/{a}/real_time/threads:{threads}"
                         for a in ALLOCATORS}
                alloc_row(doc, r, f"window {label}, W={window}, {threads} thr", free, names, 1, None)
    for free in ["sized", "address"]:
        names = {a: f"prodcons/{'address' if a == 'glibc' else free}/{a}/real_time/threads:2"
                 for a in ALLOCATORS}
        alloc_row(doc, r, "producer/consumer 64 B-64 KiB, 2 thr", free, names, 1, None)
    doc.w()
    doc.w("¹ glibc has no sized free: its `free` in both rows.")
    doc.w()
    worst = doc.alloc_worst
    doc.targets.append(("Allocation: pinpool within 1.5x of the fastest of jemalloc/mimalloc/tcmalloc/glibc",
                         "every shape, size, thread count, free flavour",
                         f"{doc.alloc_met} of {doc.alloc_total} cases" +
                         (f"; worst {worst[0]:.2f}x ({worst[1]}, {worst[2]} free, vs {worst[3]})" if worst else ""),
                         doc.alloc_met == doc.alloc_total if doc.alloc_total else None))
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
                f'"alloc_{shape}_{threads}_{a}.dat" using 1:2 with linespoints lw 2 title "{a}"'
                for a in ALLOCATORS))
    body.append("unset multiplot")
    doc.plot("alloc", {"body": "\n".join(body) + "\n", "height": 900}, data)

def alloc_row(doc, r, label, free, names, divide, series_key):
    """One table row: every allocator's figure for one case, the fastest baseline, the ratio."""
    vals, med = {}, {}
    for a, n in names.items():
        v, m = r.ns(n), r.median_ns(n)
        vals[a] = v / divide if v is not None else None
        med[a] = m / divide if m is not None else None
        if series_key and free == "sized":
            shape, threads, size = series_key
            doc.alloc_series.setdefault((shape, threads, a), []).append((size, vals[a]))
    base = {a: vals[a] for a in BASELINES if vals[a] is not None}
    best = min(base, key=base.get) if base else None
    ratio = vals["pinpool"] / base[best] if best and vals["pinpool"] else None
    ok = None if ratio is None else ratio <= 1.5
    mb = [med[a] for a in BASELINES if med[a] is not None]
    mratio = med["pinpool"] / min(mb) if mb and med["pinpool"] else None
    if ok is not None:
        doc.alloc_total += 1
        doc.alloc_met += ok
        if doc.alloc_worst is None or ratio > doc.alloc_worst[0]:
            doc.alloc_worst = (ratio, label, free, best)
    doc.w(f"| {label} | {free} | " + " | ".join(f"{vals[a]:.1f}" if vals[a] else "n/a" for a in ALLOCATORS)
           + f" | {best or 'n/a'} | {fmt_ratio(ratio)} | {'yes' if ok else ('no' if ok is not None else 'n/a')} | {fmt_ratio(mratio)} |")
