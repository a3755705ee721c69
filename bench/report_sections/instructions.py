"""11. Instructions per allocate + free pair, counted by callgrind (instruction_counts.md: the
table bench/instruction-counts.sh prints).

write(doc) appends the section to the page (a common.Page) and its targets to the Targets table (doc.target)."""
import os
import re

# The target: each pinpool form within this factor of tcmalloc's count (sized to sized, by
# address and the C API to by address), at every size.
BOUND = 1.25
RATIOS = {"sized / tc sized": "sized", "address / tc address": "by address",
          "c / tc address": "C API", "block / tc sized": "`Deallocate(Block)`"}


def write(doc):
    doc.section("11. Instructions per allocate + free pair")
    path = os.path.join(doc.out, "instruction_counts.md")
    target = f"Instructions per pair: every pinpool form within {BOUND}x of tcmalloc's"
    if not os.path.exists(path):
        return doc.not_measured(target=target, part="counts")
    doc.measured("counts")
    lines = open(path).read().splitlines()
    table = [l for l in lines if l.startswith("|")]
    rest = [l for l in lines if l.strip() and not l.startswith("|")]
    doc.w("Counted by valgrind's callgrind, which counts exactly whatever the load "
          "(`bench/instruction-counts.sh`; what each instruction is for: "
          "[instruction-counts.md](instruction-counts.md)). Columns: `pinpool/block` = "
          "`Allocate(n)` + `Deallocate(Block)`, `sized` = `Allocate(n).data()` + "
          "`Deallocate(p, n)`, `address` = the same + `Deallocate(p)`, `c` = `pinpool_malloc` + "
          "`pinpool_free`; `classes/*` = a pool with named buffer classes ([classes.md](classes.md)); "
          "tcmalloc is gperftools', mimalloc and glibc Debian's, each called as a program would. "
          "The last row is a step of the small window (a free and an allocation)."
          + (f" The script: *{' '.join(rest)}*." if rest else ""))
    doc.w()
    doc.lines += table
    doc.w()
    header = [c.strip() for c in table[0].strip("|").split("|")] if table else []
    worst = None
    n = 0
    for line in table[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        row = dict(zip(header, cells))
        for col, form in RATIOS.items():
            v = row.get(col, "-")
            if not re.match(r"^[\d.]+$", v):
                continue
            n += 1
            if worst is None or float(v) > worst[0]:
                worst = (float(v), form, row.get("size", "?"))
    doc.target(target, "sized, by address, C API, `Deallocate(Block)`; 64 B-64 KiB and the small window",
               f"worst {worst[0]:.2f}x ({worst[1]}, {worst[2]})" if worst else "n/a",
               worst[0] <= BOUND if worst else None)
