// Allocation latency while the pool grows under a steady allocation load, with a low watermark
// (chunks added in the background by the pool's thread) and without (the allocation that finds no
// room maps, populates and registers the next chunk itself). Reports the distribution of single
// Allocate calls: p50, p99, p99.9 and max, in nanoseconds, and how many chunks each way added.
//
// Each iteration creates a pool with one chunk (untimed), then allocates 64 KiB blocks, one every
// `pause` microseconds of busy work (the benchmark's argument), until `chunks` chunks' worth are
// live, timing every Allocate with steady_clock; then frees them and destroys the pool (untimed).
// Domain: the default long-term pin on the host; the RDMA device's PD (verbs) when there is one
// (the soft-RoCE guest, bench/guest-benchmarks.sh). 16 MiB chunks of 4 KiB pages, populated.
//   PINPOOL_BENCH_GROWTH_CHUNKS (default 16) sets `chunks`, PINPOOL_BENCH_GROWTH_ITERATIONS
//   (default 3) the iterations, PINPOOL_BENCH_GROWTH_PAUSE_US the pause (default 100 on the host,
//   2000 with verbs in the guest).
//   build/bench/growth_latency_benchmark --benchmark_filter=pin
//
// steady_rate/<domain>/rate_mbps:R/workers:W: the case a new user meets. 32 MiB chunks (the
// default page size, falling back as the machine allows), initial_size 64 MiB, low_watermark
// 96 MiB, background_workers W; one thread allocates 1 MiB blocks on a fixed schedule of R MB/s
// (block i is due at i MiB / R: a late allocation does not push the next ones back) until
// PINPOOL_BENCH_STEADY_MIB (default 800) MiB are live. Reports growth_waits (allocations that
// waited for a chunk in flight), allocation_growths, p50/p99/max of single Allocate calls, and
// behind_ms: how far the schedule slipped (0 when the pool kept pace), and preempted: allocations
// during which the scheduler switched the thread out (on a small machine the pool's workers and
// the allocating thread share the cores: those are slow without waiting for the pool). --smoke
// (first argument) runs 64 MiB at two rates, one iteration each. Also chunk_build_ms (mean) and
// register_ms (Register's share of it). PINPOOL_BENCH_STEADY_SLEEP=1 sleeps until each
// allocation is due instead of spinning.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "pinpool/pool.h"
#include "pinpool/verbs.h"
#include "reserve_runs.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kChunk = 16 * pinpool::kMiB;
constexpr std::size_t kBlock = 64 * pinpool::kKiB;

std::size_t EnvOr(const char* name, std::size_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::strtoull(v, nullptr, 10) : fallback;
}
std::size_t Chunks() { return EnvOr("PINPOOL_BENCH_GROWTH_CHUNKS", 16); }
bool smoke = false;
std::size_t SteadyBytes() {
  return (smoke ? 64 : EnvOr("PINPOOL_BENCH_STEADY_MIB", 800)) * pinpool::kMiB;
}

void BusyFor(std::chrono::microseconds d) {
  const auto until = Clock::now() + d;
  while (Clock::now() < until) {
  }
}

double Percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  const std::size_t i = std::min(v.size() - 1, static_cast<std::size_t>(q * (v.size() - 1) + 0.5));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(i), v.end());
  return v[i];
}

void GrowUnderLoad(benchmark::State& state, std::shared_ptr<pinpool::Domain> domain,
                   bool watermark) {
  const std::chrono::microseconds pause(state.range(0));
  const std::size_t chunks = Chunks();
  pinpool::PoolOptions o;
  o.page_size = pinpool::PageSize::k4K;
  o.chunk_size = kChunk;
  o.budget = (chunks + 4) * kChunk;
  o.initial_size = kChunk;
  o.low_watermark = watermark ? 2 * kChunk : 0;
  o.domains = {domain};
  std::vector<double> ns;
  double allocation_growths = 0, background_growths = 0, waits = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto pool = pinpool::Pool::Create(o);
    if (!pool.ok()) {
      state.SkipWithError(std::string(pool.status().message()).c_str());
      break;
    }
    std::vector<pinpool::Block> blocks;
    blocks.reserve(chunks * kChunk / kBlock);
    state.ResumeTiming();
    for (std::size_t i = 0; i < chunks * kChunk / kBlock; ++i) {
      const auto t0 = Clock::now();
      pinpool::Block b = (*pool)->Allocate(kBlock);
      const auto t1 = Clock::now();
      if (!b) {
        state.SkipWithError("an allocation failed");
        break;
      }
      ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
      blocks.push_back(b);
      BusyFor(pause);
    }
    state.PauseTiming();
    const pinpool::PoolStats s = (*pool)->GetStats();
    allocation_growths += static_cast<double>(s.growth.allocation_growths);
    background_growths += static_cast<double>(s.growth.background_growths);
    waits += static_cast<double>(s.growth.growth_waits);
    for (const pinpool::Block& b : blocks) (*pool)->Deallocate(b);
    pool->reset();
    state.ResumeTiming();
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["allocations"] = static_cast<double>(ns.size());
  state.counters["p50_ns"] = Percentile(ns, 0.5);
  state.counters["p99_ns"] = Percentile(ns, 0.99);
  state.counters["p999_ns"] = Percentile(ns, 0.999);
  state.counters["max_ns"] = ns.empty() ? 0 : *std::max_element(ns.begin(), ns.end());
  state.counters["allocation_growths"] = n > 0 ? allocation_growths / n : 0;
  state.counters["background_growths"] = n > 0 ? background_growths / n : 0;
  state.counters["growth_waits"] = n > 0 ? waits / n : 0;
}

// Times this thread was switched out involuntarily: an allocation during which it was had its
// time stretched by the scheduler (the pool's own workers on a machine with few cores), not by
// the pool.
long InvoluntarySwitches() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return u.ru_nivcsw;
}

void SteadyRate(benchmark::State& state, std::shared_ptr<pinpool::Domain> domain) {
  const double bytes_per_ns = static_cast<double>(state.range(0)) * 1e6 / 1e9;
  const std::size_t total = SteadyBytes();
  // PINPOOL_BENCH_STEADY_SLEEP=1: wait for each allocation's time asleep instead of spinning (the
  // spinning thread takes a core from the pool's workers on a small machine).
  const bool sleep_until_due = EnvOr("PINPOOL_BENCH_STEADY_SLEEP", 0) != 0;
  constexpr std::size_t kSteadyChunk = 32 * pinpool::kMiB;
  constexpr std::size_t kSteadyBlock = pinpool::kMiB;
  pinpool::PoolOptions o;
  o.chunk_size = kSteadyChunk;
  o.budget = total + 8 * kSteadyChunk;
  o.initial_size = 2 * kSteadyChunk;
  o.low_watermark = 3 * kSteadyChunk;
  o.background_workers = static_cast<unsigned>(state.range(1));
  o.domains = {domain};
  std::vector<double> ns;
  double allocation_growths = 0, waits = 0, behind_ms = 0, build_s = 0, builds = 0;
  double preempted = 0, register_s = 0;
  std::string pages;
  for (auto _ : state) {
    state.PauseTiming();
    auto pool = pinpool::Pool::Create(o);
    if (!pool.ok()) {
      state.SkipWithError(std::string(pool.status().message()).c_str());
      break;
    }
    std::vector<pinpool::Block> blocks;
    blocks.reserve(total / kSteadyBlock);
    state.ResumeTiming();
    const Clock::time_point start = Clock::now();
    for (std::size_t i = 0; i < total / kSteadyBlock; ++i) {
      const Clock::time_point due =
          start + std::chrono::nanoseconds(static_cast<std::int64_t>(
                      static_cast<double>(i * kSteadyBlock) / bytes_per_ns));
      if (sleep_until_due) {
        std::this_thread::sleep_until(due);
      } else {
        while (Clock::now() < due) {
        }
      }
      const long switched = InvoluntarySwitches();
      const auto t0 = Clock::now();
      pinpool::Block b = (*pool)->Allocate(kSteadyBlock);
      const auto t1 = Clock::now();
      if (InvoluntarySwitches() != switched) ++preempted;
      if (!b) {
        state.SkipWithError("an allocation failed");
        break;
      }
      ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
      behind_ms = std::max(behind_ms, std::chrono::duration<double, std::milli>(t1 - due).count());
      blocks.push_back(b);
    }
    state.PauseTiming();
    const pinpool::PoolStats s = (*pool)->GetStats();
    allocation_growths += static_cast<double>(s.growth.allocation_growths);
    waits += static_cast<double>(s.growth.growth_waits);
    build_s += s.growth.growth_latency.sum_seconds;
    register_s += s.domains.empty() ? 0 : s.domains[0].register_seconds;
    builds += static_cast<double>(s.growth.growth_latency.count);
    if (!s.chunks.empty()) pages = pinpool::PageSizeName(s.chunks.back().page_size);
    for (const pinpool::Block& b : blocks) (*pool)->Deallocate(b);
    pool->reset();
    state.ResumeTiming();
  }
  const double n = static_cast<double>(state.iterations());
  state.SetLabel(pages);
  state.counters["chunk_build_ms"] = builds > 0 ? 1e3 * build_s / builds : 0;
  state.counters["register_ms"] = builds > 0 ? 1e3 * register_s / builds : 0;
  state.counters["allocations"] = static_cast<double>(ns.size());
  state.counters["p50_ns"] = Percentile(ns, 0.5);
  state.counters["p99_ns"] = Percentile(ns, 0.99);
  state.counters["max_ns"] = ns.empty() ? 0 : *std::max_element(ns.begin(), ns.end());
  state.counters["allocation_growths"] = n > 0 ? allocation_growths / n : 0;
  state.counters["growth_waits"] = n > 0 ? waits / n : 0;
  state.counters["behind_ms"] = behind_ms;
  state.counters["preempted"] = n > 0 ? preempted / n : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--smoke") {
    smoke = true;
    argv[1] = argv[0];
    --argc;
    ++argv;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  const pinpool_bench::NamedDomain chosen =
      pinpool_bench::VerbsOrDefaultDomain("growth_latency_benchmark");
  if (chosen.domain == nullptr) return 1;
  const std::string name = chosen.name;
  const std::shared_ptr<pinpool::Domain> domain = chosen.domain;
  // Under TCG a 16 MiB chunk takes ~0.1-0.5 s to populate and register: pause longer there.
  const std::vector<long> pauses = {
      static_cast<long>(EnvOr("PINPOOL_BENCH_GROWTH_PAUSE_US", name == "verbs" ? 2000 : 100))};
  benchmark::AddCustomContext("domain", domain->name());
  benchmark::AddCustomContext("chunks", std::to_string(Chunks()));
  for (const bool watermark : {true, false}) {
    const std::string bench =
        "grow_under_load/" + name + (watermark ? "/watermark" : "/no_watermark");
    auto* b = benchmark::RegisterBenchmark(bench.c_str(), [domain, watermark](benchmark::State& s) {
      GrowUnderLoad(s, domain, watermark);
    });
    for (long p : pauses) b->Arg(p);
    b->ArgName("pause_us")
        ->Unit(benchmark::kMillisecond)
        ->Iterations(
            static_cast<benchmark::IterationCount>(EnvOr("PINPOOL_BENCH_GROWTH_ITERATIONS", 3)));
  }
  const std::string steady = "steady_rate/" + name;
  auto* b = benchmark::RegisterBenchmark(steady.c_str(),
                                         [domain](benchmark::State& s) { SteadyRate(s, domain); });
  if (smoke) {
    b->Args({500, 1})->Args({2000, 2});
  } else {
    for (long rate : {500, 1000, 2000, 3000, 4000}) {
      for (long workers : {1, 2, 4}) b->Args({rate, workers});
    }
  }
  b->ArgNames({"rate_mbps", "workers"})
      ->Unit(benchmark::kMillisecond)
      ->Iterations(static_cast<benchmark::IterationCount>(
          smoke ? 1 : EnvOr("PINPOOL_BENCH_GROWTH_ITERATIONS", 3)));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
