#!/usr/bin/env python3
"""Checks what pinpool-info (and the demo's --json) report against the machine itself.

Run by ctest (tests/info/CMakeLists.txt), one mode per entry:

  check.py host TOOL       on the host: the JSON parses (strictly) and agrees with the kernel:
                           RLIMIT_MEMLOCK equals `ulimit -l`/`-Hl`, every huge page pool of
                           /sys/kernel/mm/hugepages is listed with its counts, THP and
                           io_uring_disabled as in /sys and /proc, cloning between rings as
                           the kernel's version has it (and --rings' cost); long-term pinning is
                           available exactly when io_uring with sparse tables is, and --try's
                           pool (the default domain here) is long-term pinned, not locked;
                           without an RDMA device the no_rdma_device problem is there with its
                           fix; the text report, --help and argument errors (exit 2) behave.
  check.py nobody TOOL     as an unprivileged user (setpriv; a uid of its own, since io_uring
                           counts pins per user) with an 8 MiB RLIMIT_MEMLOCK: a 1 GiB budget is
                           reported as memlock_too_low with the fixes, a 4 MiB one fits, and
                           long-term pinning works.
  check.py guest TOOL      in the soft-RoCE guest (scripts/softroce/ctest-in-guest.sh): rxe0 is listed with
                           its caps, port 1 PORT_ACTIVE, an IPv4-mapped RoCE v2 GID; both GID
                           paths agree; --try registers a pool with rxe0; Linux 6.1 clones no
                           registrations between rings. A missing rxe0 fails.
  check.py demo DEMO       `pinpool_demo --json` prints PoolStats::ToJson with exactly the fields
                           docs/pinpool-info.md's field reference lists (made from the stats'
                           descriptions), in its order.
  check.py install BUILD PREFIX_PARENT
                           `cmake --install` of the runtime and tools components: the installed
                           pinpool-info runs and finds the installed library.

Exit status: 0 all checks hold, 1 one failed (the message says which), 77 nothing to check here.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

FAILURES = []


def check(ok, what):
    if not ok:
        FAILURES.append(what)
        print(f"check: FAIL: {what}", file=sys.stderr)
    return ok


def finish(name):
    if FAILURES:
        print(f"check {name}: {len(FAILURES)} check(s) failed", file=sys.stderr)
        sys.exit(1)
    print(f"check {name}: all checks hold")
    sys.exit(0)


def strict_json(text, source):
    """json.loads that also refuses NaN/Infinity (not JSON) and duplicate keys."""

    def reject_constant(name):
        raise ValueError(f"{source}: {name} is not JSON")

    def no_duplicates(pairs):
        keys = [k for k, _ in pairs]
        if len(keys) != len(set(keys)):
            raise ValueError(f"{source}: duplicate keys in an object: {keys}")
        return dict(pairs)

    return json.loads(text, parse_constant=reject_constant, object_pairs_hook=no_duplicates)


def run(argv, expect_rc=0, **kwargs):
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)
    if expect_rc is not None:
        check(proc.returncode == expect_rc,
              f"{' '.join(argv)} exited {proc.returncode}, expected {expect_rc}; "
              f"stderr: {proc.stderr.strip()}")
    return proc


def tool_json(argv, **kwargs):
    proc = run(argv + ["--json"], **kwargs)
    try:
        return strict_json(proc.stdout, " ".join(argv))
    except ValueError as e:
        check(False, f"{' '.join(argv)} --json is not JSON: {e}\n{proc.stdout[:2000]}")
        finish("json")


def problems(report, pid):
    return [p for p in report["problems"] if p["id"] == pid]


def ulimit_bytes(flag):
    out = subprocess.run(["sh", "-c", f"ulimit {flag}"], stdout=subprocess.PIPE, text=True,
                         check=True).stdout.strip()
    return None if out == "unlimited" else int(out) * 1024


def read(path):
    with open(path) as f:
        return f.read().strip()


def selected(path):
    text = read(path)
    return text[text.index("[") + 1:text.index("]")]


def has_rdma_device():
    return os.path.isdir("/sys/class/infiniband") and bool(os.listdir("/sys/class/infiniband"))


# --- host ----------------------------------------------------------------------------------------

def check_host(tool):
    r = tool_json([tool])
    check(r["schema_version"] == 4, f"schema_version is {r['schema_version']}")
    for key in ["system", "rdma", "hugepages", "memlock", "pinning", "fork", "io_uring", "pool",
                "problems"]:
        check(key in r, f"no top-level field {key}")

    # RDMA: no device on this host, said with the fix.
    if has_rdma_device():
        print("check host: this machine has RDMA devices; the no-device checks do not apply")
    else:
        check(r["rdma"]["devices"] == [], f"devices listed on a host without RDMA: {r['rdma']['devices']}")
        found = problems(r, "no_rdma_device")
        if check(len(found) == 1, f"no_rdma_device not reported; problems: {[p['id'] for p in r['problems']]}"):
            p = found[0]
            check(p["severity"] == "error", f"no_rdma_device severity {p['severity']}")
            check(p["problem"].startswith("no RDMA device"), f"problem text: {p['problem']}")
            for word in ["rdma_rxe", "siw", "rdma link add"]:
                check(word in p["fix"], f"no_rdma_device fix does not mention {word}: {p['fix']}")

    # RLIMIT_MEMLOCK as the shell sees it.
    m = r["memlock"]
    soft, hard = ulimit_bytes("-l"), ulimit_bytes("-Hl")
    check(m["soft_limit_bytes"] == soft, f"memlock soft {m['soft_limit_bytes']} but ulimit -l says {soft}")
    check(m["hard_limit_bytes"] == hard, f"memlock hard {m['hard_limit_bytes']} but ulimit -Hl says {hard}")
    cap_eff = int([l for l in read("/proc/self/status").splitlines() if l.startswith("CapEff:")][0].split()[1], 16)
    check(m["cap_ipc_lock"] == bool(cap_eff >> 14 & 1), f"cap_ipc_lock {m['cap_ipc_lock']}, CapEff {cap_eff:#x}")
    for key in ["pin_headroom_bytes", "lock_headroom_bytes"]:
        check(m[key] is None if (m["cap_ipc_lock"] or soft is None) else m[key] is not None,
              f"{key} {m[key]} with cap {m['cap_ipc_lock']} and limit {soft}")

    # Every huge page pool of the kernel, with its counts.
    base = "/sys/kernel/mm/hugepages"
    pools = {p["page_size_bytes"]: p for p in r["hugepages"]["pools"]}
    sysfs = sorted(os.listdir(base)) if os.path.isdir(base) else []
    check(len(pools) == len(sysfs), f"{len(pools)} huge page pools listed, sysfs has {sysfs}")
    for d in sysfs:
        size = int(d[len("hugepages-"):-len("kB")]) * 1024
        if not check(size in pools, f"huge page pool {d} not listed"):
            continue
        for field, name in [("total", "nr_hugepages"), ("free", "free_hugepages"),
                            ("reserved", "resv_hugepages"), ("surplus", "surplus_hugepages"),
                            ("overcommit", "nr_overcommit_hugepages")]:
            want = int(read(f"{base}/{d}/{name}"))
            check(pools[size][field] == want, f"{d} {field} is {pools[size][field]}, sysfs {name} is {want}")
    thp = "/sys/kernel/mm/transparent_hugepage"
    if os.path.exists(f"{thp}/enabled"):
        check(r["hugepages"]["thp"]["enabled"] == selected(f"{thp}/enabled"), "THP enabled differs from sysfs")
        check(r["hugepages"]["thp"]["defrag"] == selected(f"{thp}/defrag"), "THP defrag differs from sysfs")
    sysctl = "/proc/sys/kernel/io_uring_disabled"
    want = int(read(sysctl)) if os.path.exists(sysctl) else None
    check(r["io_uring"]["io_uring_disabled"] == want, f"io_uring_disabled {r['io_uring']['io_uring_disabled']}, /proc says {want}")
    check(r["io_uring"]["max_buffer_bytes"] == 1 << 30 and r["io_uring"]["max_buffers"] == 16384,
          "io_uring buffer limits")
    check_rings(tool, r)

    # Long-term pinning: the default domain's rides on io_uring with sparse tables.
    pin = r["pinning"]
    ring_ok = r["io_uring"]["available"] and r["io_uring"]["sparse_buffers"] is True
    check(pin["long_term_available"] == ring_ok,
          f"long_term_available {pin['long_term_available']} but io_uring usable: {ring_ok} ({pin['long_term_error']})")
    check((pin["long_term_error"] is None) == pin["long_term_available"], f"long_term_error {pin['long_term_error']}")
    kinds = {d["domain"]: d["pinning"] for d in pin["domains"]}
    check(kinds == {"default": "long-term", "io_uring": "long-term", "verbs": "long-term", "mlock": "resident"},
          f"domain pinning kinds {kinds}")
    check(bool(problems(r, "long_term_pinning_unavailable")) != pin["long_term_available"],
          "long_term_pinning_unavailable does not match long_term_available")

    # The pool plan follows the free 2 MiB pages.
    r2 = tool_json([tool, "--budget", "64M", "--chunk-size", "2M", "--page-size", "2M"])
    plan = r2["pool"]
    check(plan["chunks"] == 32 and plan["valid"], f"plan: {plan}")
    free2m = pools.get(2 << 20, {"free": 0, "reserved": 0})
    want2m = min(32, max(0, free2m["free"] - free2m["reserved"]))
    got2m = [p["chunks"] for p in plan["page_sizes"] if p["page_size"] == "2M"]
    check(got2m == [want2m], f"2M chunks planned {got2m}, free pages allow {want2m}")
    check(sum(p["chunks"] for p in plan["page_sizes"]) + plan["failing_chunks"] == 32, "chunks do not add up")
    if want2m < 32:
        hp = problems(r2, "hugepages_missing")
        if check(len(hp) == 1, "hugepages_missing not reported with too few 2 MiB pages"):
            target = pools.get(2 << 20, {"total": 0})["total"] + 32 - want2m
            check(f"sysctl vm.nr_hugepages={target}" in hp[0]["fix"], f"hugepages fix: {hp[0]['fix']}")

    # --try: a real pool (the default domain here) with its stats: pinned long-term, not locked.
    r3 = tool_json([tool, "--budget", "4M", "--chunk-size", "2M", "--page-size", "4K", "--try"])
    t = r3["pool"]["try"]
    if check(t is not None and t["ok"], f"--try failed: {t}"):
        st = t["stats"]
        check(st["mapped_bytes"] == 2 << 20 and len(st["chunks"]) == 1, f"--try stats: {st}")
        if not has_rdma_device():
            check(t["domain"] == "long-term pin", f"--try used domain {t['domain']}")
            check(st["domains"][0]["pinning"] == "long-term", f"--try domain {st['domains'][0]}")
            check(st["pinned_bytes"] == 2 << 20 and st["locked_bytes"] == 0,
                  f"--try pinned {st['pinned_bytes']}, locked {st['locked_bytes']}")

    # Text, help, argument errors.
    text = run([tool]).stdout
    for heading in ["RDMA devices", "Huge pages", "Locked memory", "Pinning", "io_uring", "A pool with",
                    "Problems and fixes"]:
        check(heading in text, f"text report lacks '{heading}'")
    helptext = run([tool, "--help"]).stdout
    for key in list(r.keys()) + ["soft_limit_bytes", "gid_table_size", "ipv4_mapped", "pin_headroom_bytes",
                                 "lock_headroom_bytes", "long_term_available", "unavailable_reason"]:
        check(key in helptext, f"--help does not document {key}")
    for bad in (["--page-size", "3M"], ["--chunk-size"], ["--budget", "lots"], ["--bogus"], ["--json=1"],
                ["--device", "rxe0"], ["--metrics"], ["--metrics", "/nonexistent.sock", "--json"]):
        proc = run([tool] + bad, expect_rc=2)
        check("pinpool-info:" in proc.stderr and proc.stdout == "", f"{bad}: stderr {proc.stderr!r}")
    invalid = tool_json([tool, "--chunk-size", "3M"])
    check(not invalid["pool"]["valid"] and problems(invalid, "invalid_pool_options"), "chunk size 3M not refused")
    finish("host")


def kernel_version():
    release = os.uname().release.split("-")[0].split(".")
    return int(release[0]), int(release[1])


def check_rings(tool, r):
    """What the kernel can clone between io_uring rings, against its version (whole tables from
    Linux 6.12, ranges from 6.13), and what --rings N costs: the pool once, or N times."""
    if not r["io_uring"]["available"]:
        return
    version = kernel_version()
    clone = r["io_uring"]["clone"]
    check(clone["whole_table"] == (version >= (6, 12)), f"clone whole_table {clone} on Linux {version}")
    check(clone["ranges"] == (version >= (6, 13)), f"clone ranges {clone} on Linux {version}")
    plan = tool_json([tool, "--budget", "64M", "--chunk-size", "2M", "--rings", "4"])
    rings = plan["pool"]["io_uring_rings"]
    sharing = "clone" if clone["ranges"] else "per_ring"
    want = (64 << 20) * (1 if clone["ranges"] else 4)
    check(rings["rings"] == 4 and rings["sharing"] == sharing and rings["memlock_bytes"] == want
          and rings["memlock_bytes_cloned"] == 64 << 20 and rings["memlock_bytes_per_ring"] == 4 * (64 << 20),
          f"--rings 4 plan {rings} (sharing should be {sharing}, memlock {want})")
    check(bool(problems(plan, "io_uring_no_clone")) != clone["ranges"],
          f"io_uring_no_clone reported: {bool(problems(plan, 'io_uring_no_clone'))}, kernel clones ranges: "
          f"{clone['ranges']}")


# --- nobody --------------------------------------------------------------------------------------

def check_nobody(tool):
    if os.geteuid() != 0:
        print("check nobody: SKIP: needs root to become another user (setpriv)")
        sys.exit(77)
    # The user may not reach the build tree: run a copy of the tool (which links the library's
    # internals statically: no libpinpool.so to copy) from a directory everyone can read. A uid no
    # one else uses (as tests/support/unprivileged.h): io_uring counts pinned memory per user,
    # across processes.
    with tempfile.TemporaryDirectory(prefix="pinpool-info-") as d:
        os.chmod(d, 0o755)
        shutil.copy2(tool, d)
        copy = os.path.join(d, os.path.basename(tool))

        def limit_memlock():
            import resource
            resource.setrlimit(resource.RLIMIT_MEMLOCK, (8 << 20, 8 << 20))

        uid = 0x40000000 + os.getpid()

        def as_nobody(args):
            argv = ["setpriv", f"--reuid={uid}", "--regid=nogroup", "--clear-groups", copy] + args
            return tool_json(argv, preexec_fn=limit_memlock)

        r = as_nobody(["--budget", "1G"])
        m = r["memlock"]
        check(r["system"]["uid"] != 0, f"ran as uid {r['system']['uid']}")
        check(not m["cap_ipc_lock"], "the unprivileged user has CAP_IPC_LOCK")
        check(r["pinning"]["long_term_available"],
              f"no long-term pin for an unprivileged user: {r['pinning']['long_term_error']}")
        check(m["soft_limit_bytes"] == 8 << 20, f"soft limit {m['soft_limit_bytes']}")
        check(r["pool"]["memlock"] == {"needed_bytes": 1 << 30, "applies": True, "fits": False},
              f"pool memlock: {r['pool']['memlock']}")
        found = problems(r, "memlock_too_low")
        if check(len(found) == 1, f"memlock_too_low not reported: {[p['id'] for p in r['problems']]}"):
            p = found[0]
            check(p["severity"] == "error", f"severity {p['severity']}")
            check("RLIMIT_MEMLOCK is 8 MiB but the budget is 1 GiB" in p["problem"], f"problem: {p['problem']}")
            for word in ["ulimit -l", "limits.conf", "LimitMEMLOCK", "CAP_IPC_LOCK", "lower the budget"]:
                check(word in p["fix"], f"memlock fix does not mention {word}: {p['fix']}")
        small = as_nobody(["--budget", "4M", "--chunk-size", "2M"])
        check(small["pool"]["memlock"]["fits"], f"4 MiB does not fit 8 MiB: {small['pool']['memlock']}")
        check(not problems(small, "memlock_too_low"), "memlock_too_low for a budget that fits")
    finish("nobody")


# --- guest ---------------------------------------------------------------------------------------

def gid_list(report):
    return [(g["index"], g["gid"], g["type"], g["netdev"])
            for d in report["rdma"]["devices"] for p in d.get("ports", []) for g in p["gids"]]


def check_guest(tool):
    if os.environ.get("PINPOOL_SOFTROCE") != "1":
        print("check guest: FAIL: not in the soft-RoCE guest (run through scripts/softroce/ctest-in-guest.sh)",
              file=sys.stderr)
        sys.exit(1)
    r = tool_json([tool])
    devices = {d["name"]: d for d in r["rdma"]["devices"]}
    if not check("rxe0" in devices, f"rxe0 not listed (PINPOOL_REQUIRE_RDMA=1); devices: {list(devices)}, "
                                    f"list error: {r['rdma']['device_list_error']}"):
        finish("guest")
    d = devices["rxe0"]
    check(d["error"] is None, f"rxe0 error: {d['error']}")
    check(d["max_mr_size"] == (1 << 64) - 1, f"rxe0 max_mr_size {d['max_mr_size']} (rxe's is 2^64-1)")
    check(d["max_mr"] > 0 and d["page_size_cap"] > 0, f"rxe0 max_mr {d['max_mr']} page_size_cap {d['page_size_cap']}")
    check("4K" in d["page_sizes"] and "2M" in d["page_sizes"], f"rxe0 page sizes {d['page_sizes']}")
    check(d["memory_windows"]["type1"] and d["memory_windows"]["type2b"], f"rxe0 memory windows {d['memory_windows']}")
    g = d["grants"]
    check(g["windows_type2"] and not g["window_bounds_enforced"] and g["mechanism"] == "region"
          and "rxe" in (g["reason"] or ""), f"rxe0 grants {g}")
    check(d["odp"]["queried"] and not d["odp"]["supported"], f"rxe0 ODP {d['odp']} (rxe has none)")
    ports = {p["port"]: p for p in d["ports"]}
    if check(1 in ports, "rxe0 has no port 1"):
        p = ports[1]
        check(p["state"] == "PORT_ACTIVE" and p["active"], f"port 1 state {p['state']}")
        check(p["link_layer"] == "Ethernet", f"port 1 link layer {p['link_layer']}")
        check(p["active_mtu"] >= 256, f"port 1 active MTU {p['active_mtu']}")
        v2 = [g for g in p["gids"] if g["type"] == "RoCE v2" and g["ipv4_mapped"]]
        if check(v2, f"no IPv4-mapped RoCE v2 GID on port 1: {p['gids']}"):
            g = v2[0]
            check(g["gid"] == "::ffff:" + g["ipv4"], f"GID {g['gid']} does not map {g['ipv4']}")
            print(f"check guest: rxe0 port 1 GID[{g['index']}] {g['gid']} {g['type']} on {g['netdev']}")
    check(not problems(r, "no_rdma_device") and not problems(r, "rdma_no_active_port")
          and not problems(r, "roce_no_ipv4_gid"), f"RDMA problems reported: {[x['id'] for x in r['problems']]}")
    check(r["pool"]["devices"] and r["pool"]["devices"][0]["name"] == "rxe0"
          and r["pool"]["devices"][0]["chunk_fits_max_mr_size"], f"pool devices: {r['pool']['devices']}")

    # The sysfs GID path reads the same table as ibv_query_gid_table.
    fallback = tool_json([tool], env=dict(os.environ, PINPOOL_INFO_GID_FALLBACK="1"))
    check(gid_list(fallback) == gid_list(r), f"GIDs differ: table {gid_list(r)}, sysfs {gid_list(fallback)}")

    # --try registers a real pool with rxe0.
    t = tool_json([tool, "--try", "--chunk-size", "2M", "--budget", "8M"])["pool"]["try"]
    if check(t is not None and t["ok"], f"--try failed in the guest: {t}"):
        check(t["domain"].startswith("rxe0/"), f"--try used domain {t['domain']}")
        regs = t["stats"]["chunks"][0]["registrations"]
        check(regs[0]["lkey"] is not None and regs[0]["rkey"] is not None, f"--try keys {regs}")
        check(t["stats"]["domains"][0]["kind"] == "verbs", f"--try domain kind {t['stats']['domains'][0]}")
        check(t["stats"]["domains"][0]["pinning"] == "long-term", f"--try pinning {t['stats']['domains'][0]}")
        check(t["stats"]["pinned_bytes"] == 2 << 20, f"--try pinned {t['stats']['pinned_bytes']}")
    # Linux 6.1: no cloning between rings; each ring an IoUringDomain serves registers the pool.
    check(not r["io_uring"]["clone"]["ranges"] and not r["io_uring"]["clone"]["whole_table"],
          f"clone support in the guest's 6.1: {r['io_uring']['clone']}")
    check_rings(tool, r)
    # Every domain is usable in the guest, and says what it does to the pages.
    usable = {d["domain"]: d["available"] for d in r["pinning"]["domains"]}
    check(all(usable.values()), f"domains not available in the guest: {usable}")
    bad = tool_json([tool, "--try", "--device", "nosuch0", "--chunk-size", "2M", "--budget", "2M"])
    check(problems(bad, "try_failed"), "--try on a device that does not exist did not fail")
    print(run([tool]).stdout)
    finish("guest")


# --- demo ----------------------------------------------------------------------------------------

# The stats' fields as docs/pinpool-info.md lists them: its field reference is generated from the
# stats' descriptions (src/report/stats_fields.h; StatsFieldsTest keeps the two equal), so the demo's
# JSON is checked against the descriptions themselves.
DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "pinpool-info.md")


def documented_fields(prefix):
    """The documented names right under `prefix` ("" for the top level, "grants."), in order."""
    names = []
    text = open(DOC, encoding="utf-8").read()
    section = text[text.index("\n## Pool stats"):]
    section = section[:section.find("\n## ", 1)]
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        path = line.split("`")[1]
        if not path.startswith(prefix):
            continue
        rest = path[len(prefix):]
        if rest.endswith("[]"):
            rest = rest[:-2]
        if rest and "." not in rest and "[" not in rest and rest not in names:
            names.append(rest)
    return names


def check_demo(demo):
    proc = run([demo, "--json"])
    try:
        s = strict_json(proc.stdout, "pinpool_demo --json")
    except ValueError as e:
        check(False, f"pinpool_demo --json is not JSON: {e}\n{proc.stdout[:2000]}")
        finish("demo")
    stats_fields = documented_fields("")
    check(len(stats_fields) > 20, f"the field reference of {DOC} lists {stats_fields}")
    check(list(s.keys()) == stats_fields, f"stats fields {list(s.keys())}, documented {stats_fields}")
    check(s["mapped_bytes"] == 8 << 20 and len(s["chunks"]) == 1, f"demo pool: {s['mapped_bytes']} mapped")
    grant_fields = documented_fields("grants.")
    check(list(s["grants"].keys()) == grant_fields, f"grant fields {list(s['grants'].keys())}, documented {grant_fields}")
    check(list(s["growth"].keys()) == documented_fields("growth."), f"growth fields {list(s['growth'].keys())}")
    check(list(s["domains"][0].keys()) == documented_fields("domains[]."), f"domain fields {list(s['domains'][0].keys())}")
    check(s["grants"]["connections"] == 0 and s["grants"]["live"] == 0, f"demo grants {s['grants']}")
    check(s["live_bytes"] >= 64 + 4096 + 65536 + (1 << 20), f"live {s['live_bytes']}")
    check(0 <= s["heap_fragmentation"] < 1, f"heap_fragmentation {s['heap_fragmentation']}")
    c = s["chunks"][0]
    check(list(c) == documented_fields("chunks[]."), f"chunk fields {list(c)}")
    check(c["page_size"] in ("1G", "2M", "THP", "4K"), f"page size {c['page_size']}")
    dom = s["domains"][0]
    check(dom["registrations"] == 1 and dom["mean_register_seconds"] is not None, f"domain {dom}")
    # Without an RDMA device the demo uses the default domain: long-term pinned, never mlock.
    check(dom["pinning"] == "long-term", f"the demo's domain does not pin long-term: {dom}")
    check(s["pinned_bytes"] == s["mapped_bytes"] and s["locked_bytes"] == 0,
          f"pinned {s['pinned_bytes']}, locked {s['locked_bytes']} of {s['mapped_bytes']} mapped")
    run([demo, "--bogus"], expect_rc=2)
    finish("demo")


# --- install -------------------------------------------------------------------------------------

def check_install(build, parent):
    cmake = os.environ.get("CMAKE", "cmake")
    with tempfile.TemporaryDirectory(prefix="pinpool-info-install-", dir=parent) as prefix:
        for component in ["pinpool_Runtime", "pinpool_Tools"]:
            run([cmake, "--install", build, "--prefix", prefix, "--component", component])
        tool = os.path.join(prefix, "bin", "pinpool-info")
        if not check(os.access(tool, os.X_OK), f"not installed: {tool}"):
            finish("install")
        env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
        # The tool carries the library's internals (pinpool_core), not a dependency on it.
        ldd = run(["ldd", tool], env=env).stdout
        check("libpinpool" not in ldd, f"installed pinpool-info depends on libpinpool: {ldd}")
        check(run([tool, "--version"], env=env).stdout.startswith("pinpool-info "), "--version")
        r = tool_json([tool], env=env)
        check(r["schema_version"] == 4, "installed tool's JSON")
    finish("install")


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    mode = sys.argv[1]
    if mode == "host":
        check_host(sys.argv[2])
    elif mode == "nobody":
        check_nobody(sys.argv[2])
    elif mode == "guest":
        check_guest(sys.argv[2])
    elif mode == "demo":
        check_demo(sys.argv[2])
    elif mode == "install" and len(sys.argv) == 4:
        check_install(sys.argv[2], sys.argv[3])
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
