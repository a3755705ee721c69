// What per-block remote access costs (pinpool/verbs_remote_access.h), on a real device, against
// registering each buffer and against chunk-wide keys, in one run:
//
//   primitives   mw_alloc_free            ibv_alloc_mw + ibv_dealloc_mw (a window pool's growth)
//                grant_revoke/window/S    VerbsRemoteAccess::Grant (bind posted) + Revoke + the
//                                         LOCAL_INV's completion
//                grant_revoke/region/S    VerbsRemoteAccess::Grant + Revoke (reg + dereg of the
//                range) range_reg/S              the same ibv_reg_mr + ibv_dereg_mr without pinpool
//                per_buffer_reg/S         malloc + ibv_reg_mr + ibv_dereg_mr + free: what a
//                                         program without a pool pays per buffer
//                send/inv, send/plain     a 0-byte SEND_WITH_INV of a window grant's rkey vs a
//                                         plain SEND, to the receive completion
//   request loop (one request = the peer RDMA WRITEs S bytes into the server's block and sends
//   a 0-byte "done" message the server receives):
//                request/chunk_wide/S     the block's chunk-wide rkey: nothing per request
//                request/window_send_inv/S  grant (window) + WRITE + "done" as SEND_WITH_INV
//                request/window_local_inv/S grant (window) + WRITE + "done" + Revoke (LOCAL_INV)
//                request/region/S         grant (range region) + WRITE + "done" + Revoke
// S = 4 KiB, 64 KiB, 1 MiB, 4 MiB. Server and peer are two loopback RC QPs (rc_pair.h) with their
// own contexts and PDs. scripts/run-benchmarks.sh runs it in the soft-RoCE guest and writes the
// table into docs/benchmarks.md. Without a device it says why and exits 0 (1 with
// PINPOOL_REQUIRE_RDMA=1).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "bench_grants.h"
#include "bench_pool.h"
#include "bench_verbs.h"
#include "pinpool/pool.h"
#include "pinpool/verbs.h"
#include "pinpool/verbs_remote_access.h"
#include "rc_pair.h"

namespace {

using pinpool::Block;
using pinpool::GrantMechanism;
using pinpool::RemoteGrant;
using pinpool::VerbsRemoteAccess;
using pinpool::testing::RcPair;
using Side = RcPair::Side;
constexpr Side kServer = Side::kA, kPeer = Side::kB;

struct Env {
  std::shared_ptr<pinpool::VerbsDomain> server_domain;   // local-only chunks: grants
  std::shared_ptr<pinpool::VerbsDomain> trusted_domain;  // same PD, chunk-wide rights
  std::shared_ptr<pinpool::VerbsDomain> peer_domain;
  pinpool::Pool* server = nullptr;
  pinpool::Pool* trusted = nullptr;
  pinpool::Pool* peer = nullptr;
  std::unique_ptr<RcPair> pair;
  Block server_inbox;  // 0-byte messages land here (a receive needs an sge)
  Block peer_buf;      // the peer's source for WRITEs, 4 MiB
};

Env& E() {
  static Env env;
  return env;
}

pinpool::Pool* MakePool(std::shared_ptr<pinpool::VerbsDomain> domain) {
  pinpool::PoolOptions o;
  o.chunk_size = 8 * pinpool::kMiB;
  o.budget = 128 * pinpool::kMiB;
  o.initial_size = 16 * pinpool::kMiB;
  o.page_size = pinpool::PageSize::kTransparent;
  o.domains = {std::move(domain)};
  return &pinpool::bench::LeakedPool(std::move(o));
}

// One connection's VerbsRemoteAccess for a benchmark, its completions routed through the pair.
std::unique_ptr<VerbsRemoteAccess> Access(benchmark::State& state, GrantMechanism m) {
  return pinpool::bench::AccessFor(state, *E().server, *E().pair, kServer, {.mechanism = m});
}

void Done(std::unique_ptr<VerbsRemoteAccess>& access) {
  pinpool::bench::EndAccess(*E().pair, kServer, access);
}

bool Await(VerbsRemoteAccess& access, const RemoteGrant& g) {
  return E().pair->PollUntil(kServer, [&] { return access.Ended(g); }).ok();
}

// The peer WRITEs `size` bytes to `remote`.
bool PeerWrite(const pinpool::RemoteBuffer& remote, std::size_t size) {
  ibv_sge sge = pinpool::ToSge(E().peer_buf);
  sge.length = static_cast<std::uint32_t>(size);
  absl::StatusOr<ibv_wc_status> wc = E().pair->Write(kPeer, sge, remote);
  return wc.ok() && *wc == IBV_WC_SUCCESS;
}

// The peer's 0-byte "done" (SEND_WITH_INV of `rkey` when given), received by the server.
bool PeerDone(std::optional<std::uint32_t> invalidate) {
  if (!E().pair->PostRecv(kServer, pinpool::ToSge(E().server_inbox)).ok()) return false;
  ibv_sge empty = pinpool::ToSge(E().peer_buf);
  empty.length = 0;
  absl::StatusOr<ibv_wc_status> wc = E().pair->Send(kPeer, empty, invalidate);
  return wc.ok() && *wc == IBV_WC_SUCCESS && E().pair->WaitRecv(kServer).ok();
}

void SetSizeCounters(benchmark::State& state, std::size_t size) {
  state.counters["size"] = static_cast<double>(size);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * size));
}

void BM_MwAllocFree(benchmark::State& state) {
  for (auto _ : state) {
    ibv_mw* mw = ibv_alloc_mw(E().server_domain->pd(), IBV_MW_TYPE_2);
    if (mw == nullptr || ibv_dealloc_mw(mw) != 0) {
      state.SkipWithError("ibv_alloc_mw/ibv_dealloc_mw failed");
      return;
    }
  }
}

void BM_GrantRevoke(benchmark::State& state, GrantMechanism m) {
  const auto size = static_cast<std::size_t>(state.range(0));
  std::unique_ptr<VerbsRemoteAccess> access = Access(state, m);
  if (!access) return;
  const Block b = E().server->Allocate(size);
  for (auto _ : state) {
    absl::StatusOr<RemoteGrant> g = access->Grant(b, {.write = true});
    if (!g.ok() || !access->Revoke(*g).ok() || !Await(*access, *g)) {
      state.SkipWithError("grant or revoke failed");
      break;
    }
  }
  E().server->Deallocate(b);
  Done(access);
  state.counters["size"] = static_cast<double>(size);
}

// The kernel command beneath a range-region grant, without pinpool: ibv_reg_mr + ibv_dereg_mr of
// a range of pool memory (pinned and populated already by its chunk's registration).
void BM_RangeRegistration(benchmark::State& state) {
  const auto size = static_cast<std::size_t>(state.range(0));
  const Block b = E().server->Allocate(size);
  for (auto _ : state) {
    ibv_mr* mr = ibv_reg_mr(E().server_domain->pd(), b.data(), size,
                            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (mr == nullptr || ibv_dereg_mr(mr) != 0) {
      state.SkipWithError("ibv_reg_mr/ibv_dereg_mr failed");
      break;
    }
  }
  E().server->Deallocate(b);
  state.counters["size"] = static_cast<double>(size);
}

void BM_PerBufferRegistration(benchmark::State& state) {
  const auto size = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    void* p = std::malloc(size);
    ibv_mr* mr = ibv_reg_mr(E().server_domain->pd(), p, size,
                            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (mr == nullptr || ibv_dereg_mr(mr) != 0) {
      state.SkipWithError("ibv_reg_mr/ibv_dereg_mr failed");
      std::free(p);
      return;
    }
    std::free(p);
  }
  state.counters["size"] = static_cast<double>(size);
}

void BM_Send(benchmark::State& state, bool invalidate) {
  std::unique_ptr<VerbsRemoteAccess> access = Access(state, GrantMechanism::kWindow);
  if (!access) return;
  const Block b = E().server->Allocate(4096);
  for (auto _ : state) {
    state.PauseTiming();
    absl::StatusOr<RemoteGrant> g = access->Grant(b, {.write = true});
    state.ResumeTiming();
    if (!g.ok() ||
        !PeerDone(invalidate ? std::optional(pinpool::ToUnderlying(g->rkey)) : std::nullopt)) {
      state.SkipWithError("send failed");
      break;
    }
    state.PauseTiming();
    if (!invalidate && (!access->Revoke(*g).ok() || !Await(*access, *g))) {
      state.SkipWithError("revoke failed");
    }
    state.ResumeTiming();
  }
  E().server->Deallocate(b);
  Done(access);
}

enum class Loop { kChunkWide, kWindowSendInv, kWindowLocalInv, kRegion };

void BM_Request(benchmark::State& state, Loop loop) {
  const auto size = static_cast<std::size_t>(state.range(0));
  std::unique_ptr<VerbsRemoteAccess> access;
  if (loop != Loop::kChunkWide) {
    access =
        Access(state, loop == Loop::kRegion ? GrantMechanism::kRegion : GrantMechanism::kWindow);
    if (!access) return;
  }
  pinpool::Pool& pool = loop == Loop::kChunkWide ? *E().trusted : *E().server;
  const Block b = pool.Allocate(size);
  for (auto _ : state) {
    bool ok = true;
    if (loop == Loop::kChunkWide) {
      ok = PeerWrite(pinpool::ToRemoteBuffer(b), size) && PeerDone(std::nullopt);
    } else {
      absl::StatusOr<RemoteGrant> g = access->Grant(b, {.write = true});
      ok = g.ok() && PeerWrite(g->remote(), size);
      if (ok && loop == Loop::kWindowSendInv) {
        ok = PeerDone(pinpool::ToUnderlying(g->rkey)) && access->Ended(*g);
      } else if (ok) {
        ok = PeerDone(std::nullopt) && access->Revoke(*g).ok() && Await(*access, *g);
      }
    }
    if (!ok) {
      state.SkipWithError("request failed");
      break;
    }
  }
  pool.Deallocate(b);
  if (access) Done(access);
  SetSizeCounters(state, size);
}

void Sizes(benchmark::internal::Benchmark* b) {
  for (std::int64_t s : {4 << 10, 64 << 10, 1 << 20, 4 << 20}) b->Arg(s);
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_MwAllocFree)->Name("mw_alloc_free")->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_GrantRevoke, window, GrantMechanism::kWindow)
    ->Name("grant_revoke/window")
    ->Apply(Sizes);
BENCHMARK_CAPTURE(BM_GrantRevoke, region, GrantMechanism::kRegion)
    ->Name("grant_revoke/region")
    ->Apply(Sizes);
BENCHMARK(BM_RangeRegistration)->Name("range_reg")->Apply(Sizes);
BENCHMARK(BM_PerBufferRegistration)->Name("per_buffer_reg")->Apply(Sizes);
BENCHMARK_CAPTURE(BM_Send, inv, true)
    ->Name("send/inv")
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Send, plain, false)
    ->Name("send/plain")
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Request, chunk_wide, Loop::kChunkWide)
    ->Name("request/chunk_wide")
    ->Apply(Sizes);
BENCHMARK_CAPTURE(BM_Request, window_send_inv, Loop::kWindowSendInv)
    ->Name("request/window_send_inv")
    ->Apply(Sizes);
BENCHMARK_CAPTURE(BM_Request, window_local_inv, Loop::kWindowLocalInv)
    ->Name("request/window_local_inv")
    ->Apply(Sizes);
BENCHMARK_CAPTURE(BM_Request, region, Loop::kRegion)->Name("request/region")->Apply(Sizes);

}  // namespace

int main(int argc, char** argv) {
  int exit_code = 0;
  Env& e = E();
  e.trusted_domain = pinpool::bench::OpenVerbsOrExplain("remote_access_benchmark", &exit_code);
  if (e.trusted_domain == nullptr) return exit_code;
  // The grants' domain shares the trusted domain's PD, so one pair serves both loops.
  absl::StatusOr<std::shared_ptr<pinpool::VerbsDomain>> server =
      pinpool::VerbsDomain::Wrap(e.trusted_domain->pd());
  absl::StatusOr<std::shared_ptr<pinpool::VerbsDomain>> peer =
      pinpool::VerbsDomain::Open({.device = e.trusted_domain->device_name()});
  if (!server.ok() || !peer.ok()) {
    std::fprintf(stderr, "remote_access_benchmark: %s %s\n", server.status().ToString().c_str(),
                 peer.status().ToString().c_str());
    return 1;
  }
  e.server_domain = *server;
  e.peer_domain = *peer;
  e.server = MakePool(e.server_domain);
  e.trusted = MakePool(e.trusted_domain);
  e.peer = MakePool(e.peer_domain);
  absl::StatusOr<std::unique_ptr<RcPair>> pair =
      RcPair::Connect(e.server_domain->pd(), e.peer_domain->pd());
  if (!pair.ok()) {
    std::fprintf(stderr, "remote_access_benchmark: %s\n", pair.status().ToString().c_str());
    return 1;
  }
  e.pair = *std::move(pair);
  e.server_inbox = e.server->Allocate(64);
  e.peer_buf = e.peer->Allocate(4 << 20);
  std::memset(e.peer_buf.data(), 0x42, e.peer_buf.size());

  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  e.pair.reset();
  return 0;
}
