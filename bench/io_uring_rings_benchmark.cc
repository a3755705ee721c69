// One pool, many rings (pinpool/io_uring.h): what it costs to make a pool's memory usable on 1, 2,
// 4, 8 and 16 rings, with the registration cloned into every ring (kClone, where the kernel can:
// Linux 6.13+) against each ring registering it itself (kPerRing: IoUringDomainOptions::clone =
// false, what kernels that cannot clone do), in one run:
//   join/<clone|per_ring>/<rings>   the pool (PINPOOL_BENCH_RINGS_MIB, default 1024 MiB, 4 KiB
//                                   pages, in 256 MiB chunks) is registered in the domain's ring
//                                   (untimed); the time is the AddRing of the other rings-1.
//   grow/<clone|per_ring>/<rings>   the rings join an empty pool's domain first (untimed); the
//                                   time is Reserve of the whole pool: mapping, populating and
//                                   registering every chunk, reaching every ring.
// Counters: pinned_bytes (the process's VmPin with the pool on every ring, less before the pool),
// memlock_bytes (the domain's own figure, IoUringDomainFigures::kMemlockBytes), ms_per_ring (join
// only). Cloning should keep both byte counters at the pool's size whatever the rings, and a
// ring's join in microseconds; per ring, both grow with every ring.
//
//   PINPOOL_BENCH_RINGS_MIB=1024 build/bench/io_uring_rings_benchmark --benchmark_repetitions=3
//
// Each case runs PINPOOL_BENCH_RINGS_ITERATIONS times (default 3; the smoke run 1).
// Needs RLIMIT_MEMLOCK of 16 times the pool for the per-ring cases (root, or `ulimit -l`).
#include <benchmark/benchmark.h>
#include <liburing.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "pinpool/io_uring.h"
#include "pinpool/pool.h"

namespace {

std::size_t PoolBytes() {
  const char* mib = std::getenv("PINPOOL_BENCH_RINGS_MIB");
  return (mib != nullptr ? std::strtoull(mib, nullptr, 10) : 1024) * pinpool::kMiB;
}

// Iterations per case: each builds a pool, so a fixed few (a join of one ring takes no time at
// all, which a minimum time would repeat without end).
benchmark::IterationCount Iterations() {
  const char* n = std::getenv("PINPOOL_BENCH_RINGS_ITERATIONS");
  return n != nullptr ? std::strtoll(n, nullptr, 10) : 3;
}

long long VmPinBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmPin:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return -1;
}

// `n` rings of the application's, closed when it goes.
struct Rings {
  std::vector<io_uring> rings;
  explicit Rings(std::size_t n) : rings(n) {
    for (io_uring& r : rings) {
      if (io_uring_queue_init(8, &r, 0) != 0) std::abort();
    }
  }
  ~Rings() {
    for (io_uring& r : rings) io_uring_queue_exit(&r);
  }
};

pinpool::PoolOptions Options(std::shared_ptr<pinpool::IoUringDomain> domain) {
  pinpool::PoolOptions o;
  o.page_size = pinpool::PageSize::k4K;
  o.require_page_size = true;
  o.chunk_size = std::min<std::size_t>(PoolBytes(), 256 * pinpool::kMiB);
  o.budget = PoolBytes();
  o.domains = {std::move(domain)};
  return o;
}

void Report(benchmark::State& state, const pinpool::IoUringDomain& domain, long long pinned) {
  state.counters["pinned_bytes"] = static_cast<double>(pinned);
  state.counters["memlock_bytes"] = static_cast<double>(
      pinpool::FigureValue(domain.figures(), pinpool::IoUringDomainFigures::kMemlockBytes)
          .value_or(0));
}

std::shared_ptr<pinpool::IoUringDomain> MakeDomain(benchmark::State& state, bool clone) {
  pinpool::IoUringDomainOptions o;
  o.clone = clone;
  o.slots = 64;
  absl::StatusOr<std::shared_ptr<pinpool::IoUringDomain>> d = pinpool::IoUringDomain::Create(8, o);
  if (!d.ok()) {
    state.SkipWithError(std::string(d.status().message()).c_str());
    return nullptr;
  }
  if (clone && (*d)->sharing() != pinpool::IoUringSharing::kClone) {
    state.SkipWithError("this kernel cannot clone registrations between rings (Linux 6.13+)");
    return nullptr;
  }
  return *std::move(d);
}

void Join(benchmark::State& state, bool clone) {
  const auto rings = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    const long long before = VmPinBytes();
    std::shared_ptr<pinpool::IoUringDomain> domain = MakeDomain(state, clone);
    if (domain == nullptr) break;
    pinpool::PoolOptions o = Options(domain);
    o.initial_size = PoolBytes();
    absl::StatusOr<std::unique_ptr<pinpool::Pool>> pool = pinpool::Pool::Create(o);
    if (!pool.ok()) {
      state.SkipWithError(std::string(pool.status().message()).c_str());
      break;
    }
    Rings others(rings - 1);
    const auto start = std::chrono::steady_clock::now();
    for (io_uring& r : others.rings) {
      if (absl::Status s = domain->AddRing(&r); !s.ok()) {
        state.SkipWithError(std::string(s.message()).c_str());
        break;
      }
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    state.SetIterationTime(seconds);
    Report(state, *domain, VmPinBytes() - before);
    state.counters["ms_per_ring"] = rings > 1 ? seconds * 1e3 / static_cast<double>(rings - 1) : 0;
    for (io_uring& r : others.rings) (void)domain->RemoveRing(&r);
  }
}

void Grow(benchmark::State& state, bool clone) {
  const auto rings = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    const long long before = VmPinBytes();
    std::shared_ptr<pinpool::IoUringDomain> domain = MakeDomain(state, clone);
    if (domain == nullptr) break;
    Rings others(rings - 1);
    for (io_uring& r : others.rings) {
      if (absl::Status s = domain->AddRing(&r); !s.ok()) {
        state.SkipWithError(std::string(s.message()).c_str());
        break;
      }
    }
    absl::StatusOr<std::unique_ptr<pinpool::Pool>> pool = pinpool::Pool::Create(Options(domain));
    if (!pool.ok()) {
      state.SkipWithError(std::string(pool.status().message()).c_str());
      break;
    }
    const auto start = std::chrono::steady_clock::now();
    const absl::Status grown = (*pool)->Reserve(PoolBytes());
    state.SetIterationTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (!grown.ok()) {
      state.SkipWithError(std::string(grown.message()).c_str());
      break;
    }
    Report(state, *domain, VmPinBytes() - before);
    pool->reset();
    for (io_uring& r : others.rings) (void)domain->RemoveRing(&r);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * PoolBytes()));
}

void RingCounts(benchmark::internal::Benchmark* b) {
  for (int rings : {1, 2, 4, 8, 16}) b->Arg(rings);
  b->ArgName("rings")->UseManualTime()->Iterations(Iterations())->Unit(benchmark::kMillisecond);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  const pinpool::IoUringCloneSupport clone = pinpool::IoUringDomain::KernelCanClone();
  benchmark::AddCustomContext("pool_bytes", std::to_string(PoolBytes()));
  benchmark::AddCustomContext("kernel_clones_ranges", clone.ranges ? "yes" : "no");
  for (const bool c : {true, false}) {
    const std::string mode = c ? "clone" : "per_ring";
    benchmark::RegisterBenchmark(("join/" + mode).c_str(), [c](benchmark::State& s) {
      Join(s, c);
    })->Apply(RingCounts);
    benchmark::RegisterBenchmark(("grow/" + mode).c_str(), [c](benchmark::State& s) {
      Grow(s, c);
    })->Apply(RingCounts);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
