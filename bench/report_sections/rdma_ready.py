"""2. RDMA-ready buffer: a pool block against registering per buffer and the registration caches
of UCX and libfabric (guest/rdma_ready*.json).

write(doc) appends the section to the page (a common.Page) and its targets to the Targets table (doc.target)."""
import os

from report_sections.common import Results, fmt_ns, fmt_size, fmt_ratio


def write(doc):
    doc.section("2. Getting an RDMA-ready buffer (soft-RoCE, in the guest)")
    r = Results(os.path.join(doc.out, "guest", "rdma_ready.json"))
    nc = Results(os.path.join(doc.out, "guest", "rdma_ready_nocache.json"))
    if not r.present:
        return doc.not_measured(target="RDMA-ready buffer against per-buffer registration and "
                                "registration caches", part="guest")
    doc.measured("guest", guest=True)
    doc.w("Time to get a buffer with its lkey and rkey ready, and give it back, on rxe0 in one "
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
    doc.w()
    ctx = r.context
    doc.w(f"UCX: {ctx.get('ucx', '?')} · libfabric verbs provider: {ctx.get('libfabric', '?')}"
           f" (domain `{ctx.get('libfabric_domain', '?')}`)")
    doc.w()
    methods = ["pool", "verbs_reg", "ucx_direct", "fabric_nocache", "ucx_mdcache", "ucx_cached",
               "ucx_cached_pack", "fabric_reg"]
    hits = ["ucx_mdcache", "ucx_cached", "ucx_cached_pack", "fabric_reg"]
    sizes = sorted({int(n.split("/")[1]) for n in r.runs if n.startswith("pool/")})

    def t(m, s):
        src = nc if m == "fabric_nocache" else r
        return src.ns(f"{m}/{s}")

    doc.w("| size | " + " | ".join(methods) + " |")
    doc.w("|---|" + "---|" * len(methods))
    for s in sizes:
        doc.w(f"| {fmt_size(s)} | " + " | ".join(fmt_ns(t(m, s)) for m in methods) + " |")
    doc.w()
    doc.w("| size | verbs_reg / pool | ucx_direct / pool | fabric_nocache / pool | best hit | best hit / pool | ≥ 100x | ≥ 5x |")
    doc.w("|---|---|---|---|---|---|---|---|")
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
        doc.w(f"| {fmt_size(s)} | {fmt_ratio(rv, 0)} | {fmt_ratio(ru, 0)} | {fmt_ratio(rf, 0)} | {best or 'n/a'} | {fmt_ratio(rh, 1)} | {'yes' if a else 'no'} | {'yes' if b else 'no'} |")
    doc.w()
    doc.target("RDMA-ready buffer ≥ 100x faster than per-buffer `ibv_reg_mr`", "every size 4 KiB-4 MiB",
                         f"smallest ratio {worst100[0]:.0f}x at {fmt_size(worst100[1])}" if worst100 else "n/a",
                         ok100 if n else None)
    doc.target("RDMA-ready buffer ≥ 5x faster than the best registration-cache hit", "every size",
                         f"smallest ratio {worst5[0]:.1f}x at {fmt_size(worst5[1])} (vs {worst5[2]})" if worst5 else "n/a",
                         ok5 if n else None)
    data = {}
    for m in methods:
        data[f"ready_{m}.dat"] = "".join(f"{s} {t(m, s)}\n" for s in sizes if t(m, s))
    body = ['set title "RDMA-ready buffer: time per buffer on rxe0 (lower is better)"',
            'set logscale xy', 'set xtics ("4K" 4096, "64K" 65536, "1M" 1048576, "4M" 4194304)',
            'set xlabel "buffer size (bytes)"', 'set ylabel "ns per buffer"', 'set key outside right',
            'set grid', 'set bmargin 6',
            "plot " + ", ".join(f'"ready_{m}.dat" using 1:2 with linespoints lw 2 title "{m}"'
                                for m in methods if data[f"ready_{m}.dat"])]
    doc.plot("rdma_ready", {"body": "\n".join(body) + "\n"}, data, guest=True)
