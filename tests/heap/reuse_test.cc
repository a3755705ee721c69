// Freed memory is reused for other sizes: a pool never purges, so memory freed in one size must
// serve later requests of others, or the pool grows until its budget runs out while little is
// live. (The jemalloc heap once refused to split a free extent more than 64x larger than the
// request: freed blocks that coalesced into chunk-sized extents were never reused.)
#include <gtest/gtest.h>

#include <cstddef>

#include "pinpool/pool.h"

namespace pinpool {
namespace {

TEST(ReuseTest, AlternatingBatchesOfSizesReuseFreedMemoryInsteadOfGrowing) {
  PoolOptions o;
  o.chunk_size = 32 * kMiB;
  o.budget = 128 * kMiB;  // at most ~17 MiB is live at any time below
  o.page_size = PageSize::k4K;
  auto pool = Pool::Create(o).value();
  for (int round = 0; round < 30; ++round) {
    for (std::size_t size : {std::size_t{16} << 10, std::size_t{256} << 10, std::size_t{96} << 10,
                             std::size_t{200} << 10}) {
      Block batch[64];
      for (Block& b : batch) {
        b = pool->Allocate(size);
        ASSERT_TRUE(b) << "round " << round << ", size " << size << ": "
                       << pool->last_growth_error();
      }
      for (Block& b : batch) pool->Deallocate(b);
    }
  }
  const PoolStats s = pool->GetStats();
  EXPECT_EQ(s.growth_failures, 0u);
  EXPECT_LE(s.mapped_bytes, 64 * kMiB) << s.ToString();
}

}  // namespace
}  // namespace pinpool
