"""9. io_uring: one pool on many rings, cloned or registered per ring, and zero-copy sends against
copying ones (io_uring_rings.json, io_uring_zero_copy.json).

write(doc) appends the section to the page (a common.Page) and its targets to the Targets table (doc.target)."""
import os
import re

from report_sections.common import MIB, Results, fmt_ns, fmt_ratio, fmt_size

# Pinned and memlock bytes of a cloned registration may exceed the pool's by this fraction (a
# ring's own pages) and still count as one pin.
ONE_PIN_SLACK = 0.01


def write(doc):
    doc.section("9. io_uring: one pool on many rings, and zero-copy sends")
    rings = Results(os.path.join(doc.out, "io_uring_rings.json"))
    zc = Results(os.path.join(doc.out, "io_uring_zero_copy.json"))
    target = "io_uring: one pin for a pool on 1-16 rings where the kernel clones registrations"
    if not rings.present and not zc.present:
        return doc.not_measured("; ".join(doc.skipped[p] for p in ("io_uring_rings", "io_uring_zero_copy")
                                          if p in doc.skipped), target=target)
    if rings.present:
        write_rings(doc, rings, target)
    else:
        doc.not_measured(target=target, part="io_uring_rings")
    if zc.present:
        write_zero_copy(doc, zc)
    else:
        doc.not_measured(part="io_uring_zero_copy")


def write_rings(doc, r, target):
    doc.measured("io_uring_rings")
    pool = int(r.context.get("pool_bytes", "0"))
    clones = r.context.get("kernel_clones_ranges", "?")
    doc.w("One pool on 1, 2, 4, 8 and 16 of the application's rings (`IoUringDomain`, "
          f"`io_uring_rings_benchmark`{doc.link('io_uring.md')}): {pool // MIB} MiB of 4 KiB pages in chunks of at "
          "most 256 MiB, registered into every ring either **cloned** from the domain's own ring "
          "(`IORING_REGISTER_CLONE_BUFFERS`, where the kernel can: Linux 6.13 and later; this "
          f"kernel: {'can' if clones == 'yes' else 'cannot'}) or **per ring** (each ring registers "
          "every chunk itself: `IoUringDomainOptions::clone = false`, what older kernels do). "
          "`join` = the pool registered in the domain's ring first, then `AddRing` of the other "
          "rings, time per ring; `grow` = the rings joined first, then `Reserve` of the whole "
          "pool (map, populate, register into every ring), GB/s of pool. Pinned = the process's "
          "VmPin growth with the pool on every ring; memlock = what the domain charged "
          "(`IoUringDomainFigures::kMemlockBytes`). Medians of the repetitions. Target: cloned, "
          "both stay the pool's size whatever the number of rings.")
    doc.w()
    cases = {}
    for name in r.runs:
        m = re.match(r"(join|grow)/(clone|per_ring)/rings:(\d+)/", name)
        if m:
            cases[(m.group(1), m.group(2), int(m.group(3)))] = r.runs[name]
    counts = sorted({k[2] for k in cases})
    modes = [("clone", "cloned"), ("per_ring", "per ring")]

    def cell(kind, mode, n, what):
        b = cases.get((kind, mode, n))
        if b is None:
            return "n/a"
        if what == "join":
            return "-" if n == 1 else fmt_ns(b.get("ms_per_ring", 0) * 1e6)
        if what == "grow":
            return f"{b.get('bytes_per_second', 0) / 1e9:.2f}"
        v = b.get(what)
        return "n/a" if v is None else f"{v / MIB:.0f} MiB ({v / pool:.2f}x)" if pool else f"{v / MIB:.0f} MiB"

    doc.w("| rings | join, cloned (per ring) | join, per ring (per ring) | grow, cloned GB/s | grow, per ring GB/s | pinned, cloned | pinned, per ring | memlock, cloned | memlock, per ring |")
    doc.w("|---|---|---|---|---|---|---|---|---|")
    for n in counts:
        doc.w(f"| {n} | " + " | ".join(
            [cell("join", m, n, "join") for m, _ in modes]
            + [cell("grow", m, n, "grow") for m, _ in modes]
            + [cell("join", m, n, "pinned_bytes") for m, _ in modes]
            + [cell("join", m, n, "memlock_bytes") for m, _ in modes]) + " |")
    doc.w()
    if r.errors:
        doc.w("Cases that reported an error: "
              + "; ".join(f"`{k}`: {v}" for k, v in sorted(r.errors.items())))
        doc.w()
    cloned = [b for (kind, mode, n), b in cases.items() if mode == "clone"]
    if not cloned or not pool:
        doc.target(target, "1-16 rings", "not measured (this kernel cannot clone)" if clones == "no"
                   else "not measured", None)
        return
    worst = max(max(b.get("pinned_bytes", 0), b.get("memlock_bytes", 0)) for b in cloned) / pool
    doc.target(target, f"1-16 rings, a {pool // MIB} MiB pool",
               f"largest pinned or memlock, cloned: {worst:.2f}x the pool",
               worst <= 1 + ONE_PIN_SLACK)


def write_zero_copy(doc, r):
    doc.measured("io_uring_zero_copy")
    doc.w("Sending a pool block over loopback TCP (`IoUringZeroCopy`, "
          "`io_uring_zero_copy_benchmark`): each send allocates a block, writes its first "
          "and last byte, sends it and waits for the send's completion; a thread reads and "
          "discards on the other end. **zero-copy** = `IORING_OP_SEND_ZC` from the block's fixed "
          "buffer, the block freed at the first completion and held by the pool until the "
          "kernel's notification; **copying** = `IORING_OP_SEND` of the same block. Medians of "
          "the repetitions. Held = sends whose block was still waiting for its notification when "
          "it was freed (per send).")
    doc.w()
    sizes = sorted({int(m.group(1)) for n in r.runs for m in [re.match(r"send/zero_copy/(\d+)", n)] if m})
    doc.w("| size | zero-copy GB/s | copying GB/s | zero-copy / copying | zero-copy µs per send | copying µs per send | held |")
    doc.w("|---|---|---|---|---|---|---|")
    for s in sizes:
        z = next((b for n, b in r.runs.items() if n.startswith(f"send/zero_copy/{s}/")), {})
        c = next((b for n, b in r.runs.items() if n.startswith(f"send/copy/{s}/")), {})
        zb, cb = z.get("bytes_per_second"), c.get("bytes_per_second")
        zt = r.median_ns(f"send/zero_copy/{s}/real_time")
        ct = r.median_ns(f"send/copy/{s}/real_time")
        doc.w(f"| {fmt_size(s)} | {zb / 1e9 if zb else 0:.2f} | {cb / 1e9 if cb else 0:.2f} | "
              f"{fmt_ratio(zb / cb if zb and cb else None)} | {fmt_ratio(zt / 1e3 if zt else None, 1)} | "
              f"{fmt_ratio(ct / 1e3 if ct else None, 1)} | {fmt_ratio(z.get('deferred_frees'))} |")
    doc.w()
    if r.errors:
        doc.w("Cases that reported an error: "
              + "; ".join(f"`{k}`: {v}" for k, v in sorted(r.errors.items())))
        doc.w()
