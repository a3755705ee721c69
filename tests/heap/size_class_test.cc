// Size classes (src/heap/size_class.h): every size maps to the smallest class that holds it, at
// every class boundary and through both lookup paths; slab geometry fits its bitmap and wastes
// little; the divisibility test behind the free fast path's interior-pointer check is exact;
// aligned requests get classes whose blocks are aligned.
#include "heap/size_class.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

namespace pinpool::internal {
namespace {

TEST(SizeClassTest, ClassesGrowStrictlyFrom16BytesTo1GiBInStepsOf16ThenFourPerDoubling) {
  EXPECT_EQ(ClassSize(0), 16u);
  EXPECT_EQ(ClassSize(kNumClasses - 1), std::size_t{1} << 30);
  for (unsigned c = 1; c < kNumClasses; ++c) {
    ASSERT_GT(ClassSize(c), ClassSize(c - 1)) << c;
    ASSERT_EQ(ClassSize(c) % 16, 0u) << c;
    if (ClassSize(c) > 128) {
      // Four per doubling: the step is a quarter of the power of two below.
      const std::size_t step = ClassSize(c) - ClassSize(c - 1);
      const std::size_t pow2 = std::size_t{1} << (63 - __builtin_clzll(ClassSize(c) - 1));
      EXPECT_EQ(step, pow2 / 4) << c;
    }
  }
}

TEST(SizeClassTest, EverySizeMapsToTheSmallestClassHoldingItAtEveryBoundary) {
  for (unsigned c = 0; c < kNumClasses; ++c) {
    const std::size_t size = ClassSize(c);
    EXPECT_EQ(SizeClass(size), c) << size;
    EXPECT_EQ(ComputeSizeClass(size), c) << size;
    if (c + 1 < kNumClasses) {
      EXPECT_EQ(SizeClass(size + 1), c + 1) << size + 1;
    }
    if (c > 0) {
      EXPECT_EQ(SizeClass(ClassSize(c - 1) + 1), c) << ClassSize(c - 1) + 1;
    }
  }
  EXPECT_EQ(SizeClass(1), 0u);
}

TEST(SizeClassTest, TableAndComputedPathsAgreeForEverySizeUpTo64KiB) {
  for (std::size_t size = 1; size <= 64 * 1024; ++size) {
    const unsigned c = SizeClass(size);
    ASSERT_EQ(c, ComputeSizeClass(size)) << size;
    ASSERT_GE(ClassSize(c), size) << size;
    if (c > 0) {
      ASSERT_LT(ClassSize(c - 1), size) << size;
    }
  }
}

TEST(SizeClassTest, SlabsHoldTheirBlocksAndWasteLittleLargeClassesAreWholePages) {
  for (unsigned c = 0; c < kNumClasses; ++c) {
    const ClassInfo& k = Class(c);
    const std::size_t span = std::size_t{k.pages} * kPageSize;
    if (IsSlabClass(c)) {
      ASSERT_LT(c, kFirstLargeClass);
      EXPECT_GE(k.objects, 1u) << c;
      EXPECT_LE(k.objects, kMaxSlabObjects) << c;
      EXPECT_EQ(k.objects, span / k.size) << c;
      EXPECT_LE(k.pages, 16u) << c;
      EXPECT_LE((span - k.objects * std::size_t{k.size}) * 32, span)
          << "slab of class " << c << " wastes over 1/32";
    } else {
      ASSERT_GE(c, kFirstLargeClass);
      EXPECT_EQ(k.size % kPageSize, 0u) << c;
      EXPECT_EQ(span, k.size) << c;
      EXPECT_EQ(k.objects, 1u) << c;
    }
  }
}

TEST(SizeClassTest, CacheBoundsAreConsistent) {
  for (unsigned c = 0; c < kNumClasses; ++c) {
    const ClassInfo& k = Class(c);
    EXPECT_GE(k.bin_cap, 64u) << c;
    EXPECT_LE(k.bin_cap, 2048u) << c;
    EXPECT_GE(k.batch, 2u) << c;
    EXPECT_LE(k.batch, k.bin_cap / 2) << c;  // a refill never fills more than half a bin
    EXPECT_GE(k.transfer_cap, 2u * k.batch) << c;
    EXPECT_LE(k.transfer_cap, 32768u) << c;
    EXPECT_LE(std::size_t{k.transfer_cap} * k.size,
              std::max<std::size_t>(16 << 20, 2 * std::size_t{k.batch} * k.size))
        << c;
  }
}

TEST(SizeClassTest, BlockOffsetTestIsExactForEveryClass) {
  for (unsigned c = 0; c < kNumClasses; ++c) {
    const std::uint64_t size = ClassSize(c);
    // Every 16-byte-aligned offset of a slab, or of a large block's first two pages.
    const std::uint64_t end = IsSlabClass(c) ? Class(c).pages * kPageSize : 2 * kPageSize;
    for (std::uint64_t off = 0; off < end; off += 16) {
      ASSERT_EQ(IsBlockOffset(c, off), off % size == 0) << "class " << c << " offset " << off;
    }
    // And at the far end of the offsets a span can have (a 1 GiB chunk).
    for (std::uint64_t off : {size, 2 * size, (std::uint64_t{1} << 30) - size,
                              (std::uint64_t{1} << 30) - 16, (std::uint64_t{1} << 30) + 16}) {
      ASSERT_EQ(IsBlockOffset(c, off), off % size == 0) << "class " << c << " offset " << off;
    }
  }
}

TEST(SizeClassTest, AlignedClassesGiveAlignedBlocksOfTheSizeAsked) {
  for (std::size_t align = 16; align <= kPageSize; align *= 2) {
    for (std::size_t size :
         {std::size_t{1}, std::size_t{24}, std::size_t{100}, std::size_t{640}, std::size_t{3000},
          std::size_t{5000}, std::size_t{14000}, std::size_t{20000}, std::size_t{1} << 20}) {
      const unsigned c = AlignedSizeClass(size, align);
      EXPECT_GE(ClassSize(c), size) << size << " " << align;
      // Slab blocks start at multiples of the class size from a page boundary; large blocks are
      // page-aligned spans.
      if (IsSlabClass(c)) {
        EXPECT_EQ(ClassSize(c) % align, 0u) << size << " " << align;
      }
      if (align == 16) {
        EXPECT_EQ(c, SizeClass(size));
      }
    }
  }
}

}  // namespace
}  // namespace pinpool::internal
