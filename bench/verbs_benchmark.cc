// What pinpool saves on an RDMA device: getting a registered buffer of 4 KiB, 64 KiB and 1 MiB
// with its keys ready from a pool (Allocate + Deallocate), against what an application without
// a pool does per buffer (malloc + ibv_reg_mr + ibv_dereg_mr + free), same sizes, same run, same
// device and PD. Needs an RDMA device: run it in the soft-RoCE guest:
//
//   scripts/softroce/run-in-guest.sh build/bench/verbs_benchmark --benchmark_min_time=0.5 \
//       --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
//
// Without a device it says why and exits 0 (1 with PINPOOL_REQUIRE_RDMA=1). Under ctest (label
// rdma) it runs once in the guest with a tiny min_time, as a smoke test.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "bench_pool.h"
#include "bench_verbs.h"
#include "pinpool/pool.h"
#include "pinpool/verbs.h"

namespace {

std::shared_ptr<pinpool::VerbsDomain>& Domain() {
  static std::shared_ptr<pinpool::VerbsDomain> domain;
  return domain;
}

pinpool::Pool& SharedPool() {
  static pinpool::Pool* pool = [] {
    pinpool::PoolOptions o;
    o.chunk_size = 4 * pinpool::kMiB;  // the largest block asked for (1 MiB) fits 7/8 of it
    o.budget = 16 * pinpool::kMiB;
    o.initial_size = 8 * pinpool::kMiB;
    o.page_size = pinpool::PageSize::kTransparent;
    o.domains = {Domain()};
    return &pinpool::bench::LeakedPool(o);
  }();
  return *pool;
}

// A registered buffer with its keys, from the pool: what the application needs before posting.
void BM_PoolAllocate(benchmark::State& state) {
  pinpool::Pool& pool = SharedPool();
  const auto size = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    const pinpool::Block b = pool.Allocate(size);
    ibv_sge sge = pinpool::ToSge(b);
    benchmark::DoNotOptimize(sge);
    pool.Deallocate(b);
  }
}

// The same without a pool: a fresh buffer registered and deregistered each time.
void BM_MallocRegMr(benchmark::State& state) {
  ibv_pd* pd = Domain()->pd();
  const auto size = static_cast<std::size_t>(state.range(0));
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
  for (auto _ : state) {
    void* p = std::malloc(size);
    ibv_mr* mr = ibv_reg_mr(pd, p, size, access);
    if (mr == nullptr) {
      state.SkipWithError("ibv_reg_mr failed");
      std::free(p);
      break;
    }
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(p), static_cast<std::uint32_t>(size), mr->lkey};
    benchmark::DoNotOptimize(sge);
    ibv_dereg_mr(mr);
    std::free(p);
  }
}

#define PINPOOL_VERBS_BENCH(fn) BENCHMARK(fn)->Arg(4 << 10)->Arg(64 << 10)->Arg(1 << 20)

PINPOOL_VERBS_BENCH(BM_PoolAllocate);
PINPOOL_VERBS_BENCH(BM_MallocRegMr);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  int exit_code = 0;
  Domain() = pinpool::bench::OpenVerbsOrExplain("verbs_benchmark", &exit_code);
  if (Domain() == nullptr) return exit_code;
  SharedPool();  // its creation (mapping and registering 8 MiB) is not what is measured
  std::fprintf(stderr, "verbs_benchmark: device %s, domain %s\n", Domain()->device_name().c_str(),
               Domain()->name().c_str());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
