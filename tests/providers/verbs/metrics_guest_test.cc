// Grant metrics on a real device (the soft-RoCE guest): a stale grant's refused access increments
// verbs_remote_access_errors on the side that used it; revocations and grants move their latency
// histograms; a held block shows in the age buckets until its revocation completes; and the
// scrape of the running pool (PoolStats::ToOpenMetrics) carries all of it.
//
// Side A is the server whose pool grants; side B is the peer, a pinpool user too: its completions
// go through its own VerbsRemoteAccess (OnCompletion), as every completion of a pinpool
// connection must, which is where a refused access is seen and counted.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>

#include "pinpool/pool.h"
#include "pinpool/verbs.h"
#include "pinpool/verbs_remote_access.h"
#include "verbs_test_support.h"

namespace pinpool {
namespace {

using testing::MakePool;
using testing::RcPair;
using testing::StatusName;
using Side = RcPair::Side;

std::uint64_t Counted(const PoolStats& s, std::string_view name) {
  return FigureValue(s.grants.figures, name).value_or(0);
}

std::uint64_t Timed(const PoolStats& s, std::string_view name) {
  for (const HistogramFigure& h : s.grants.histograms) {
    if (h.name == name) return h.histogram.count;
  }
  return 0;
}

class MetricsGuestTest : public testing::ServerAndPeerTest,
                         public ::testing::WithParamInterface<GrantMechanism> {
 protected:
  void SetUp() override {
    SetUpServerAndPeer(16 * kMiB);
    if (HasFatalFailure() || IsSkipped()) return;
    auto a = VerbsRemoteAccess::Create(*server_, pair_->qp(Side::kA),
                                       {.mechanism = GetParam(), .min_idle_windows = 8});
    auto b = VerbsRemoteAccess::Create(*peer_, pair_->qp(Side::kB));
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    server_access_ = *std::move(a);
    peer_access_ = *std::move(b);
    pair_->SetCompletionHook(Side::kA,
                             [this](const ibv_wc& wc) { return server_access_->OnCompletion(wc); });
    pair_->SetCompletionHook(Side::kB,
                             [this](const ibv_wc& wc) { return peer_access_->OnCompletion(wc); });
  }

  void TearDown() override {
    server_access_.reset();
    peer_access_.reset();
    pair_.reset();
  }

  std::unique_ptr<VerbsRemoteAccess> server_access_, peer_access_;
};

TEST_P(MetricsGuestTest, AStaleGrantsRefusedAccessIsCountedAndRevocationsAreTimed) {
  const Block a = server_->Allocate(64 * kKiB);
  const Block src = peer_->Allocate(64 * kKiB);
  ASSERT_TRUE(a && src);
  absl::StatusOr<RemoteGrant> g = server_access_->Grant(a, {.write = true});
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_WC(IBV_WC_SUCCESS, pair_->Write(Side::kB, ToSge(src), g->remote()));
  PoolStats s = server_->GetStats();
  if (GetParam() == GrantMechanism::kWindow) {
    EXPECT_EQ(Timed(s, VerbsGrantHistograms::kWindowBindSeconds), 1u);
  } else {
    EXPECT_EQ(Timed(s, VerbsGrantHistograms::kRegionRegisterSeconds), 1u);
  }
  EXPECT_EQ(Counted(peer_->GetStats(), VerbsGrantFigures::kRemoteAccessErrors), 0u);

  // Freed while granted: held until the revocation completes, seen in the age buckets.
  server_->Deallocate(a);
  s = server_->GetStats();
  if (GetParam() == GrantMechanism::kWindow) {
    EXPECT_EQ(s.grants.held_blocks, 1u);
    std::uint64_t by_age = 0;
    for (std::uint64_t n : s.grants.held_ages.blocks) by_age += n;
    EXPECT_EQ(by_age, 1u) << "the held block is in the age buckets";
    EXPECT_NE(s.ToOpenMetrics().find("\npinpool_grants_held_age_seconds_gcount 1\n"),
              std::string::npos);
    ASSERT_TRUE(pair_->PollUntil(Side::kA, [&] { return server_access_->Ended(*g); }).ok());
    s = server_->GetStats();
    EXPECT_EQ(Timed(s, VerbsGrantHistograms::kInvalidateSeconds), 1u)
        << "LOCAL_INV post to completion is timed";
  } else {
    EXPECT_EQ(Timed(s, VerbsGrantHistograms::kRegionDeregisterSeconds), 1u);
  }
  EXPECT_EQ(s.grants.held_blocks, 0u);
  EXPECT_NE(s.ToOpenMetrics().find("\npinpool_grants_held_age_seconds_gcount 0\n"),
            std::string::npos);

  // The peer's application uses the revoked grant: its WRITE is refused, and its completion,
  // handed to OnCompletion as every completion of the connection must be, is counted. (Posted
  // and polled here rather than with RcPair::Write, which keeps the completion it waits for.)
  ibv_sge sge = ToSge(src);
  ibv_send_wr wr{};
  wr.wr_id = 42;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.wr.rdma.remote_addr = g->address;
  wr.wr.rdma.rkey = ToUnderlying(g->rkey);
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(pair_->qp(Side::kB), &wr, &bad), 0);
  std::optional<ibv_wc> refused;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!refused && std::chrono::steady_clock::now() < deadline) {
    ibv_wc wc{};
    if (ibv_poll_cq(pair_->cq(Side::kB), 1, &wc) == 1 && wc.wr_id == 42) refused = wc;
  }
  ASSERT_TRUE(refused.has_value()) << "no completion for the stale WRITE";
  ASSERT_EQ(refused->status, IBV_WC_REM_ACCESS_ERR) << StatusName(refused->status);
  EXPECT_FALSE(peer_access_->OnCompletion(*refused)) << "the application's completion, not ours";
  const PoolStats p = peer_->GetStats();
  EXPECT_EQ(Counted(p, VerbsGrantFigures::kRemoteAccessErrors), 1u)
      << "the stale grant's refused access was not counted";
  const std::string text = p.ToOpenMetrics();
  EXPECT_NE(text.find("\npinpool_grants_verbs_remote_access_errors_total 1\n"), std::string::npos)
      << "not in the scrape";
  EXPECT_EQ(Counted(server_->GetStats(), VerbsGrantFigures::kRemoteAccessErrors), 0u)
      << "the server's device refused it without a completion on the server's side";
  peer_access_->RevokeAllNow();  // the QP is in error now
  server_access_->RevokeAllNow();
  peer_->Deallocate(src);
}

INSTANTIATE_TEST_SUITE_P(Mechanisms, MetricsGuestTest,
                         ::testing::Values(GrantMechanism::kWindow, GrantMechanism::kRegion),
                         [](const auto& info) { return GrantMechanismName(info.param); });

}  // namespace
}  // namespace pinpool
