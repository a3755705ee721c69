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
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
