"""10. Python: allocation from Python against numpy and torch, DLPack, pinned bytes per requested
byte, and PyTorch's DataLoader filling pool blocks (python_alloc.json, python_dataloader.txt: the
Python package's alloc_benchmark.py --json and dataloader_benchmark.py's table).

write(doc) appends the section to the page (a common.Page) and its targets to the Targets table (doc.target)."""
import json
import os
import re

from report_sections.common import MIB, fmt_ratio

# The goals alloc_benchmark.py states (the Python package's page, "Speed and waste").
NUMPY_BOUND = 2.0
WASTE_BOUND = 1.125


def write(doc):
    doc.section("10. Python: allocation, DLPack, waste, a DataLoader")
    alloc_path = os.path.join(doc.out, "python_alloc.json")
    loader_path = os.path.join(doc.out, "python_dataloader.txt")
    targets = [f"Python: allocate + free of a 4 KiB block within {NUMPY_BOUND}x of numpy.empty",
               "Python: allocate + free of a 4 KiB block faster than torch.empty",
               f"Python: pinned bytes per requested byte at most {WASTE_BOUND}"]
    if not os.path.exists(alloc_path) and not os.path.exists(loader_path):
        doc.not_measured(part="python")
        for t in targets:
            doc.target(t, "", "not measured", None)
        return
    doc.measured("python")
    if os.path.exists(alloc_path):
        write_alloc(doc, json.load(open(alloc_path)), targets)
    else:
        doc.w("`alloc_benchmark.py`: no results in this run.")
        doc.w()
    if os.path.exists(loader_path):
        write_loader(doc, open(loader_path).read())


def write_alloc(doc, res, targets):
    doc.w(f"`alloc_benchmark.py` of the Python package{doc.link('python.md')}, one thread: allocate + free "
          "of a 4 KiB block from Python (the block dropped, `free()`, a `with`) against "
          "`numpy.empty(4096, dtype=uint8)` and `torch.empty(4096, dtype=torch.uint8)`, medians of "
          "`timeit` repeats in ns per call.")
    doc.w()
    speed = res.get("speed_ns", {})
    numpy_ns = next((v for k, v in speed.items() if k.startswith("numpy.empty")), None)
    torch_ns = next((v for k, v in speed.items() if k.startswith("torch.empty")), None)
    doc.w("| 4 KiB, one thread | ns | / numpy.empty | / torch.empty |")
    doc.w("|---|---|---|---|")
    for name, ns in speed.items():
        doc.w(f"| `{name}` | {ns:.0f} | {fmt_ratio(ns / numpy_ns if numpy_ns else None)} | "
              f"{fmt_ratio(ns / torch_ns if torch_ns else None)} |")
    doc.w()
    ours = {k: v for k, v in speed.items() if k.startswith(("pool.", "with pool."))}
    if ours and numpy_ns and torch_ns:
        worst_name = max(ours, key=ours.get)
        worst = ours[worst_name]
        doc.target(targets[0], "the block dropped, `free()`, a `with`",
                   f"worst {worst / numpy_ns:.2f}x (`{worst_name}`)", worst / numpy_ns <= NUMPY_BOUND)
        doc.target(targets[1], "the same three",
                   f"worst {worst / torch_ns:.2f}x of torch.empty", worst < torch_ns)
    dl = res.get("dlpack_ns", {})
    if dl:
        doc.w("`torch.from_dlpack` of a block (the tensor at the block's own address: the program "
              "checks there is no copy), ns: " + "; ".join(f"`{k}` {v:.0f}" for k, v in dl.items())
              + ".")
        doc.w()
    w = res.get("waste")
    if w:
        doc.w(f"Pinned bytes per requested byte ({w['sizes']} sizes from 4 KiB to the largest "
              "block, each one byte above a class boundary and log-uniform in between; a block "
              f"takes its size class's bytes): worst **{w['worst']:.3f}** (at {w['worst_at']} B), "
              f"geometric mean {w['geomean']:.3f}; PyTorch's `pin_memory` rounds to the next "
              f"power of two: worst {w['pin_memory_worst']:.3f}, geometric mean "
              f"{w['pin_memory_geomean']:.3f}. A pool full of blocks above a quarter of a chunk "
              "(64 MiB chunks), pinned per requested: "
              + ", ".join(f"{size / MIB:.0f} MiB blocks {ratio:.3f}" for size, ratio in w["packed"])
              + ".")
        doc.w()
        doc.target(targets[2], f"{w['sizes']} sizes, 4 KiB to the largest block",
                   f"worst {w['worst']:.3f} (pin_memory's rule: {w['pin_memory_worst']:.3f})",
                   w["worst"] <= WASTE_BOUND)
    if "too_large" in res:
        doc.w(f"A 2.25 GiB request (more than the largest block): {res['too_large']}")
        doc.w()


def write_loader(doc, text):
    rows = []
    for line in text.splitlines():
        m = re.match(r"\|\s*(\d+) MiB\s*\|\s*(pinpool|usual)\s*\|\s*([\d.]+)\s*\|\s*([^|]+?)\s*\|", line)
        if m:
            rows.append((int(m.group(1)), m.group(2), float(m.group(3)), m.group(4)))
    doc.w("`dataloader_benchmark.py`: `torch.utils.data.DataLoader` with spawned "
          "workers, 16 samples a batch. **pinpool**: the batch sampler hands every batch a block "
          "of a memfd-backed pool, each worker attaches to the pool once and decodes every sample "
          "straight into its place in the block, and the main process takes the block as a tensor "
          "(`torch.from_dlpack`): no byte copied after the decode. **usual**: each sample decoded "
          "into a tensor of its own, the default collate stacks them into shared memory (a copy, "
          "in the worker), and the main process copies the batch into a staging buffer as "
          "`pin_memory` does (a second copy). Batches per second after the first.")
    doc.w()
    if not rows:
        doc.w("No table in this run's output.")
        doc.w()
        return
    doc.w("| batch | pinpool batches/s | usual batches/s | pinpool / usual | bytes copied per batch, pinpool | usual (workers + main) |")
    doc.w("|---|---|---|---|---|---|")
    for mib in sorted({r[0] for r in rows}):
        p = next((r for r in rows if r[0] == mib and r[1] == "pinpool"), None)
        u = next((r for r in rows if r[0] == mib and r[1] == "usual"), None)
        doc.w(f"| {mib} MiB | {p[2] if p else 'n/a'} | {u[2] if u else 'n/a'} | "
              f"{fmt_ratio(p[2] / u[2] if p and u and u[2] else None)} | {p[3] if p else 'n/a'} | "
              f"{u[3] if u else 'n/a'} |")
    doc.w()
