// Budgets and RLIMIT_MEMLOCK: exceeding either is a typed error that names the limit and the
// fix, and leaves nothing pinned (VmLck back where it was) and nothing half-mapped.
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
  const long long locked_before = ProcStatusBytes("VmLck");
  std::vector<Block> blocks;
  for (Block b; (b = pool->Allocate(3 * kMiB));) blocks.push_back(b);
  EXPECT_EQ(blocks.size(), 4u);  // one 3 MiB block per 4 MiB chunk
  const absl::Status error = pool->last_growth_error();
  EXPECT_EQ(error.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(error.message()),
              AllOf(HasSubstr("budget of 16 MiB"), HasSubstr("PoolOptions::budget")));
  const PoolStats s = pool->GetStats();
  EXPECT_EQ(s.mapped_bytes, 16 * kMiB);
  EXPECT_LE(s.pinned_bytes, s.budget_bytes);
  if (!testing::kMlockIsANoOp) {
    EXPECT_EQ(ProcStatusBytes("VmLck") - locked_before, static_cast<long long>(16 * kMiB));
  }
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

TEST(MemlockTest, PoolLargerThanTheLimitFailsWithTheLimitAndTheFixAndPinsNothing) {
  PINPOOL_SKIP_IF_MLOCK_IS_A_NOOP();
  RunAsUnprivileged([] {
    WarmUpJemalloc();
    const long long locked_before = ProcStatusBytes("VmLck");
    const long long size_before = ProcStatusBytes("VmSize");
    PoolOptions o;
    o.chunk_size = 16 * kMiB;
    o.budget = 64 * kMiB;
    o.initial_size = 16 * kMiB;
    o.page_size = PageSize::k4K;
    auto pool = Pool::Create(o);
    EXPECT_FALSE(pool.ok());
    EXPECT_EQ(pool.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(std::string(pool.status().message()),
                AllOf(HasSubstr("RLIMIT_MEMLOCK is 8 MiB"), HasSubstr("ulimit -l"),
                      HasSubstr("CAP_IPC_LOCK")));
    EXPECT_EQ(ProcStatusBytes("VmLck"), locked_before);
    EXPECT_NEAR(ProcStatusBytes("VmSize"), size_before, 1 << 20);  // nothing left mapped
    std::fprintf(stderr, "error as the user sees it: %s\n", pool.status().ToString().c_str());
  });
}

TEST(MemlockTest, GrowthPastTheLimitFailsOnTheAllocationPathAndKeepsServing) {
  PINPOOL_SKIP_IF_MLOCK_IS_A_NOOP();
  RunAsUnprivileged([] {
    const long long locked_before = ProcStatusBytes("VmLck");
    PoolOptions o;
    o.chunk_size = 2 * kMiB;
    o.budget = 64 * kMiB;
    o.page_size = PageSize::k4K;
    auto pool = Pool::Create(o).value();
    std::vector<Block> blocks;
    for (Block b; (b = pool->Allocate(kMiB));) blocks.push_back(b);
    // 8 MiB of limit = at most 4 chunks of 2 MiB (less whatever else is locked).
    EXPECT_GE(blocks.size(), 4u);
    EXPECT_LE(blocks.size(), 8u);
    EXPECT_THAT(std::string(pool->last_growth_error().message()),
                HasSubstr("RLIMIT_MEMLOCK is 8 MiB"));
    EXPECT_LE(ProcStatusBytes("VmLck") - locked_before, static_cast<long long>(8 * kMiB));
    pool->Deallocate(blocks.back());
    blocks.pop_back();
    EXPECT_TRUE(pool->Allocate(kMiB));  // what it has, it still serves
    pool.reset();
    EXPECT_EQ(ProcStatusBytes("VmLck"), locked_before);
  });
}

}  // namespace
}  // namespace pinpool
