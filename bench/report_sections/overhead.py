"""4. Memory overhead under a mixed-size workload (overhead.json).

write(doc) appends the section to the page (a common.Page) and its targets to the Targets table (doc.target)."""
import os

from report_sections.common import MIB, Results


# Bytes pinned per byte requested by the jemalloc heap pinpool's own heap replaced, on this
# workload at 512 MiB (docs/benchmarks.md as generated at commit fffccc0): the bound the target keeps.
PINNED_JEMALLOC_HEAP = 1.374

def write(doc):
    doc.section("4. Memory overhead under a mixed-size workload")
    r = Results(os.path.join(doc.out, "overhead.json"))
    name = next(iter(r.runs), None)
    if not name:
        return doc.not_measured(f"error: `{next(iter(r.errors.values()))}`" if r.errors else "",
                                target="Memory: bytes pinned per byte requested")
    doc.measured("overhead")
    b = r.runs[name]
    doc.w("One pool (64 MiB chunks, transparent huge pages, the default domain), one thread, fixed seed: "
           "block sizes log-uniform in four bands (60% 16 B-1 KiB, 25% 1-16 KiB, 12% 16-256 KiB, "
           "3% 256 KiB-2 MiB), allocated up to the target of live requested bytes, then 4x as many "
           "random frees each followed by refilling to the target. Measured at the end.")
    doc.w()
    req = b["requested"]
    doc.w("| quantity | bytes | per byte requested |")
    doc.w("|---|---|---|")
    doc.w(f"| requested by the live blocks ({int(b['blocks'])} blocks) | {req / MIB:.1f} MiB | 1.000 |")
    rows = [("allocated", "allocated (size classes of live blocks + free blocks in caches)")]
    if "cached" in b:
        rows.append(("cached", "of which free blocks in thread caches and transfer stacks"))
    for key, label in rows + [
                       ("heap_active", "heap active (pages in use for blocks)"),
                       ("mapped", "mapped by the pool (whole chunks)"),
                       ("pinned", "pinned (registered)"),
                       ("metadata", "pool metadata (resident growth outside the chunks; upper bound)")]:
        doc.w(f"| {label} | {b[key] / MIB:.1f} MiB | {b[key] / req:.3f} |")
    doc.w()
    doc.w("Pinned per requested is what a registration cache avoids paying for buffers it never "
           "sees, and what pinpool pays for owning the memory: the heap's size classes and the "
           "free blocks its caches keep ready (allocated / requested), pages held by the heap "
           "but free (heap active / allocated), and whole chunks mapped ahead (mapped / heap "
           "active). Caches never make the pool grow: an allocation that finds no free span "
           "gives back its thread's cache and the transfer stacks before mapping a chunk.")
    doc.w()
    pinned = b["pinned"] / req
    doc.target("Memory: bytes pinned per byte requested, mixed workload, no worse than "
                         f"the jemalloc heap pinpool's own replaced ({PINNED_JEMALLOC_HEAP})",
                         f"{req / MIB:.0f} MiB requested",
                         f"{pinned:.3f}", pinned <= PINNED_JEMALLOC_HEAP + 0.0005)
