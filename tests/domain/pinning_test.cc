// Pinned means pinned: memory a domain calls long-term pinned keeps its physical addresses while
// the kernel compacts memory, and mlocked memory (what the resident domain gives) does not.
//
// Pools of 4 KiB pages (required: compaction skips huge pages, which would prove nothing) on
// every domain available on the host that claims a long-term pin (the default, io_uring), one on
// the resident (mlock) domain, and an mlocked control buffer. The PFNs of every page are read
// from /proc/self/pagemap, memory is compacted (/proc/sys/vm/compact_memory), and the PFNs are
// read again. The test fails unless mlocked memory (the control, and the resident pool when its
// mlock is real) moved (else compaction did nothing this run and the zeros prove nothing), and
// fails if any page of a long-term pinned pool moved. The verbs
// domain has the same test in the soft-RoCE guest (tests/providers/verbs/verbs_pinning_test.cc).
//
// Root only (pagemap hides PFNs from others; only root compacts): CI runs as root, elsewhere the
// test skips saying why.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "pinpool/io_uring.h"
#include "pinpool/pool.h"
#include "support/compaction.h"
#include "support/proc_status.h"

namespace pinpool {
namespace {

using testing::Claim;
using testing::CompactionRun;
using testing::InterleavedControl;

TEST(PinningTest, LongTermPinnedPoolsKeepTheirPagesWhereCompactionMovesMlockedOnes) {
  const std::string why_not = testing::WhyCompactionCannotBeObserved();
  if (!why_not.empty()) GTEST_SKIP() << why_not;

  auto ring = IoUringDomain::Create(8);
  ASSERT_TRUE(ring.ok()) << ring.status();
  auto by_default = Pool::Create(testing::FourKiBPoolOptions({}));
  ASSERT_TRUE(by_default.ok()) << by_default.status();
  auto by_ring = Pool::Create(testing::FourKiBPoolOptions({*ring}));
  ASSERT_TRUE(by_ring.ok()) << by_ring.status();
  auto by_mlock = Pool::Create(testing::FourKiBPoolOptions({MakeResidentNotPinnedDomain()}));
  ASSERT_TRUE(by_mlock.ok()) << by_mlock.status();
  const long long locked = testing::ProcStatusBytes("VmLck");
  InterleavedControl control(testing::kWatchedBytes);
  ASSERT_TRUE(
      testing::GrowInterleaved({by_default->get(), by_ring->get(), by_mlock->get()}, control));
  const long long now_locked = testing::ProcStatusBytes("VmLck") - locked;
  ASSERT_GE(now_locked, static_cast<long long>(testing::kWatchedBytes))
      << "the control is not mlocked";
  // The resident pool is mlocked memory too, and counts with the control, unless a sanitizer made
  // its mlock a no-op (VmLck then holds the control alone).
  const Claim resident = now_locked >= static_cast<long long>(2 * testing::kWatchedBytes)
                             ? Claim::kMlocked
                             : Claim::kNothing;

  CompactionRun run;
  run.WatchPool("default (long-term pin)", **by_default, Claim::kLongTermPinned);
  run.WatchPool("io_uring", **by_ring, Claim::kLongTermPinned);
  run.WatchPool("mlock (resident, not pinned)", **by_mlock, resident);
  run.WatchControl("mlocked control", control);
  run.CompactUntilTheControlMoves();
  run.Verify();
}

}  // namespace
}  // namespace pinpool
