// Pinned means pinned, for RDMA: a pool registered with a verbs domain (ibv_reg_mr on rxe0, which
// takes a long-term pin) keeps the physical address of every page while the kernel compacts
// memory, in the same run in which an mlocked control buffer moves. Also the default domain and
// io_uring again, on the guest's own kernel (Debian 12's, older than the host's). The check is
// tests/support/compaction.h's, as in tests/domain/pinning_test.cc on the host. Runs in the
// soft-RoCE guest (as root there, which reading PFNs and compacting need).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "pinpool/io_uring.h"
#include "support/compaction.h"
#include "support/proc_status.h"
#include "verbs_test_support.h"

namespace pinpool::testing {
namespace {

class VerbsPinningTest : public VerbsTest {};

TEST_F(VerbsPinningTest, VerbsRegisteredPoolKeepsItsPagesWhereCompactionMovesMlockedOnes) {
  const std::string why_not = WhyCompactionCannotBeObserved();
  if (!why_not.empty()) {
    if (RdmaRequired()) FAIL() << "PINPOOL_REQUIRE_RDMA=1 but " << why_not;
    GTEST_SKIP() << why_not;
  }
  auto ring = IoUringDomain::Create(8);
  ASSERT_TRUE(ring.ok()) << ring.status();
  auto by_verbs = Pool::Create(FourKiBPoolOptions({domain_}));
  ASSERT_TRUE(by_verbs.ok()) << by_verbs.status();
  auto by_default = Pool::Create(FourKiBPoolOptions({}));
  ASSERT_TRUE(by_default.ok()) << by_default.status();
  auto by_ring = Pool::Create(FourKiBPoolOptions({*ring}));
  ASSERT_TRUE(by_ring.ok()) << by_ring.status();
  auto by_mlock = Pool::Create(FourKiBPoolOptions({MakeResidentNotPinnedDomain()}));
  ASSERT_TRUE(by_mlock.ok()) << by_mlock.status();
  const long long locked = ProcStatusBytes("VmLck");
  InterleavedControl control(kWatchedBytes);
  ASSERT_TRUE(GrowInterleaved({by_verbs->get(), by_default->get(), by_ring->get(), by_mlock->get()},
                              control));
  // The control and the resident pool: both mlocked (no sanitizer in the guest's runs).
  ASSERT_GE(ProcStatusBytes("VmLck") - locked, static_cast<long long>(2 * kWatchedBytes));

  CompactionRun run;
  run.WatchPool(domain_->name() + " (verbs)", **by_verbs, Claim::kLongTermPinned);
  run.WatchPool("default (long-term pin)", **by_default, Claim::kLongTermPinned);
  run.WatchPool("io_uring", **by_ring, Claim::kLongTermPinned);
  run.WatchPool("mlock (resident, not pinned)", **by_mlock, Claim::kMlocked);
  run.WatchControl("mlocked control", control);
  run.CompactUntilTheControlMoves();
  run.Verify();
}

}  // namespace
}  // namespace pinpool::testing
