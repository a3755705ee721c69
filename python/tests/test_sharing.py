"""Sharing from Python: block handles that pickle, multiprocessing workers (spawn and forkserver)
that attach to the pool and write blocks in place, attachments that follow the pool's growth, and
a warm restart (quiesce, hand over, adopt, claim) between two processes."""

import multiprocessing
import os
import pickle
import socket

import numpy
import pytest

import pinpool
import workers


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_workers_write_blocks_in_place(shared_pool, method):
    blocks = [shared_pool.allocate("64KiB") for _ in range(8)]
    for b in blocks:
        numpy.asarray(b)[:] = 0
    with pinpool.ShareServer(shared_pool) as server:
        ctx = multiprocessing.get_context(method)
        with ctx.Pool(2) as pool_of_workers:
            done = pool_of_workers.starmap(
                workers.fill, [(server.path, b.handle, i + 1) for i, b in enumerate(blocks)])
            assert shared_pool.stats()["sharing"]["attached_processes"] >= 1
    assert {pid for pid, _ in done} - {os.getpid()}, "the workers are other processes"
    for i, b in enumerate(blocks):
        assert (numpy.asarray(b) == i + 1).all(), f"block {i} not written in place"
        b.free()


def test_handles_pickle(shared_pool):
    with shared_pool.allocate(100) as b:
        h = b.handle
        assert h == shared_pool.handle_of(b) and hash(h) == hash(shared_pool.handle_of(b))
        again = pickle.loads(pickle.dumps(h))
        assert again == h and again.size == 100 and again.pool_id == shared_pool.id
        assert (h.chunk, h.offset) == (b.chunk, b.address - shared_pool.lookup(b.address).keys[0].base)
        assert "BlockHandle" in repr(h) and f"generation={h.generation}" in repr(h)


def test_a_handle_of_another_generation_maps_nothing(shared_pool):
    with shared_pool.allocate(100) as b, pinpool.ShareServer(shared_pool) as server:
        att = pinpool.Attachment.connect(server.path)
        h = b.handle
        assert att.map(h).size == 100
        stale = pinpool.BlockHandle(h.pool_id, h.chunk, h.generation + 1, h.offset, h.size)
        assert stale != h
        with pytest.raises(pinpool.NotFoundError):
            att.map(stale)
        att.close()


def test_an_attachment_follows_the_pool_as_it_grows(shared_pool):
    first = shared_pool.allocate("1MiB")
    with pinpool.ShareServer(shared_pool) as server:
        att = pinpool.Attachment.connect(server.path)
        assert att.chunks_mapped == 1 and att.pool_id == shared_pool.id
        later = [shared_pool.allocate("1MiB") for _ in range(6)]  # new chunks
        view = att.map(later[-1].handle)  # not mapped yet: asks the server, then maps
        assert att.chunks_mapped >= 3
        assert view.address != later[-1].address and view.parent is att
        numpy.asarray(view)[:] = 0x3C  # the same pages: the owner sees it
        assert (numpy.asarray(later[-1]) == 0x3C).all()
        assert view.keys == () and view.chunk is None
        with pytest.raises(pinpool.InvalidArgumentError, match="view"):
            view.free()
        kept = numpy.asarray(att.map(first.handle))
        att.close()  # unmaps once `kept` goes
        kept[:] = 1
        assert (numpy.asarray(first) == 1).all()
        with pytest.raises(pinpool.FreedError):
            att.map(first.handle)
        del kept, view
    for b in [first] + later:
        b.free()


def test_a_handle_of_another_pool_is_refused(shared_pool):
    with pinpool.Pool(backing="memfd", budget="64MiB", chunk_size="2MiB") as other:
        with other.allocate(64) as foreign, pinpool.ShareServer(shared_pool) as server:
            with pinpool.Attachment.connect(server.path) as att:
                with pytest.raises(pinpool.InvalidArgumentError, match="another pool|not of this"):
                    att.map(foreign.handle)
                with pytest.raises(TypeError):
                    att.map((0, 0, 64))


def test_warm_restart_between_processes(tmp_path):
    path = str(tmp_path / "handover.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    values = [11, 22, 33]
    child = multiprocessing.get_context("spawn").Process(target=workers.hand_over_to,
                                                         args=(path, values))
    child.start()
    conn, _ = listener.accept()
    pool = pinpool.Pool.adopt(conn, backing="memfd", budget="64MiB", chunk_size="2MiB")
    child.join(120)
    assert child.exitcode == 0
    handles = pool.adopted_blocks()
    assert len(handles) == 3
    blocks = [pool.claim(h) for h in handles]
    for b, value in zip(blocks, values):
        assert b.size == 64 << 10 and (numpy.asarray(b) == value).all()
    assert pool.claim(handles[0]) is blocks[0]
    blocks[0].free()
    with pytest.raises(pinpool.NotFoundError):
        pool.claim(handles[0])
    assert pool.stats()["sharing"]["adopted_blocks"] == 3
    for b in blocks[1:]:
        b.free()
    pool.close()
    conn.close()
    listener.close()
