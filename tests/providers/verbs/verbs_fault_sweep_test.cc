// Every failure point of the verbs provider's scenarios, in turn (tests/support/fault_sweep.h;
// docs/robustness.md, "Every failure point"), on rxe0 in the soft-RoCE guest: a verbs pool's
// growth (ibv_reg_mr of each chunk), window grants (ibv_alloc_mw as the domain's windows run out,
// ibv_post_send of the bind), the peer's READ and WRITE through them, and their revocation
// (ibv_post_send of the invalidation); range-region grants (ibv_reg_mr of the range) and theirs.
// Every run ends in OK or a documented error; a grant's bytes are right when the transfers went
// through; after every run no grant is live, a revoked or failed grant's rkey is refused by the
// device, nothing stays registered (the domain's live regions) and the earlier blocks keep
// their bytes.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "pinpool/verbs_remote_access.h"
#include "support/fault_sweep.h"
#include "verbs_test_support.h"

namespace pinpool::testing {
namespace {

using Side = RcPair::Side;

class VerbsFaultSweep : public ServerAndPeerTest {
 protected:
  void SetUp() override { SetUpServerAndPeer(16 * kMiB); }
  void TearDown() override {
    if (peer_buf_) peer_->Deallocate(peer_buf_);
    peer_buf_ = {};
  }
  // A grant with `mechanism`, the peer's WRITE through it, its revocation, and the peer refused
  // afterwards; each call on the way failing in turn.
  void GrantScenario(GrantMechanism mechanism, const char* name);
};

// The verbs pool grows: each chunk's ibv_reg_mr, and the os layer's calls.
TEST_F(VerbsFaultSweep, Growth) {
  Sweep("verbs registration (growth)",
        [&] {
          Outcome o;
          std::unique_ptr<Pool> pool;
          Block kept;
          std::uint64_t regions = 0;
          {
            FaultPlan::Pause pause;
            regions = domain_->live_registrations();
            PoolOptions options = OptionsOf({.chunk_size = 2 * kMiB,
                                             .budget = 16 * kMiB,
                                             .initial_size = 2 * kMiB,
                                             .page_size = PageSize::kTransparent,
                                             .domains = {domain_}});
            options.reserve_threads = 1;  // no worker threads: the same calls in the same order
            pool = MakePoolWith(options);
            kept = pool->Allocate(100 * kKiB);
            Fill(kept.data(), kept.size(), 3);
          }
          o.status = pool->Reserve(4 * 2 * kMiB);
          FaultPlan::Pause pause;
          ++o.blocks;
          if (FirstMismatch(kept.data(), kept.size(), 3) != -1) ++o.changed;
          EXPECT_TRUE(pool->Reserve(4 * 2 * kMiB).ok()) << "growth after the fault";
          pool->Deallocate(kept);
          pool.reset();
          if (domain_->live_registrations() != regions) {
            o.status = absl::InternalError("a chunk's region outlived its pool");
          }
          return o;
        },
        {absl::StatusCode::kResourceExhausted, absl::StatusCode::kInternal,
         absl::StatusCode::kFailedPrecondition, absl::StatusCode::kInvalidArgument});
}

void VerbsFaultSweep::GrantScenario(GrantMechanism mechanism, const char* name) {
  Sweep(name,
        [&] {
          Outcome o;
          // Each run its own server domain, pool and connection: the domain's window pool starts
          // empty every time, so the run allocates windows (ibv_alloc_mw) at the same grant.
          std::shared_ptr<VerbsDomain> domain;
          std::unique_ptr<Pool> server;
          std::unique_ptr<RcPair> pair;
          std::unique_ptr<VerbsRemoteAccess> access;
          Block target;
          {
            FaultPlan::Pause pause;
            domain = OpenDomain({});
            server = MakePool({domain}, 2 * kMiB, 8 * kMiB, 2 * kMiB);
            pair = Connect(domain->pd(), peer_domain_->pd());
            auto a = VerbsRemoteAccess::Create(*server, pair->qp(Side::kA),
                                               {.mechanism = mechanism, .min_idle_windows = 0});
            EXPECT_TRUE(a.ok()) << a.status();
            if (!a.ok()) return o;
            access = *std::move(a);
            VerbsRemoteAccess* raw = access.get();
            pair->SetCompletionHook(Side::kA,
                                    [raw](const ibv_wc& wc) { return raw->OnCompletion(wc); });
            target = server->Allocate(64 * kKiB);
            Fill(target.data(), target.size(), 5);
          }
          std::vector<RemoteGrant> grants;
          const auto run = [&]() -> absl::Status {
            for (int i = 0; i < 2; ++i) {  // the second takes a window the first left none of
              absl::StatusOr<RemoteGrant> made =
                  access->Grant(target, {.read = true, .write = true});
              if (!made.ok()) return made.status();
              grants.push_back(*made);
              absl::StatusOr<ibv_wc_status> wc =
                  pair->Write(Side::kB, PeerBuffer(4096, 9 + i), made->remote());
              if (!wc.ok()) return wc.status();
              if (*wc != IBV_WC_SUCCESS) return absl::InternalError(StatusName(*wc));
              ++o.blocks;
              if (FirstMismatch(target.data(), 4096, 9 + i) != -1) ++o.changed;
            }
            for (const RemoteGrant& g : grants) {
              if (absl::Status s = access->Revoke(g); !s.ok()) return s;
            }
            return absl::OkStatus();
          };
          o.status = run();
          FaultPlan::Pause pause;
          // Whatever happened, once revoked (again) and confirmed, the device refuses every
          // rkey. All confirmed first: a refused access breaks the connection, whose
          // reconnection drops the completions still queued.
          for (const RemoteGrant& g : grants) {
            EXPECT_TRUE(access->Revoke(g).ok());
            EXPECT_TRUE(pair->PollUntil(Side::kA, [&] { return access->Ended(g); }).ok());
          }
          for (const RemoteGrant& g : grants) {
            const absl::StatusOr<ibv_wc_status> after =
                pair->Read(Side::kB, PeerBuffer(4096, 0), g.remote());
            if (!after.ok() || *after == IBV_WC_SUCCESS) {
              o.status = absl::InternalError("a revoked grant still reads");
            }
            EXPECT_TRUE(pair->Reconnect().ok());
          }
          EXPECT_EQ(access->live_grants(), 0u);
          pair->SetCompletionHook(Side::kA, nullptr);
          access.reset();
          server->Deallocate(target);
          server.reset();
          if (domain->live_registrations() != 0) {
            o.status = absl::InternalError("a region outlived its pool or grant");
          }
          return o;
        },
        // verbs_remote_access.h: Grant's and Revoke's errors.
        {absl::StatusCode::kResourceExhausted, absl::StatusCode::kInternal,
         absl::StatusCode::kUnavailable, absl::StatusCode::kFailedPrecondition});
}

TEST_F(VerbsFaultSweep, WindowGrantAndRevoke) {
  GrantScenario(GrantMechanism::kWindow, "verbs window grant and revoke");
}

TEST_F(VerbsFaultSweep, RegionGrantAndRevoke) {
  GrantScenario(GrantMechanism::kRegion, "verbs range-region grant and revoke");
}

}  // namespace
}  // namespace pinpool::testing
