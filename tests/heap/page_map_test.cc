// PageMap (src/heap/page_map.h): entries encode a class and the distance to the span's start;
// IsBlockStart accepts exactly the block starts of a slab or a large block and nothing else; a
// lookup outside the range, or in a chunk the heap has not taken, finds no block. The inline
// free (pinpool/fast_path.h) reads the same entries: the row an entry selects is its class's,
// and an entry of 0, or one with the grant tag, selects a row where nothing is a block's start.
#include "heap/page_map.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "heap/metadata.h"
#include "pinpool/fast_path.h"

namespace pinpool::internal {
namespace {

constexpr unsigned kChunkShift = 21;                       // 2 MiB chunks: 512 pages
constexpr std::uintptr_t kBase = std::uintptr_t{1} << 40;  // never dereferenced

TEST(PageMapTest, EntriesEncodeTheClassAndTheDistanceToTheSpanStart) {
  for (unsigned c : {0u, 7u, 34u, kFirstLargeClass, kNumClasses - 1}) {
    for (std::size_t delta :
         {std::size_t{0}, std::size_t{1}, std::size_t{15}, PageMap::kMaxDelta}) {
      // A large block's entry is on its first page only.
      if (!IsSlabClass(c) && delta != 0) continue;
      // At every page position modulo 16 (the lead depends on the page's address bits 12-15).
      for (std::uintptr_t at = 0; at < 16; ++at) {
        const std::uintptr_t page = kBase + (at + delta) * kPageSize;
        const std::uint32_t e = PageMap::Encode(c, delta, page);
        EXPECT_NE(e, 0u);
        EXPECT_EQ(PageMap::ClassOf(e), c);
        EXPECT_EQ(PageMap::DeltaOf(e), delta);
        EXPECT_EQ(PageMap::SpanStart(e, page + 16), kBase + at * kPageSize);
        // The fast path's offset is the span offset modulo the class size, exactly (p mod page)
        // + rest, for every address on the page.
        for (std::uintptr_t low : {std::uintptr_t{0}, std::uintptr_t{16}, kPageSize - 16}) {
          const std::uintptr_t p = page + low;
          EXPECT_EQ(PageMap::PageOffset(e, p), low + (delta * kPageSize) % ClassSize(c))
              << c << " " << delta << " " << at << " " << low;
          EXPECT_EQ(PageMap::SpanOffset(e, p), delta * kPageSize + low);
        }
      }
    }
  }
  EXPECT_GE(PageMap::ClassOf(0), kNumClasses) << "entry 0 must name no class";
}

TEST(PageMapTest, IsBlockStartAcceptsExactlyTheBlocksOfASlab) {
  const unsigned c = SizeClass(48);  // 85 blocks in one page, 16 bytes left over
  const std::uintptr_t span = kBase + 8 * kPageSize;
  const std::uint32_t e = PageMap::Encode(c, 0, span);
  unsigned cls = 999;
  for (std::uintptr_t off = 0; off < kPageSize; off += 16) {
    EXPECT_EQ(PageMap::IsBlockStart(e, span + off, &cls), off % 48 == 0) << off;
  }
  EXPECT_EQ(cls, c);
  // A three-page slab of 640-byte blocks: blocks cross page boundaries; the entry of each page
  // gives the distance back to the slab's start.
  const unsigned c640 = SizeClass(640);
  ASSERT_EQ(Class(c640).pages, 3u);
  for (std::uintptr_t off = 0; off < 3 * kPageSize; off += 16) {
    const std::uint32_t page_entry =
        PageMap::Encode(c640, off / kPageSize, span + off / kPageSize * kPageSize);
    EXPECT_EQ(PageMap::IsBlockStart(page_entry, span + off, &cls), off % 640 == 0) << off;
  }
}

TEST(PageMapTest, ALargeBlockStartsOnlyAtItsFirstByte) {
  const unsigned c = SizeClass(64 * 1024);
  const std::uintptr_t span = kBase + 16 * kPageSize;
  unsigned cls = 0;
  EXPECT_TRUE(PageMap::IsBlockStart(PageMap::Encode(c, 0, span), span, &cls));
  EXPECT_EQ(cls, c);
  for (std::uintptr_t off = 16; off < kPageSize; off += 16) {
    EXPECT_FALSE(PageMap::IsBlockStart(PageMap::Encode(c, 0, span), span + off, &cls)) << off;
  }
  EXPECT_FALSE(PageMap::IsBlockStart(0, span + kPageSize, &cls)) << "later pages carry no entry";
}

TEST(PageMapTest, TheInlineFreesRowIsTheEntrysClassAndRowZeroHasNoBlockStart) {
  const fast::ClassTable& table = fast::classes;
  for (unsigned c = 0; c < kNumClasses; ++c) {
    for (std::size_t delta = 0; delta <= (IsSlabClass(c) ? PageMap::kMaxDelta : 0); ++delta) {
      const std::uint32_t e = PageMap::Encode(c, delta, kBase + (delta + 7) * kPageSize);
      const std::size_t row = fast::RowOfEntry(e) / sizeof(fast::ClassTable::Class);
      ASSERT_EQ(row, c + 1) << c << " " << delta;
      ASSERT_EQ(table.cls[row].size, ClassSize(c));
    }
    // On a span starting at every page position modulo 16, the inline test of an address (its
    // page's entry, SpanOffset) agrees with the heap's (IsBlockStart) at every 16 bytes.
    const std::size_t pages = IsSlabClass(c) ? Class(c).pages : 1;
    for (std::uintptr_t at = 0; at < 16; ++at) {
      const std::uintptr_t start = kBase + at * kPageSize;
      for (std::uintptr_t off = 0; off < pages * kPageSize; off += 16) {
        const std::uintptr_t page = start + off / kPageSize * kPageSize;
        const std::uint32_t e = PageMap::Encode(c, off / kPageSize, page);
        const auto& k = *reinterpret_cast<const fast::ClassTable::Class*>(
            reinterpret_cast<std::uintptr_t>(table.cls) + fast::RowOfEntry(e));
        unsigned cls = 0;
        ASSERT_EQ(fast::AtBlockStart(k, fast::SpanOffset(e, reinterpret_cast<void*>(start + off))),
                  PageMap::IsBlockStart(e, start + off, &cls))
            << c << " " << at << " " << off;
        ASSERT_EQ(PageMap::IsBlockStart(e, start + off, &cls), off % ClassSize(c) == 0);
      }
    }
    // The inline test agrees with the heap's on every 16-byte offset of a span of the class.
    const std::size_t span = IsSlabClass(c) ? Class(c).pages * kPageSize : kPageSize;
    for (std::uintptr_t off = 0; off < span && off < (1u << 20); off += 16) {
      ASSERT_EQ(fast::AtBlockStart(table.cls[c + 1], off), IsBlockOffset(c, off))
          << c << " " << off;
    }
  }
  for (std::uintptr_t off = 0; off < (1u << 17); off += 16) {
    ASSERT_FALSE(fast::AtBlockStart(table.cls[0], off)) << "row 0 at offset " << off;
  }
}

// A sized free up to 64 KiB takes its row from the size and requires the entry's to be the same:
// the size lookup names the heap's class of every size, a class whose blocks hold the size, and
// an entry's row equals a size's row exactly when the entry's class is the size's; an entry of 0
// and one with the grant tag equal no size's row.
TEST(PageMapTest, ASizesRowIsItsClassAndOnlyThatClassesEntriesMatchIt) {
  const fast::ClassTable& table = fast::classes;
  constexpr std::size_t kRow = sizeof(fast::ClassTable::Class);
  for (std::size_t size = 1; size <= fast::kMaxFastSize; size += (size < 64 ? 1 : 16)) {
    const std::uint32_t row = fast::RowOfSize(size);
    ASSERT_EQ(row, (SizeClass(size) + 1) * kRow) << size;
    ASSERT_GE(table.cls[row / kRow].size, size) << size;
    ASSERT_NE(row, 0u);
    ASSERT_EQ(row & (fast::kGrantTag >> fast::kRowShift), 0u) << size;
  }
  for (unsigned c = 0; c < kNumClasses; ++c) {
    const std::uint32_t e = PageMap::Encode(c, 0, kBase + 3 * kPageSize);
    for (std::size_t size = 16; size <= fast::kMaxFastSize; size += 16) {
      const std::uint32_t row = fast::RowOfSize(size);
      ASSERT_EQ(fast::RowOfEntry(e) == row, SizeClass(size) == c) << c << " " << size;
      ASSERT_NE(fast::RowOfEntry(e | PageMap::kGrantTag), row) << c << " " << size;
    }
  }
}

// The grant tag: with it, the inline free's row is the zero half of the class's row, where
// nothing is a block's start; the heap's own readings of the entry ignore it; and it is set and
// cleared on its page alone, leaving the entry as it was.
TEST(PageMapTest, TheGrantTagFailsTheInlineFreeAndNothingElse) {
  const fast::ClassTable& table = fast::classes;
  for (unsigned c = 0; c < kNumClasses; ++c) {
    const std::uint32_t tagged = PageMap::Encode(c, 0, kBase) | PageMap::kGrantTag;
    EXPECT_EQ(PageMap::ClassOf(tagged), c);
    EXPECT_EQ(PageMap::DeltaOf(tagged), 0u);
    unsigned cls = kNumClasses;
    EXPECT_TRUE(PageMap::IsBlockStart(tagged, kBase, &cls));
    EXPECT_EQ(cls, c);
    const auto& row = *reinterpret_cast<const fast::ClassTable::Class*>(
        reinterpret_cast<std::uintptr_t>(table.cls) + fast::RowOfEntry(tagged));
    for (std::uintptr_t off = 0; off < 4 * ClassSize(c) && off < (1u << 17); off += 16) {
      ASSERT_FALSE(fast::AtBlockStart(row, off)) << "class " << c << " offset " << off;
    }
  }
  const std::uint32_t tagged_empty = PageMap::kGrantTag;  // a page where no block starts
  EXPECT_GE(PageMap::ClassOf(tagged_empty), kNumClasses);

  MetadataArena metadata;
  PageMap map(kBase, kChunkShift, 2, &metadata);
  ASSERT_TRUE(map.ok());
  const unsigned slab = SizeClass(64);
  map.SetSlab(kBase, 2, slab);
  map.SetGrantTag(kBase + kPageSize + 640, true);
  map.SetGrantTag(kBase + kPageSize + 64, true);  // twice: still one bit
  EXPECT_EQ(map.EntryAt(kBase), PageMap::Encode(slab, 0, kBase));
  EXPECT_EQ(map.EntryAt(kBase + kPageSize),
            PageMap::Encode(slab, 1, kBase + kPageSize) | PageMap::kGrantTag);
  map.SetGrantTag(kBase + kPageSize, false);
  EXPECT_EQ(map.EntryAt(kBase + kPageSize), PageMap::Encode(slab, 1, kBase + kPageSize));
}

TEST(PageMapTest, LookupsFindOnlyWhatWasRecorded) {
  MetadataArena metadata;
  PageMap map(kBase, kChunkShift, 4, &metadata);
  ASSERT_TRUE(map.ok());
  EXPECT_EQ(map.pages_per_chunk(), 512u);
  const std::uintptr_t chunk1 = kBase + (std::uintptr_t{1} << kChunkShift);
  EXPECT_EQ(map.EntryAt(chunk1), 0u) << "a chunk the heap has not taken";
  EXPECT_EQ(map.EntryAt(kBase - 16), 0u) << "below the range";
  EXPECT_EQ(map.EntryAt(kBase + (std::uintptr_t{4} << kChunkShift)), 0u) << "above the range";
  EXPECT_FALSE(map.HasChunk(1));

  ASSERT_TRUE(map.Prepare());
  map.AddChunk(1);
  EXPECT_TRUE(map.HasChunk(1));
  EXPECT_FALSE(map.HasChunk(0));
  const unsigned slab = SizeClass(640);
  map.SetSlab(chunk1 + 10 * kPageSize, 3, slab);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(map.EntryAt(chunk1 + (10 + i) * kPageSize + 100),
              PageMap::Encode(slab, i, chunk1 + (10 + i) * kPageSize));
  }
  EXPECT_EQ(map.EntryAt(chunk1 + 13 * kPageSize), 0u);
  const unsigned large = SizeClass(20 * 1024);
  map.SetLarge(chunk1 + 20 * kPageSize, large);
  EXPECT_EQ(map.EntryAt(chunk1 + 20 * kPageSize),
            PageMap::Encode(large, 0, chunk1 + 20 * kPageSize));
  EXPECT_EQ(map.EntryAt(chunk1 + 21 * kPageSize), 0u);
  map.Clear(chunk1 + 10 * kPageSize, 3);
  EXPECT_EQ(map.EntryAt(chunk1 + 11 * kPageSize), 0u);
  // The last page of the chunk, and the entry for the fast path's own indexing: one array over
  // the range, by page.
  map.SetLarge(chunk1 + 511 * kPageSize, large);
  EXPECT_EQ(map.entries()[512 + 511].load(), PageMap::Encode(large, 0, chunk1 + 511 * kPageSize));
  EXPECT_EQ(map.entries()[2 * 512].load(), 0u) << "the next chunk's first page";
  EXPECT_GE(map.metadata_bytes(), 4u * 512 * 4) << "entries for every page of the range";
}

}  // namespace
}  // namespace pinpool::internal
