"""Functions the sharing and fork tests run in worker processes (a module of its own, so that
spawn and forkserver children import it by name)."""

import os
import socket
import sys

import numpy

import pinpool


def fill(path, handle, value):
    """Maps `handle` through this process's attachment to the ShareServer at `path` and writes
    `value` into every byte, in place. Returns this process's pid and view address."""
    view = pinpool.attach(path).map(handle)
    numpy.asarray(view)[:] = value
    return os.getpid(), view.address


def hand_over_to(path, values):
    """A predecessor: makes a memfd pool, writes values[i] into block i, then quiesces and hands
    the pool over to the process listening at `path`. Exits 0 when every check passed."""
    pool = pinpool.Pool(backing="memfd", budget="64MiB", chunk_size="2MiB")
    blocks = [pool.allocate("64KiB") for _ in values]
    for block, value in zip(blocks, values):
        numpy.asarray(block)[:] = value
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    pool.quiesce()
    try:
        pool.allocate(64)
        sys.exit("a quiesced pool allocated")
    except pinpool.FailedPreconditionError:
        pass
    pool.hand_over(sock, blocks)
    try:
        numpy.asarray(blocks[0])
        sys.exit("a handed-over block was still usable")
    except pinpool.FreedError:
        pass
    for block in blocks:
        block.free()  # does nothing: the memory is the successor's
    pool.close()
    sock.close()
