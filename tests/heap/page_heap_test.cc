// PageHeap (src/heap/page_heap.h): spans inside chunks taken one at a time from a source; every
// operation keeps the structure exact (PageHeap::Verify: spans tile each chunk, free spans merged
// and on the right lists, page map entries match); freed spans merge back into whole chunks; a
// span never crosses a chunk; alignment is honoured; growth happens only when allowed.
#include "heap/page_heap.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "support/fake_chunks.h"

namespace pinpool::internal {
namespace {

using testing::FakeChunks;

constexpr std::size_t kChunk = 2 << 20;  // 512 pages
constexpr std::size_t kPages = kChunk / kPageSize;

struct Fixture {
  explicit Fixture(std::size_t chunks = 4)
      : source(kChunk, chunks), heap(source.base(), source.chunk_shift(), chunks, &source, &meta) {}
  MetadataArena meta;
  FakeChunks source;
  PageHeap heap;
};

TEST(PageHeapTest, TakesAChunkOnlyWhenAllowedAndNoFreeSpanFits) {
  Fixture f;
  EXPECT_EQ(f.heap.Allocate(1, kFirstLargeClass, kPageSize, /*grow=*/false), nullptr);
  EXPECT_EQ(f.source.given(), 0u);
  Span* s = f.heap.Allocate(4, kFirstLargeClass, kPageSize, /*grow=*/true);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(f.source.given(), 1u);
  EXPECT_EQ(s->start, f.source.base());
  EXPECT_EQ(s->state, Span::State::kLarge);
  Span* t = f.heap.Allocate(kPages - 4, kFirstLargeClass, kPageSize, /*grow=*/false);
  ASSERT_NE(t, nullptr) << "the rest of the chunk fits without growing";
  EXPECT_EQ(f.source.given(), 1u);
  EXPECT_EQ(f.heap.Allocate(1, kFirstLargeClass, kPageSize, /*grow=*/false), nullptr);
  f.heap.Verify();
  const PageHeap::Counts c = f.heap.GetCounts();
  EXPECT_EQ(c.chunks, 1u);
  EXPECT_EQ(c.used_pages, kPages);
  EXPECT_EQ(c.free_pages, 0u);
}

TEST(PageHeapTest, FreedSpansMergeBackIntoWholeChunks) {
  Fixture f;
  std::vector<Span*> spans;
  for (std::size_t i = 0; i < 2 * kPages; ++i) {
    Span* s = f.heap.Allocate(1, kFirstLargeClass, kPageSize, true);
    ASSERT_NE(s, nullptr) << i;
    spans.push_back(s);
  }
  EXPECT_EQ(f.source.given(), 2u);
  std::mt19937_64 rng(1);
  std::shuffle(spans.begin(), spans.end(), rng);
  for (std::size_t i = 0; i < spans.size(); ++i) {
    f.heap.Free(spans[i]);
    if (i % 97 == 0) f.heap.Verify();
  }
  f.heap.Verify();
  const PageHeap::Counts c = f.heap.GetCounts();
  EXPECT_EQ(c.used_pages, 0u);
  EXPECT_EQ(c.free_pages, 2 * kPages);
  EXPECT_EQ(c.free_spans, 2u) << "one free span per chunk, never one across two";
  // A whole chunk fits again, without growing.
  EXPECT_NE(f.heap.Allocate(kPages, kFirstLargeClass, kPageSize, false), nullptr);
  EXPECT_NE(f.heap.Allocate(kPages, kFirstLargeClass, kPageSize, false), nullptr);
  EXPECT_EQ(f.source.given(), 2u);
}

TEST(PageHeapTest, ReleasesOnlyWholeFreeChunksAndTakesThemBackLater) {
  Fixture f;
  Span* a = f.heap.Allocate(kPages, kFirstLargeClass, kPageSize, true);
  Span* b = f.heap.Allocate(kPages, kFirstLargeClass, kPageSize, true);
  Span* c = f.heap.Allocate(3, kFirstLargeClass, kPageSize, true);  // a third chunk, partly used
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(f.source.given(), 3u);
  EXPECT_EQ(f.heap.ReleaseIdleChunks(), 0u) << "every chunk holds a block";
  f.heap.Free(a);
  f.heap.Free(b);
  EXPECT_EQ(f.heap.ReleaseIdleChunks(), 2u);
  EXPECT_EQ(f.source.returns(), 2u);
  f.heap.Verify();
  PageHeap::Counts counts = f.heap.GetCounts();
  EXPECT_EQ(counts.chunks, 1u);
  EXPECT_EQ(counts.free_pages, kPages - 3) << "the released chunks' pages are gone";
  // Growing again takes the returned chunks back before any new one.
  EXPECT_NE(f.heap.Allocate(kPages, kFirstLargeClass, kPageSize, true), nullptr);
  EXPECT_NE(f.heap.Allocate(kPages, kFirstLargeClass, kPageSize, true), nullptr);
  EXPECT_EQ(f.source.given(), 3u);
  f.heap.Verify();
  EXPECT_EQ(f.heap.GetCounts().chunks, 3u);
}

TEST(PageHeapTest, RandomSpansStayInsideOneChunkAndNeverOverlap) {
  Fixture f(8);
  std::mt19937_64 rng(7);
  std::map<std::uintptr_t, Span*> live;
  for (int op = 0; op < 20000; ++op) {
    if (!live.empty() && rng() % 2 == 0) {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      f.heap.Free(it->second);
      live.erase(it);
    } else {
      const std::size_t pages = rng() % 4 == 0 ? 1 + rng() % kPages : 1 + rng() % 16;
      const std::size_t align = rng() % 8 == 0 ? kPageSize << (rng() % 10) : kPageSize;
      // A slab has at most 16 pages (PageMap::kMaxDelta + 1).
      const unsigned cls = pages > 16 || rng() % 2 ? kFirstLargeClass : SizeClass(48);
      Span* s = f.heap.Allocate(pages, cls, align, true);
      if (s == nullptr) continue;  // full (8 chunks)
      ASSERT_EQ(s->pages, pages);
      ASSERT_EQ(s->start % align, 0u);
      ASSERT_EQ((s->start - f.source.base()) / kChunk, (s->end() - 1 - f.source.base()) / kChunk)
          << "a span crosses a chunk boundary";
      auto next = live.lower_bound(s->start);
      ASSERT_TRUE(next == live.end() || next->first >= s->end());
      if (next != live.begin()) {
        ASSERT_LE(std::prev(next)->second->end(), s->start);
      }
      live[s->start] = s;
    }
    if (op % 1000 == 0) f.heap.Verify();
  }
  f.heap.Verify();
  for (auto& [start, s] : live) f.heap.Free(s);
  f.heap.Verify();
  EXPECT_EQ(f.heap.GetCounts().free_spans, f.source.given());
}

TEST(PageHeapTest, AlignmentUpToAWholeChunkIsHonoured) {
  Fixture f;
  Span* small = f.heap.Allocate(1, kFirstLargeClass, kPageSize, true);
  ASSERT_NE(small, nullptr);
  // The first chunk is no longer free at its start: a chunk-aligned span needs the next chunk.
  Span* whole = f.heap.Allocate(kPages / 2, kFirstLargeClass, kChunk, true);
  ASSERT_NE(whole, nullptr);
  EXPECT_EQ(whole->start % kChunk, 0u);
  EXPECT_EQ(f.source.given(), 2u);
  Span* a = f.heap.Allocate(3, kFirstLargeClass, 64 * kPageSize, true);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->start % (64 * kPageSize), 0u);
  f.heap.Verify();
  f.heap.Free(a);
  f.heap.Free(whole);
  f.heap.Free(small);
  f.heap.Verify();
}

TEST(PageHeapTest, PageMapTellsSlabsFromLargeBlocksAndFindLocatesAnyPage) {
  Fixture f;
  const unsigned slab = SizeClass(640);
  Span* s = f.heap.Allocate(Class(slab).pages, slab, kPageSize, true);
  Span* l = f.heap.Allocate(5, kFirstLargeClass + 1, kPageSize, true);
  ASSERT_NE(s, nullptr);
  ASSERT_NE(l, nullptr);
  const PageMap& map = f.heap.page_map();
  unsigned cls = 0;
  EXPECT_TRUE(PageMap::IsBlockStart(map.EntryAt(s->start + 640 * 7), s->start + 640 * 7, &cls));
  EXPECT_EQ(cls, slab);
  EXPECT_EQ(f.heap.SlabOf(s->start + 640 * 7), s);
  EXPECT_TRUE(PageMap::IsBlockStart(map.EntryAt(l->start), l->start, &cls));
  EXPECT_EQ(cls, kFirstLargeClass + 1);
  EXPECT_EQ(map.EntryAt(l->start + 2 * kPageSize), 0u);
  const PageHeap::Where w = f.heap.Find(l->start + 2 * kPageSize + 48);
  EXPECT_EQ(w.span, l);
  EXPECT_EQ(w.state, Span::State::kLarge);
  const PageHeap::Where free_space = f.heap.Find(l->end() + 100 * kPageSize);
  ASSERT_NE(free_space.span, nullptr);
  EXPECT_EQ(free_space.state, Span::State::kFree);
  EXPECT_EQ(f.heap.Find(f.source.base() + kChunk).span, nullptr) << "a chunk not taken yet";
  f.heap.FreeLarge(l->start);
  EXPECT_EQ(map.EntryAt(l->start), 0u);
  f.heap.Free(s);
  EXPECT_EQ(map.EntryAt(s->start), 0u);
  f.heap.Verify();
}

TEST(PageHeapTest, NothingIsHandedOutWhenTheSourceRefuses) {
  Fixture f(1);
  ASSERT_NE(f.heap.Allocate(kPages, kFirstLargeClass, kPageSize, true), nullptr);
  EXPECT_EQ(f.heap.Allocate(1, kFirstLargeClass, kPageSize, true), nullptr);
  f.heap.Verify();
}

}  // namespace
}  // namespace pinpool::internal
