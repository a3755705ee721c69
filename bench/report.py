#!/usr/bin/env python3
"""Writes docs/benchmarks.md and its figures from one scripts/run-benchmarks.sh run.

    bench/report.py --results DIR --command CMD --markdown docs/benchmarks.md \
        --figures docs/benchmarks

DIR holds the Google Benchmark JSON files and text files the script wrote (see
scripts/run-benchmarks.sh and bench/guest-benchmarks.sh). Every figure on the page comes from DIR:
medians of the repetitions when there are several. Plots are drawn by gnuplot (pngcairo), each
stating the command, the machine and the date. bench/benchmarks-notes.md, hand-written, is
appended as the page's last section.
"""
import argparse
import json
import os
import re
import subprocess
import sys

UNIT_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
MIB = 1 << 20


def read_kv(path):
    """key=value lines (several per line allowed for hugepages.txt)."""
    kv = {}
    if not os.path.exists(path):
        return kv
    for line in open(path):
        line = line.strip()
        if "=" not in line:
            continue
        if " " in line and line.count("=") > 1 and not line.startswith(("date=", "cpu_model=", "os=", "thp=", "command=", "load=")):
            for part in line.split():
                if "=" in part:
                    k, v = part.split("=", 1)
                    kv[k] = v
        else:
            k, v = line.split("=", 1)
            kv[k] = v
    return kv


class Results:
    """One Google Benchmark JSON file: name -> record (median aggregate, else the single run),
    name -> error message, and the context."""

    def __init__(self, path, aggregate="median"):
        self.runs, self.errors, self.context = {}, {}, {}
        self.medians = {}
        self.present = os.path.exists(path) and os.path.getsize(path) > 0
        if not self.present:
            return
        try:
            data = json.load(open(path))
        except json.JSONDecodeError as e:  # a run cut short
            print(f"report: {path}: {e}: left out", file=sys.stderr)
            self.present = False
            return
        self.context = data.get("context", {})
        for b in data.get("benchmarks", []):
            name = b.get("run_name", b["name"])
            if b.get("error_occurred"):
                self.errors[name] = b.get("error_message", "error")
                continue
            if b.get("run_type") == "aggregate":
                if b.get("aggregate_name") == aggregate:
                    self.runs[name] = b
                if b.get("aggregate_name") == "median":
                    self.medians[name] = b
            elif name not in self.runs:
                self.runs[name] = b

    def ns(self, name):
        b = self.runs.get(name)
        return None if b is None else b["real_time"] * UNIT_NS[b.get("time_unit", "ns")]

    def median_ns(self, name):
        b = self.medians.get(name) or self.runs.get(name)
        return None if b is None else b["real_time"] * UNIT_NS[b.get("time_unit", "ns")]

    def get(self, name, field):
        b = self.runs.get(name)
        return None if b is None else b.get(field)


def fmt_ns(v):
    if v is None:
        return "n/a"
    if v >= 1e6:
        return f"{v / 1e6:.2f} ms"
    if v >= 1e3:
        return f"{v / 1e3:.2f} µs"
    return f"{v:.1f} ns"


def fmt_size(n):
    n = int(n)
    if n >= MIB and n % MIB == 0:
        return f"{n // MIB} MiB"
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024} KiB"
    return f"{n} B"


def fmt_ratio(v, digits=2):
    return "n/a" if v is None else f"{v:.{digits}f}"


def verdict(ok):
    return "n/a" if ok is None else ("**met**" if ok else "**missed**")


class Page:
    def __init__(self, args):
        self.args = args
        self.out = args.results
        self.machine = read_kv(os.path.join(self.out, "machine.txt"))
        if "command" in self.machine:  # the command that measured (also when only re-reporting)
            args.command = self.machine["command"]
        self.guest = read_kv(os.path.join(self.out, "guest", "guest.txt"))
        self.hugepages = read_kv(os.path.join(self.out, "hugepages.txt"))
        self.lines = []
        self.targets = []  # (what, target, result, ok)
        os.makedirs(args.figures, exist_ok=True)
        self.fig_rel = os.path.relpath(args.figures, os.path.dirname(os.path.abspath(args.markdown)))

    # --- helpers ---------------------------------------------------------------------------
    def w(self, s=""):
        self.lines.append(s)

    def machine_line(self, guest=False):
        m = self.machine
        host = f"{m.get('cpu_model', '?')}, {m.get('cpus', '?')} CPUs, {m.get('memory_gib', '?')} GiB, {m.get('os', '?')}, Linux {m.get('kernel', '?')}"
        if guest:
            g = self.guest
            return (f"soft-RoCE rxe0 in a QEMU TCG guest ({g.get('cpus', '?')} vCPUs, "
                    f"{int(g.get('memory_kib', '0')) // 1024} MiB, Linux {g.get('kernel', '?')}) on {host}")
        return host

    def caption(self, guest=False, run=None):
        run = run or {}
        return (f"command: {run.get('command', self.args.command)} | machine: {self.machine_line(guest)} | "
                f"date: {run.get('date', self.machine.get('date', '?'))} | "
                f"commit {run.get('commit', self.machine.get('commit', '?'))}")

    def plot(self, name, script, data, guest=False, run=None):
        """Writes DATA files and runs gnuplot SCRIPT producing figures/NAME.png. `run` (command,
        date, commit) names a separate run that measured these figures, when not the page's."""
        work = os.path.abspath(os.path.join(self.out, "plots"))
        os.makedirs(work, exist_ok=True)
        for fname, text in data.items():
            with open(os.path.join(work, fname), "w") as f:
                f.write(text)
        png = os.path.abspath(os.path.join(self.args.figures, name + ".png"))
        m = dict(self.machine, **(run or {}))
        line1 = (f"command: {(run or {}).get('command', self.args.command)}   date: {m.get('date', '?')}   "
                 f"commit: {m.get('commit', '?')}").replace('"', "'")
        line2 = f"machine: {self.machine_line(guest)}".replace('"', "'")
        head = (f'set terminal pngcairo noenhanced size 1200,{script.get("height", 700)} font "DejaVu Sans,10"\n'
                f'set output "{png}"\n'
                f'set label 998 "{line1}" at screen 0.01,0.035 font ",8"\n'
                f'set label 999 "{line2}" at screen 0.01,0.012 font ",8"\n')
        gp = os.path.join(work, name + ".gp")
        with open(gp, "w") as f:
            f.write(head + script["body"])
        r = subprocess.run(["gnuplot", gp], cwd=work, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"report: gnuplot failed for {name}:\n{r.stderr}", file=sys.stderr)
            sys.exit(1)
        self.w(f"![{name}]({self.fig_rel}/{name}.png)")
        self.w()
        self.w(f"<sub>{self.caption(guest, run)}</sub>")
        self.w()

    # --- 1. allocation ----------------------------------------------------------------------
    ALLOCATORS = ["pinpool", "jemalloc", "mimalloc", "tcmalloc", "glibc"]
    BASELINES = ["jemalloc", "mimalloc", "tcmalloc", "glibc"]
    WINDOWS = [("small", "64 B-1 KiB", 16), ("medium", "4-64 KiB", 256), ("64k", "64 KiB", 256),
               ("large", "1-4 MiB", 16)]

    def alloc(self):
        r = Results(os.path.join(self.out, "alloc.json"), aggregate="min")
        self.w("## 1. Allocation")
        self.w()
        if not r.present:
            self.w("Not measured in this run.")
            self.w()
            return
        self.w("Nanoseconds per allocate + free, per thread, the best of the repetitions (other "
               "engineers' work shared the 2 CPUs and interference only adds time; the ratio of "
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
        self.w()
        self.alloc_met = self.alloc_total = 0
        self.alloc_worst = None
        self.alloc_series = {}
        sizes = sorted({int(m.group(1)) for n in r.runs
                        for m in [re.match(r"pair/\w+/\w+/(\d+)/", n)] if m})
        header = ("| {0} | free | " + " | ".join(a if a != "glibc" else "glibc¹" for a in self.ALLOCATORS)
                  + " | fastest baseline | pinpool / fastest | ≤ 1.5x | same, medians |")
        sep = "|---|---|" + "---|" * (len(self.ALLOCATORS) + 4)
        for shape in ["pair", "batch"]:
            for threads in [1, 2]:
                self.w(f"**{shape}, {threads} thread{'s' if threads > 1 else ''}** (ns)")
                self.w()
                self.w(header.format("size"))
                self.w(sep)
                for size in sizes:
                    for free in ["sized", "address"]:
                        names = {a: f"{shape}/{'address' if a == 'glibc' else free}/{a}/{size}/real_time/threads:{threads}"
                                 for a in self.ALLOCATORS}
                        self.alloc_row(r, fmt_size(size), free, names, 64 if shape == "batch" else 1,
                                       (shape, threads, size))
                self.w()
        self.w("**windows of outstanding blocks, and producer/consumer** (ns)")
        self.w()
        self.w(header.format("shape"))
        self.w(sep)
        for name, label, window in self.WINDOWS:
            for threads in [1, 2]:
                for free in ["sized", "address"]:
                    names = {a: f"window/{name}/{'address' if a == 'glibc' else free}/{a}/real_time/threads:{threads}"
                             for a in self.ALLOCATORS}
                    self.alloc_row(r, f"window {label}, W={window}, {threads} thr", free, names, 1, None)
        for free in ["sized", "address"]:
            names = {a: f"prodcons/{'address' if a == 'glibc' else free}/{a}/real_time/threads:2"
                     for a in self.ALLOCATORS}
            self.alloc_row(r, "producer/consumer 64 B-64 KiB, 2 thr", free, names, 1, None)
        self.w()
        self.w("¹ glibc has no sized free: its `free` in both rows.")
        self.w()
        worst = self.alloc_worst
        self.targets.append(("Allocation: pinpool within 1.5x of the fastest of jemalloc/mimalloc/tcmalloc/glibc",
                             "every shape, size, thread count, free flavour",
                             f"{self.alloc_met} of {self.alloc_total} cases" +
                             (f"; worst {worst[0]:.2f}x ({worst[1]}, {worst[2]} free, vs {worst[3]})" if worst else ""),
                             self.alloc_met == self.alloc_total if self.alloc_total else None))
        # Figure: 2x2 panels (pair/batch x 1/2 threads), sized free, ns vs size.
        data = {}
        for (shape, threads, a), pts in self.alloc_series.items():
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
                    for a in self.ALLOCATORS))
        body.append("unset multiplot")
        self.plot("alloc", {"body": "\n".join(body) + "\n", "height": 900}, data)

    def alloc_row(self, r, label, free, names, divide, series_key):
        """One table row: every allocator's figure for one case, the fastest baseline, the ratio."""
        vals, med = {}, {}
        for a, n in names.items():
            v, m = r.ns(n), r.median_ns(n)
            vals[a] = v / divide if v is not None else None
            med[a] = m / divide if m is not None else None
            if series_key and free == "sized":
                shape, threads, size = series_key
                self.alloc_series.setdefault((shape, threads, a), []).append((size, vals[a]))
        base = {a: vals[a] for a in self.BASELINES if vals[a] is not None}
        best = min(base, key=base.get) if base else None
        ratio = vals["pinpool"] / base[best] if best and vals["pinpool"] else None
        ok = None if ratio is None else ratio <= 1.5
        mb = [med[a] for a in self.BASELINES if med[a] is not None]
        mratio = med["pinpool"] / min(mb) if mb and med["pinpool"] else None
        if ok is not None:
            self.alloc_total += 1
            self.alloc_met += ok
            if self.alloc_worst is None or ratio > self.alloc_worst[0]:
                self.alloc_worst = (ratio, label, free, best)
        self.w(f"| {label} | {free} | " + " | ".join(f"{vals[a]:.1f}" if vals[a] else "n/a" for a in self.ALLOCATORS)
               + f" | {best or 'n/a'} | {fmt_ratio(ratio)} | {'yes' if ok else ('no' if ok is not None else 'n/a')} | {fmt_ratio(mratio)} |")

    # --- 2. RDMA-ready buffer ------------------------------------------------------------------
    def rdma_ready(self):
        self.w("## 2. Getting an RDMA-ready buffer (soft-RoCE, in the guest)")
        self.w()
        r = Results(os.path.join(self.out, "guest", "rdma_ready.json"))
        nc = Results(os.path.join(self.out, "guest", "rdma_ready_nocache.json"))
        if not r.present:
            self.w("Not measured in this run (no guest).")
            self.w()
            self.targets.append(("RDMA-ready buffer", "", "not measured", None))
            return
        self.w("Time to get a buffer with its lkey and rkey ready, and give it back, on rxe0 in one "
               "process, medians. Per-buffer registration: `verbs_reg` = malloc + `ibv_reg_mr` + "
               "`ibv_dereg_mr` + free; `ucx_direct` = malloc + `ucp_mem_map` + `ucp_rkey_pack` + "
               "release + `ucp_mem_unmap` + free with UCX's caches off (`UCX_IB_REG_METHODS=direct`, "
               "`UCX_RCACHE_ENABLE=n`); `fabric_nocache` = `fi_mr_reg` + `fi_close` on libfabric's "
               "verbs provider with `FI_MR_CACHE_MAX_COUNT=0` (a second process in the same guest). "
               "Registration-cache hits (the buffer was registered before and stays cached, the "
               "MPI pattern): `ucx_mdcache` = `ucp_mem_map` + `ucp_mem_unmap` with only the IB "
               "memory domain's cache; `ucx_cached` = the same with UCX's defaults (ucp and IB "
               "caches); `ucx_cached_pack` adds `ucp_rkey_pack` (what a peer needs); `fabric_reg` = "
               "`fi_mr_reg` + `fi_mr_key` + `fi_mr_desc` + `fi_close` with the verbs provider's MR "
               "cache on (default). Targets: pool ≥ 100x faster than per-buffer registration "
               "(`verbs_reg`), ≥ 5x faster than the best cache hit.")
        self.w()
        ctx = r.context
        self.w(f"UCX: {ctx.get('ucx', '?')} · libfabric verbs provider: {ctx.get('libfabric', '?')}"
               f" (domain `{ctx.get('libfabric_domain', '?')}`)")
        self.w()
        methods = ["pool", "verbs_reg", "ucx_direct", "fabric_nocache", "ucx_mdcache", "ucx_cached",
                   "ucx_cached_pack", "fabric_reg"]
        hits = ["ucx_mdcache", "ucx_cached", "ucx_cached_pack", "fabric_reg"]
        sizes = sorted({int(n.split("/")[1]) for n in r.runs if n.startswith("pool/")})

        def t(m, s):
            src = nc if m == "fabric_nocache" else r
            return src.ns(f"{m}/{s}")

        self.w("| size | " + " | ".join(methods) + " |")
        self.w("|---|" + "---|" * len(methods))
        for s in sizes:
            self.w(f"| {fmt_size(s)} | " + " | ".join(fmt_ns(t(m, s)) for m in methods) + " |")
        self.w()
        self.w("| size | verbs_reg / pool | ucx_direct / pool | fabric_nocache / pool | best hit | best hit / pool | ≥ 100x | ≥ 5x |")
        self.w("|---|---|---|---|---|---|---|---|")
        ok100 = ok5 = True
        n = 0
        worst100 = worst5 = None
        for s in sizes:
            p = t("pool", s)
            if not p:
                continue
            n += 1
            rv = t("verbs_reg", s) / p if t("verbs_reg", s) else None
            ru = t("ucx_direct", s) / p if t("ucx_direct", s) else None
            rf = t("fabric_nocache", s) / p if t("fabric_nocache", s) else None
            hv = {m: t(m, s) for m in hits if t(m, s)}
            best = min(hv, key=hv.get) if hv else None
            rh = hv[best] / p if best else None
            a = rv is not None and rv >= 100
            b = rh is not None and rh >= 5
            ok100 &= a
            ok5 &= b
            if rv is not None and (worst100 is None or rv < worst100[0]):
                worst100 = (rv, s)
            if rh is not None and (worst5 is None or rh < worst5[0]):
                worst5 = (rh, s, best)
            self.w(f"| {fmt_size(s)} | {fmt_ratio(rv, 0)} | {fmt_ratio(ru, 0)} | {fmt_ratio(rf, 0)} | {best or 'n/a'} | {fmt_ratio(rh, 1)} | {'yes' if a else 'no'} | {'yes' if b else 'no'} |")
        self.w()
        self.targets.append(("RDMA-ready buffer ≥ 100x faster than per-buffer `ibv_reg_mr`", "every size 4 KiB-4 MiB",
                             f"smallest ratio {worst100[0]:.0f}x at {fmt_size(worst100[1])}" if worst100 else "n/a",
                             ok100 if n else None))
        self.targets.append(("RDMA-ready buffer ≥ 5x faster than the best registration-cache hit", "every size",
                             f"smallest ratio {worst5[0]:.1f}x at {fmt_size(worst5[1])} (vs {worst5[2]})" if worst5 else "n/a",
                             ok5 if n else None))
        data = {}
        for m in methods:
            data[f"ready_{m}.dat"] = "".join(f"{s} {t(m, s)}\n" for s in sizes if t(m, s))
        body = ['set title "RDMA-ready buffer: time per buffer on rxe0 (lower is better)"',
                'set logscale xy', 'set xtics ("4K" 4096, "64K" 65536, "1M" 1048576, "4M" 4194304)',
                'set xlabel "buffer size (bytes)"', 'set ylabel "ns per buffer"', 'set key outside right',
                'set grid', 'set bmargin 6',
                "plot " + ", ".join(f'"ready_{m}.dat" using 1:2 with linespoints lw 2 title "{m}"'
                                    for m in methods if data[f"ready_{m}.dat"])]
        self.plot("rdma_ready", {"body": "\n".join(body) + "\n"}, data, guest=True)

    # --- 3. growth ----------------------------------------------------------------------------------
    def growth(self):
        self.w("## 3. Growth: adding and registering chunks")
        self.w()
        host = Results(os.path.join(self.out, "growth_host.json"))
        verbs = Results(os.path.join(self.out, "guest", "growth_verbs.json"))
        hp = self.hugepages
        self.w(f"GB/s registered (10^9 bytes per second; pinned long-term, or for mlock only locked) for `Pool::Reserve` of {int(hp.get('growth_mib', '0'))} MiB on the "
               f"host (1 GiB chunks for 1 GiB pages, 64 MiB chunks otherwise) and "
               f"{self.guest.get('growth_mib', '?')} MiB in the guest, from an empty pool: map, fault in "
               "(populated) or not, and register every chunk. The page size is required, never a "
               "fallback; a page size the kernel could not give shows its error. Host huge pages "
               f"set by the script for the run: {hp.get('hugepages_2M', '?')} x 2 MiB, "
               f"{hp.get('hugepages_1G', '?')} x 1 GiB (restored afterwards); guest: "
               f"{self.guest.get('hugepages_2M', '?')} x 2 MiB. The guest runs under TCG, 10-50x "
               "slower than native: compare its rows with each other, not with the host's.")
        self.w()
        self.w("| domain | page size | populated GB/s | not populated GB/s |")
        self.w("|---|---|---|---|")
        rows = []
        errors = []
        for res, where in [(host, "host"), (verbs, "guest")]:
            if not res.present:
                continue
            names = list(res.runs) + list(res.errors)
            domains = []
            for n in names:
                d = n.split("/")[1]
                if d not in domains:
                    domains.append(d)
            for d in domains:
                label = {"host": "mlock", "pin": "long-term pin"}.get(d, d)  # "host": older runs
                for page in ["1G", "2M", "THP", "4K"]:
                    cells = []
                    for pop in ["populated", "unpopulated"]:
                        name = f"grow/{d}/{page}/{pop}/manual_time"
                        bps = res.get(name, "bytes_per_second")
                        if bps:
                            cells.append(f"{bps / 1e9:.2f}")
                            rows.append((f"{label} ({where})", page, pop, bps / 1e9))
                        elif name in res.errors:
                            cells.append("unavailable¹")
                            errors.append((f"{d} {page} {pop}", res.errors[name]))
                        else:
                            cells.append("not run")
                    self.w(f"| {label} ({where}) | {page} | {cells[0]} | {cells[1]} |")
        self.w()
        if errors:
            seen = set()
            self.w("¹ The pool's error, verbatim:")
            self.w()
            for what, msg in errors:
                if msg in seen:
                    continue
                seen.add(msg)
                self.w(f"- {what}: `{msg}`")
            self.w()
        if rows:
            cats = []
            for d, page, pop, v in rows:
                if (d, page) not in cats:
                    cats.append((d, page))
            lines = []
            for d, page in cats:
                vals = {pop: v for dd, pg, pop, v in rows if dd == d and pg == page}
                lines.append(f'"{d} {page}" {vals.get("populated", "NaN")} {vals.get("unpopulated", "NaN")}\n')
            data = {"growth.dat": "".join(lines)}
            body = ['set title "Growth: GB/s registered by Pool::Reserve (higher is better; log scale)"',
                    'set style data histogram', 'set style histogram cluster gap 1',
                    'set style fill solid 0.8 border -1', 'set logscale y', 'set grid ytics',
                    'set ylabel "GB/s"', 'set xtics rotate by -30', 'set bmargin 9', 'set key top right',
                    'plot "growth.dat" using 2:xtic(1) title "populated", "" using 3 title "not populated"']
            self.plot("growth", {"body": "\n".join(body) + "\n"}, data, guest=verbs.present)

    # --- 8. growth at scale -------------------------------------------------------------------------
    def growth_at_scale(self):
        """Growth off the allocation path (low watermark vs none), parallel start-up, trim.
        scale.txt, when present, names the run that measured these (a smaller, separate run)."""
        self.w("## 8. Growth at scale: off the allocation path, parallel start-up, trim")
        self.w()
        scale = read_kv(os.path.join(self.out, "scale.txt"))
        host = Results(os.path.join(self.out, "growth_latency_host.json"))
        verbs = Results(os.path.join(self.out, "guest", "growth_latency_verbs.json"))
        start = Results(os.path.join(self.out, "startup_host.json"))
        if scale:
            self.w(f"Measured separately from the sections above, by a smaller run: `{scale.get('command', '?')}` "
                   f"on {scale.get('date', '?')}, commit `{scale.get('commit', '?')}`, load average "
                   f"{scale.get('load', '?')} (the machine was shared with other work).")
            self.w()
        self.w("**Allocation latency while the pool grows** (`growth_latency_benchmark`): a pool of 16 MiB "
               "chunks (4 KiB pages, populated) starts with one chunk; one thread allocates 64 KiB blocks, "
               "one per `pause_us` of busy work, until the chunks asked for are live, timing every "
               "`Allocate` (steady_clock). With a low watermark of two chunks the pool's thread adds chunks "
               "in the background; without one, the allocation that finds no room maps, populates and "
               "registers the next chunk itself. Domain: the default long-term pin on the host, verbs "
               "(rxe0, `ibv_reg_mr`) in the guest. Percentiles over all allocations of all iterations.")
        self.w()
        self.w("| where | growth | pause | allocations | p50 | p99 | p99.9 | max | chunks added by allocations | in the background | allocations that waited |")
        self.w("|---|---|---|---|---|---|---|---|---|---|---|")
        rows = []
        for res, where in [(host, "host (long-term pin)"), (verbs, "guest (verbs)")]:
            if not res.present:
                continue
            for name in sorted(res.runs):
                b = res.runs[name]
                mode = "watermark" if "/watermark" in name else "no watermark"
                pause = name.split("pause_us:")[1].split("/")[0] if "pause_us:" in name else "?"
                vals = [b.get(k) for k in ("p50_ns", "p99_ns", "p999_ns", "max_ns")]
                rows.append((where, mode, vals))
                self.w(f"| {where} | {mode} | {pause} us | {int(b.get('allocations', 0))} | "
                       + " | ".join(fmt_ns(v) for v in vals)
                       + f" | {b.get('allocation_growths', 0):g} | {b.get('background_growths', 0):g} | {b.get('growth_waits', 0):g} |")
            for name, msg in res.errors.items():
                self.w(f"| {where} | {name} | error: `{msg}` | | | | | | | | |")
        self.w()
        if rows:
            lines = "".join(f'"{w.split(" ")[0]} {m}" ' + " ".join(f"{v / 1e3:.3f}" for v in vals) + "\n"
                            for w, m, vals in rows)
            body = ['set title "Allocate latency while the pool grows (microseconds, log scale; lower is better)"',
                    'set style data histogram', 'set style histogram cluster gap 1',
                    'set style fill solid 0.8 border -1', 'set logscale y', 'set grid ytics',
                    'set ylabel "us"', 'set bmargin 7', 'set key top left',
                    'plot "latency.dat" using 2:xtic(1) title "p50", "" using 3 title "p99", '
                    '"" using 4 title "p99.9", "" using 5 title "max"']
            self.plot("growth_latency", {"body": "\n".join(body) + "\n"}, {"latency.dat": lines},
                      guest=verbs.present, run=scale)
            for where in {w for w, _, _ in rows}:
                wm = [v for w, m, v in rows if w == where and m == "watermark"]
                nw = [v for w, m, v in rows if w == where and m == "no watermark"]
                if wm and nw:
                    self.targets.append((f"p99.9 of Allocate while the pool grows, {where}", "watermark vs none",
                                         f"{fmt_ns(wm[0][2])} vs {fmt_ns(nw[0][2])}", wm[0][2] < nw[0][2]))
        self.w("**Start-up and trim** (`startup_benchmark`): `Pool::Reserve` of "
               f"{int(start.context.get('total_bytes', '0')) // MIB if start.present else '?'} MiB from an "
               "empty pool (64 MiB chunks, page size required), building chunks on one thread "
               "(sequential) or on one thread per CPU (parallel, `PoolOptions::reserve_threads = 0`), "
               "then `Pool::Trim(0)` giving every chunk back (deregistered, unmapped). GB/s = 10^9 bytes "
               "per second; medians of the repetitions.")
        self.w()
        self.w("| page size | populated | sequential GB/s | parallel GB/s (threads) | parallel / sequential | first chunk after (parallel) | Trim GB/s | VmPin before / after Trim |")
        self.w("|---|---|---|---|---|---|---|---|")
        bars = []
        for page in ["2M", "4K"]:
            for pop in ["populated", "unpopulated"]:
                seq_name = next((n for n in start.runs if f"/{page}/{pop}/sequential" in n), None)
                par_name = next((n for n in start.runs if f"/{page}/{pop}/parallel" in n), None)
                err = next((m for n, m in start.errors.items() if f"/{page}/{pop}/" in n), None)
                if seq_name is None or par_name is None:
                    if err:
                        self.w(f"| {page} | {pop} | error: `{err}` | | | | | |")
                    continue
                seq = start.runs[seq_name]
                par = start.runs[par_name]
                sg, pg = seq["bytes_per_second"] / 1e9, par["bytes_per_second"] / 1e9
                bars.append((f"{page} {pop}", sg, pg))
                self.w(f"| {page} | {pop} | {sg:.2f} | {pg:.2f} ({par.get('threads', 0):g}) | {fmt_ratio(pg / sg)} | "
                       f"{par.get('first_chunk_s', 0) * 1e3:.1f} ms | {par.get('trim_gbps', 0):.1f} | "
                       f"{par.get('vmpin_mib_before_trim', 0):.0f} / {par.get('vmpin_mib_after_trim', 0):.0f} MiB |")
        self.w()
        if bars:
            data = "".join(f'"{n}" {a} {b}\n' for n, a, b in bars)
            body = ['set title "Start-up: GB/s of Pool::Reserve (higher is better)"',
                    'set style data histogram', 'set style histogram cluster gap 1',
                    'set style fill solid 0.8 border -1', 'set grid ytics', 'set ylabel "GB/s"',
                    'set bmargin 7', 'set key top right',
                    'plot "startup.dat" using 2:xtic(1) title "sequential", "" using 3 title "parallel"']
            self.plot("startup", {"body": "\n".join(body) + "\n"}, {"startup.dat": data}, run=scale)

    # --- 4. overhead ----------------------------------------------------------------------------------
    PINNED_BEFORE_ISSUE13 = 1.374  # docs/benchmarks.md at fffccc0, 512 MiB requested

    def overhead(self):
        self.w("## 4. Memory overhead under a mixed-size workload")
        self.w()
        r = Results(os.path.join(self.out, "overhead.json"))
        name = next(iter(r.runs), None)
        if not name:
            self.w("Not measured in this run." + (f" Error: `{next(iter(r.errors.values()))}`" if r.errors else ""))
            self.w()
            return
        b = r.runs[name]
        self.w("One pool (64 MiB chunks, transparent huge pages, the default domain), one thread, fixed seed: "
               "block sizes log-uniform in four bands (60% 16 B-1 KiB, 25% 1-16 KiB, 12% 16-256 KiB, "
               "3% 256 KiB-2 MiB), allocated up to the target of live requested bytes, then 4x as many "
               "random frees each followed by refilling to the target. Measured at the end.")
        self.w()
        req = b["requested"]
        self.w("| quantity | bytes | per byte requested |")
        self.w("|---|---|---|")
        self.w(f"| requested by the live blocks ({int(b['blocks'])} blocks) | {req / MIB:.1f} MiB | 1.000 |")
        rows = [("allocated", "allocated (size classes of live blocks + free blocks in caches)")]
        if "cached" in b:
            rows.append(("cached", "of which free blocks in thread caches and transfer stacks"))
        for key, label in rows + [
                           ("heap_active", "heap active (pages in use for blocks)"),
                           ("mapped", "mapped by the pool (whole chunks)"),
                           ("pinned", "pinned (registered)"),
                           ("metadata", "pool metadata (resident growth outside the chunks; upper bound)")]:
            self.w(f"| {label} | {b[key] / MIB:.1f} MiB | {b[key] / req:.3f} |")
        self.w()
        self.w("Pinned per requested is what a registration cache avoids paying for buffers it never "
               "sees, and what pinpool pays for owning the memory: the heap's size classes and the "
               "free blocks its caches keep ready (allocated / requested), pages held by the heap "
               "but free (heap active / allocated), and whole chunks mapped ahead (mapped / heap "
               "active). Caches never make the pool grow: an allocation that finds no free span "
               "gives back its thread's cache and the transfer stacks before mapping a chunk.")
        self.w()
        pinned = b["pinned"] / req
        self.targets.append(("Memory: bytes pinned per byte requested, mixed workload, no worse than "
                             f"before issue 13 ({self.PINNED_BEFORE_ISSUE13})",
                             f"{req / MIB:.0f} MiB requested",
                             f"{pinned:.3f}", pinned <= self.PINNED_BEFORE_ISSUE13 + 0.0005))

    # --- 5. data path -----------------------------------------------------------------------------
    def wire(self):
        self.w("## 5. Data path: RDMA WRITE throughput (soft-RoCE, in the guest)")
        self.w()
        guest = os.path.join(self.out, "guest")
        rounds = sorted(int(m.group(1)) for f in (os.listdir(guest) if os.path.isdir(guest) else [])
                        for m in [re.match(r"wire-(\d+)\.json$", f)] if m)
        results = [Results(os.path.join(guest, f"wire-{k}.json")) for k in rounds]
        results = [r for r in results if r.present]
        if not results:
            self.w("Not measured in this run (no guest).")
            self.w()
            self.targets.append(("Wire throughput within 5% of ib_write_bw", "", "not measured", None))
            return
        self.w("MiB/s of RDMA WRITE over two loopback RC QPs on rxe0: `pool` writes from a pool block "
               "into a pool block (the block's lkey, the peer block's rkey); `registered_once` does "
               "the same loop between two buffers each registered once with `ibv_reg_mr`; "
               "`ib_write_bw` is perftest, server and client on rxe0 (GID index 1), with the same "
               "message size, tx depth (`-t`) and completion moderation (`-Q`) and a fixed number "
               "of messages (`-n`). The guest ran them in alternating rounds (benchmark, then "
               f"ib_write_bw at each size; {len(results)} rounds); each figure is the median over "
               "the rounds, with the range in brackets. Target: pool within 5% of ib_write_bw.")
        self.w()

        def med(vals):
            vals = sorted(v for v in vals if v)
            if not vals:
                return None, None, None
            n = len(vals)
            m = vals[n // 2] if n % 2 else (vals[n // 2 - 1] + vals[n // 2]) / 2
            return m, vals[0], vals[-1]

        def cell(t):
            m, lo, hi = t
            if m is None:
                return "n/a"
            return f"{m:.1f}" + (f" [{lo:.1f}-{hi:.1f}]" if hi != lo else "")

        self.w("| size | depth | pool MiB/s | registered_once MiB/s | ib_write_bw MiB/s | pool / ib_write_bw | pool / registered_once | within 5% |")
        self.w("|---|---|---|---|---|---|---|---|")
        sizes = sorted({int(n.split("/")[2]) for r in results for n in r.runs if n.startswith("write/pool/")})
        ok_all = True
        n = 0
        worst = None
        cmd = ""
        pts = {"pool": [], "registered_once": [], "ib_write_bw": []}
        for s in sizes:
            name = next(k for r in results for k in r.runs if k.startswith(f"write/pool/{s}/"))
            depth = name.split("/")[3]
            p = med([(r.get(name, "bytes_per_second") or 0) / MIB for r in results])
            o = med([(r.get(name.replace("/pool/", "/registered_once/"), "bytes_per_second") or 0) / MIB
                     for r in results])
            bws = []
            for k in rounds:
                path = os.path.join(guest, f"ib_write_bw-{s}-{k}.txt")
                if not os.path.exists(path):
                    continue
                text = open(path).read()
                m = re.search(r"^\s*%d\s+\d+\s+[\d.]+\s+([\d.]+)" % s, text, re.M)
                if m:
                    bws.append(float(m.group(1)))
                c = re.search(r"^command: (.*)$", text, re.M)
                cmd = c.group(1) if c else cmd
            bw = med(bws)
            ratio = p[0] / bw[0] if p[0] and bw[0] else None
            ok = ratio is not None and ratio >= 0.95
            if ratio is not None:
                n += 1
                ok_all &= ok
                if worst is None or ratio < worst[0]:
                    worst = (ratio, s)
            for k, v in [("pool", p), ("registered_once", o), ("ib_write_bw", bw)]:
                if v[0]:
                    pts[k].append((s, v[0]))
            self.w(f"| {fmt_size(s)} | {depth} | {cell(p)} | {cell(o)} | {cell(bw)} | "
                   f"{fmt_ratio(ratio)} | {fmt_ratio(p[0] / o[0] if p[0] and o[0] else None)} | "
                   f"{'yes' if ok else ('no' if ratio is not None else 'n/a')} |")
        self.w()
        if cmd:
            self.w(f"ib_write_bw client command (largest size): `{cmd}`")
            self.w()
        self.targets.append(("Wire throughput from pool blocks within 5% of ib_write_bw", "every size",
                             f"lowest pool / ib_write_bw {worst[0]:.2f} at {fmt_size(worst[1])}" if worst else "n/a",
                             ok_all if n else None))
        data = {f"wire_{k}.dat": "".join(f"{s} {v}\n" for s, v in v_) for k, v_ in pts.items()}
        body = ['set title "RDMA WRITE throughput on rxe0, medians of the rounds (higher is better)"',
                'set logscale x', 'set xtics ("4K" 4096, "64K" 65536, "1M" 1048576)',
                'set xlabel "message size (bytes)"', 'set ylabel "MiB/s"', 'set yrange [0:*]',
                'set key bottom right', 'set grid', 'set bmargin 6',
                "plot " + ", ".join(f'"wire_{k}.dat" using 1:2 with linespoints lw 2 title "{k}"'
                                    for k in pts if pts[k])]
        self.plot("wire", {"body": "\n".join(body) + "\n"}, data, guest=True)

    # --- 6. remote access ----------------------------------------------------------------------------
    def remote_access(self):
        self.w("## 6. Remote access: per-block grants (soft-RoCE, in the guest)")
        self.w()
        r = Results(os.path.join(self.out, "guest", "remote_access.json"))
        if not r.present:
            self.w("Not measured in this run (no guest).")
            self.w()
            self.targets.append(("Grant + revocation cheaper than per-buffer registration", "", "not measured", None))
            return
        self.w("What it costs to give a peer one block and take it back (`pinpool::VerbsRemoteAccess`, "
               "[remote-access.md](remote-access.md)), on rxe0, medians, `bench/remote_access_benchmark.cc`. "
               "`grant_revoke/window` = `Grant` (a type 2 window bound by a work request on the QP) + "
               "`Revoke` (`IBV_WR_LOCAL_INV`) + its completion; `grant_revoke/region` = `Grant` + `Revoke` "
               "with a region registered over exactly the range; `range_reg` = the same `ibv_reg_mr` + "
               "`ibv_dereg_mr` on pool memory without pinpool; `per_buffer_reg` = malloc + `ibv_reg_mr` + "
               "`ibv_dereg_mr` + free, what a program without a pool pays per buffer. Under emulation "
               "every kernel round trip is slow; on a real NIC a bind or an invalidation is a work request "
               "the adapter executes with no system call, while registration stays a kernel command, so "
               "the ratios there favour windows far more.")
        self.w()
        sizes = sorted({int(n.split("/")[2]) for n in r.runs if n.startswith("grant_revoke/window/")})

        def t(name):
            return r.median_ns(name + "/real_time") or r.median_ns(name)

        rows = [("grant + revoke, window", "grant_revoke/window"), ("grant + revoke, range region", "grant_revoke/region"),
                ("range region register + deregister (no pinpool)", "range_reg"),
                ("malloc + ibv_reg_mr + ibv_dereg_mr + free", "per_buffer_reg")]
        self.w("| operation | " + " | ".join(fmt_size(s) for s in sizes) + " |")
        self.w("|---|" + "---|" * len(sizes))
        for label, key in rows:
            self.w(f"| {label} | " + " | ".join(fmt_ns(t(f"{key}/{s}")) for s in sizes) + " |")
        self.w(f"| window allocate + deallocate (`ibv_alloc_mw` + `ibv_dealloc_mw`; growth only) | {fmt_ns(t('mw_alloc_free'))} (any size) |" + " |" * (len(sizes) - 1))
        self.w(f"| 0-byte SEND_WITH_INV of a window's rkey, to the receive | {fmt_ns(t('send/inv'))} (plain SEND: {fmt_ns(t('send/plain'))}) |" + " |" * (len(sizes) - 1))
        self.w()
        self.w("| size | per-buffer / window grant | per-buffer / region grant | window cheaper | region cheaper |")
        self.w("|---|---|---|---|---|")
        ok_w = ok_r = True
        n = 0
        worst_w = worst_r = None
        for s in sizes:
            pb, gw, gr = t(f"per_buffer_reg/{s}"), t(f"grant_revoke/window/{s}"), t(f"grant_revoke/region/{s}")
            if not (pb and gw and gr):
                continue
            n += 1
            ok_w &= gw < pb
            ok_r &= gr < pb
            if worst_w is None or pb / gw < worst_w[0]:
                worst_w = (pb / gw, s)
            if worst_r is None or pb / gr < worst_r[0]:
                worst_r = (pb / gr, s)
            self.w(f"| {fmt_size(s)} | {fmt_ratio(pb / gw)} | {fmt_ratio(pb / gr)} | {'yes' if gw < pb else 'no'} | {'yes' if gr < pb else 'no'} |")
        self.w()
        self.targets.append(("Window grant + revocation cheaper than per-buffer registration (rxe)", "every size 4 KiB-4 MiB",
                             f"per-buffer / grant at least {worst_w[0]:.2f}x ({fmt_size(worst_w[1])})" if worst_w else "n/a",
                             ok_w if n else None))
        self.targets.append(("Range-region grant + revocation cheaper than per-buffer registration (rxe)", "every size 4 KiB-4 MiB",
                             f"per-buffer / grant at least {worst_r[0]:.2f}x ({fmt_size(worst_r[1])})" if worst_r else "n/a",
                             ok_r if n else None))

        self.w("Request loop: the peer RDMA WRITEs the block and sends a 0-byte \"done\" message the server "
               "receives. `chunk_wide` uses the chunk's rkey (`VerbsAccess::trusted_whole_chunk`: nothing per "
               "request, and the whole chunk exposed); `window_send_inv` grants a window and the peer's \"done\" "
               "is a SEND_WITH_INV of its rkey (the revocation rides on a message the protocol sends anyway); "
               "`window_local_inv` grants a window and revokes it with `IBV_WR_LOCAL_INV` after \"done\"; "
               "`region` grants and revokes a range region. Time per request, and its ratio to `chunk_wide`.")
        self.w()
        loops = ["chunk_wide", "window_send_inv", "window_local_inv", "region"]
        self.w("| size | " + " | ".join(loops) + " | window_send_inv / chunk_wide | window_local_inv / chunk_wide | region / chunk_wide | target (send_inv) |")
        self.w("|---|" + "---|" * (len(loops) + 4))
        ok_loop = True
        n = 0
        worst = None
        for s in sizes:
            v = {l: t(f"request/{l}/{s}") for l in loops}
            base = v["chunk_wide"]
            if not base or not v["window_send_inv"]:
                continue
            n += 1
            limit = 1.25 if s < 65536 else 1.05
            ratio = v["window_send_inv"] / base
            ok = ratio <= limit
            ok_loop &= ok
            if worst is None or ratio / limit > worst[0] / worst[2]:
                worst = (ratio, s, limit)
            cells = " | ".join(fmt_ns(v[l]) for l in loops)
            rl = v["window_local_inv"] / base if v["window_local_inv"] else None
            rr = v["region"] / base if v["region"] else None
            self.w(f"| {fmt_size(s)} | {cells} | {fmt_ratio(ratio)} | {fmt_ratio(rl)} | {fmt_ratio(rr)} | ≤ {limit} {'met' if ok else 'missed'} |")
        self.w()
        self.targets.append(("Window request loop with SEND_WITH_INV within 1.25x of chunk-wide keys at 4 KiB, 1.05x from 64 KiB",
                             "4 KiB-4 MiB",
                             f"worst {worst[0]:.2f}x at {fmt_size(worst[1])} (limit {worst[2]})" if worst else "n/a",
                             ok_loop if n else None))

    # --- 7. UCX and libfabric domains ---------------------------------------------------------------
    def engines(self):
        """A put through UCX and through libfabric from a pool block vs the engines' own ways of
        getting a buffer ready (bench/engines_benchmark.cc; guest files engines.json and
        engines_nocache.json). Self-contained: tables of medians and ratios, no figure."""
        self.w("## 7. Through UCX and libfabric: a put from a pool block (soft-RoCE, in the guest)")
        self.w()
        r = Results(os.path.join(self.out, "guest", "engines.json"))
        nc = Results(os.path.join(self.out, "guest", "engines_nocache.json"))
        if not r.present:
            self.w("Not measured in this run (no guest, or no engines_benchmark: it needs libucx-dev "
                   "and libfabric-dev).")
            self.w()
            return
        ctx = r.context
        self.w("Time to get a buffer ready, fill it and have its bytes at the target (one put from one "
               "worker or endpoint to another over rxe0, completed at the target before the next), "
               "medians, `bench/engines_benchmark.cc`. UCX (`UCX_TLS=rc`, rc_verbs): `pool` = pinpool "
               "`Allocate` + `UcxPut` passing the chunk's memory handle + flush + `Deallocate` (the chunk "
               "was mapped once by `pinpool::UcxDomain`); `map_each` = malloc + `ucp_mem_map` + put + "
               "flush + `ucp_mem_unmap` + free with UCX's registration caches off; `cache_fresh` = a "
               "freshly mmapped buffer put without a memory handle, UCX's caches on (its default), then "
               "munmap; `cache_reused` = the same buffer every time (the cache's best case, for "
               "reference). libfabric (`verbs;ofi_rxm`): `pool` = `Allocate` + `fi_writemsg` with the "
               "chunk's descriptor + completion + `Deallocate`; `reg_each` = a fresh buffer + `fi_mr_reg` "
               "+ write + completion + `fi_close` + munmap, with the verbs provider's registration cache "
               "off (`FI_MR_CACHE_MAX_COUNT=0`, a second process) and on. Every variant fills the buffer. "
               "Ratios are the alternative's time over the pool's: above 1, the pool is faster. Under "
               "TCG the data copy in the emulated device dominates large puts; on a real NIC "
               "registration costs the same kernel work while the transfer itself gets much cheaper.")
        self.w()
        self.w(f"UCX: {ctx.get('ucx', '?')} · libfabric: {ctx.get('libfabric', '?')} "
               f"(domain `{ctx.get('libfabric_domain', '?')}`)")
        self.w()

        def t(res, name):
            return res.median_ns(name)

        sizes = sorted({int(n.split("/")[2]) for n in r.runs if n.startswith("ucx/pool/")} |
                       {int(n.split("/")[2]) for n in r.runs if n.startswith("fabric/pool/")})

        def ratio(a, b):
            return fmt_ratio(a / b) if a and b else "n/a"

        ucx = ["pool", "map_each", "cache_fresh", "cache_reused"]
        self.w("**UCX** (time per put)")
        self.w()
        self.w("| size | " + " | ".join(ucx) + " | map_each / pool | cache_fresh / pool | cache_reused / pool |")
        self.w("|---|" + "---|" * (len(ucx) + 3))
        for size in sizes:
            v = {m: t(r, f"ucx/{m}/{size}") for m in ucx}
            self.w(f"| {fmt_size(size)} | " + " | ".join(fmt_ns(v[m]) for m in ucx)
                   + f" | {ratio(v['map_each'], v['pool'])} | {ratio(v['cache_fresh'], v['pool'])}"
                   f" | {ratio(v['cache_reused'], v['pool'])} |")
        self.w()
        self.w("**libfabric** (time per write)")
        self.w()
        self.w("| size | pool | reg_each, cache off | reg_each, cache on | cache off / pool | cache on / pool |")
        self.w("|---|---|---|---|---|---|")
        for size in sizes:
            p = t(r, f"fabric/pool/{size}")
            off = t(nc, f"fabric/reg_each_nocache/{size}")
            on = t(r, f"fabric/reg_each_cache/{size}")
            self.w(f"| {fmt_size(size)} | {fmt_ns(p)} | {fmt_ns(off)} | {fmt_ns(on)} | {ratio(off, p)} | {ratio(on, p)} |")
        self.w()
        errors = dict(r.errors, **nc.errors)
        if errors:
            self.w("Benchmarks that reported an error: " +
                   "; ".join(f"`{k}`: {v}" for k, v in sorted(errors.items())))
            self.w()

    # --- the page -----------------------------------------------------------------------------------
    def write(self):
        body_start = len(self.lines)
        self.alloc()
        self.rdma_ready()
        self.growth()
        self.overhead()
        self.wire()
        self.remote_access()
        self.engines()
        self.growth_at_scale()
        body = self.lines[body_start:]
        self.lines = self.lines[:body_start]
        m = self.machine
        self.w("# Benchmarks: pinpool against the alternatives")
        self.w()
        self.w("<!-- Generated by scripts/run-benchmarks.sh (bench/report.py): do not edit by hand; "
               "edit bench/benchmarks-notes.md for the last section. -->")
        self.w()
        self.w(f"Every figure below was measured by `{self.args.command}` in one run on "
               f"{m.get('date', '?')}, commit `{m.get('commit', '?')}`"
               + (f" (with {m.get('dirty')} uncommitted changes under src/ include/ bench/)" if m.get('dirty', '0') not in ('0', '') else "")
               + ". Each comparison's figures come from one process (or one guest boot), minutes apart.")
        self.w()
        self.w("| | |")
        self.w("|---|---|")
        self.w(f"| host | {self.machine_line()} |")
        self.w(f"| transparent huge pages | `{m.get('thp', '?')}` |")
        if self.guest:
            self.w(f"| RDMA device | {self.machine_line(guest=True).split(' on ')[0]} |")
        pk = ", ".join(f"{k[4:]} {v}" for k, v in m.items() if k.startswith("pkg_"))
        self.w(f"| packages | {pk} |")
        loads = os.path.join(self.out, "load.txt")
        if os.path.exists(loads):
            self.w("| load average (1/5/15 min) | " + "; ".join(l.strip() for l in open(loads)) + " |")
        if m.get("quick") == "quick":
            self.w("| mode | **--quick**: too short to quote |")
        self.w()
        self.w("## Targets")
        self.w()
        self.w("| target | over | result | |")
        self.w("|---|---|---|---|")
        for what, over, result, ok in self.targets:
            self.w(f"| {what} | {over} | {result} | {verdict(ok)} |")
        self.w()
        self.lines += body
        notes = os.path.join(os.path.dirname(os.path.abspath(__file__)), "benchmarks-notes.md")
        if os.path.exists(notes):
            self.lines += open(notes).read().rstrip("\n").split("\n")
            self.w()
        with open(self.args.markdown, "w") as f:
            f.write("\n".join(self.lines).rstrip("\n") + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--command", required=True)
    ap.add_argument("--markdown", required=True)
    ap.add_argument("--figures", required=True)
    Page(ap.parse_args()).write()


if __name__ == "__main__":
    main()
