"""Arrays from Python: element views, per-run numpy views, descriptors decoded by the pure-Python
decoder, and the lifetime rule for arrays (views keep the memory)."""

import gc

import numpy
import pytest
import torch

import pinpool
from conftest import SMALL

PAGE = 16 << 10


@pytest.fixture
def cache(pool):
    """A KV-cache-shaped array: 1000 pages of 16 KiB in 2 MiB chunks (8 runs)."""
    with pool.allocate_array(1000, PAGE, PAGE) as a:
        yield a


def test_layout(cache):
    assert (len(cache), cache.count, cache.element_size, cache.stride) == (1000, 1000, PAGE, PAGE)
    assert not cache.in_block and cache.elements_per_chunk == (2 << 20) // PAGE
    runs = cache.runs
    assert len(runs) == 8 and sum(r.count for r in runs) == 1000
    assert [r.first for r in runs] == [128 * i for i in range(8)]
    for r in runs:
        assert r.nbytes == r.count * PAGE
        assert cache[r.first].address == r.address and cache[r.first].chunk == r.chunk
        last = cache[r.first + r.count - 1]
        assert last.address == r.address + (r.count - 1) * PAGE
        assert last.keys[0].offset == last.address - r.keys[0].base


def test_elements_are_block_views(cache):
    e = cache[-1]
    assert e.parent is cache and e.size == PAGE and e.address == cache[999].address
    a = numpy.asarray(e)
    a[:] = 42
    assert (numpy.asarray(cache.element(999)) == 42).all()
    t = torch.from_dlpack(cache[999])
    assert t.data_ptr() == e.address and int(t[0]) == 42
    with e:  # a view's `with` frees nothing
        pass
    assert not e.freed
    del a, t


def test_run_views_share_memory_with_elements(cache):
    rows = cache.run_view(3)
    assert rows.shape == (128, PAGE) and rows.strides == (PAGE, 1)
    assert rows.ctypes.data == cache.runs[3].address
    rows[5, :] = 7
    assert (numpy.asarray(cache[3 * 128 + 5]) == 7).all()
    words = cache.run_view(7, "u8")
    assert words.shape == (1000 - 7 * 128, PAGE // 8)
    words[0, 0] = 0x0102030405060708
    assert bytes(numpy.asarray(cache[7 * 128])[:8]) == bytes(range(8, 0, -1))
    del rows, words


def test_strided_elements():
    with pinpool.Pool(**SMALL) as p, p.allocate_array(100, 100, 64) as a:
        assert a.stride == 128 and a.element_size == 100 and a.in_block
        rows = a.run_view(0)
        assert rows.shape == (100, 100) and rows.strides == (128, 1)
        assert a[1].address - a[0].address == 128
        del rows


def test_describe_decoded_in_pure_python(cache):
    d = pinpool.Descriptor.decode(cache.describe())
    assert (len(d), d.element_size, d.key_count, len(d.runs)) == (1000, PAGE, 1, 8)
    for i in [0, 1, 127, 128, 500, 999, -1]:
        e = d[i]
        assert e.address == cache[i].address and e.length == PAGE
        assert e.keys == (cache[i].keys[0].rkey,)
    sub = pinpool.Descriptor.decode(cache.describe([0], 120, 20))
    assert len(sub) == 20 and [r.count for r in sub.runs] == [8, 12]
    assert all(sub[i].address == cache[120 + i].address for i in range(20))
    assert [e.address for e in d] == [cache[i].address for i in range(1000)]


def test_an_element_outliving_free_keeps_the_array(pool):
    base = pool.stats()
    a = pool.allocate_array(300, PAGE)
    element = a[299]
    tensor = torch.from_dlpack(a[10])
    address = element.address
    a.free()
    assert a.freed
    assert pool.stats()["arrays"] == base["arrays"] + 1, "freed while its views live"
    other = pool.allocate_array(300, PAGE)
    assert not any(other[i].address == address for i in range(300))
    numpy.asarray(element)[:] = 1
    tensor[:] = 2
    del element
    gc.collect()
    assert pool.stats()["arrays"] == base["arrays"] + 2
    del tensor
    gc.collect()
    assert pool.stats()["arrays"] == base["arrays"] + 1
    other.free()
    assert pool.stats()["arrays"] == base["arrays"]
    assert pool.stats()["array_bytes"] == base["array_bytes"]


def test_small_arrays_are_one_block(pool):
    with pool.allocate_array(10, 64) as a:
        assert a.in_block and len(a.runs) == 1
        assert "10 elements" in repr(a)
    assert "freed" in repr(a)
