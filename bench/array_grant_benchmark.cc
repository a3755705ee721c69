// What granting an array to a peer costs (VerbsRemoteAccess::GrantArray, docs/arrays.md) against
// granting its elements one by one, on a real device, in one run. The array: 2048 elements of
// 4 KiB in 2 MiB chunks (4 chunk runs); the subrange: 1% of it (20 elements) across a chunk
// boundary (2 runs). Each iteration grants, revokes every grant and waits until all have ended.
//
//   array_grant/whole/M          GrantArray of the whole array: one grant per run (4)
//   array_grant/subrange/M       GrantArray of the 1% subrange: one grant per run it touches (2)
//   per_element/whole/M          VerbsRemoteAccess::Grant of each element of the array (2048)
//   per_element/subrange/M       the same for each element of the subrange (20)
// M = window or region (GrantMechanism). Server and peer are two loopback RC QPs (rc_pair.h)
// with their own contexts and PDs; the server's chunks are local-only. Without a device it says
// why and exits 0 (1 with PINPOOL_REQUIRE_RDMA=1).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

#include "bench_grants.h"
#include "bench_pool.h"
#include "bench_verbs.h"
#include "pinpool/pool.h"
#include "pinpool/verbs.h"
#include "pinpool/verbs_remote_access.h"
#include "rc_pair.h"

namespace {

using pinpool::Array;
using pinpool::GrantMechanism;
using pinpool::RemoteGrant;
using pinpool::VerbsRemoteAccess;
using pinpool::testing::RcPair;
constexpr RcPair::Side kServer = RcPair::Side::kA;

constexpr std::size_t kCount = 2048;
constexpr std::size_t kSubFirst = 502;  // 20 elements across the first chunk boundary (512)
constexpr std::size_t kSubCount = 20;

struct Env {
  std::shared_ptr<pinpool::VerbsDomain> server_domain;
  std::shared_ptr<pinpool::VerbsDomain> peer_domain;
  pinpool::Pool* server = nullptr;
  std::unique_ptr<RcPair> pair;
  Array array;
};

Env& E() {
  static Env env;
  return env;
}

std::unique_ptr<VerbsRemoteAccess> Access(benchmark::State& state, GrantMechanism m) {
  return pinpool::bench::AccessFor(state, *E().server, *E().pair, kServer,
                                   {.mechanism = m, .min_idle_windows = 64});
}

void Done(std::unique_ptr<VerbsRemoteAccess>& access) {
  pinpool::bench::EndAccess(*E().pair, kServer, access);
}

// Revokes every grant and waits until none can be used.
bool RevokeAll(VerbsRemoteAccess& access, const std::vector<RemoteGrant>& grants) {
  for (const RemoteGrant& g : grants) {
    if (!access.Revoke(g).ok()) return false;
  }
  return E()
      .pair
      ->PollUntil(kServer,
                  [&] {
                    return std::all_of(grants.begin(), grants.end(),
                                       [&](const RemoteGrant& g) { return access.Ended(g); });
                  })
      .ok();
}

void BM_GrantArray(benchmark::State& state, GrantMechanism m, bool whole) {
  std::unique_ptr<VerbsRemoteAccess> access = Access(state, m);
  if (!access) return;
  std::size_t made = 0;
  for (auto _ : state) {
    absl::StatusOr<std::vector<RemoteGrant>> g =
        whole ? access->GrantArray(E().array, {.read = true})
              : access->GrantArray(E().array, {.read = true}, kSubFirst, kSubCount);
    if (!g.ok() || !RevokeAll(*access, *g)) {
      state.SkipWithError(g.ok() ? "revoke failed" : g.status().ToString().c_str());
      break;
    }
    made = g->size();
  }
  state.counters["grants"] = static_cast<double>(made);
  Done(access);
}

void BM_PerElement(benchmark::State& state, GrantMechanism m, bool whole) {
  std::unique_ptr<VerbsRemoteAccess> access = Access(state, m);
  if (!access) return;
  const std::size_t first = whole ? 0 : kSubFirst;
  const std::size_t count = whole ? kCount : kSubCount;
  const Array& a = E().array;
  std::vector<RemoteGrant> grants;
  grants.reserve(count);
  for (auto _ : state) {
    grants.clear();
    for (std::size_t i = first; i < first + count; ++i) {
      const std::size_t r = i / a.elements_per_chunk();
      absl::StatusOr<RemoteGrant> g = access->Grant(a.Run(r), (i - a.runs()[r].first) * a.stride(),
                                                    a.element_size(), {.read = true});
      if (!g.ok()) {
        state.SkipWithError(g.status().ToString().c_str());
        break;
      }
      grants.push_back(*g);
    }
    if (!RevokeAll(*access, grants)) {
      state.SkipWithError("revoke failed");
      break;
    }
  }
  state.counters["grants"] = static_cast<double>(count);
  Done(access);
}

BENCHMARK_CAPTURE(BM_GrantArray, whole_window, GrantMechanism::kWindow, true)
    ->Name("array_grant/whole/window")
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_GrantArray, sub_window, GrantMechanism::kWindow, false)
    ->Name("array_grant/subrange/window")
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_PerElement, whole_window, GrantMechanism::kWindow, true)
    ->Name("per_element/whole/window")
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PerElement, sub_window, GrantMechanism::kWindow, false)
    ->Name("per_element/subrange/window")
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_GrantArray, whole_region, GrantMechanism::kRegion, true)
    ->Name("array_grant/whole/region")
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_GrantArray, sub_region, GrantMechanism::kRegion, false)
    ->Name("array_grant/subrange/region")
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_PerElement, whole_region, GrantMechanism::kRegion, true)
    ->Name("per_element/whole/region")
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PerElement, sub_region, GrantMechanism::kRegion, false)
    ->Name("per_element/subrange/region")
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  Env& e = E();
  int code = 0;
  std::shared_ptr<pinpool::VerbsDomain> any = pinpool::bench::OpenVerbsOrExplain(argv[0], &code);
  if (!any) return code;
  absl::StatusOr<std::shared_ptr<pinpool::VerbsDomain>> server =
      pinpool::VerbsDomain::Open({.device = any->device_name()});
  absl::StatusOr<std::shared_ptr<pinpool::VerbsDomain>> peer =
      pinpool::VerbsDomain::Open({.device = any->device_name()});
  if (!server.ok() || !peer.ok()) {
    std::fprintf(stderr, "array_grant_benchmark: %s\n",
                 (server.ok() ? peer.status() : server.status()).ToString().c_str());
    return 1;
  }
  e.server_domain = *server;
  e.peer_domain = *peer;
  pinpool::PoolOptions o;
  o.chunk_size = 2 * pinpool::kMiB;
  o.budget = 16 * pinpool::kMiB;
  o.page_size = pinpool::PageSize::kTransparent;
  o.domains = {e.server_domain};
  e.server = &pinpool::bench::LeakedPool(std::move(o));
  absl::StatusOr<Array> array = e.server->AllocateArray(kCount, 4096, 4096);
  if (!array.ok()) {
    std::fprintf(stderr, "array_grant_benchmark: %s\n", array.status().ToString().c_str());
    return 1;
  }
  e.array = std::move(*array);
  // Room for a bind and an invalidation per element grant at once.
  absl::StatusOr<std::unique_ptr<RcPair>> pair = RcPair::Connect(
      e.server_domain->pd(), e.peer_domain->pd(), {.max_send_wr = 2 * kCount + 128});
  if (!pair.ok()) {
    std::fprintf(stderr, "array_grant_benchmark: %s\n", pair.status().ToString().c_str());
    return 1;
  }
  e.pair = *std::move(pair);

  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  e.pair.reset();
  return 0;
}
