// Reallocate keeps the heap's books true: a block it returns is filed, when freed, under the size
// class of its real extent, so memory freed after any resize serves later requests of its size.
// The bug this guards against (issue 13): shrinking a 1.5 MiB block to 100 bytes was reported as
// done in place, the block kept its large extent and was then freed into the 112-byte bin, where
// no large request could ever reuse it: 40 rounds left 80 MiB registered.
#include <gtest/gtest.h>

#include <cstring>

#include "pinpool/pool.h"

namespace pinpool {
namespace {

PoolOptions Options() {
  PoolOptions o;
  o.chunk_size = 4 * kMiB;
  o.budget = 256 * kMiB;
  o.page_size = PageSize::k4K;
  return o;
}

TEST(ReallocateTest, ShrinkingALargeBlockAndFreeingItDoesNotGrowThePool) {
  for (const bool by_address : {false, true}) {
    auto pool = Pool::Create(Options()).value();
    std::size_t mapped_after_first = 0;
    for (int round = 0; round < 40; ++round) {
      Block big = pool->Allocate(1536 * kKiB);
      ASSERT_TRUE(big) << "round " << round << ": " << pool->last_growth_error();
      std::memset(big.data(), 0x5a, 100);
      Block small = by_address ? pool->Reallocate(big.data(), 100) : pool->Reallocate(big, 100);
      ASSERT_TRUE(small);
      EXPECT_EQ(static_cast<unsigned char*>(small.data())[99], 0x5a);
      pool->Deallocate(small);
      if (round == 0) mapped_after_first = pool->GetStats().mapped_bytes;
    }
    EXPECT_EQ(pool->GetStats().mapped_bytes, mapped_after_first)
        << (by_address ? "by address: " : "by Block: ") << pool->GetStats().ToString();
  }
}

}  // namespace
}  // namespace pinpool
