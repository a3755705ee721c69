"""7. UCX and libfabric domains: a put from a pool block against the providers' own ways
(guest/providers*.json).

write(doc) appends the section to the page (a common.Page) and its targets to the Targets table (doc.target)."""
import os

from report_sections.common import Results, fmt_ns, fmt_size, fmt_ratio


def write(doc):
    """A put through UCX and through libfabric from a pool block vs the providers' own ways of
    getting a buffer ready (bench/providers_benchmark.cc; guest files providers.json and
    providers_nocache.json). Self-contained: tables of medians and ratios, no figure."""
    doc.section("7. Through UCX and libfabric: a put from a pool block (soft-RoCE, in the guest)")
    r = Results(os.path.join(doc.out, "guest", "providers.json"))
    nc = Results(os.path.join(doc.out, "guest", "providers_nocache.json"))
    if not r.present:
        if "guest" in doc.skipped:
            return doc.not_measured(part="guest")
        return doc.not_measured("no providers_benchmark: it needs libucx-dev and libfabric-dev")
    doc.measured("guest", guest=True)
    ctx = r.context
    doc.w("Time to get a buffer ready, fill it and have its bytes at the target (one put from one "
           "worker or endpoint to another over rxe0, completed at the target before the next), "
           "medians, `bench/providers_benchmark.cc`. UCX (`UCX_TLS=rc`, rc_verbs): `pool` = pinpool "
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
    doc.w()
    doc.w(f"UCX: {ctx.get('ucx', '?')} · libfabric: {ctx.get('libfabric', '?')} "
           f"(domain `{ctx.get('libfabric_domain', '?')}`)")
    doc.w()

    def t(res, name):
        return res.median_ns(name)

    sizes = sorted({int(n.split("/")[2]) for n in r.runs if n.startswith("ucx/pool/")} |
                   {int(n.split("/")[2]) for n in r.runs if n.startswith("fabric/pool/")})

    def ratio(a, b):
        return fmt_ratio(a / b) if a and b else "n/a"

    ucx = ["pool", "map_each", "cache_fresh", "cache_reused"]
    doc.w("**UCX** (time per put)")
    doc.w()
    doc.w("| size | " + " | ".join(ucx) + " | map_each / pool | cache_fresh / pool | cache_reused / pool |")
    doc.w("|---|" + "---|" * (len(ucx) + 3))
    for size in sizes:
        v = {m: t(r, f"ucx/{m}/{size}") for m in ucx}
        doc.w(f"| {fmt_size(size)} | " + " | ".join(fmt_ns(v[m]) for m in ucx)
               + f" | {ratio(v['map_each'], v['pool'])} | {ratio(v['cache_fresh'], v['pool'])}"
               f" | {ratio(v['cache_reused'], v['pool'])} |")
    doc.w()
    doc.w("**libfabric** (time per write)")
    doc.w()
    doc.w("| size | pool | reg_each, cache off | reg_each, cache on | cache off / pool | cache on / pool |")
    doc.w("|---|---|---|---|---|---|")
    for size in sizes:
        p = t(r, f"fabric/pool/{size}")
        off = t(nc, f"fabric/reg_each_nocache/{size}")
        on = t(r, f"fabric/reg_each_cache/{size}")
        doc.w(f"| {fmt_size(size)} | {fmt_ns(p)} | {fmt_ns(off)} | {fmt_ns(on)} | {ratio(off, p)} | {ratio(on, p)} |")
    doc.w()
    errors = dict(r.errors, **nc.errors)
    if errors:
        doc.w("Benchmarks that reported an error: " +
               "; ".join(f"`{k}`: {v}" for k, v in sorted(errors.items())))
        doc.w()
