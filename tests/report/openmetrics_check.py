#!/usr/bin/env python3
"""PoolStats::ToOpenMetrics's text through a real OpenMetrics parser (prometheus_client's, the
Python client Prometheus maintains; Debian's python3-prometheus-client), for a made-up snapshot
with every kind of figure and for a running pool's scrape. The parser is strict: a malformed line,
a counter without `_total`, a histogram whose buckets do not add up, a missing `# EOF` all raise.
Then checks that what it read is what the snapshot holds. With pinpool-info's path, also reads
the running pool as another process does: the pool serves its socket (Pool::ServeMetrics) and
`pinpool-info --metrics SOCKET` prints what it says.
Usage: check.py <openmetrics_dump> [<pinpool-info>].
Exits 0 when all holds, 1 with every failure listed.
"""
import math
import os
import subprocess
import sys
import tempfile

try:
    from prometheus_client.openmetrics.parser import text_string_to_metric_families
except ImportError:
    print("prometheus_client is missing: apt-get install python3-prometheus-client "
          "(scripts/setup-deps.sh installs it)", file=sys.stderr)
    sys.exit(1)

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def parse(dump, mode):
    text = subprocess.run([dump, mode], check=True, capture_output=True, text=True).stdout
    return parse_text(text, mode)


def parse_text(text, mode):
    try:
        return {f.name: f for f in text_string_to_metric_families(text)}, text
    except Exception as e:  # the parser's own words: what is malformed, and where
        print(f"{mode}: the parser refused the text: {e!r}\n{text}", file=sys.stderr)
        sys.exit(1)


def samples(family, suffix="", **labels):
    return [s for s in family.samples
            if s.name == family.name + suffix and all(s.labels.get(k) == v for k, v in labels.items())]


def value(families, name, suffix="", **labels):
    if name not in families:
        failures.append(f"no family {name}")
        return None
    found = samples(families[name], suffix, **labels)
    if len(found) != 1:
        failures.append(f"{name}{suffix}{labels}: {len(found)} samples")
        return None
    return found[0].value


def histogram_ok(families, name, count, **labels):
    """Buckets cumulative, +Inf equal to _count, _count as expected (None: any)."""
    if name not in families:
        failures.append(f"no histogram {name}")
        return
    f = families[name]
    check(f.type == "histogram", f"{name} is a {f.type}")
    check(f.unit == "seconds", f"{name} unit {f.unit!r}")
    buckets = [s for s in samples(f, "_bucket") if all(s.labels.get(k) == v for k, v in labels.items())]
    bounds = [float(s.labels["le"]) for s in buckets]
    check(bounds == sorted(bounds) and math.isinf(bounds[-1]), f"{name} bounds {bounds}")
    check(bounds[0] == 1e-6, f"{name} first bound {bounds[0]}")
    values = [s.value for s in buckets]
    check(values == sorted(values), f"{name} buckets not cumulative: {values}")
    total = value(families, name, "_count", **labels)
    check(values[-1] == total, f"{name} +Inf bucket {values[-1]} != count {total}")
    if count is not None:
        check(total == count, f"{name} count {total}, expected {count}")


def synthetic(dump):
    fam, text = parse(dump, "synthetic")
    check(text.endswith("# EOF\n"), "no # EOF at the end")
    # Gauges and counters from the rows, with their units.
    check(value(fam, "pinpool_live_bytes") == 3 * 2**20, "live_bytes")
    check(fam["pinpool_live_bytes"].unit == "bytes", "live_bytes has no unit")
    check(value(fam, "pinpool_cached_bytes") == 256 * 2**10, "cached_bytes")
    check(fam["pinpool_growths"].type == "counter", "growths is not a counter")
    check(value(fam, "pinpool_growths", "_total") == 5, "growths_total")
    check("pinpool_memlock_limit" in fam and not fam["pinpool_memlock_limit"].samples,
          "an unlimited memlock_limit writes no sample")
    check(value(fam, "pinpool_memlock_exempt") == 0, "memlock_exempt as 0/1")
    # Records: chunks labelled by index, domains by name (escapes round-trip).
    check(value(fam, "pinpool_chunk_huge_bytes", chunk="0", page_size="2M") == 2 * 2**20,
          "chunk 0 huge bytes")
    check(value(fam, "pinpool_chunk_size", chunk="1", numa_node="1") == 2 * 2**20, "chunk 1")
    odd = "a \"quoted\" \\ name\nwith a newline"
    check(value(fam, "pinpool_domain_registrations", "_total", domain="rxe0/pd0",
                kind="verbs", pinning="long-term") == 4, "verbs registrations")
    check(value(fam, "pinpool_domain_registered_bytes", domain=odd) == 0,
          "a domain name with quotes, a backslash and a newline comes back as it was")
    check(value(fam, "pinpool_domain_windows", domain="rxe0/pd0") == 64, "domain figure")
    check(value(fam, "pinpool_domain_windows", domain=odd) == 1, "the same figure, other domain")
    check(value(fam, "pinpool_domain_window_allocations", "_total", domain="rxe0/pd0") == 70,
          "domain counter figure")
    # Histograms.
    histogram_ok(fam, "pinpool_allocate_slow_latency_seconds", 5)
    check(value(fam, "pinpool_allocate_slow_latency_seconds", "_bucket", le="4e-06") == 4,
          "slow path: 3 events <= 1 us and one <= 4 us")
    check(value(fam, "pinpool_allocate_slow_latency_seconds", "_sum") == 100.5, "slow path sum")
    histogram_ok(fam, "pinpool_domain_register_latency_seconds", 4, domain="rxe0/pd0")
    histogram_ok(fam, "pinpool_domain_deregister_latency_seconds", 0, domain=odd)
    histogram_ok(fam, "pinpool_growth_growth_latency_seconds", 2)
    histogram_ok(fam, "pinpool_growth_trim_latency_seconds", 0)
    histogram_ok(fam, "pinpool_grants_verbs_window_bind_seconds", 7)
    check(fam["pinpool_grants_verbs_window_bind_seconds"].documentation ==
          "post to completion of a bind", "grant histogram help")
    # Grant figures, held blocks by age.
    check(value(fam, "pinpool_grants_verbs_remote_access_errors", "_total") == 1, "grant figure")
    check(fam["pinpool_grants_verbs_remote_access_errors"].documentation ==
          "help with \"quotes\" and \\", "help escapes round-trip")
    ages = fam.get("pinpool_grants_held_age_seconds")
    check(ages is not None and ages.type == "gaugehistogram", "held ages: a gauge histogram")
    check(value(fam, "pinpool_grants_held_age_seconds", "_gcount") == 3, "3 held blocks")
    check(value(fam, "pinpool_grants_held_age_seconds", "_bucket", le="1") == 2,
          "2 held for at most 1 s")
    check(value(fam, "pinpool_grants_held_age_bytes", age_le="+Inf") == 12288, "held bytes")
    check(value(fam, "pinpool_growth_seconds_to_first_chunk") == 0.01, "seconds_to_first_chunk")
    check("pinpool_growth_seconds_to_initial_size" in fam and
          not fam["pinpool_growth_seconds_to_initial_size"].samples, "not yet: no sample")


def running(dump, info=None):
    if info is None:
        fam, _ = parse(dump, "running")
    else:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "metrics.sock")
            server = subprocess.Popen([dump, "serve", path], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True)
            try:
                check(server.stdout.readline().strip() == "serving", "the pool did not serve")
                out = subprocess.run([info, "--metrics", path], capture_output=True, text=True)
                check(out.returncode == 0, f"pinpool-info --metrics: {out.returncode} {out.stderr}")
            finally:
                server.stdin.close()
                server.wait(timeout=30)
            check(not os.path.exists(path), "the socket outlived the pool")
            gone = subprocess.run([info, "--metrics", path], capture_output=True, text=True)
            check(gone.returncode == 1 and "Pool::ServeMetrics" in gone.stderr,
                  f"no pool serving: exit {gone.returncode}, {gone.stderr!r}")
        fam, _ = parse_text(out.stdout, "pinpool-info --metrics")
    # Reserve added 2 chunks, the second 1.5 MiB block a third; Trim(2 MiB) gave two back.
    histogram_ok(fam, "pinpool_growth_growth_latency_seconds", 3)
    histogram_ok(fam, "pinpool_domain_register_latency_seconds", 3, domain="fake")
    histogram_ok(fam, "pinpool_growth_trim_latency_seconds", 2)
    histogram_ok(fam, "pinpool_domain_deregister_latency_seconds", 2, domain="fake")
    histogram_ok(fam, "pinpool_allocate_slow_latency_seconds", None)
    # Three blocks above 64 KiB: the slow path times one in 32 of those per thread, the first
    # included.
    check(value(fam, "pinpool_allocate_slow_latency_seconds", "_count") >= 1,
          "the thread's first large block was timed")
    check(value(fam, "pinpool_live_bytes") >= 100 * 2**10, "the live block")
    check(value(fam, "pinpool_growth_trims", "_total") == 2, "two chunks trimmed")
    check(value(fam, "pinpool_mapped_bytes") == 2 * 2**20, "2 MiB mapped after the trim")


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    synthetic(sys.argv[1])
    running(sys.argv[1])
    if len(sys.argv) == 3:
        running(sys.argv[1], sys.argv[2])
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    if not failures:
        print("openmetrics: both texts parse and hold what the snapshots hold")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
