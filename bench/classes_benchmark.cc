// What buffer classes (docs/classes.md) cost, in time: an allocate + free pair of one size in the
// default class of a pool without named classes, in the default class of a pool with them (the
// fast path must not move), in a named class, and in a named class under each scrub policy
// (on_reuse zeroes the block on its free: the cost grows with the block). Google Benchmark; the
// noise-free measure of the fast path is bench/instruction-counts.sh (classes/* columns).
#include <benchmark/benchmark.h>

#include <cstddef>
#include <string>
#include <utility>

#include "bench_pool.h"
#include "pinpool/pool.h"

namespace {

using pinpool::Block;
using pinpool::Pool;

pinpool::PoolOptions BaseOptions() {
  pinpool::PoolOptions o;
  o.chunk_size = 8 << 20;
  o.budget = 256 << 20;
  o.initial_size = 32 << 20;
  o.page_size = pinpool::PageSize::k4K;
  o.domains = {pinpool::MakeResidentNotPinnedDomain()};
  return o;
}

Pool& PlainPool() {
  static Pool* pool = &pinpool::bench::LeakedPool(BaseOptions());
  return *pool;
}

Pool& ClassesPool() {
  static Pool* pool = [] {
    pinpool::PoolOptions o = BaseOptions();
    o.classes = {
        {.name = "none", .reserved = 32 << 20},
        {.name = "on_reuse", .reserved = 32 << 20, .scrub = pinpool::Scrub::kOnReuse},
        {.name = "on_class_change", .reserved = 32 << 20, .scrub = pinpool::Scrub::kOnClassChange}};
    return &pinpool::bench::LeakedPool(std::move(o));
  }();
  return *pool;
}

void PairLoop(benchmark::State& state, Pool& pool, const pinpool::ClassId* cls) {
  const auto size = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    const Block b = cls == nullptr ? pool.Allocate(size) : pool.Allocate(*cls, size);
    benchmark::DoNotOptimize(b.data());
    pool.Deallocate(b);
  }
}

void BM_DefaultNoClasses(benchmark::State& state) { PairLoop(state, PlainPool(), nullptr); }
void BM_DefaultWithClasses(benchmark::State& state) { PairLoop(state, ClassesPool(), nullptr); }
void BM_Named(benchmark::State& state, const char* name) {
  const pinpool::ClassId cls = ClassesPool().ClassOf(name).value();
  PairLoop(state, ClassesPool(), &cls);
}

BENCHMARK(BM_DefaultNoClasses)->Arg(64)->Arg(4096)->Arg(65536);
BENCHMARK(BM_DefaultWithClasses)->Arg(64)->Arg(4096)->Arg(65536);
BENCHMARK_CAPTURE(BM_Named, scrub_none, "none")->Arg(64)->Arg(4096)->Arg(65536);
BENCHMARK_CAPTURE(BM_Named, scrub_on_reuse, "on_reuse")->Arg(64)->Arg(4096)->Arg(65536);
BENCHMARK_CAPTURE(BM_Named, scrub_on_class_change, "on_class_change")
    ->Arg(64)
    ->Arg(4096)
    ->Arg(65536);

}  // namespace

BENCHMARK_MAIN();
