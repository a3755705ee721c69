// Allocation fast path: one Allocate + Deallocate pair of 64 B, 4 KiB and 64 KiB, 1 and 2
// threads, beside jemalloc's plain malloc/free and glibc's malloc/free in the same run.
// bench/ratios.py turns the JSON output into pinpool / baseline ratios.
//
//   build/bench/alloc_benchmark --benchmark_repetitions=5 --benchmark_format=json > out.json
//   python3 bench/ratios.py out.json
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>

#include "bench_pool.h"
#include "pinpool/pool.h"

extern "C" {  // the bench's own copy of jemalloc (renamed archive, default options)
void* pinpool_je_malloc(size_t);
void pinpool_je_free(void*);
}

namespace {

pinpool::Pool& SharedPool() {
  static pinpool::Pool* pool = [] {
    pinpool::PoolOptions o;
    o.chunk_size = 64 * pinpool::kMiB;
    o.budget = 512 * pinpool::kMiB;
    o.initial_size = 64 * pinpool::kMiB;
    o.page_size = pinpool::PageSize::kTransparent;
    return &pinpool::bench::LeakedPool(o);
  }();
  return *pool;
}

void BM_Pinpool(benchmark::State& state) {
  pinpool::Pool& pool = SharedPool();
  const auto size = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    pinpool::Block b = pool.Allocate(size);
    benchmark::DoNotOptimize(b.data());
    pool.Deallocate(b);
  }
}

void BM_Jemalloc(benchmark::State& state) {
  const auto size = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    void* p = pinpool_je_malloc(size);
    benchmark::DoNotOptimize(p);
    pinpool_je_free(p);
  }
}

void BM_Glibc(benchmark::State& state) {
  const auto size = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    void* p = std::malloc(size);
    benchmark::DoNotOptimize(p);
    std::free(p);
  }
}

#define PINPOOL_ALLOC_BENCH(fn) \
  BENCHMARK(fn)->Arg(64)->Arg(4096)->Arg(65536)->Threads(1)->Threads(2)->UseRealTime()

PINPOOL_ALLOC_BENCH(BM_Pinpool);
PINPOOL_ALLOC_BENCH(BM_Jemalloc);
PINPOOL_ALLOC_BENCH(BM_Glibc);

}  // namespace

BENCHMARK_MAIN();
