// Where a free block's mark lies (src/heap/free_mark.h, fast::MarkOf): inside the block, in
// its first word for classes that are not a multiple of the page, else in its first page, at the
// word the inline paths find from the class row; spread over the page's lines for blocks a page
// or 64 KiB apart (the reason it moved); written by the heap where the inline paths read it; and
// still found after a block's span went back to the page heap, where its class is forgotten.
#include "heap/free_mark.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include "heap/central_cache.h"
#include "pinpool/pool.h"
#include "support/counting_domain.h"
#include "support/fake_chunks.h"

namespace pinpool::internal {
namespace {

constexpr std::uintptr_t kBase = std::uintptr_t{0x7f3a00000000};  // 1 GiB aligned, never read

std::uintptr_t MarkOffset(std::uintptr_t block, unsigned c) {
  return reinterpret_cast<std::uintptr_t>(MarkOf(reinterpret_cast<void*>(block), c)) - block;
}

TEST(FreeMarkTest, EveryClassKeepsItsMarkInItsBlockWhereTheInlineRowSays) {
  unsigned hashed = 0;
  for (unsigned c = 0; c < kNumClasses; ++c) {
    const std::size_t size = ClassSize(c);
    const bool page_multiple = size % kPageSize == 0;
    hashed += page_multiple;
    ASSERT_EQ(fast::classes.cls[c + 1].mark_hash, MarkHash(c)) << "class " << c;
    ASSERT_EQ(fast::classes.cls[c + 1].zero, 0u) << "the grant tag's magic, class " << c;
    // Blocks as a slab or the page heap lays them out: from a page, the class's stride.
    std::set<std::uintptr_t> offsets;
    for (std::uintptr_t i = 0; i < 512; ++i) {
      const std::uintptr_t block = kBase + i * size;
      const std::uintptr_t off = MarkOffset(block, c);
      ASSERT_EQ(off % 8, 0u) << c;
      ASSERT_LE(off + 8, std::min(size, kPageSize)) << "inside the block's first page, class " << c;
      if (!page_multiple) {
        ASSERT_EQ(off, 0u) << "blocks sharing pages: the first word, class " << c;
      }
      offsets.insert(off);
    }
    if (page_multiple) {
      EXPECT_GT(offsets.size(), 100u) << "class " << c;
    }
  }
  EXPECT_GE(hashed, 20u) << "4, 8, 12 KiB and every class from 16 KiB";
}

// The lines the marks of `n` blocks `stride` apart fall on, in a cache indexed by the address's
// bits 6..11 (an L1 of 64 sets).
std::vector<int> LinesOfMarks(unsigned c, std::uintptr_t stride, int n) {
  std::vector<int> per_line(64);
  for (int i = 0; i < n; ++i) {
    const std::uintptr_t block = kBase + std::uintptr_t(i) * stride;
    ++per_line[((block + MarkOffset(block, c)) >> 6) & 63];
  }
  return per_line;
}

TEST(FreeMarkTest, MarksOfBlocksAPageOr64KiBApartSpreadOverTheLines) {
  for (const std::size_t size : {std::size_t{4096}, std::size_t{64} << 10, std::size_t{1} << 20}) {
    const std::vector<int> lines = LinesOfMarks(SizeClass(size), size, 256);
    int used = 0, most = 0;
    for (int n : lines) {
      used += n != 0;
      most = std::max(most, n);
    }
    // 256 marks in 64 sets: 4 each on average. In the first word, all 256 share set 0.
    EXPECT_GE(used, 56) << size;
    EXPECT_LE(most, 12) << size;
  }
}

// The heap writes the mark where the inline paths look: through the central layer's fresh
// blocks (real memory), the first word of a page-multiple block stays what it was.
TEST(FreeMarkTest, FreshBlocksOfAPageMultipleCarryTheMarkOutsideTheirFirstWord) {
  constexpr std::uint64_t kSecret = 0x5ec7e7;
  MetadataArena meta;
  testing::FakeChunks source(2 << 20, 16);
  PageHeap pages(source.base(), source.chunk_shift(), 16, &source, &meta);
  CentralCache central(&pages, &meta, kSecret, 64 << 20);
  for (const std::size_t size : {std::size_t{4096}, std::size_t{12288}, std::size_t{64} << 10,
                                 std::size_t{256} << 10, std::size_t{640}}) {
    const unsigned c = SizeClass(size);
    void* blocks[4];
    ASSERT_EQ(central.Take(c, blocks, 4, true), 4u) << size;
    for (void* p : blocks) {
      EXPECT_TRUE(MarkedFree(kSecret, p, c)) << size;
      EXPECT_TRUE(MaybeMarkedFree(kSecret, p)) << size;
      // A page-multiple block's mark is outside its first word unless its address hashes to
      // word 0 (1 in 512 addresses).
      const bool in_first_word = static_cast<void*>(MarkOf(p, c)) == p;
      EXPECT_EQ(in_first_word,
                size % kPageSize != 0 ||
                    ((reinterpret_cast<std::uintptr_t>(p) * fast::kMarkHash) >> 55) == 0)
          << size;
      std::uint64_t first;
      std::memcpy(&first, p, 8);
      EXPECT_EQ(first == FreeMark(kSecret, p), in_first_word) << size;
      MarkLive(p, c);
      EXPECT_FALSE(MarkedFree(kSecret, p, c)) << size;
      EXPECT_FALSE(MaybeMarkedFree(kSecret, p)) << size;
    }
    for (void* p : blocks) MarkFree(kSecret, p, c);
    central.Put(c, blocks, 4);
  }
}

// A double free of a large block whose span went back to the page heap (its page map entry
// cleared, its class forgotten) is still caught: the free looks in both places a mark may lie.
TEST(FreeMarkDeathTest, ADoubleFreeAfterTheSpanWentBackIsCaughtForEveryPlace) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  PoolOptions o;
  o.chunk_size = 64 * kMiB;
  o.budget = 128 * kMiB;
  o.page_size = PageSize::k4K;
  o.domains.push_back(std::make_shared<pinpool::testing::CountingDomain>());
  auto pool = Pool::Create(o).value();
  // More blocks than a thread cache and the transfer stack keep: the rest go to the page heap.
  std::vector<Block> blocks;
  for (int i = 0; i < 12; ++i) blocks.push_back(pool->Allocate(3 * kMiB));
  for (Block& b : blocks) ASSERT_TRUE(b);
  for (Block& b : blocks) pool->Deallocate(b);
  for (const Block& b : blocks) {
    EXPECT_DEATH(pool->Deallocate(b.data()), "free already") << b.data();
  }
}

}  // namespace
}  // namespace pinpool::internal
