"""5. Data path: RDMA WRITE from pool blocks against buffers registered once and perftest's
ib_write_bw (guest/wire-*.json, guest/ib_write_bw-*.txt).

write(doc) appends the section to the page (a common.Page) and its targets to the Targets table (doc.target)."""
import os
import re

from report_sections.common import MIB, Results, fmt_size, fmt_ratio


def write(doc):
    doc.section("5. Data path: RDMA WRITE throughput (soft-RoCE, in the guest)")
    guest = os.path.join(doc.out, "guest")
    rounds = sorted(int(m.group(1)) for f in (os.listdir(guest) if os.path.isdir(guest) else [])
                    for m in [re.match(r"wire-(\d+)\.json$", f)] if m)
    results = [Results(os.path.join(guest, f"wire-{k}.json")) for k in rounds]
    results = [r for r in results if r.present]
    if not results:
        return doc.not_measured(target="Wire throughput within 5% of ib_write_bw", part="guest")
    doc.measured("guest", guest=True)
    doc.w("MiB/s of RDMA WRITE over two loopback RC QPs on rxe0: `pool` writes from a pool block "
           "into a pool block (the block's lkey, the peer block's rkey); `registered_once` does "
           "the same loop between two buffers each registered once with `ibv_reg_mr`; "
           "`ib_write_bw` is perftest, server and client on rxe0 (GID index 1), with the same "
           "message size, tx depth (`-t`) and completion moderation (`-Q`) and a fixed number "
           "of messages (`-n`). The guest ran them in alternating rounds (benchmark, then "
           f"ib_write_bw at each size; {len(results)} rounds); each figure is the median over "
           "the rounds, with the range in brackets. Target: pool within 5% of ib_write_bw.")
    doc.w()

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

    doc.w("| size | depth | pool MiB/s | registered_once MiB/s | ib_write_bw MiB/s | pool / ib_write_bw | pool / registered_once | within 5% |")
    doc.w("|---|---|---|---|---|---|---|---|")
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
        doc.w(f"| {fmt_size(s)} | {depth} | {cell(p)} | {cell(o)} | {cell(bw)} | "
               f"{fmt_ratio(ratio)} | {fmt_ratio(p[0] / o[0] if p[0] and o[0] else None)} | "
               f"{'yes' if ok else ('no' if ratio is not None else 'n/a')} |")
    doc.w()
    if cmd:
        doc.w(f"ib_write_bw client command (largest size): `{cmd}`")
        doc.w()
    doc.target("Wire throughput from pool blocks within 5% of ib_write_bw", "every size",
                         f"lowest pool / ib_write_bw {worst[0]:.2f} at {fmt_size(worst[1])}" if worst else "n/a",
                         ok_all if n else None)
    data = {f"wire_{k}.dat": "".join(f"{s} {v}\n" for s, v in v_) for k, v_ in pts.items()}
    body = ['set title "RDMA WRITE throughput on rxe0, medians of the rounds (higher is better)"',
            'set logscale x', 'set xtics ("4K" 4096, "64K" 65536, "1M" 1048576)',
            'set xlabel "message size (bytes)"', 'set ylabel "MiB/s"', 'set yrange [0:*]',
            'set key bottom right', 'set grid', 'set bmargin 6',
            "plot " + ", ".join(f'"wire_{k}.dat" using 1:2 with linespoints lw 2 title "{k}"'
                                for k in pts if pts[k])]
    doc.plot("wire", {"body": "\n".join(body) + "\n"}, data, guest=True)
