// Start-up: how fast a pool of PINPOOL_BENCH_STARTUP_MIB (default 1024) gets its memory mapped,
// placed and registered, in GB/s, building chunks on one thread (sequential) or on
// reserve_threads threads at once (parallel: 0 = one per CPU), populated up front or not, with
// 2 MiB hugetlb pages or 4 KiB pages, all in one run. Each iteration creates an empty pool
// (untimed), times Reserve(total), checks the pages are what was required, then times Trim(0)
// giving it all back (reported as trim_gbps, with VmPin before and after), destroys it (untimed).
// Domain: the default long-term pin on the host (verbs on an RDMA device when there is one).
// 64 MiB chunks. hugetlb needs vm.nr_hugepages >= total / 2 MiB (scripts/run-benchmarks.sh sets
// it); without them those cases report the pool's own error.
//   PINPOOL_BENCH_STARTUP_MIB=1024 build/bench/startup_benchmark
//
// cold_start/<domain>/4K/{foreground,background}: the time to the first block of a pool whose
// initial_size is the whole total, when Create builds all of it (foreground) and when it builds
// the first chunk and leaves the rest to the pool's thread (initial_size_in_background). Timed:
// Create plus one Allocate (the manual time); reported: create_ms, first_block_ms, and
// full_ms (seconds_to_initial_size, after AwaitInitialSize). 4 KiB pages, populated.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "pinpool/pool.h"
#include "pinpool/verbs.h"
#include "reserve_runs.h"

namespace {

std::size_t TotalBytes() {
  const char* mib = std::getenv("PINPOOL_BENCH_STARTUP_MIB");
  return (mib != nullptr ? std::strtoull(mib, nullptr, 10) : 1024) * pinpool::kMiB;
}

// VmPin of this process in KiB (-1 if unknown).
long long VmPinKiB() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return -1;
  char line[256];
  long long kib = -1;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::sscanf(line, "VmPin: %lld kB", &kib) == 1) break;
  }
  std::fclose(f);
  return kib;
}

void Startup(benchmark::State& state, std::shared_ptr<pinpool::Domain> domain,
             pinpool::PageSize page, bool populate, unsigned threads) {
  const std::size_t total = TotalBytes();
  pinpool::PoolOptions o;
  o.page_size = page;
  o.require_page_size = true;
  o.chunk_size = 64 * pinpool::kMiB;
  o.budget = total;
  o.populate = populate;
  o.reserve_threads = threads;
  o.domains = {domain};
  for (auto _ : state) {
    std::optional<pinpool_bench::ReserveRun> run =
        pinpool_bench::TimedReserve(state, o, total, page, /*check_pages=*/populate);
    if (!run) break;
    std::unique_ptr<pinpool::Pool>& pool = run->pool;
    state.SetIterationTime(run->seconds);
    state.counters["first_chunk_s"] = pool->GetStats().growth.seconds_to_first_chunk;
    // And back: Trim gives every chunk back (nothing was allocated), untimed by the benchmark's
    // clock but reported, with VmPin before and after.
    const long long pinned = VmPinKiB();
    const auto trim_start = std::chrono::steady_clock::now();
    const std::size_t given = pool->Trim(0);
    const double trim_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - trim_start).count();
    state.counters["trim_gbps"] = static_cast<double>(given) / trim_s / 1e9;
    state.counters["vmpin_mib_before_trim"] = static_cast<double>(pinned) / 1024;
    state.counters["vmpin_mib_after_trim"] = static_cast<double>(VmPinKiB()) / 1024;
    pool.reset();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * total));
  state.counters["threads"] =
      threads != 0 ? threads : static_cast<double>(std::thread::hardware_concurrency());
}

void ColdStart(benchmark::State& state, std::shared_ptr<pinpool::Domain> domain, bool background) {
  using Clock = std::chrono::steady_clock;
  const std::size_t total = TotalBytes();
  pinpool::PoolOptions o;
  o.page_size = pinpool::PageSize::k4K;
  o.chunk_size = 64 * pinpool::kMiB;
  o.budget = total;
  o.initial_size = total;
  o.initial_size_in_background = background;
  o.domains = {domain};
  for (auto _ : state) {
    const Clock::time_point start = Clock::now();
    auto pool = pinpool::Pool::Create(o);
    const Clock::time_point created = Clock::now();
    if (!pool.ok()) {
      state.SkipWithError(std::string(pool.status().message()).c_str());
      break;
    }
    pinpool::Block b = (*pool)->Allocate(4096);
    const Clock::time_point first = Clock::now();
    if (!b) {
      state.SkipWithError("the first allocation failed");
      break;
    }
    state.SetIterationTime(std::chrono::duration<double>(first - start).count());
    if (absl::Status s = (*pool)->AwaitInitialSize(std::chrono::minutes(5)); !s.ok()) {
      state.SkipWithError(std::string(s.message()).c_str());
      break;
    }
    state.counters["create_ms"] =
        std::chrono::duration<double, std::milli>(created - start).count();
    state.counters["first_block_ms"] =
        std::chrono::duration<double, std::milli>(first - start).count();
    state.counters["full_ms"] = 1e3 * (*pool)->GetStats().growth.seconds_to_initial_size;
    (*pool)->Deallocate(b);
    pool->reset();
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  const pinpool_bench::NamedDomain chosen =
      pinpool_bench::VerbsOrDefaultDomain("startup_benchmark");
  if (chosen.domain == nullptr) return 1;
  const std::string name = chosen.name;
  const std::shared_ptr<pinpool::Domain> domain = chosen.domain;
  benchmark::AddCustomContext("domain", domain->name());
  benchmark::AddCustomContext("total_bytes", std::to_string(TotalBytes()));
  for (const pinpool::PageSize page : {pinpool::PageSize::k2M, pinpool::PageSize::k4K}) {
    for (const bool populate : {true, false}) {
      for (const unsigned threads : {1u, 0u}) {
        const std::string bench = "startup/" + name + "/" + pinpool::PageSizeName(page) +
                                  (populate ? "/populated" : "/unpopulated") +
                                  (threads == 1 ? "/sequential" : "/parallel");
        benchmark::RegisterBenchmark(bench.c_str(),
                                     [domain, page, populate, threads](benchmark::State& s) {
                                       Startup(s, domain, page, populate, threads);
                                     })
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
  for (const bool background : {false, true}) {
    const std::string bench =
        "cold_start/" + name + "/4K/" + (background ? "background" : "foreground");
    benchmark::RegisterBenchmark(
        bench.c_str(),
        [domain, background](benchmark::State& s) { ColdStart(s, domain, background); })
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
