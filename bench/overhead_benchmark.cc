// Memory overhead: bytes a pool maps and pins per byte the application asked for, under a
// mixed-size workload with churn (the pool's fragmentation), and the pool's own metadata.
//
// Workload (fixed seed, one thread): sizes log-uniform within four bands - 60% 16 B..1 KiB,
// 25% 1..16 KiB, 12% 16..256 KiB, 3% 256 KiB..2 MiB - allocated until the live requested bytes
// reach the target, then 4x as many random frees and re-allocations (each free followed by an
// allocation of a new size while below the target). Reported at the end, all as counters:
//   requested        bytes the live blocks asked for
//   allocated        PoolStats::live_bytes + cached_bytes (size classes of live blocks and of
//                    the free blocks waiting in caches)
//   cached           PoolStats::thread_cache_bytes + transfer_cache_bytes (the caches' part)
//   heap_active      PoolStats::heap_active_bytes (pages the heap uses for blocks)
//   mapped, pinned   PoolStats::mapped_bytes / pinned_bytes
//   *_per_requested  each of the above divided by requested
//   metadata         growth of the process's resident memory OUTSIDE the pool's chunks, minus
//                    the benchmark's own block list: the pool's bookkeeping (its heap's
//                    metadata, chunk table, thread caches) plus whatever else the process
//                    touched meanwhile (the benchmark's block list is touched beforehand), so an
//                    upper bound
// PINPOOL_BENCH_LIVE_MIB sets the target (default 32).
//
//   PINPOOL_BENCH_LIVE_MIB=512 build-bench/bench/overhead_benchmark
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "pinpool/pool.h"

namespace {

std::size_t LiveTarget() {
  const char* mib = std::getenv("PINPOOL_BENCH_LIVE_MIB");
  return (mib != nullptr ? std::strtoull(mib, nullptr, 10) : 32) * pinpool::kMiB;
}

// Resident bytes of all mappings except those inside [lo, hi).
std::size_t RssOutside(std::uintptr_t lo, std::uintptr_t hi) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  std::size_t total = 0;
  bool inside = false;
  while (std::getline(smaps, line)) {
    std::uintptr_t start = 0;
    std::uintptr_t end = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &start, &end) == 2 && line.find(':') > 8) {
      inside = start >= lo && end <= hi;
      continue;
    }
    std::size_t kb = 0;
    if (!inside && std::sscanf(line.c_str(), "Rss: %zu kB", &kb) == 1) total += kb * 1024;
  }
  return total;
}

std::size_t DrawSize(std::mt19937_64& rng) {
  struct Band {
    double weight;
    double lo;
    double hi;
  };
  static constexpr Band kBands[] = {{0.60, 16, 1 << 10},
                                    {0.25, 1 << 10, 16 << 10},
                                    {0.12, 16 << 10, 256 << 10},
                                    {0.03, 256 << 10, 2 << 20}};
  double u = std::uniform_real_distribution<double>(0, 1)(rng);
  for (const Band& b : kBands) {
    if (u < b.weight) {
      const double x = std::uniform_real_distribution<double>(std::log(b.lo), std::log(b.hi))(rng);
      return static_cast<std::size_t>(std::exp(x));
    }
    u -= b.weight;
  }
  return 64;
}

void BM_MixedWorkload(benchmark::State& state) {
  const std::size_t target = LiveTarget();
  for (auto _ : state) {
    pinpool::PoolOptions o;
    o.chunk_size = 64 * pinpool::kMiB;
    o.budget = 4 * target + 256 * pinpool::kMiB;
    o.page_size = pinpool::PageSize::kTransparent;
    // The benchmark's own block list, touched up front so that its pages are in rss_before.
    std::vector<pinpool::Block> live(1 << 18);
    std::vector<std::size_t> asked(1 << 18);
    live.clear();
    asked.clear();
    const std::size_t rss_before = RssOutside(0, 0);
    absl::StatusOr<std::unique_ptr<pinpool::Pool>> pool = pinpool::Pool::Create(o);
    if (!pool.ok()) {
      state.SkipWithError(std::string(pool.status().message()).c_str());
      break;
    }
    pinpool::Pool& p = **pool;
    std::mt19937_64 rng(20261121);
    std::size_t requested = 0;  // asked[k] is what live[k] asked for
    auto fill = [&] {
      while (requested < target) {
        const std::size_t n = DrawSize(rng);
        pinpool::Block b = p.Allocate(n);
        if (!b) return false;
        live.push_back(b);
        asked.push_back(n);
        requested += n;
      }
      return true;
    };
    if (!fill()) {
      state.SkipWithError(std::string(p.last_growth_error().message()).c_str());
      break;
    }
    const std::size_t churn = 4 * live.size();
    for (std::size_t i = 0; i < churn; ++i) {
      const std::size_t k = std::uniform_int_distribution<std::size_t>(0, live.size() - 1)(rng);
      p.Deallocate(live[k]);
      requested -= asked[k];
      live[k] = live.back();
      asked[k] = asked.back();
      live.pop_back();
      asked.pop_back();
      if (!fill()) {
        state.SkipWithError(std::string(p.last_growth_error().message()).c_str());
        break;
      }
    }
    const pinpool::PoolStats s = p.GetStats();
    std::uintptr_t lo = UINTPTR_MAX;
    std::uintptr_t hi = 0;
    for (const pinpool::ChunkStats& c : s.chunks) {
      lo = std::min(lo, c.base);
      hi = std::max(hi, c.base + c.size);
    }
    // Beyond the pre-touched capacity the lists grew by reallocation: count that as ours.
    const std::size_t own = live.capacity() > (1 << 18) ? live.capacity() * sizeof(pinpool::Block) +
                                                              asked.capacity() * sizeof(std::size_t)
                                                        : 0;
    const std::size_t rss_after = RssOutside(lo, hi);
    const double metadata =
        static_cast<double>(rss_after) - static_cast<double>(rss_before) - static_cast<double>(own);
    const auto r = static_cast<double>(requested);
    state.counters["blocks"] = static_cast<double>(live.size());
    state.counters["requested"] = r;
    state.counters["allocated"] = static_cast<double>(s.live_bytes + s.cached_bytes);
    state.counters["cached"] = static_cast<double>(s.thread_cache_bytes + s.transfer_cache_bytes);
    state.counters["heap_active"] = static_cast<double>(s.heap_active_bytes);
    state.counters["mapped"] = static_cast<double>(s.mapped_bytes);
    state.counters["pinned"] = static_cast<double>(s.pinned_bytes);
    state.counters["allocated_per_requested"] =
        static_cast<double>(s.live_bytes + s.cached_bytes) / r;
    state.counters["heap_active_per_requested"] = static_cast<double>(s.heap_active_bytes) / r;
    state.counters["mapped_per_requested"] = static_cast<double>(s.mapped_bytes) / r;
    state.counters["pinned_per_requested"] = static_cast<double>(s.pinned_bytes) / r;
    state.counters["metadata"] = metadata;
    state.counters["metadata_per_requested"] = metadata / r;
    for (const pinpool::Block& b : live) p.Deallocate(b);
  }
}

BENCHMARK(BM_MixedWorkload)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
