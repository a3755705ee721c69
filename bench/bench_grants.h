// A VerbsRemoteAccess for one benchmark of grants on a loopback pair (rc_pair.h): made with its
// completions routed through the pair's side, and torn down again. Shared by the grant
// benchmarks (remote_access_benchmark, array_grant_benchmark).
#ifndef PINPOOL_BENCH_BENCH_GRANTS_H_
#define PINPOOL_BENCH_BENCH_GRANTS_H_

#include <benchmark/benchmark.h>

#include <memory>

#include "pinpool/pool.h"
#include "pinpool/verbs_remote_access.h"
#include "rc_pair.h"

namespace pinpool::bench {

// The access, or null after state.SkipWithError saying why.
inline std::unique_ptr<VerbsRemoteAccess> AccessFor(benchmark::State& state, Pool& pool,
                                                    testing::RcPair& pair,
                                                    testing::RcPair::Side side,
                                                    const VerbsRemoteAccessOptions& options) {
  absl::StatusOr<std::unique_ptr<VerbsRemoteAccess>> a =
      VerbsRemoteAccess::Create(pool, pair.qp(side), options);
  if (!a.ok()) {
    state.SkipWithError(a.status().ToString().c_str());
    return nullptr;
  }
  VerbsRemoteAccess* raw = a->get();
  pair.SetCompletionHook(side, [raw](const ibv_wc& wc) { return raw->OnCompletion(wc); });
  return *std::move(a);
}

// Unhooks the completions, then destroys the access (revoking what it still holds).
inline void EndAccess(testing::RcPair& pair, testing::RcPair::Side side,
                      std::unique_ptr<VerbsRemoteAccess>& access) {
  pair.SetCompletionHook(side, nullptr);
  access.reset();
}

}  // namespace pinpool::bench

#endif  // PINPOOL_BENCH_BENCH_GRANTS_H_
