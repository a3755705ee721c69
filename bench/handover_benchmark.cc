// Warm restart against a cold start (docs/sharing.md, docs/benchmarks-notes.md): for pools of 256
// MiB up to PINPOOL_BENCH_HANDOVER_MAX_MIB (default 1024), memfd-backed, 32 MiB chunks, populated,
// 4 KiB pages (THP allowed), on verbs when the machine has an RDMA device (the guest), else on the
// default long-term pin.
//
//   cold/<MiB>:  Pool::Create with initial_size = the pool, built in the background
//                (initial_size_in_background), then one Allocate: the manual time is Create to
//                that first block; full_ms is Create to AwaitInitialSize (every chunk registered).
//   adopt/<MiB>: a pool of the same size is built, one block filled, quiesced and handed over on a
//                Unix socket, and the predecessor destroyed (untimed); then Pool::Adopt and
//                Claim of that block: the manual time is Adopt to the first block (its bytes
//                checked), full_ms is Adopt to AwaitInitialSize.
// speedup_full = cold full_ms / adopt full_ms is computed by the reader from the two rows.
//   build/bench/handover_benchmark --benchmark_repetitions=3
#include <benchmark/benchmark.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "pinpool/pool.h"
#include "pinpool/share.h"
#include "pinpool/verbs.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kChunk = 32 * pinpool::kMiB;

std::shared_ptr<pinpool::Domain> TheDomain() {
  static std::shared_ptr<pinpool::Domain> domain = [] {
    absl::StatusOr<std::shared_ptr<pinpool::VerbsDomain>> v = pinpool::VerbsDomain::Open({});
    if (v.ok()) return std::shared_ptr<pinpool::Domain>(*v);
    absl::StatusOr<std::shared_ptr<pinpool::Domain>> pin = pinpool::MakeLongTermPinDomain();
    return pin.ok() ? *pin : nullptr;
  }();
  return domain;
}

pinpool::PoolOptions Options(std::size_t total) {
  pinpool::PoolOptions o;
  o.chunk_size = kChunk;
  o.budget = total;
  o.initial_size = total;
  o.page_size = pinpool::PageSize::kTransparent;
  o.backing.kind = pinpool::BackingKind::kMemfd;
  o.domains = {TheDomain()};
  return o;
}

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

void Cold(benchmark::State& state) {
  const std::size_t total = static_cast<std::size_t>(state.range(0)) * pinpool::kMiB;
  double full = 0;
  for (auto _ : state) {
    pinpool::PoolOptions o = Options(total);
    o.initial_size_in_background = true;
    const auto t0 = Clock::now();
    auto pool = pinpool::Pool::Create(o);
    if (!pool.ok()) {
      state.SkipWithError(std::string(pool.status().message()).c_str());
      return;
    }
    pinpool::Block b = (*pool)->Allocate(4096);
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - t0).count());
    if (!b || !(*pool)->AwaitInitialSize(std::chrono::minutes(10)).ok()) {
      state.SkipWithError("the cold pool did not fill");
      return;
    }
    full += Ms(Clock::now() - t0);
    (*pool)->Deallocate(b);
  }
  state.counters["full_ms"] = full / static_cast<double>(state.iterations());
}

void Adopt(benchmark::State& state) {
  const std::size_t total = static_cast<std::size_t>(state.range(0)) * pinpool::kMiB;
  double full = 0;
  for (auto _ : state) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
      state.SkipWithError("socketpair");
      return;
    }
    pinpool::BlockHandle handle;
    {
      auto a = pinpool::Pool::Create(Options(total));
      if (!a.ok()) {
        state.SkipWithError(std::string(a.status().message()).c_str());
        return;
      }
      pinpool::Block b = (*a)->Allocate(4096);
      std::memset(b.data(), 0x5c, b.size());
      handle = *(*a)->HandleOf(b);
      if (!(*a)->Quiesce().ok() || !(*a)->HandOver(sv[0], std::span(&handle, 1)).ok()) {
        state.SkipWithError("handover failed");
        return;
      }
    }
    const auto t0 = Clock::now();
    auto pool = pinpool::Pool::Adopt(Options(total), sv[1]);
    if (!pool.ok()) {
      state.SkipWithError(std::string(pool.status().message()).c_str());
      return;
    }
    absl::StatusOr<pinpool::Block> c = (*pool)->Claim(handle);
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - t0).count());
    if (!c.ok() || static_cast<unsigned char*>(c->data())[4095] != 0x5c ||
        !(*pool)->AwaitInitialSize(std::chrono::minutes(10)).ok()) {
      state.SkipWithError("the adopted block or pool is wrong");
      return;
    }
    full += Ms(Clock::now() - t0);
    (*pool)->Deallocate(*c);
    ::close(sv[0]);
    ::close(sv[1]);
  }
  state.counters["full_ms"] = full / static_cast<double>(state.iterations());
}

void Sizes(benchmark::internal::Benchmark* b) {
  const char* env = std::getenv("PINPOOL_BENCH_HANDOVER_MAX_MIB");
  const long max = env != nullptr ? std::strtol(env, nullptr, 10) : 1024;
  for (long mib = 256; mib <= max; mib *= 2) b->Arg(mib);
  if (max < 256) b->Arg(max);
  b->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(1);
}

BENCHMARK(Cold)->Name("cold")->Apply(Sizes);
BENCHMARK(Adopt)->Name("adopt")->Apply(Sizes);

}  // namespace

BENCHMARK_MAIN();
