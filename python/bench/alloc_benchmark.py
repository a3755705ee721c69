"""Allocation from Python, its speed against numpy and torch in the same run, and its waste.

    PYTHONPATH=build/python /usr/bin/python3 python/bench/alloc_benchmark.py [--smoke] [--json F]

1. Speed (timeit; the median of R repeats of N calls each, on one thread, ns per call):
   allocate + free of a 4 KiB block from Python (the Block dropped, free(), a `with`) against
   numpy.empty(4096, dtype=uint8) and torch.empty(4096, dtype=torch.uint8), and the ratios.
   Goals: within 2x of numpy, faster than torch.
2. torch.from_dlpack(block) for a 4 KiB and a 64 MiB block: the same cost at both sizes and the
   tensor at the block's own address (no copy), against torch.from_dlpack of a numpy array.
3. Waste: pinned bytes per requested byte. Each block takes its size class's bytes of pinned
   memory (live_bytes counts exactly that); sizes from 4 KiB to the largest block (of 1 GiB
   chunks: 896 MiB; 64 MiB chunks in the smoke run), each one byte
   above a class boundary (the worst case) and log-uniform in between. Blocks above a quarter of
   a chunk also leave the chunk's tail unused: the "packed" column fills a pool with them and
   divides its pinned bytes by the bytes asked for. PyTorch's pin_memory (its caching host
   allocator) rounds every request to the next power of two: that column is its rule, computed
   (CPU-only torch cannot pin). Goal: at most 1.125.
4. A request larger than the largest block (a 2.25 GiB tensor): served, or the error's words.

Timing is only meaningful on a quiet machine; --smoke runs everything briefly and checks the
results are sane (ctest bench.python_alloc_smoke), not fast.
"""

import argparse
import json
import math
import statistics
import sys
import timeit

import numpy
import torch

import pinpool


def median_ns(stmt, env, number, repeat):
    times = timeit.repeat(stmt, globals=env, number=number, repeat=repeat)
    return statistics.median(times) / number * 1e9


def speed(number, repeat):
    pool = pinpool.Pool(budget="256MiB", chunk_size="64MiB", initial_size="64MiB")
    env = {"alloc": pool.allocate, "numpy": numpy, "torch": torch, "pool": pool}
    for _ in range(10000):
        pool.allocate(4096)  # this thread's cache, warm
    rows = {
        "pool.allocate(4096) (dropped)": "alloc(4096)",
        "pool.allocate(4096).free()": "alloc(4096).free()",
        "with pool.allocate(4096): pass": "with alloc(4096): pass",
        "numpy.empty(4096, uint8)": "numpy.empty(4096, dtype=numpy.uint8)",
        "torch.empty(4096, uint8)": "torch.empty(4096, dtype=torch.uint8)",
    }
    result = {name: median_ns(stmt, env, number, repeat) for name, stmt in rows.items()}
    pool.close()
    return result


def dlpack(number, repeat):
    pool = pinpool.Pool(budget="256MiB", chunk_size="128MiB")
    small, big = pool.allocate(4096), pool.allocate("64MiB")
    for b in (small, big):
        t = torch.from_dlpack(b)
        assert t.data_ptr() == b.address and t.numel() == b.size, "from_dlpack copied"
        del t
    array = numpy.empty(4096, dtype=numpy.uint8)
    env = {"torch": torch, "small": small, "big": big, "array": array}
    result = {
        "torch.from_dlpack(4 KiB block)": median_ns("torch.from_dlpack(small)", env, number, repeat),
        "torch.from_dlpack(64 MiB block)": median_ns("torch.from_dlpack(big)", env, number, repeat),
        "torch.from_dlpack(numpy array)": median_ns("torch.from_dlpack(array)", env, number,
                                                    repeat),
    }
    small.free()
    big.free()
    pool.close()
    return result


def next_power_of_two(n):
    return 1 << (n - 1).bit_length()


def waste(points_per_doubling, chunk_size):
    pool = pinpool.Pool(budget=2 * chunk_size, chunk_size=chunk_size, page_size="4K",
                        populate=False)
    sizes, s = [], 4096
    while s <= pool.max_block_size:
        sizes += [s + 1] + [int(s * 2 ** (k / points_per_doubling))
                            for k in range(1, points_per_doubling)]
        s *= 2
    sizes = sorted(x for x in set(sizes + [4096, pool.max_block_size]) if x <= pool.max_block_size)
    ratios = []
    for x in sizes:
        before = pool.stats()["live_bytes"]
        with pool.allocate(x):
            ratios.append((pool.stats()["live_bytes"] - before) / x)
    pool.close()
    pin_memory = [next_power_of_two(x) / x for x in sizes]
    # Packed: blocks of a quarter of a chunk and more, a pool full of them.
    packed = []
    for fraction in (0.26, 0.34, 0.51, 0.875):
        chunk = 64 << 20
        with pinpool.Pool(budget="1GiB", chunk_size=chunk, page_size="4K") as p:
            size = int(chunk * fraction) // 4096 * 4096
            blocks = [p.allocate(size) for _ in range(12)]
            packed.append((size, p.stats()["pinned_bytes"] / (size * len(blocks))))
            for b in blocks:
                b.free()
    return {
        "sizes": len(sizes),
        "worst": max(ratios), "worst_at": sizes[ratios.index(max(ratios))],
        "geomean": math.exp(statistics.fmean(math.log(r) for r in ratios)),
        "pin_memory_worst": max(pin_memory),
        "pin_memory_geomean": math.exp(statistics.fmean(math.log(r) for r in pin_memory)),
        "packed": packed,
    }


def too_large():
    with pinpool.Pool(budget="4GiB", chunk_size="1GiB") as pool:
        try:
            with pool.allocate("2.25GiB"):
                return "served"
        except pinpool.InvalidArgumentError as e:
            return f"refused: {e}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="brief run that checks the results")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    number, repeat = (2000, 3) if args.smoke else (200000, 15)
    results = {"speed_ns": speed(number, repeat), "dlpack_ns": dlpack(number // 10, repeat),
               "waste": waste(4, 64 << 20) if args.smoke else waste(16, 1 << 30),
               "too_large": too_large()}

    s = results["speed_ns"]
    numpy_ns, torch_ns = s["numpy.empty(4096, uint8)"], s["torch.empty(4096, uint8)"]
    print("| 4 KiB, one thread | ns (median) | / numpy.empty | / torch.empty |")
    print("|---|---:|---:|---:|")
    for name, ns in s.items():
        print(f"| {name} | {ns:.0f} | {ns / numpy_ns:.2f} | {ns / torch_ns:.2f} |")
    print()
    print("| DLPack | ns (median) |")
    print("|---|---:|")
    for name, ns in results["dlpack_ns"].items():
        print(f"| {name} | {ns:.0f} |")
    w = results["waste"]
    print()
    print(f"Pinned bytes per requested byte, {w['sizes']} sizes from 4 KiB to the largest block: "
          f"pinpool worst {w['worst']:.3f} (at {w['worst_at']} B), geometric mean "
          f"{w['geomean']:.3f}; pin_memory's power-of-two rule worst {w['pin_memory_worst']:.3f}, "
          f"geometric mean {w['pin_memory_geomean']:.3f}.")
    for size, ratio in w["packed"]:
        print(f"  a pool full of {size >> 20} MiB blocks (64 MiB chunks): {ratio:.3f}")
    print(f"2.25 GiB: {results['too_large']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)

    # Sanity, not speed: the smoke run fails on wrong results only.
    assert all(v > 0 for v in s.values())
    assert 1.0 <= w["worst"] < 2.0 and w["geomean"] >= 1.0
    assert results["too_large"].startswith("refused") and "allocate_array" in results["too_large"]
    return 0


if __name__ == "__main__":
    sys.exit(main())
