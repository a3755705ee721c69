"""10^6 allocate/drop cycles from Python (with views made along the way) leave the pool's live
bytes, this process's open descriptors and its VmPin where they were after the warm-up."""

import gc
import time

import numpy
import torch

import pinpool
from conftest import open_fds, proc_status

CYCLES = 10**6


def figures(pool):
    gc.collect()
    return {"live_bytes": pool.stats()["live_bytes"], "arrays": pool.stats()["arrays"],
            "fds": open_fds(), "VmPin kB": proc_status("VmPin")}


def test_a_million_cycles_leave_nothing_behind():
    with pinpool.Pool(budget="64MiB", chunk_size="2MiB") as pool:
        alloc = pool.allocate
        for _ in range(1000):  # warm-up: the first chunk, this thread's cache
            alloc(4096)
        base = figures(pool)
        start = time.perf_counter()
        for i in range(CYCLES):
            b = alloc(4096 if i & 1 else 64)  # the previous one is dropped here
            if i % 64 == 0:
                numpy.asarray(b)[0] = 1
            if i % 1024 == 0:
                t = torch.from_dlpack(b)
                b.free()  # deferred: the tensor holds it
                t[0] = 2
                del t
                with alloc("64KiB") as c:
                    memoryview(c)[0] = 3
        del b
        elapsed = time.perf_counter() - start
        print(f"{CYCLES} cycles in {elapsed:.2f} s ({elapsed / CYCLES * 1e9:.0f} ns each)")
        assert figures(pool) == base


def test_array_cycles_leave_nothing_behind():
    with pinpool.Pool(budget="64MiB", chunk_size="2MiB") as pool:
        # Warm-up as the loop runs: two arrays alive at the rebinding (the pool's high-water mark).
        a = pool.allocate_array(200, 16384)
        a = pool.allocate_array(200, 16384)
        del a
        base = figures(pool)
        for i in range(2000):
            a = pool.allocate_array(200, 16384)
            if i % 16 == 0:
                rows = a.run_view(0)
                rows[0, 0] = 1
                a.free()
                del rows
        del a
        assert figures(pool) == base
