"""A Block as Python sees it: the buffer protocol and DLPack with numpy and torch (same address,
writes visible both ways), typed views, and the lifetime rule (the memory goes back to the pool
only once no view of it lives)."""

import ctypes
import gc
import pickle

import numpy
import pytest
import torch

import pinpool


def address_of(mv):
    """The address a memoryview shows (through ctypes, which takes the buffer itself)."""
    return ctypes.addressof(ctypes.c_char.from_buffer(mv))


def live(pool):
    return pool.stats()["live_bytes"]


def test_memoryview_is_the_block_writable_and_shared(pool):
    with pool.allocate(4096) as b:
        mv = memoryview(b)
        assert (mv.nbytes, mv.format, mv.readonly, mv.ndim) == (4096, "B", False, 1)
        assert address_of(mv) == b.address
        mv[10] = 0xAB
        array = numpy.asarray(b)
        assert array[10] == 0xAB
        array[11] = 0xCD
        assert mv[11] == 0xCD
        del mv, array


@pytest.mark.parametrize("make", ["asarray", "frombuffer", "from_dlpack"])
def test_numpy_views_share_the_address_and_writes(pool, make):
    with pool.allocate(8192) as b:
        a = {"asarray": numpy.asarray, "frombuffer": lambda x: numpy.frombuffer(x, numpy.uint8),
             "from_dlpack": numpy.from_dlpack}[make](b)
        assert a.ctypes.data == b.address and a.nbytes == 8192
        other = numpy.asarray(b)
        if make == "from_dlpack":
            # numpy 1.24 marks what it imports through DLPack read-only (the unversioned DLPack
            # tensor cannot say whether it is writable): writes go through another view.
            assert not a.flags.writeable
        else:
            a[:] = 3
            assert (other == 3).all()
        other[5] = 9
        assert a[5] == 9
        del a, other


def test_torch_from_dlpack_shares_the_address_and_writes(pool):
    with pool.allocate(4096) as b:
        t = torch.from_dlpack(b)
        assert t.data_ptr() == b.address and t.dtype == torch.uint8 and t.numel() == 4096
        assert t.device.type == "cpu"
        t[0] = 200
        a = numpy.asarray(b)
        assert a[0] == 200
        a[1] = 201
        assert int(t[1]) == 201
        del t, a


def test_dlpack_device_and_capsule(pool):
    with pool.allocate(64) as b:
        assert b.__dlpack_device__() == (1, 0)
        capsule = b.__dlpack__()
        assert type(capsule).__name__ == "PyCapsule"
        with pytest.raises(BufferError):
            b.__dlpack__(stream=1)
        with pytest.raises(BufferError):
            b.__dlpack__(copy=True)
        del capsule


def test_typed_views_numpy_and_torch(pool):
    with pool.allocate(4096) as b:
        f = b.view("f4", (4, 256))
        assert f.shape == (4, 256) and f.dtype == numpy.float32 and f.ctypes.data == b.address
        f[1, 2] = 1.5
        t = b.view(torch.float32, (1024,))
        assert t.data_ptr() == b.address and float(t[256 + 2]) == 1.5
        tail = b.view(numpy.int64, offset=4096 - 64)
        assert tail.shape == (8,) and tail.ctypes.data == b.address + 4096 - 64
        t16 = b.view(torch.int16, (2, 8), offset=128)
        assert t16.data_ptr() == b.address + 128 and t16.shape == (2, 8)
        with pytest.raises(pinpool.InvalidArgumentError):
            b.view("f8", (1000,))  # 8000 bytes of a 4096-byte block
        with pytest.raises(pinpool.InvalidArgumentError):
            b.view("u1", offset=4097)
        with pytest.raises(TypeError):
            b.view("not-a-dtype")
        del f, t, tail, t16


def test_properties(pool):
    with pool.allocate(100) as b:
        assert b.size == b.nbytes == len(b) == 100
        assert b.chunk == 0 and b.parent is None and not b.freed
        (k,) = b.keys
        assert k.kind == "host" and k.domain == "long-term pin"
        assert b.offset == k.offset == b.address - k.base
        assert 0 <= b.offset < k.length
        loc = pool.lookup(b.address + 50)
        assert loc.chunk == b.chunk and loc.keys[0].offset == b.offset + 50
        assert "100 bytes" in repr(b)
    assert b.freed and "freed" in repr(b)


@pytest.mark.parametrize("kind", ["numpy", "torch", "memoryview", "capsule"])
@pytest.mark.parametrize("end", ["free", "with"])
def test_a_view_outliving_free_keeps_the_memory(pool, kind, end):
    base = live(pool)
    b = pool.allocate(65536)
    start = b.address
    make = {"numpy": numpy.asarray, "torch": torch.from_dlpack, "memoryview": memoryview,
            "capsule": lambda x: x.__dlpack__()}[kind]
    if end == "with":
        with b:
            view = make(b)
    else:
        view = make(b)
        b.free()
    assert b.freed
    assert live(pool) >= base + 65536, "freed while a view lives"
    # Nothing allocated meanwhile lands on the memory the view still shows.
    others = [pool.allocate(65536) for _ in range(64)]
    assert all(o.address + o.size <= start or o.address >= start + 65536 for o in others)
    if kind != "capsule":
        numpy.asarray(view if kind != "torch" else view.numpy())[:] = 0x5A
    for o in others:
        o.free()
    del view, others
    gc.collect()
    assert live(pool) == base


def test_free_returns_at_once_without_views(pool):
    base = live(pool)
    b = pool.allocate(4096)
    numpy.asarray(b)[:] = 1  # a view made and gone
    assert live(pool) == base + 4096
    b.free()
    assert live(pool) == base


def test_raw_consumers_hold_the_block_object_not_the_buffer(pool):
    # torch.frombuffer asks for a buffer without a format, gives it back at once and keeps the
    # address (and a reference to the Block): the memory must stay until the Block goes.
    base = live(pool)
    b = pool.allocate(4096)
    t = torch.frombuffer(b, dtype=torch.uint8)
    assert t.data_ptr() == b.address
    b.free()
    assert live(pool) == base + 4096
    t[:] = 7
    del b
    gc.collect()
    assert live(pool) == base + 4096, "torch.frombuffer's tensor still holds the block"
    del t
    gc.collect()
    assert live(pool) == base


USES = {
    "memoryview": memoryview,
    "numpy.asarray": numpy.asarray,
    "numpy.from_dlpack": numpy.from_dlpack,
    "torch.from_dlpack": torch.from_dlpack,
    "view": lambda b: b.view("u1"),
    "__dlpack__": lambda b: b.__dlpack__(),
    "address": lambda b: b.address,
    "keys": lambda b: b.keys,
    "offset": lambda b: b.offset,
    "with": lambda b: b.__enter__(),
}


@pytest.mark.parametrize("use", sorted(USES))
def test_use_after_free_is_a_typed_error(pool, use):
    b = pool.allocate(4096)
    b.free()
    with pytest.raises(pinpool.FreedError) as e:
        USES[use](b)
    assert isinstance(e.value, ValueError) and "freed" in str(e.value)
    b.free()  # freeing twice does nothing


def test_a_block_does_not_pickle(pool):
    with pool.allocate(64) as b:
        with pytest.raises(TypeError, match="handle"):
            pickle.dumps(b)


def test_a_pool_closed_under_live_blocks_stays_until_they_go():
    p = pinpool.Pool(budget="64MiB", chunk_size="2MiB")
    b = p.allocate(4096)
    a = numpy.asarray(b)
    p.close()
    assert p.closed
    with pytest.raises(pinpool.FreedError):
        p.allocate(1)
    a[:] = 9  # the C++ pool is alive: the block's memory too
    assert b.address and (numpy.asarray(b) == 9).all()
    b.free()
    del a
