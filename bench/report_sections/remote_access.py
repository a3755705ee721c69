"""6. Remote access: per-block grants against per-buffer registration and chunk-wide keys
(guest/remote_access.json).

write(doc) appends the section to the page (a common.Page) and its targets to the Targets table (doc.target)."""
import os

from report_sections.common import Results, fmt_ns, fmt_size, fmt_ratio


def write(doc):
    doc.section("6. Remote access: per-block grants (soft-RoCE, in the guest)")
    r = Results(os.path.join(doc.out, "guest", "remote_access.json"))
    if not r.present:
        return doc.not_measured(target="Grant + revocation cheaper than per-buffer registration",
                                part="guest")
    doc.measured("guest", guest=True)
    doc.w("What it costs to give a peer one block and take it back (`pinpool::VerbsRemoteAccess`, "
           "[remote-access.md](remote-access.md)), on rxe0, medians, `bench/remote_access_benchmark.cc`. "
           "`grant_revoke/window` = `Grant` (a type 2 window bound by a work request on the QP) + "
           "`Revoke` (`IBV_WR_LOCAL_INV`) + its completion; `grant_revoke/region` = `Grant` + `Revoke` "
           "with a region registered over exactly the range; `range_reg` = the same `ibv_reg_mr` + "
           "`ibv_dereg_mr` on pool memory without pinpool; `per_buffer_reg` = malloc + `ibv_reg_mr` + "
           "`ibv_dereg_mr` + free, what a program without a pool pays per buffer. Under emulation "
           "every kernel round trip is slow; on a real NIC a bind or an invalidation is a work request "
           "the adapter executes with no system call, while registration stays a kernel command, so "
           "the ratios there favour windows far more.")
    doc.w()
    sizes = sorted({int(n.split("/")[2]) for n in r.runs if n.startswith("grant_revoke/window/")})

    def t(name):
        return r.median_ns(name + "/real_time") or r.median_ns(name)

    rows = [("grant + revoke, window", "grant_revoke/window"), ("grant + revoke, range region", "grant_revoke/region"),
            ("range region register + deregister (no pinpool)", "range_reg"),
            ("malloc + ibv_reg_mr + ibv_dereg_mr + free", "per_buffer_reg")]
    doc.w("| operation | " + " | ".join(fmt_size(s) for s in sizes) + " |")
    doc.w("|---|" + "---|" * len(sizes))
    for label, key in rows:
        doc.w(f"| {label} | " + " | ".join(fmt_ns(t(f"{key}/{s}")) for s in sizes) + " |")
    doc.w(f"| window allocate + deallocate (`ibv_alloc_mw` + `ibv_dealloc_mw`; growth only) | {fmt_ns(t('mw_alloc_free'))} (any size) |" + " |" * (len(sizes) - 1))
    doc.w(f"| 0-byte SEND_WITH_INV of a window's rkey, to the receive | {fmt_ns(t('send/inv'))} (plain SEND: {fmt_ns(t('send/plain'))}) |" + " |" * (len(sizes) - 1))
    doc.w()
    doc.w("| size | per-buffer / window grant | per-buffer / region grant | window cheaper | region cheaper |")
    doc.w("|---|---|---|---|---|")
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
        doc.w(f"| {fmt_size(s)} | {fmt_ratio(pb / gw)} | {fmt_ratio(pb / gr)} | {'yes' if gw < pb else 'no'} | {'yes' if gr < pb else 'no'} |")
    doc.w()
    doc.target("Window grant + revocation cheaper than per-buffer registration (rxe)", "every size 4 KiB-4 MiB",
                         f"per-buffer / grant at least {worst_w[0]:.2f}x ({fmt_size(worst_w[1])})" if worst_w else "n/a",
                         ok_w if n else None)
    doc.target("Range-region grant + revocation cheaper than per-buffer registration (rxe)", "every size 4 KiB-4 MiB",
                         f"per-buffer / grant at least {worst_r[0]:.2f}x ({fmt_size(worst_r[1])})" if worst_r else "n/a",
                         ok_r if n else None)

    doc.w("Request loop: the peer RDMA WRITEs the block and sends a 0-byte \"done\" message the server "
           "receives. `chunk_wide` uses the chunk's rkey (`VerbsAccess::trusted_whole_chunk`: nothing per "
           "request, and the whole chunk exposed); `window_send_inv` grants a window and the peer's \"done\" "
           "is a SEND_WITH_INV of its rkey (the revocation rides on a message the protocol sends anyway); "
           "`window_local_inv` grants a window and revokes it with `IBV_WR_LOCAL_INV` after \"done\"; "
           "`region` grants and revokes a range region. Time per request, and its ratio to `chunk_wide`.")
    doc.w()
    loops = ["chunk_wide", "window_send_inv", "window_local_inv", "region"]
    doc.w("| size | " + " | ".join(loops) + " | window_send_inv / chunk_wide | window_local_inv / chunk_wide | region / chunk_wide | target (send_inv) |")
    doc.w("|---|" + "---|" * (len(loops) + 4))
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
        doc.w(f"| {fmt_size(s)} | {cells} | {fmt_ratio(ratio)} | {fmt_ratio(rl)} | {fmt_ratio(rr)} | ≤ {limit} {'met' if ok else 'missed'} |")
    doc.w()
    doc.target("Window request loop with SEND_WITH_INV within 1.25x of chunk-wide keys at 4 KiB, 1.05x from 64 KiB",
                         "4 KiB-4 MiB",
                         f"worst {worst[0]:.2f}x at {fmt_size(worst[1])} (limit {worst[2]})" if worst else "n/a",
                         ok_loop if n else None)
