"""12. Third-party programs: mimalloc-bench's programs, unmodified, with malloc routed to one pool
by the preload shim, against glibc, tcmalloc and mimalloc (third_party.md: the table
bench/third-party.sh prints).

write(doc) appends the section to the page (a common.Page) and its targets to the Targets table (doc.target)."""
import os
import re

BOUND = 1.25  # bench/third-party.sh's `≤ 1.25x` column


def write(doc):
    doc.section("12. Third-party programs through the preload shim")
    path = os.path.join(doc.out, "third_party.md")
    target = f"Third-party programs: pinpool within {BOUND}x of the fastest of glibc, tcmalloc, mimalloc"
    if not os.path.exists(path):
        return doc.not_measured(target=target, part="third_party")
    doc.measured("third_party")
    lines = open(path).read().splitlines()
    doc.w("mimalloc-bench's programs (larson, xmalloc-test, alloc-test, glibc-bench's "
          "bench-malloc-simple and bench-malloc-thread, mstress, cache-thrash, cache-scratch), "
          "built unmodified from that project's source by `bench/third-party.sh build`, run by "
          "`bench/third-party.sh` with malloc routed to glibc, tcmalloc, mimalloc and to one pool "
          "(the preload shim, a benchmark device: [preload-shim.md](preload-shim.md)), interleaved. "
          "Every run is checked (exit status, the program's completion line); a failed one shows "
          "FAIL. " + " ".join(l.strip() for l in lines if l.strip() and not l.startswith("|")))
    doc.w()
    table = [l for l in lines if l.startswith("|")]
    doc.lines += table
    doc.w()
    met = total = 0
    worst = None
    for line in table[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        m = re.match(r"([\d.]+)x \((\w+)\)", cells[-2]) if len(cells) >= 2 else None
        if not m:
            continue
        ratio = float(m.group(1))
        total += 1
        met += ratio <= BOUND
        if worst is None or ratio > worst[0]:
            worst = (ratio, f"{cells[0]}, {cells[2]} thread{'s' if cells[2] != '1' else ''}",
                     m.group(2))
    doc.target(target, "each program, 1 and 2 threads",
               f"{met} of {total}" + (f"; worst {worst[0]:.2f}x ({worst[1]}, vs {worst[2]})" if worst else ""),
               met == total if total else None)
