// Budgets and RLIMIT_MEMLOCK: exceeding either is a typed error that names the limit and the
// fix, and leaves nothing pinned or locked (VmPin for the default long-term pin domain, VmLck for
// the resident mlock domain, back where they were) and nothing half-mapped. The limit tests run
// as an unprivileged user of their own (support/unprivileged.h): io_uring, under the default
// domain, counts pins per user across processes.
#include <gmock/gmock.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "pinpool/pool.h"
#include "support/proc_status.h"
#include "support/sanitizers.h"
#include "support/unprivileged.h"

namespace pinpool {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::ProcStatusBytes;
using testing::RunAsUnprivileged;

TEST(BudgetTest, GrowthStopsAtTheBudgetWithAnErrorNamingIt) {
  PoolOptions o;
  o.chunk_size = 4 * kMiB;
  o.budget = 16 * kMiB;
  o.page_size = PageSize::k4K;
  auto pool = Pool::Create(o).value();
  const long long pinned_before = ProcStatusBytes("VmPin");
  std::vector<Block> blocks;
  for (Block b; (b = pool->Allocate(3 * kMiB));) blocks.push_back(b);
  EXPECT_EQ(blocks.size(), 4u);  // one 3 MiB block per 4 MiB chunk
  const absl::Status error = pool->last_growth_error();
  EXPECT_EQ(error.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(error.message()),
              AllOf(HasSubstr("budget of 16 MiB"), HasSubstr("PoolOptions::budget")));
  const PoolStats s = pool->GetStats();
  EXPECT_EQ(s.mapped_bytes, 16 * kMiB);
  EXPECT_EQ(s.pinned_bytes, s.budget_bytes);
  EXPECT_EQ(s.locked_bytes, 0u) << "the default domain pins; it does not mlock";
  EXPECT_EQ(ProcStatusBytes("VmPin") - pinned_before, static_cast<long long>(16 * kMiB));
  EXPECT_EQ(pool->Reserve(32 * kMiB).code(), absl::StatusCode::kResourceExhausted);
  for (Block& b : blocks) pool->Deallocate(b);
  Block again = pool->Allocate(3 * kMiB);  // freed space is served again without growth
  EXPECT_TRUE(again);
  pool->Deallocate(again);
}

// The first pool sets up process-wide state (the live-heap registry, this thread's cache list);
// that is not the pool's, so tests measuring what a pool leaves behind create and destroy one
// first.
void WarmUpJemalloc() {
  PoolOptions o;
  o.chunk_size = 2 * kMiB;
  o.budget = 2 * kMiB;
  auto pool = Pool::Create(o).value();
  pool->Deallocate(pool->Allocate(64));
}

// Both counters, so that a test sees a pool leave the other one alone too.
struct Held {
  long long pinned = ProcStatusBytes("VmPin");
  long long locked = ProcStatusBytes("VmLck");
};

// A 16 MiB pool over the 8 MiB limit, created through `domains` (empty: the default).
void ExpectAPoolLargerThanTheLimitToFailClearlyAndHoldNothing(
    std::vector<std::shared_ptr<Domain>> domains, const char* counter_words) {
  WarmUpJemalloc();
  const Held before;
  const long long size_before = ProcStatusBytes("VmSize");
  PoolOptions o;
  o.chunk_size = 16 * kMiB;
  o.budget = 64 * kMiB;
  o.initial_size = 16 * kMiB;
  o.page_size = PageSize::k4K;
  o.domains = std::move(domains);
  auto pool = Pool::Create(o);
  EXPECT_FALSE(pool.ok());
  EXPECT_EQ(pool.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(pool.status().message()),
              AllOf(HasSubstr("RLIMIT_MEMLOCK is 8 MiB"), HasSubstr(counter_words),
                    HasSubstr("16 MiB more would exceed it"), HasSubstr("ulimit -l"),
                    HasSubstr("CAP_IPC_LOCK"), HasSubstr("refused before pinning anything"),
                    // initial_size is what Create pins up front, so it is what to lower.
                    HasSubstr("PoolOptions::initial_size")));
  EXPECT_EQ(ProcStatusBytes("VmPin"), before.pinned);
  EXPECT_EQ(ProcStatusBytes("VmLck"), before.locked);
  EXPECT_NEAR(ProcStatusBytes("VmSize"), size_before,
              testing::kVmSlackBytes);  // nothing left mapped
  std::fprintf(stderr, "error as the user sees it: %s\n", pool.status().ToString().c_str());
}

TEST(MemlockTest, PoolLargerThanTheLimitFailsWithTheLimitAndTheFixAndPinsNothing) {
  RunAsUnprivileged([] {
    ExpectAPoolLargerThanTheLimitToFailClearlyAndHoldNothing({}, "long-term pinned (VmPin)");
  });
}

TEST(MemlockTest, ResidentPoolLargerThanTheLimitFailsWithTheLimitAndTheFixAndLocksNothing) {
  PINPOOL_SKIP_IF_MLOCK_IS_A_NOOP();
  RunAsUnprivileged([] {
    ExpectAPoolLargerThanTheLimitToFailClearlyAndHoldNothing({MakeResidentNotPinnedDomain()},
                                                             "locked (VmLck)");
  });
}

// Growth of a 2 MiB-chunk pool through `domains` until the kernel's limit stops it, after at
// least `min_chunks`; `counter` is what the pool's chunks count in.
void ExpectGrowthPastTheLimitToFailAndKeepServing(std::vector<std::shared_ptr<Domain>> domains,
                                                  const char* counter, std::size_t min_chunks) {
  const Held before;
  const long long held = ProcStatusBytes(counter);
  PoolOptions o;
  o.chunk_size = 2 * kMiB;
  o.budget = 64 * kMiB;
  o.page_size = PageSize::k4K;
  o.domains = std::move(domains);
  auto pool = Pool::Create(o).value();
  std::vector<Block> blocks;
  for (Block b; (b = pool->Allocate(kMiB));) blocks.push_back(b);
  // 8 MiB of limit = at most 4 chunks of 2 MiB (less whatever else is pinned or locked).
  EXPECT_GE(blocks.size(), min_chunks);
  EXPECT_LE(blocks.size(), 8u);
  const std::string error(pool->last_growth_error().message());
  EXPECT_THAT(error, HasSubstr("RLIMIT_MEMLOCK is 8 MiB"));
  std::fprintf(stderr, "growth error as the user sees it: %s\n", error.c_str());
  EXPECT_EQ(ProcStatusBytes(counter) - held, static_cast<long long>(pool->GetStats().mapped_bytes));
  EXPECT_LE(ProcStatusBytes(counter) - held, static_cast<long long>(8 * kMiB));
  pool->Deallocate(blocks.back());
  blocks.pop_back();
  EXPECT_TRUE(pool->Allocate(kMiB));  // what it has, it still serves
  pool.reset();
  EXPECT_EQ(ProcStatusBytes("VmPin"), before.pinned);
  EXPECT_EQ(ProcStatusBytes("VmLck"), before.locked);
}

TEST(MemlockTest, GrowthPastTheLimitFailsOnTheAllocationPathAndKeepsServing) {
  // io_uring counts its rings' own pages (8 KiB each here) against the user's limit too, so the
  // fourth 2 MiB chunk does not fit in 8 MiB.
  RunAsUnprivileged([] { ExpectGrowthPastTheLimitToFailAndKeepServing({}, "VmPin", 3); });
}

TEST(MemlockTest, ResidentGrowthPastTheLimitFailsOnTheAllocationPathAndKeepsServing) {
  PINPOOL_SKIP_IF_MLOCK_IS_A_NOOP();
  RunAsUnprivileged([] {
    ExpectGrowthPastTheLimitToFailAndKeepServing({MakeResidentNotPinnedDomain()}, "VmLck", 4);
  });
}

}  // namespace
}  // namespace pinpool
