"""8. Growth at scale: allocation latency while the pool grows, and start-up GB/s
(growth_latency_*.json, startup_host.json).

write(doc) appends the section to the page (a common.Page) and its targets to the Targets table (doc.target)."""
import os
import re

from report_sections.common import MIB, Results, fmt_ns, fmt_ratio


def write(doc):
    """Growth off the allocation path (low watermark vs none), parallel start-up, trim."""
    doc.section("8. Growth at scale: off the allocation path, parallel start-up, trim")
    host = Results(os.path.join(doc.out, "growth_latency_host.json"))
    verbs = Results(os.path.join(doc.out, "guest", "growth_latency_verbs.json"))
    start = Results(os.path.join(doc.out, "startup_host.json"))
    if not (host.present or verbs.present or start.present):
        return doc.not_measured()
    doc.measured("scale")
    if verbs.present:
        doc.measured("guest", guest=True)
    doc.w("**Allocation latency while the pool grows** (`growth_latency_benchmark`): a pool of 16 MiB "
           "chunks (4 KiB pages, populated) starts with one chunk; one thread allocates 64 KiB blocks, "
           "one per `pause_us` of busy work, until the chunks asked for are live, timing every "
           "`Allocate` (steady_clock). With a low watermark of two chunks the pool's thread adds chunks "
           "in the background; without one, the allocation that finds no room maps, populates and "
           "registers the next chunk itself. Domain: the default long-term pin on the host, verbs "
           "(rxe0, `ibv_reg_mr`) in the guest. Percentiles over all allocations of all iterations.")
    doc.w()
    doc.w("| where | growth | pause | allocations | p50 | p99 | p99.9 | max | chunks added by allocations | in the background | allocations that waited |")
    doc.w("|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for res, where in [(host, "host (long-term pin)"), (verbs, "guest (verbs)")]:
        if not res.present:
            continue
        for name in sorted(n for n in res.runs if n.startswith("grow_under_load/")):
            b = res.runs[name]
            mode = "watermark" if "/watermark" in name else "no watermark"
            pause = name.split("pause_us:")[1].split("/")[0] if "pause_us:" in name else "?"
            vals = [b.get(k) for k in ("p50_ns", "p99_ns", "p999_ns", "max_ns")]
            rows.append((where, mode, vals))
            doc.w(f"| {where} | {mode} | {pause} us | {int(b.get('allocations', 0))} | "
                   + " | ".join(fmt_ns(v) for v in vals)
                   + f" | {b.get('allocation_growths', 0):g} | {b.get('background_growths', 0):g} | {b.get('growth_waits', 0):g} |")
        for name, msg in res.errors.items():
            doc.w(f"| {where} | {name} | error: `{msg}` | | | | | | | | |")
    doc.w()
    steady = [(n, b) for n, b in sorted(host.runs.items(), key=lambda x: steady_key(x[0]))
              if n.startswith("steady_rate/")] if host.present else []
    if steady:
        doc.w("**A steady allocation rate** (`growth_latency_benchmark`, `steady_rate`): the case a new "
              "user meets. 32 MiB chunks of the default page size, `initial_size` 64 MiB, "
              "`low_watermark` 96 MiB, `background_workers` W; one thread allocates 1 MiB blocks on a "
              "fixed schedule of R MB/s (a late allocation does not push the next ones back) until "
              f"{steady_mib(doc)} are live. Waits = allocations that waited for a chunk in flight, per "
              "pool; behind = how far the schedule slipped; preempted = allocations during which the "
              "thread was switched out (the pool's workers share the CPUs); a chunk's build and "
              "Register's share of it, means.")
        doc.w()
        doc.w("| rate MB/s | workers | p50 | p99 | max | waits | growths by an allocation | behind | preempted | chunk build | of which Register |")
        doc.w("|---|---|---|---|---|---|---|---|---|---|---|")
        for name, b in steady:
            rate, workers = steady_key(name)
            doc.w(f"| {rate} | {workers} | " + " | ".join(fmt_ns(b.get(k)) for k in ("p50_ns", "p99_ns", "max_ns"))
                  + f" | {b.get('growth_waits', 0):.1f} | {b.get('allocation_growths', 0):.1f} | "
                  f"{b.get('behind_ms', 0):.1f} ms | {b.get('preempted', 0):.1f} | "
                  f"{b.get('chunk_build_ms', 0):.1f} ms | {b.get('register_ms', 0):.2f} ms |")
        doc.w()
    if rows:
        lines = "".join(f'"{w.split(" ")[0]} {m}" ' + " ".join(f"{v / 1e3:.3f}" for v in vals) + "\n"
                        for w, m, vals in rows)
        body = ['set title "Allocate latency while the pool grows (microseconds, log scale; lower is better)"',
                'set style data histogram', 'set style histogram cluster gap 1',
                'set style fill solid 0.8 border -1', 'set logscale y', 'set grid ytics',
                'set ylabel "us"', 'set bmargin 7', 'set key top left',
                'plot "latency.dat" using 2:xtic(1) title "p50", "" using 3 title "p99", '
                '"" using 4 title "p99.9", "" using 5 title "max"']
        doc.plot("growth_latency", {"body": "\n".join(body) + "\n"}, {"latency.dat": lines},
                  guest=verbs.present)
        for where in {w for w, _, _ in rows}:
            wm = [v for w, m, v in rows if w == where and m == "watermark"]
            nw = [v for w, m, v in rows if w == where and m == "no watermark"]
            if wm and nw:
                doc.target(f"p99.9 of Allocate while the pool grows, {where}", "watermark vs none",
                                     f"{fmt_ns(wm[0][2])} vs {fmt_ns(nw[0][2])}", wm[0][2] < nw[0][2])
    doc.w("**Start-up and trim** (`startup_benchmark`): `Pool::Reserve` of "
           f"{int(start.context.get('total_bytes', '0')) // MIB if start.present else '?'} MiB from an "
           "empty pool (64 MiB chunks, page size required), building chunks on one thread "
           "(sequential) or on one thread per CPU (parallel, `PoolOptions::reserve_threads = 0`), "
           "then `Pool::Trim(0)` giving every chunk back (deregistered, unmapped). GB/s = 10^9 bytes "
           "per second; medians of the repetitions.")
    doc.w()
    doc.w("| page size | populated | sequential GB/s | parallel GB/s (threads) | parallel / sequential | first chunk after (parallel) | Trim GB/s | VmPin before / after Trim |")
    doc.w("|---|---|---|---|---|---|---|---|")
    bars = []
    for page in ["2M", "4K"]:
        for pop in ["populated", "unpopulated"]:
            seq_name = next((n for n in start.runs if f"/{page}/{pop}/sequential" in n), None)
            par_name = next((n for n in start.runs if f"/{page}/{pop}/parallel" in n), None)
            err = next((m for n, m in start.errors.items() if f"/{page}/{pop}/" in n), None)
            if seq_name is None or par_name is None:
                if err:
                    doc.w(f"| {page} | {pop} | error: `{err}` | | | | | |")
                continue
            seq = start.runs[seq_name]
            par = start.runs[par_name]
            sg, pg = seq["bytes_per_second"] / 1e9, par["bytes_per_second"] / 1e9
            bars.append((f"{page} {pop}", sg, pg))
            doc.w(f"| {page} | {pop} | {sg:.2f} | {pg:.2f} ({par.get('threads', 0):g}) | {fmt_ratio(pg / sg)} | "
                   f"{first_chunk(par)} | {par.get('trim_gbps', 0):.1f} | "
                   f"{par.get('vmpin_mib_before_trim', 0):.0f} / {par.get('vmpin_mib_after_trim', 0):.0f} MiB |")
    doc.w()
    if bars:
        data = "".join(f'"{n}" {a} {b}\n' for n, a, b in bars)
        body = ['set title "Start-up: GB/s of Pool::Reserve (higher is better)"',
                'set style data histogram', 'set style histogram cluster gap 1',
                'set style fill solid 0.8 border -1', 'set grid ytics', 'set ylabel "GB/s"',
                'set bmargin 7', 'set key top right',
                'plot "startup.dat" using 2:xtic(1) title "sequential", "" using 3 title "parallel"']
        doc.plot("startup", {"body": "\n".join(body) + "\n"}, {"startup.dat": data})


def steady_key(name):
    """(rate in MB/s, workers) of a steady_rate benchmark's name."""
    def arg(key):
        m = re.search(key + r":(\d+)", name)
        return int(m.group(1)) if m else 0
    return arg("rate_mbps"), arg("workers")


def steady_mib(doc):
    mib = doc.machine.get("steady_mib")
    return f"{mib} MiB" if mib else "800 MiB (the benchmark's default)"


def first_chunk(run):
    """Seconds to the first chunk, as the benchmark reports them (negative: not measured)."""
    v = run.get("first_chunk_s", -1)
    return f"{v * 1e3:.1f} ms" if v >= 0 else "n/a"
