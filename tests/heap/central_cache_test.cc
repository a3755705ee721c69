// CentralCache (src/heap/central_cache.h), the transfer layer: blocks one thread puts back are
// what the next Take of any thread gets, without touching slabs; the stacks keep to their count
// and byte bounds; what does not fit goes back to its slab (an empty slab to the page heap);
// DrainTransfer empties every stack; fresh blocks carry the free mark; and many threads taking and
// putting at once never get one block twice.
#include "heap/central_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "heap/free_mark.h"
#include "support/fake_chunks.h"

namespace pinpool::internal {
namespace {

using testing::FakeChunks;

constexpr std::size_t kChunk = 2 << 20;
constexpr std::uint64_t kSecret = 0x5ec7e7;

struct Fixture {
  explicit Fixture(std::size_t transfer_limit = 64 << 20, std::size_t chunks = 64)
      : source(kChunk, chunks),
        pages(source.base(), source.chunk_shift(), chunks, &source, &meta),
        central(&pages, &meta, kSecret, transfer_limit) {}
  // `n` blocks of class c, however many Takes that needs (a Take grows the pool for its first
  // block only).
  std::vector<void*> TakeN(unsigned c, std::size_t n) {
    std::vector<void*> v(n);
    for (std::size_t got = 0; got < n;) {
      const std::size_t k = central.Take(c, v.data() + got, n - got, true);
      EXPECT_GT(k, 0u) << "the pool is full";
      if (k == 0) break;
      got += k;
    }
    return v;
  }
  MetadataArena meta;
  FakeChunks source;
  PageHeap pages;
  CentralCache central;
};

TEST(CentralCacheTest, FreshBlocksAreDistinctAlignedAndCarryTheFreeMark) {
  Fixture f;
  for (unsigned c : {0u, SizeClass(640), SizeClass(4096), kFirstLargeClass, SizeClass(1 << 20)}) {
    std::vector<void*> out = f.TakeN(c, 40);
    std::set<void*> seen(out.begin(), out.end());
    EXPECT_EQ(seen.size(), out.size()) << c;
    for (void* p : out) {
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 16, 0u);
      EXPECT_TRUE(MarkedFree(kSecret, p, c)) << "a free block carries the mark";
      unsigned cls = 999;
      const auto a = reinterpret_cast<std::uintptr_t>(p);
      EXPECT_TRUE(PageMap::IsBlockStart(f.pages.page_map().EntryAt(a), a, &cls));
      EXPECT_EQ(cls, c);
    }
    f.central.Put(c, out.data(), out.size());
  }
  f.pages.Verify();
}

TEST(CentralCacheTest, BlocksPutByOneThreadAreTakenByAnotherWithoutTouchingSlabs) {
  Fixture f;
  const unsigned c = SizeClass(4096);
  std::vector<void*> blocks;
  std::thread([&] { blocks = f.TakeN(c, 64); }).join();
  const std::size_t slabs = f.central.GetCounts().slabs;
  std::thread([&] { f.central.Put(c, blocks.data(), 64); }).join();
  EXPECT_EQ(f.central.GetCounts().transfer_bytes, 64 * ClassSize(c));
  EXPECT_EQ(f.central.GetCounts().slabs, slabs) << "the blocks stayed on the transfer stack";
  std::vector<void*> again(64);
  std::thread([&] { ASSERT_EQ(f.central.Take(c, again.data(), 64, false), 64u); }).join();
  std::sort(blocks.begin(), blocks.end());
  std::sort(again.begin(), again.end());
  EXPECT_EQ(again, blocks) << "the same blocks, handed to another thread";
  EXPECT_EQ(f.central.GetCounts().transfer_bytes, 0u);
  EXPECT_EQ(f.central.GetCounts().out_bytes, 64 * ClassSize(c));
}

TEST(CentralCacheTest, TheStacksKeepToTheirCountAndByteBounds) {
  // A class's stack holds at most its transfer_cap blocks; the rest go back to their slabs.
  {
    Fixture f;
    const unsigned c = SizeClass(64);
    const std::size_t n = Class(c).transfer_cap + 300;
    std::vector<void*> blocks = f.TakeN(c, n);
    f.central.Put(c, blocks.data(), n);
    EXPECT_EQ(f.central.GetCounts().transfer_bytes, Class(c).transfer_cap * ClassSize(c));
    EXPECT_EQ(f.central.GetCounts().out_bytes, 0u);
  }
  // All stacks together hold at most the transfer limit.
  {
    const std::size_t limit = 1 << 20;
    Fixture f(limit);
    for (unsigned c : {SizeClass(1024), SizeClass(16384), SizeClass(65536)}) {
      std::vector<void*> blocks = f.TakeN(c, 100);
      f.central.Put(c, blocks.data(), 100);
      EXPECT_LE(f.central.GetCounts().transfer_bytes, limit);
    }
    EXPECT_GT(f.central.GetCounts().transfer_bytes, limit / 2);
  }
}

TEST(CentralCacheTest, DrainTransferGivesEveryPageBack) {
  Fixture f;
  std::size_t expect = 0;
  for (unsigned c : {0u, SizeClass(200), SizeClass(3000), kFirstLargeClass, SizeClass(300000)}) {
    std::vector<void*> blocks = f.TakeN(c, 20);
    f.central.Put(c, blocks.data(), 20);
    expect += 20 * ClassSize(c);
  }
  EXPECT_GT(f.pages.GetCounts().used_pages, 0u);
  EXPECT_EQ(f.central.DrainTransfer(), expect);
  const CentralCache::Counts c = f.central.GetCounts();
  EXPECT_EQ(c.transfer_bytes, 0u);
  EXPECT_EQ(c.slabs, 0u);
  EXPECT_EQ(f.pages.GetCounts().used_pages, 0u) << "empty slabs and large blocks went back";
  f.pages.Verify();
}

TEST(CentralCacheTest, OnlyTheFirstBlockOfATakeMayGrowThePool) {
  Fixture f;
  const unsigned c = SizeClass(1536 * 1024);  // one per 2 MiB chunk
  void* out[4];
  EXPECT_EQ(f.central.Take(c, out, 4, true), 1u);
  EXPECT_EQ(f.source.given(), 1u) << "a batch never maps a chunk for blocks nobody asked for";
  f.central.Put(c, out, 1);
}

TEST(CentralCacheTest, AFullPoolGivesFewerBlocksThenNone) {
  Fixture f(64 << 20, 1);  // one 2 MiB chunk
  const unsigned c = SizeClass(512 * 1024);
  void* out[8];
  EXPECT_EQ(f.central.Take(c, out, 8, false), 0u) << "no chunk yet, and no growth allowed";
  EXPECT_EQ(f.central.Take(c, out, 8, true), 4u) << "the one chunk, grown for the first block";
  EXPECT_EQ(f.central.Take(c, out + 4, 4, true), 0u);
  f.central.Put(c, out, 4);
}

TEST(CentralCacheTest, ThreadsTakingAndPuttingAtOnceNeverShareABlock) {
  Fixture f(8 << 20, 64);
  std::mutex mu;
  std::set<void*> out;  // blocks some thread holds now
  std::atomic<int> failures{0};
  auto worker = [&](int seed) {
    std::mt19937_64 rng(seed);
    std::vector<std::pair<unsigned, void*>> mine;
    for (int op = 0; op < 20000; ++op) {
      if (!mine.empty() && rng() % 2) {
        const std::size_t k = rng() % mine.size();
        {
          std::lock_guard<std::mutex> lock(mu);
          out.erase(mine[k].second);
        }
        f.central.Put(mine[k].first, &mine[k].second, 1);
        mine[k] = mine.back();
        mine.pop_back();
      } else {
        const unsigned c = rng() % 4 ? rng() % 30 : kFirstLargeClass + rng() % 4;
        void* p[4];
        const std::size_t got = f.central.Take(c, p, 1 + rng() % 4, true);
        std::lock_guard<std::mutex> lock(mu);
        for (std::size_t i = 0; i < got; ++i) {
          if (!out.insert(p[i]).second) ++failures;
          mine.push_back({c, p[i]});
        }
      }
    }
    for (auto& [c, p] : mine) {
      {
        std::lock_guard<std::mutex> lock(mu);
        out.erase(p);
      }
      f.central.Put(c, &p, 1);
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(worker, t);
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0) << "a block was handed to two holders";
  EXPECT_EQ(f.central.GetCounts().out_bytes, 0u);
  f.central.DrainTransfer();
  f.pages.Verify();
  EXPECT_EQ(f.pages.GetCounts().used_pages, 0u);
}

}  // namespace
}  // namespace pinpool::internal
