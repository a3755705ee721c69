// What the growth-related benchmarks share (growth_benchmark, startup_benchmark,
// growth_latency_benchmark): one timed Reserve of a fresh pool, and the domain to measure when a
// program measures one.
//
// TimedReserve creates a pool with `options` (untimed), times Reserve(total) (mapping, faulting
// in, placing and registering every chunk), and checks that every chunk got `page` when
// `check_pages` is set, so that a figure is never silently of a smaller page. Any failure is
// reported with the pool's own message through state.SkipWithError, and nullopt returned.
// Header-only, for benchmark programs; thread safety: call from the benchmark's thread.
#ifndef PINPOOL_BENCH_RESERVE_RUNS_H_
#define PINPOOL_BENCH_RESERVE_RUNS_H_

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "pinpool/pool.h"
#include "pinpool/verbs.h"

namespace pinpool_bench {

struct ReserveRun {
  std::unique_ptr<pinpool::Pool> pool;
  double seconds = 0;
};

inline std::optional<ReserveRun> TimedReserve(benchmark::State& state,
                                              const pinpool::PoolOptions& options,
                                              std::size_t total, pinpool::PageSize page,
                                              bool check_pages) {
  absl::StatusOr<std::unique_ptr<pinpool::Pool>> pool = pinpool::Pool::Create(options);
  if (!pool.ok()) {
    state.SkipWithError(std::string(pool.status().message()).c_str());
    return std::nullopt;
  }
  const auto start = std::chrono::steady_clock::now();
  const absl::Status grown = (*pool)->Reserve(total);
  const auto stop = std::chrono::steady_clock::now();
  if (!grown.ok()) {
    state.SkipWithError(std::string(grown.message()).c_str());
    return std::nullopt;
  }
  if (check_pages) {
    for (const pinpool::ChunkStats& c : (*pool)->GetStats().chunks) {
      if (c.page_size != page) {
        state.SkipWithError("a chunk got a different page size than required");
        return std::nullopt;
      }
    }
  }
  return ReserveRun{*std::move(pool), std::chrono::duration<double>(stop - start).count()};
}

// The RDMA device's verbs domain when there is one ("verbs"), else the default long-term pin
// domain ("pin"); null, after saying why on stderr, when neither opens.
struct NamedDomain {
  std::string name;
  std::shared_ptr<pinpool::Domain> domain;
};
inline NamedDomain VerbsOrDefaultDomain(const char* program) {
  absl::StatusOr<std::shared_ptr<pinpool::VerbsDomain>> verbs = pinpool::VerbsDomain::Open();
  if (verbs.ok()) return {"verbs", *std::move(verbs)};
  absl::StatusOr<std::shared_ptr<pinpool::Domain>> pin = pinpool::MakeLongTermPinDomain();
  if (!pin.ok()) {
    std::fprintf(stderr, "%s: %s\n", program, pin.status().ToString().c_str());
    return {};
  }
  return {"pin", *std::move(pin)};
}

}  // namespace pinpool_bench

#endif  // PINPOOL_BENCH_RESERVE_RUNS_H_
