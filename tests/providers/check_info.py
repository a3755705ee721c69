#!/usr/bin/env python3
"""Checks pinpool-info's report of the transfer engines (rdma.providers in --json, and the text).

    check_info.py host TOOL    on the host (CI installs libucx and libfabric): UCX is present
                               with its version and tcp and shared-memory transports, libfabric
                               with tcp and shm providers offering RMA; pinpool-info does not link
                               either library (it loads them at run time).
    check_info.py guest TOOL   in the soft-RoCE guest: UCX offers rc_verbs on rxe0 and libfabric
                               the verbs provider with RMA (run by tests/providers/in-guest.sh).

Exit status: 0 when every check holds, 1 otherwise (each failure printed).
"""
import json
import subprocess
import sys

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print(f"check_info: FAIL: {what}", file=sys.stderr)


def main():
    mode, tool = sys.argv[1], sys.argv[2]
    report = json.loads(subprocess.run([tool, "--json"], check=True, capture_output=True,
                                       text=True).stdout)
    providers = {e["name"]: e for e in report["rdma"]["providers"]}
    check(set(providers) == {"ucx", "libfabric"}, f"providers listed: {sorted(providers)}")
    ucx, fabric = providers.get("ucx", {}), providers.get("libfabric", {})
    for e in (ucx, fabric):
        check(e.get("present") is True and e.get("version") and e.get("error") is None,
              f"{e.get('name')}: present with a version and no error: {e}")
    transports = ucx.get("transports", [])
    providers = fabric.get("providers", [])
    if mode == "host":
        check(any(t.startswith("tcp/") for t in transports), f"UCX tcp transport: {transports}")
        check(any(t.split("/")[0] in ("posix", "sysv", "cma") for t in transports),
              f"UCX shared-memory transport: {transports}")
        check(any(p.startswith("tcp;ofi_rxm: ") and p.endswith(" rma") for p in providers),
              f"libfabric tcp;ofi_rxm with RMA: {providers}")
        check(any(p.startswith("shm: ") and p.endswith(" rma") for p in providers),
              f"libfabric shm with RMA: {providers}")
        needed = subprocess.run(["readelf", "-d", tool], check=True, capture_output=True,
                                text=True).stdout
        check("libucp" not in needed and "libfabric" not in needed,
              "pinpool-info links UCX or libfabric: installing it would make them mandatory")
    else:
        check("rc_verbs/rxe0:1" in transports, f"UCX rc_verbs on rxe0: {transports}")
        check(any(p.startswith("verbs;ofi_rxm: ") and p.endswith(" rma") for p in providers),
              f"libfabric verbs;ofi_rxm with RMA: {providers}")
    text = subprocess.run([tool], check=True, capture_output=True, text=True).stdout
    check("Transfer engines" in text and "libucp.so.0 " + str(ucx.get("version")) in text,
          "the text report has the providers section")
    if failures:
        return 1
    print(f"check_info: {mode}: UCX {ucx['version']} ({len(transports)} transports), "
          f"libfabric {fabric['version']} ({len(providers)} providers): OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
