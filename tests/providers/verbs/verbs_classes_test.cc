// The brpc stall over a real RDMA device, and buffer classes (docs/classes.md) keeping it away:
// one verbs-registered pool shared by send and receive buffers. A sender floods its class (it
// holds every send buffer: its messages are never acknowledged) while a receive loop takes each
// message, hands the buffer to the application (which keeps it) and re-posts a fresh receive
// buffer from its own class. With a reservation for the receive class every re-post succeeds and
// every message arrives byte-exact, while the sender fails alone naming its class; without one,
// the flood takes the pool and the receive loop cannot re-post (the stall, reproduced). Two
// loopback RC QPs on rxe0 (support/rc_pair.h); runs in the soft-RoCE guest and skips with the
// reason elsewhere unless PINPOOL_REQUIRE_RDMA=1.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "pinpool/pool.h"
#include "pinpool/verbs.h"
#include "verbs_test_support.h"

namespace pinpool {
namespace {

using testing::Fill;
using testing::FirstMismatch;
using ::testing::HasSubstr;
using testing::RcPair;
using testing::VerbsTest;
using Side = RcPair::Side;

constexpr std::size_t kMessage = 4 * kKiB;
constexpr int kPosted = 8;         // receives kept posted (RcPair's queue holds 16)
constexpr int kMessages = 1200;    // 4.7 MiB of receive buffers the application keeps
constexpr int kFloodPerRound = 8;  // 512 KiB of send buffers a round, until the send class fails

struct Outcome {
  int delivered = 0;          // messages received byte-exact
  int repost_failures = 0;    // receive buffers the receive class could not give
  int send_failures = 0;      // send buffers the send class refused
  std::string receive_error;  // class_error(receive) at the end
  std::string send_error;     // class_error(send)
};

// One round per message: the sender allocates kFloodPerRound send buffers (keeping them all),
// sends one message from its newest buffer; side B's receive completes, the application keeps
// the buffer, and a fresh one from the receive class is posted.
Outcome FloodAndReceive(const std::shared_ptr<VerbsDomain>& domain, std::size_t receive_reserved) {
  PoolOptions o;
  o.chunk_size = 2 * kMiB;
  o.budget = 32 * kMiB;
  o.page_size = PageSize::kTransparent;
  o.domains = {domain};
  o.classes = {{.name = "receive", .reserved = receive_reserved}, {.name = "send"}};
  absl::StatusOr<std::unique_ptr<Pool>> created = Pool::Create(o);
  EXPECT_TRUE(created.ok()) << created.status();
  if (!created.ok()) return {};
  Pool& pool = **created;
  const ClassId receive = pool.ClassOf("receive").value();
  const ClassId send = pool.ClassOf("send").value();
  absl::StatusOr<std::unique_ptr<RcPair>> pair = RcPair::Connect(domain->pd(), domain->pd());
  EXPECT_TRUE(pair.ok()) << pair.status();
  if (!pair.ok()) return {};

  Outcome out;
  std::vector<Block> posted;  // in posting order: receives complete in order on an RC QP
  std::vector<Block> kept;    // received buffers the application holds
  std::vector<Block> sent;    // send buffers, never acknowledged, never freed
  const auto post = [&] {
    Block b = pool.Allocate(receive, kMessage);
    if (!b) {
      ++out.repost_failures;
      return false;
    }
    EXPECT_TRUE((*pair)->PostRecv(Side::kB, ToSge(b)).ok());
    posted.push_back(b);
    return true;
  };
  for (int i = 0; i < kPosted; ++i) post();
  for (int m = 0; m < kMessages && !posted.empty(); ++m) {
    for (int i = 0; i < kFloodPerRound; ++i) {
      Block b = pool.Allocate(send, 64 * kKiB);
      if (!b) {
        ++out.send_failures;
        break;
      }
      sent.push_back(b);
    }
    if (sent.empty()) break;
    const Block& from = sent.back();
    Fill(from.data(), kMessage, m);
    ibv_sge sge = ToSge(from);
    sge.length = kMessage;
    absl::StatusOr<ibv_wc_status> status = (*pair)->Send(Side::kA, sge);
    EXPECT_TRUE(status.ok() && *status == IBV_WC_SUCCESS) << m;
    absl::StatusOr<ibv_wc> wc = (*pair)->WaitRecv(Side::kB);
    EXPECT_TRUE(wc.ok() && wc->status == IBV_WC_SUCCESS) << m;
    const Block got = posted.front();
    posted.erase(posted.begin());
    if (FirstMismatch(got.data(), kMessage, m) == -1) ++out.delivered;
    kept.push_back(got);
    if (!post() && posted.empty()) break;  // nothing posted: the next send would stall
  }
  out.receive_error = std::string(pool.class_error(receive).message());
  out.send_error = std::string(pool.class_error(send).message());
  for (const Block& b : posted) pool.Deallocate(b);  // QPs go with the pair, after
  for (const Block& b : kept) pool.Deallocate(b);
  for (const Block& b : sent) pool.Deallocate(b);
  pair->reset();
  return out;
}

TEST_F(VerbsTest, AReceiveClassKeepsRepostingWhileASenderFloodsItsOwn) {
  const Outcome out = FloodAndReceive(domain_, 8 * kMiB);
  EXPECT_EQ(out.repost_failures, 0) << out.receive_error;
  EXPECT_EQ(out.delivered, kMessages);
  EXPECT_GT(out.send_failures, kMessages / 2) << "the sender should have hit the wall early";
  EXPECT_THAT(out.send_error, HasSubstr("buffer class \"send\" cannot have another chunk"));
  EXPECT_EQ(out.receive_error, "");
}

// The same flood without the reservation: the receive loop runs out of buffers to post.
TEST_F(VerbsTest, WithoutAReservationTheFloodStallsTheReceiveLoop) {
  const Outcome out = FloodAndReceive(domain_, 0);
  EXPECT_GT(out.repost_failures, 0);
  EXPECT_LT(out.delivered, kMessages);
  EXPECT_THAT(out.receive_error, HasSubstr("buffer class \"receive\" cannot have another chunk"));
}

}  // namespace
}  // namespace pinpool
