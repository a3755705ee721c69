"""3. Growth: bytes pinned per second by page size and domain (growth_host.json,
guest/growth_verbs.json).

write(doc) appends the section to the page (a common.Page) and its targets to the Targets table (doc.target)."""
import os

from report_sections.common import Results


def write(doc):
    doc.section("3. Growth: adding and registering chunks")
    host = Results(os.path.join(doc.out, "growth_host.json"))
    verbs = Results(os.path.join(doc.out, "guest", "growth_verbs.json"))
    hp = doc.hugepages
    if not host.present and not verbs.present:
        return doc.not_measured()
    doc.measured("growth")
    if verbs.present:
        doc.measured("guest", guest=True)
    guest = (f" and {doc.guest.get('growth_mib', '?')} MiB in the guest" if verbs.present else "")
    doc.w("GB/s registered (10^9 bytes per second; pinned long-term, or for mlock only locked) for "
          f"`Pool::Reserve` of {int(hp.get('growth_mib', '0'))} MiB on the host (1 GiB chunks for "
          f"1 GiB pages, 64 MiB chunks otherwise){guest}, from an empty pool: map, fault in "
          "(populated) or not, and register every chunk. The page size is required, never a "
          "fallback; a page size the kernel could not give shows its error. Host huge pages set by "
          f"the script for the run: {hp.get('hugepages_2M', '?')} x 2 MiB, "
          f"{hp.get('hugepages_1G', '?')} x 1 GiB (restored afterwards)"
          + (f"; guest: {doc.guest.get('hugepages_2M', '?')} x 2 MiB. The guest runs under TCG, "
             "10-50x slower than native: compare its rows with each other, not with the host's."
             if verbs.present else "."))
    doc.w()
    doc.w("| domain | page size | populated GB/s | not populated GB/s |")
    doc.w("|---|---|---|---|")
    rows = []
    errors = []
    for res, where in [(host, "host"), (verbs, "guest")]:
        if not res.present:
            continue
        names = list(res.runs) + list(res.errors)
        domains = []
        for n in names:
            d = n.split("/")[1]
            if d not in domains:
                domains.append(d)
        for d in domains:
            label = {"host": "mlock", "pin": "long-term pin"}.get(d, d)  # "host": older runs
            for page in ["1G", "2M", "THP", "4K"]:
                cells = []
                for pop in ["populated", "unpopulated"]:
                    name = f"grow/{d}/{page}/{pop}/manual_time"
                    bps = res.get(name, "bytes_per_second")
                    if bps:
                        cells.append(f"{bps / 1e9:.2f}")
                        rows.append((f"{label} ({where})", page, pop, bps / 1e9))
                    elif name in res.errors:
                        cells.append("unavailable¹")
                        errors.append((f"{d} {page} {pop}", res.errors[name]))
                    else:
                        cells.append("not run")
                doc.w(f"| {label} ({where}) | {page} | {cells[0]} | {cells[1]} |")
    doc.w()
    if errors:
        seen = set()
        doc.w("¹ The pool's error, verbatim:")
        doc.w()
        for what, msg in errors:
            if msg in seen:
                continue
            seen.add(msg)
            doc.w(f"- {what}: `{msg}`")
        doc.w()
    if rows:
        cats = []
        for d, page, pop, v in rows:
            if (d, page) not in cats:
                cats.append((d, page))
        lines = []
        for d, page in cats:
            vals = {pop: v for dd, pg, pop, v in rows if dd == d and pg == page}
            lines.append(f'"{d} {page}" {vals.get("populated", "NaN")} {vals.get("unpopulated", "NaN")}\n')
        data = {"growth.dat": "".join(lines)}
        body = ['set title "Growth: GB/s registered by Pool::Reserve (higher is better; log scale)"',
                'set style data histogram', 'set style histogram cluster gap 1',
                'set style fill solid 0.8 border -1', 'set logscale y', 'set grid ytics',
                'set ylabel "GB/s"', 'set xtics rotate by -30', 'set bmargin 9', 'set key top right',
                'plot "growth.dat" using 2:xtic(1) title "populated", "" using 3 title "not populated"']
        doc.plot("growth", {"body": "\n".join(body) + "\n"}, data, guest=verbs.present)
