"""PyTorch's own DataLoader filling pool blocks in its workers, against its usual path.

    PYTHONPATH=build/python /usr/bin/python3 python/bench/dataloader_benchmark.py [--smoke]

Both paths in one run, for batches of 1, 4, 16 and 64 MiB (16 samples each), with
torch.utils.data.DataLoader(num_workers=4, multiprocessing_context="spawn"):

- pinpool: the main process hands every batch a block: its batch sampler (which the DataLoader
  runs in the main process) allocates one from a memfd-backed pool and passes its handle with the
  batch's indices. Each worker attaches to the pool once (worker_init_fn: pinpool.attach), and
  its collate_fn decodes every sample straight into its place in the block, returning only the
  handle. The main process gets the batch as a tensor over the block (torch.from_dlpack) and
  frees the block at once: the memory goes back to the pool when the tensor goes. No byte is
  copied after the decode.
- usual: __getitem__ decodes each sample into a tensor of its own, the default collate_fn stacks
  them into a tensor in shared memory (a copy, in the worker), the main process receives it and
  copies it into a staging buffer, as pin_memory does (CPU-only torch cannot pin: the staging
  buffer is a pool block): every byte is copied twice.

A sample's decode is one pass over its bytes (XOR of its encoded form with its index), the same
work on both paths. Reported per batch size: batches per second over the batches after the first
(the workers' start-up is not counted) and bytes copied per batch (in the workers, in the main
process), each path's every batch checked byte for byte in the smoke run and a sample of them
otherwise. Timing needs a quiet machine; --smoke (ctest bench.python_dataloader_smoke) runs 1 MiB
batches with two workers and checks the results, not the speed.
"""

import argparse
import functools
import sys
import time
import warnings

import numpy
import torch
import torch.utils.data

import pinpool

SAMPLES_PER_BATCH = 16


@functools.lru_cache(maxsize=None)
def encoded(sample_bytes):
    """Every sample's encoded form (the same bytes, decoded with the sample's index)."""
    return numpy.random.default_rng(1234).integers(0, 256, sample_bytes, dtype=numpy.uint8)


def decode(index, sample_bytes, out):
    numpy.bitwise_xor(encoded(sample_bytes), index & 0xFF, out=out)


class Samples(torch.utils.data.Dataset):
    """`count` samples of `sample_bytes`; an item is either an index (the usual path: decoded
    here into a tensor of its own) or (handle, slot, index) (the pinpool path: decoded later,
    straight into the block, by collate_into_block)."""

    def __init__(self, count, sample_bytes):
        self.count = count
        self.sample_bytes = sample_bytes

    def __len__(self):
        return self.count

    def __getitem__(self, item):
        if isinstance(item, tuple):
            return item
        out = numpy.empty(self.sample_bytes, dtype=numpy.uint8)
        decode(item, self.sample_bytes, out)
        return torch.from_numpy(out)


def attach_worker(path, worker_id):
    pinpool.attach(path)


def collate_into_block(path, sample_bytes, items):
    handle = items[0][0]
    rows = pinpool.attach(path).map(handle).view("u1", (len(items), sample_bytes))
    for _, slot, index in items:
        decode(index, sample_bytes, rows[slot])
    return handle


class BlockPerBatch(torch.utils.data.Sampler):
    """Batches of consecutive indices, each with a new block of the pool for its bytes."""

    def __init__(self, pool, batches, sample_bytes):
        self.pool = pool
        self.batches = batches
        self.sample_bytes = sample_bytes
        self.outstanding = {}

    def __len__(self):
        return self.batches

    def __iter__(self):
        for b in range(self.batches):
            block = self.pool.allocate(SAMPLES_PER_BATCH * self.sample_bytes)
            self.outstanding[block.handle] = block
            first = b * SAMPLES_PER_BATCH
            yield [(block.handle, k, first + k) for k in range(SAMPLES_PER_BATCH)]


def check(batch, first, sample_bytes):
    expected = numpy.empty(sample_bytes, dtype=numpy.uint8)
    rows = batch.view(SAMPLES_PER_BATCH, sample_bytes).numpy()
    for k in range(SAMPLES_PER_BATCH):
        decode(first + k, sample_bytes, expected)
        assert numpy.array_equal(rows[k], expected), f"sample {first + k} is wrong"


def run_pinpool(pool, server, batch_bytes, batches, workers, check_every):
    sample_bytes = batch_bytes // SAMPLES_PER_BATCH
    sampler = BlockPerBatch(pool, batches, sample_bytes)
    loader = torch.utils.data.DataLoader(
        Samples(batches * SAMPLES_PER_BATCH, sample_bytes), batch_sampler=sampler,
        num_workers=workers, multiprocessing_context="spawn",
        worker_init_fn=functools.partial(attach_worker, server.path),
        collate_fn=functools.partial(collate_into_block, server.path, sample_bytes))
    start = None
    for b, handle in enumerate(loader):
        block = sampler.outstanding.pop(handle)
        address = block.address
        batch = torch.from_dlpack(block)
        block.free()  # goes back to the pool when `batch` goes
        # The batch is the block itself (no copy in this process), and the check below reads
        # what the worker decoded into it (no copy in the worker either).
        assert batch.data_ptr() == address and batch.numel() == batch_bytes
        if b % check_every == 0:
            check(batch, b * SAMPLES_PER_BATCH, sample_bytes)
        if start is None:
            start = time.perf_counter()
        del batch
    return (batches - 1) / (time.perf_counter() - start), 0, 0


def run_usual(pool, batch_bytes, batches, workers, check_every):
    sample_bytes = batch_bytes // SAMPLES_PER_BATCH
    loader = torch.utils.data.DataLoader(
        Samples(batches * SAMPLES_PER_BATCH, sample_bytes), batch_size=SAMPLES_PER_BATCH,
        num_workers=workers, multiprocessing_context="spawn")
    staging = pool.allocate(batch_bytes)
    target = torch.from_dlpack(staging).view(SAMPLES_PER_BATCH, sample_bytes)
    worker_copied = main_copied = 0
    start = None
    for b, batch in enumerate(loader):
        worker_copied += batch.numel() * batch.element_size()  # default_collate's stack
        target.copy_(batch)  # pin_memory's copy into the staging buffer
        main_copied += batch.numel() * batch.element_size()
        if b % check_every == 0:
            check(target.view(-1), b * SAMPLES_PER_BATCH, sample_bytes)
        if start is None:
            start = time.perf_counter()
    del target
    staging.free()
    return (batches - 1) / (time.perf_counter() - start), worker_copied, main_copied


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    # torch warns when there are more workers than CPUs: the measurement asks for four.
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    sizes = [1] if args.smoke else [1, 4, 16, 64]
    workers = 2 if args.smoke else 4
    check_every = 1 if args.smoke else 8
    pool = pinpool.Pool(backing="memfd", budget="2GiB", chunk_size="128MiB")
    print(f"| batch | path | batches/s | bytes copied per batch (workers + main) |")
    print("|---|---|---:|---:|")
    with pinpool.ShareServer(pool) as server:
        for mib in sizes:
            batches = 6 if args.smoke else max(16, 1024 // mib)
            batch_bytes = mib << 20
            rate, w, m = run_pinpool(pool, server, batch_bytes, batches, workers, check_every)
            print(f"| {mib} MiB | pinpool | {rate:.1f} | {(w + m) // batches} |")
            usual_rate, w2, m2 = run_usual(pool, batch_bytes, batches, workers, check_every)
            print(f"| {mib} MiB | usual | {usual_rate:.1f} | {w2 // batches} + {m2 // batches} |",
                  flush=True)
            assert w == 0 and m == 0 and w2 == m2 == batches * batch_bytes
    assert pool.stats()["live_bytes"] == 0, "a batch's block was not given back"
    pool.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
