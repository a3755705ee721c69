"""Pool from Python: options, stats under the JSON names, OpenMetrics text, lookup, growth and
trim, buffer classes, the io_uring domain's buffer index, and destruction giving every pin back."""

import gc

import numpy
import pytest

import pinpool
from conftest import SMALL, proc_status


def test_stats_have_the_json_names(pool):
    with pool.allocate(4096):
        s = pool.stats()
        for key in ["live_bytes", "mapped_bytes", "pinned_bytes", "budget_bytes", "cached_bytes",
                    "domains", "chunks", "grants", "growth", "sharing", "classes"]:
            assert key in s, key
        assert s["live_bytes"] >= 4096 and s["budget_bytes"] == 64 << 20
        assert s["mapped_bytes"] == len(s["chunks"]) * (2 << 20)
        assert s["domains"][0]["name"] == "long-term pin"
        assert s["pinned_bytes"] == s["mapped_bytes"]
    assert pool.stats()["live_bytes"] == 0


def test_metrics_are_openmetrics(pool):
    text = pool.metrics()
    assert text.rstrip().endswith("# EOF")
    assert "pinpool_live_bytes" in text or "pinpool_pool_live_bytes" in text
    assert pinpool.OPENMETRICS_CONTENT_TYPE.startswith("application/openmetrics-text")


def test_lookup_and_contains(pool):
    with pool.allocate(1000) as b:
        inner = b.address + 999
        assert pool.contains(inner) and pool.lookup(inner).chunk == b.chunk
        assert pool.lookup(inner).keys[0].offset == b.offset + 999
    assert pool.lookup(16) is None and not pool.contains(16)


def test_reserve_trim_and_growth(pool):
    pool.reserve("8MiB")
    assert pool.stats()["mapped_bytes"] >= 8 << 20
    assert pool.trim() >= 6 << 20
    assert pool.stats()["mapped_bytes"] <= 2 << 20
    assert pool.ready and pool.last_growth_error is None
    pool.await_initial_size(1.0)


def test_properties_and_repr(pool):
    assert pool.chunk_size == 2 << 20 and pool.budget == 64 << 20
    assert pool.max_block_size == (2 << 20) * 7 // 8
    assert len(pool.id) == 16 and pool.domains == [] and not pool.closed
    assert "2 MiB chunks" in repr(pool)
    assert not pool.needs_replenish


def test_classes_allocate_from_their_share():
    classes = [pinpool.BufferClass("rx", reserved="4MiB", cap="8MiB", scrub="on_reuse")]
    with pinpool.Pool(classes=classes, **SMALL) as p:
        with p.allocate("64KiB", cls="rx") as b:
            numpy.asarray(b)[:] = 9
        s = p.stats()
        rx = [c for c in s["classes"] if c["name"] == "rx"][0]
        assert rx["reserved_bytes"] == 4 << 20 and rx["scrubbed_bytes"] >= 64 << 10
        with p.allocate("64KiB", cls="rx") as b:
            assert (numpy.asarray(b) == 0).all(), "scrubbed on reuse"
        assert classes[0].name == "rx" and "on_reuse" in repr(classes[0])


def test_io_uring_domain_buffer_index():
    ring = pinpool.IoUringDomain(8)
    with pinpool.Pool(domains=[ring], **SMALL) as p:
        assert p.domains == [ring] and ring.kind == "io_uring" and ring.pinning == "long-term"
        blocks = [p.allocate("1MiB") for _ in range(4)]  # two chunks: two fixed buffers
        indexes = {b.chunk: b.keys[0].buffer_index for b in blocks}
        assert len(indexes) >= 2 and len(set(indexes.values())) == len(indexes)
        assert ring.slots_in_use == len(p.stats()["chunks"])
        assert all(b.keys[0].kind == "io_uring" and b.keys[0].length == 2 << 20 for b in blocks)
        assert ring.ring_fd >= 0
        for b in blocks:
            b.free()


def test_two_domains_give_keys_for_each():
    with pinpool.Pool(domains=[pinpool.IoUringDomain(8), pinpool.long_term_pin_domain()],
                      **SMALL) as p:
        with p.allocate(64) as b:
            assert [k.kind for k in b.keys] == ["io_uring", "host"]


def test_resident_domain_is_not_pinned():
    d = pinpool.resident_domain()
    assert d.pinning == "resident" and "not pinned" in d.name
    with pinpool.Pool(domains=[d], **SMALL) as p, p.allocate(64):
        s = p.stats()
        assert s["locked_bytes"] == s["mapped_bytes"] and s["pinned_bytes"] == 0


def test_closing_gives_every_pin_back():
    before = proc_status("VmPin")
    p = pinpool.Pool(initial_size="8MiB", **SMALL)
    b = p.allocate(4096)
    assert proc_status("VmPin") >= before + 8 * 1024
    p.close()
    assert proc_status("VmPin") >= before + 8 * 1024, "a block still lives"
    b.free()
    gc.collect()
    assert proc_status("VmPin") == before


def test_background_start(pool):
    with pinpool.Pool(initial_size="8MiB", initial_size_in_background=True, **SMALL) as p:
        p.await_initial_size(60)
        assert p.ready and p.stats()["mapped_bytes"] >= 8 << 20


def test_serve_metrics_on_a_socket(pool, tmp_path):
    import socket
    path = tmp_path / "metrics.sock"
    pool.serve_metrics(path)
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(str(path))
        text = b""
        while chunk := s.recv(65536):
            text += chunk
    assert text.decode().rstrip().endswith("# EOF")
    with pytest.raises(pinpool.AlreadyExistsError):
        with pinpool.Pool(**SMALL) as other:
            other.serve_metrics(path)
    pool.stop_serving_metrics()
    assert not path.exists()
