// Growth: what it costs a pool to add chunks and register them, in bytes pinned per second, by
// page size (1 GiB / 2 MiB hugetlb, transparent huge pages, 4 KiB), populated up front or not,
// for each registration domain this machine has:
//   pin       the default long-term pin domain      on the host
//   mlock     mlock (resident, not pinned)          on the host
//   io_uring  fixed-buffer table of a ring          on the host
//   verbs     ibv_reg_mr on the RDMA device's PD    in the soft-RoCE guest (only there)
//
// Each iteration creates an empty pool (untimed), then times Reserve(total) - mapping, faulting
// in and registering total / chunk_size chunks - then destroys the pool (untimed). The page size
// is required (require_page_size), so a figure is never silently of a smaller page: a size the
// machine cannot give (no hugetlb pages reserved, 1 GiB pages unavailable) is reported as an
// error for that benchmark with the pool's own message. 1 GiB pages use 1 GiB chunks, the others
// 64 MiB chunks. PINPOOL_BENCH_GROWTH_MIB sets the total (default 64; a multiple of 1024 is
// needed for 1 GiB pages, else that case is left out).
//
//   sysctl vm.nr_hugepages=600   # scripts/run-benchmarks.sh sets and restores it
//   PINPOOL_BENCH_GROWTH_MIB=1024 build-bench/bench/growth_benchmark --benchmark_min_time=1
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pinpool/io_uring.h"
#include "pinpool/pool.h"
#include "pinpool/verbs.h"
#include "reserve_runs.h"

namespace {

std::size_t TotalBytes() {
  const char* mib = std::getenv("PINPOOL_BENCH_GROWTH_MIB");
  return (mib != nullptr ? std::strtoull(mib, nullptr, 10) : 64) * pinpool::kMiB;
}

using pinpool_bench::NamedDomain;

std::vector<NamedDomain>& Domains() {
  static std::vector<NamedDomain> domains;
  return domains;
}

constexpr pinpool::PageSize kPages[] = {pinpool::PageSize::k1G, pinpool::PageSize::k2M,
                                        pinpool::PageSize::kTransparent, pinpool::PageSize::k4K};

void Grow(benchmark::State& state, pinpool::PageSize page, bool populate, const NamedDomain& d) {
  const std::size_t total = TotalBytes();
  pinpool::PoolOptions o;
  o.page_size = page;
  o.require_page_size = true;
  o.chunk_size = page == pinpool::PageSize::k1G ? pinpool::kGiB : 64 * pinpool::kMiB;
  o.budget = total;
  o.initial_size = 0;
  o.populate = populate;
  o.domains = {d.domain};
  for (auto _ : state) {
    std::optional<pinpool_bench::ReserveRun> run =
        pinpool_bench::TimedReserve(state, o, total, page, /*check_pages=*/true);
    if (!run) break;
    state.SetIterationTime(run->seconds);
    state.counters["chunks"] = static_cast<double>(run->pool->GetStats().chunks.size());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * total));
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  absl::StatusOr<std::shared_ptr<pinpool::VerbsDomain>> verbs = pinpool::VerbsDomain::Open(
      {.access = {.trusted_whole_chunk = {.read = true, .write = true}}});
  if (verbs.ok()) {
    Domains().push_back({"verbs", *std::move(verbs)});
    benchmark::AddCustomContext("device", Domains().back().domain->name());
  } else {
    absl::StatusOr<std::shared_ptr<pinpool::Domain>> pin = pinpool::MakeLongTermPinDomain();
    if (pin.ok()) {
      Domains().push_back({"pin", *std::move(pin)});
    } else {
      std::fprintf(stderr, "growth_benchmark: no long-term pin domain: %s\n",
                   pin.status().ToString().c_str());
    }
    Domains().push_back({"mlock", pinpool::MakeResidentNotPinnedDomain()});
    pinpool::IoUringDomainOptions io;
    io.slots = 64;
    absl::StatusOr<std::shared_ptr<pinpool::IoUringDomain>> ring =
        pinpool::IoUringDomain::Create(8, io);
    if (ring.ok()) {
      Domains().push_back({"io_uring", *std::move(ring)});
    } else {
      std::fprintf(stderr, "growth_benchmark: no io_uring domain: %s\n",
                   ring.status().ToString().c_str());
    }
  }
  benchmark::AddCustomContext("total_bytes", std::to_string(TotalBytes()));
  for (std::size_t d = 0; d < Domains().size(); ++d) {
    for (std::size_t p = 0; p < std::size(kPages); ++p) {
      if (kPages[p] == pinpool::PageSize::k1G && TotalBytes() % pinpool::kGiB != 0) continue;
      for (const int populate : {1, 0}) {
        const std::string name = "grow/" + Domains()[d].name + "/" +
                                 pinpool::PageSizeName(kPages[p]) +
                                 (populate ? "/populated" : "/unpopulated");
        const pinpool::PageSize page = kPages[p];
        const NamedDomain* domain = &Domains()[d];
        benchmark::RegisterBenchmark(name.c_str(),
                                     [page, populate, domain](benchmark::State& state) {
                                       Grow(state, page, populate != 0, *domain);
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
