// Every free files a block under the class of its real extent, whatever size the caller names. The
// jemalloc heap filed a sized free by the caller's size, and that misfiled (found while looking for
// the class of Reallocate's bug, reallocate_test.cc): a block allocated with a large alignment has
// a larger class than the size it asked for, and Deallocate(Block), Allocator<T>::deallocate of an
// over-aligned T and the pmr resource's do_deallocate all free it with the size asked. 40 blocks of
// 64 bytes aligned to 4 KiB came back as plain 64-byte blocks carrying 4 KiB each.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory_resource>
#include <vector>

#include "pinpool/allocator.h"
#include "pinpool/memory_resource.h"
#include "pinpool/pool.h"

namespace pinpool {
namespace {

PoolOptions Options() {
  PoolOptions o;
  o.chunk_size = 4 * kMiB;
  o.budget = 64 * kMiB;
  o.page_size = PageSize::k4K;
  return o;
}

// Frees `n` blocks of 64 bytes aligned to 4 KiB through `free`, then checks that plain 64-byte
// allocations get 64-byte blocks.
template <typename Free>
void ExpectPlainBlocksAfterAlignedFrees(Pool& pool, Free free) {
  std::vector<Block> aligned;
  for (int i = 0; i < 40; ++i) {
    aligned.push_back(pool.Allocate(64, 4096));
    ASSERT_TRUE(aligned.back());
    ASSERT_EQ(pool.UsableSize(aligned.back().data()), 4096u);
  }
  for (const Block& b : aligned) free(b);
  std::vector<Block> plain;
  for (int i = 0; i < 40; ++i) {
    plain.push_back(pool.Allocate(64));
    EXPECT_EQ(pool.UsableSize(plain.back().data()), 64u) << "a 4 KiB block filed as 64 bytes";
  }
  for (const Block& b : plain) pool.Deallocate(b);
}

TEST(BlockClassTest, AlignedBlocksFreedWithTheSizeAskedGoBackToTheirOwnClass) {
  auto pool = Pool::Create(Options()).value();
  ExpectPlainBlocksAfterAlignedFrees(*pool, [&](const Block& b) { pool->Deallocate(b); });
  ExpectPlainBlocksAfterAlignedFrees(*pool,
                                     [&](const Block& b) { pool->Deallocate(b.data(), 64); });
  struct alignas(4096) Page {
    char bytes[64];
  };
  ExpectPlainBlocksAfterAlignedFrees(*pool, [&](const Block& b) {
    Allocator<Page>(*pool).deallocate(static_cast<Page*>(b.data()), 1);  // names 4096 bytes
  });
  MemoryResource resource(*pool);
  ExpectPlainBlocksAfterAlignedFrees(
      *pool, [&](const Block& b) { resource.deallocate(b.data(), 64, 4096); });
}

TEST(BlockClassTest, ASizedFreeNamingFewerBytesStillFilesTheWholeBlock) {
  auto pool = Pool::Create(Options()).value();
  std::vector<void*> big;
  for (int i = 0; i < 40; ++i) big.push_back(pool->Allocate(100 * kKiB).data());
  for (void* p : big) pool->Deallocate(p, 16);  // names less than it was allocated with
  for (int i = 0; i < 40; ++i) {
    Block b = pool->Allocate(16);
    EXPECT_EQ(pool->UsableSize(b.data()), 16u);
    pool->Deallocate(b);
  }
  // The large blocks went back as large blocks: a large request reuses them without growing.
  const std::size_t mapped = pool->GetStats().mapped_bytes;
  std::vector<Block> again;
  for (int i = 0; i < 40; ++i) again.push_back(pool->Allocate(100 * kKiB));
  EXPECT_EQ(pool->GetStats().mapped_bytes, mapped);
  for (Block& b : again) pool->Deallocate(b);
}

}  // namespace
}  // namespace pinpool
