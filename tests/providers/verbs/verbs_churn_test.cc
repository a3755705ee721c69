// Registered memory stays the device's memory through allocation churn (docs/design.md, invariant
// "Registered pages are never released or replaced while registered": what the CPU writes is what
// the device reads, after any amount of allocation churn), proved on a real device: 10^5
// allocate/free operations on a pool of rxe0-registered chunks, with every block filled by the CPU
// when allocated; along the way and at the end, an RDMA READ from the other QP sees exactly the
// CPU's bytes, and an RDMA WRITE's bytes are exactly what the CPU reads. And the registration count
// does not move across the churn: registration happens per chunk, never per block. Fixed seeds, so
// a failure reproduces. Runs in the soft-RoCE guest; skips with the reason elsewhere unless
// PINPOOL_REQUIRE_RDMA=1.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "pinpool/pool.h"
#include "pinpool/verbs.h"
#include "verbs_test_support.h"

namespace pinpool {
namespace {

using testing::Fill;
using testing::FirstMismatch;
using testing::MakePool;
using testing::RcPair;
using testing::StatusName;
using testing::VerbsTest;
using Side = RcPair::Side;

constexpr int kOperations = 100'000;  // allocate or free, each one operation
constexpr std::size_t kMaxLive = 128;
constexpr std::size_t kMaxBlock = 128 * kKiB;

struct Live {
  Block block;
  std::uint64_t seed = 0;
};

// Mostly small sizes, a tail up to kMaxBlock (log-uniform), as a server's buffers are.
std::size_t RandomSize(std::mt19937_64& rng) {
  if (rng() % 8 != 0) return 1 + rng() % 2048;
  const double lg = 11.0 + static_cast<double>(rng() % 6001) / 1000.0;  // 2^11 .. 2^17
  return static_cast<std::size_t>(std::exp2(lg));
}

class ChurnTest : public VerbsTest {
 protected:
  // 4 MiB chunks, the first four registered at creation: more than the churn's live bytes ever
  // need, so any registration during the churn would be one per block, not per chunk.
  std::unique_ptr<Pool> MakeChurnPool() {
    return MakePool({domain_}, 4 * kMiB, 32 * kMiB, 16 * kMiB);
  }

  // One churn step: free a random live block or allocate a new one (filled by the CPU).
  // Returns false when an allocation failed.
  static bool Step(Pool& pool, std::vector<Live>& live, std::mt19937_64& rng,
                   std::uint64_t& next_seed) {
    const bool allocate = live.empty() || (live.size() < kMaxLive && rng() % 2 == 0);
    if (!allocate) {
      const std::size_t victim = rng() % live.size();
      pool.Deallocate(live[victim].block);
      live[victim] = live.back();
      live.pop_back();
      return true;
    }
    Live l{pool.Allocate(RandomSize(rng)), next_seed++};
    if (!l.block) return false;
    Fill(l.block.data(), l.block.size(), l.seed);
    live.push_back(l);
    return true;
  }
};

// CPU -> device: an RDMA READ of the block (from QP B, into a scratch block of another pool)
// sees exactly the pattern the CPU wrote. Device -> CPU: an RDMA WRITE of a new pattern into the
// block is exactly what the CPU then reads.
void CheckBothWays(RcPair& pair, Live& l, const Block& scratch, std::uint64_t new_seed) {
  const auto n = static_cast<std::uint32_t>(l.block.size());
  ibv_sge local = ToSge(scratch);
  local.length = n;
  Fill(scratch.data(), n, ~l.seed);
  const absl::StatusOr<ibv_wc_status> read = pair.Read(Side::kB, local, ToRemoteBuffer(l.block));
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(*read, IBV_WC_SUCCESS) << StatusName(*read);
  ASSERT_EQ(FirstMismatch(scratch.data(), n, l.seed), -1)
      << "RDMA READ of a " << n << " B block at " << l.block.data()
      << " does not see what the CPU wrote";

  Fill(scratch.data(), n, new_seed);
  const absl::StatusOr<ibv_wc_status> write = pair.Write(Side::kB, local, ToRemoteBuffer(l.block));
  ASSERT_TRUE(write.ok()) << write.status();
  ASSERT_EQ(*write, IBV_WC_SUCCESS) << StatusName(*write);
  ASSERT_EQ(FirstMismatch(l.block.data(), n, new_seed), -1)
      << "the CPU does not read what an RDMA WRITE put into a " << n << " B block at "
      << l.block.data();
  l.seed = new_seed;
}

TEST_F(ChurnTest, AfterAHundredThousandOperationsCpuAndDeviceSeeTheSameBytes) {
  std::unique_ptr<Pool> pool = MakeChurnPool();
  std::unique_ptr<Pool> scratch_pool = MakePool({domain_}, 2 * kMiB, 2 * kMiB);
  ASSERT_NE(pool, nullptr);
  ASSERT_NE(scratch_pool, nullptr);
  const Block scratch = scratch_pool->Allocate(kMaxBlock);
  ASSERT_TRUE(scratch);
  std::unique_ptr<RcPair> pair = Connect(domain_->pd(), domain_->pd());
  ASSERT_NE(pair, nullptr);

  std::mt19937_64 rng(20240603);
  std::uint64_t next_seed = 1;
  std::vector<Live> live;
  int checks = 0;
  for (int op = 1; op <= kOperations; ++op) {
    ASSERT_TRUE(Step(*pool, live, rng, next_seed))
        << "allocation failed at operation " << op << ": " << pool->last_growth_error();
    // Every 1000 operations, both directions on two random live blocks.
    if (op % 1000 == 0 && !live.empty()) {
      for (int k = 0; k < 2; ++k) {
        CheckBothWays(*pair, live[rng() % live.size()], scratch, next_seed++);
        ASSERT_FALSE(HasFatalFailure()) << "at operation " << op;
        ++checks;
      }
    }
  }
  // At the end, every live block, both ways.
  for (Live& l : live) {
    CheckBothWays(*pair, l, scratch, next_seed++);
    ASSERT_FALSE(HasFatalFailure());
    ++checks;
  }
  RecordProperty("rdma_checks", checks);
  RecordProperty("live_blocks_at_end", static_cast<int>(live.size()));
  for (Live& l : live) pool->Deallocate(l.block);
  scratch_pool->Deallocate(scratch);
}

TEST_F(ChurnTest, TheRegistrationCountDoesNotChangeAcrossChurn) {
  std::unique_ptr<Pool> pool = MakeChurnPool();
  ASSERT_NE(pool, nullptr);
  const PoolStats before = pool->GetStats();
  const std::uint64_t domain_total = domain_->total_registrations();
  const std::uint64_t domain_live = domain_->live_registrations();
  ASSERT_EQ(before.domains[0].registrations, 4u);
  ASSERT_EQ(domain_live, 4u);

  std::mt19937_64 rng(7);
  std::uint64_t next_seed = 1;
  std::vector<Live> live;
  for (int op = 1; op <= kOperations; ++op) {
    ASSERT_TRUE(Step(*pool, live, rng, next_seed)) << "allocation failed at operation " << op;
  }

  const PoolStats after = pool->GetStats();
  EXPECT_EQ(after.domains[0].registrations, before.domains[0].registrations);
  EXPECT_EQ(after.domains[0].registered_bytes, before.domains[0].registered_bytes);
  EXPECT_EQ(after.growths, before.growths);
  EXPECT_EQ(domain_->total_registrations(), domain_total) << "ibv_reg_mr was called during churn";
  EXPECT_EQ(domain_->live_registrations(), domain_live);
  EXPECT_EQ(domain_->failed_deregistrations(), 0u);
  for (Live& l : live) pool->Deallocate(l.block);
  pool.reset();
  EXPECT_EQ(domain_->live_registrations(), 0u) << "destroying the pool left regions registered";
}

}  // namespace
}  // namespace pinpool
