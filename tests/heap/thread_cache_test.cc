// ThreadCache (src/heap/thread_cache.h): a bin never holds more than its class's count bound and
// the cache never more than its byte budget once a push returns; a full bin gives its oldest
// half to the central layer and keeps the newest; an empty bin refills a batch; FlushAll empties
// everything and accounts every byte; blocks the inline pop took out (which gives the room
// nothing back) are counted again before a shortfall flushes anything, and the room stays a
// bound on what the bins may still take; every bin carries its class's mark hash.
#include "heap/thread_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "heap/free_mark.h"
#include "support/fake_chunks.h"

namespace pinpool::internal {
namespace {

using testing::FakeChunks;

constexpr std::size_t kChunk = 8 << 20;
constexpr std::uint64_t kSecret = 77;

struct Fixture {
  explicit Fixture(std::size_t budget)
      : source(kChunk, 32),
        pages(source.base(), source.chunk_shift(), 32, &source, &meta),
        central(&pages, &meta, kSecret, 4 << 20),
        cache(1, budget, &meta) {}
  // Blocks of class c from the central layer, as if the program held them.
  std::vector<void*> Get(unsigned c, std::size_t n) {
    std::vector<void*> v(n);
    EXPECT_EQ(central.Take(c, v.data(), n, true), n);
    return v;
  }
  MetadataArena meta;
  FakeChunks source;
  PageHeap pages;
  CentralCache central;
  ThreadCache cache;
};

TEST(ThreadCacheTest, AFullBinGivesItsOldestHalfBackAndKeepsTheNewest) {
  Fixture f(64 << 20);
  const unsigned c = SizeClass(64);
  const std::size_t cap = Class(c).bin_cap;
  std::vector<void*> blocks = f.Get(c, cap + 1);
  for (std::size_t i = 0; i < cap; ++i) ASSERT_TRUE(f.cache.Push(f.central, c, blocks[i]));
  ASSERT_EQ(f.cache.bins[c].count(), cap);
  ASSERT_EQ(f.cache.bins[c].Top(), f.cache.bins[c].limit) << "full: the fast path goes slow";
  ASSERT_TRUE(f.cache.Push(f.central, c, blocks[cap]));
  const ThreadCache::Bin& bin = f.cache.bins[c];
  EXPECT_EQ(bin.count(), cap - (cap + 1) / 2 + 1);
  EXPECT_EQ(bin.Bottom()[0], blocks[(cap + 1) / 2]) << "the oldest half went";
  EXPECT_EQ(bin.Top()[-1], blocks[cap]) << "the newest is on top";
  EXPECT_EQ(f.central.GetCounts().transfer_bytes, (cap + 1) / 2 * ClassSize(c));
  EXPECT_EQ(f.cache.held_bytes(), bin.count() * ClassSize(c));
}

// The inline pop finds a block's mark with the hash its bin carries (fast::Bin::mark_hash):
// every bin that holds a block carries its class's, the class table row's.
TEST(ThreadCacheTest, EveryBinThatHoldsABlockCarriesItsClasssMarkHash) {
  Fixture f(std::size_t{256} << 20);
  for (unsigned c = 0; c < kNumClasses && ClassSize(c) <= (std::size_t{1} << 20); ++c) {
    std::vector<void*> blocks = f.Get(c, 1);
    ASSERT_TRUE(f.cache.Push(f.central, c, blocks[0])) << c;
    ASSERT_EQ(f.cache.bins[c].count(), 1u) << c;
    EXPECT_EQ(f.cache.bins[c].mark_hash, MarkHash(c)) << "class " << c;
    EXPECT_EQ(f.cache.bins[c].mark_hash, fast::classes.cls[c + 1].mark_hash) << "class " << c;
  }
  EXPECT_NE(f.cache.bins[SizeClass(4096)].mark_hash, 0u) << "a page-multiple class is hashed";
}

TEST(ThreadCacheTest, TheByteBudgetHoldsAfterEveryPush) {
  const std::size_t budget = 4 << 20;
  Fixture f(budget);
  std::mt19937_64 rng(3);
  for (int i = 0; i < 3000; ++i) {
    const unsigned c = rng() % 3 == 0 ? SizeClass(std::size_t{1} << (14 + rng() % 8))  // to 2 MiB
                                      : static_cast<unsigned>(rng() % 28);
    void* p;
    ASSERT_EQ(f.central.Take(c, &p, 1, true), 1u);
    ASSERT_TRUE(f.cache.Push(f.central, c, p));
    ASSERT_LE(f.cache.held_bytes(), budget) << "push " << i;
    for (unsigned k = 0; k < kNumClasses; ++k) {
      ASSERT_LE(f.cache.bins[k].count(), Class(k).bin_cap);
    }
  }
  EXPECT_GT(f.cache.held_bytes(), 0u);
  const std::size_t held = f.cache.held_bytes();
  EXPECT_EQ(f.cache.FlushAll(f.central), held);
  EXPECT_EQ(f.cache.held_bytes(), 0u);
  EXPECT_EQ(f.cache.room.load(), static_cast<std::intptr_t>(budget));
  for (const ThreadCache::Bin& b : f.cache.bins) EXPECT_EQ(b.count(), 0u);
  EXPECT_EQ(f.central.GetCounts().out_bytes, 0u) << "every block is back in the central layer";
}

TEST(ThreadCacheTest, ClassesTheThreadStoppedUsingGiveWayToTheOnesItUses) {
  // 1 MiB of 4 KiB blocks sits in the cache; then the thread only allocates and frees 1 MiB
  // blocks, which overflow the 2 MiB budget: an overflow halves every bin, so the 4 KiB blocks
  // make room, and the 1 MiB pairs then stay in the cache instead of going to the central layer
  // on every pair (as when only the overflowing bin gave blocks back).
  Fixture f(2 << 20);
  const unsigned small = SizeClass(4096), big = SizeClass(1 << 20);
  for (void* p : f.Get(small, 256)) ASSERT_TRUE(f.cache.Push(f.central, small, p));
  ASSERT_EQ(f.cache.bins[small].count(), 256u);
  auto pair = [&] {
    void* p = f.cache.Refill(f.central, big, true);
    ASSERT_NE(p, nullptr);
    ASSERT_TRUE(f.cache.Push(f.central, big, p));
    ASSERT_LE(f.cache.held_bytes(), std::size_t{2} << 20);
  };
  for (int i = 0; i < 5; ++i) pair();
  EXPECT_LT(f.cache.bins[small].count(), 256u);
  const CentralCache::Counts before = f.central.GetCounts();
  for (int i = 0; i < 20; ++i) pair();
  const CentralCache::Counts after = f.central.GetCounts();
  EXPECT_EQ(after.out_bytes, before.out_bytes) << "1 MiB pairs went to the central layer";
  EXPECT_EQ(after.transfer_bytes, before.transfer_bytes);
  EXPECT_EQ(f.cache.used_classes(), 2u);
}

// What the inline pop (pinpool/fast_path.h TryPop) of a size up to kMaxUncreditedSize does to a
// bin: the top moves down, the room is left alone.
void* InlinePop(ThreadCache::Bin& bin) {
  void** top = bin.Top() - 1;
  bin.SetTop(top);
  return *top;
}

TEST(ThreadCacheTest, AFreeAfterInlinePopsCountsAgainInsteadOfHalvingTheBins) {
  // The budget filled with 1 KiB blocks, half of them then taken by inline pops: the room still
  // says 0, held_bytes already says half. The next free must find the room by counting, not
  // halve the bins (which a room believed would do).
  const std::size_t budget = 2 << 20;
  Fixture f(budget);
  const unsigned c = SizeClass(fast::kMaxUncreditedSize);
  const std::size_t n = budget / ClassSize(c);
  std::vector<void*> blocks = f.Get(c, n);
  for (void* p : blocks) ASSERT_TRUE(f.cache.Push(f.central, c, p));
  ASSERT_EQ(f.cache.room.load(), 0);
  for (std::size_t i = 0; i < n / 2; ++i) InlinePop(f.cache.bins[c]);
  EXPECT_EQ(f.cache.room.load(), 0) << "these inline pops give nothing back";
  EXPECT_EQ(f.cache.held_bytes(), (n - n / 2) * ClassSize(c)) << "held_bytes counts the bins";
  ASSERT_TRUE(f.cache.Push(f.central, c, blocks[0]));
  EXPECT_EQ(f.cache.bins[c].count(), n - n / 2 + 1) << "nothing flushed";
  EXPECT_EQ(f.central.GetCounts().transfer_bytes, 0u);
  EXPECT_EQ(f.cache.room.load(), static_cast<std::intptr_t>(budget - f.cache.held_bytes()))
      << "exact once counted";
  // A refill too counts before it trims its batch to a room believed short.
  const unsigned d = SizeClass(100);
  for (std::size_t i = 0; i < n - n / 2 + 1; ++i) InlinePop(f.cache.bins[c]);
  f.cache.room.store(0);  // as if those pops had come after the count
  ASSERT_NE(f.cache.Refill(f.central, d, true), nullptr);
  EXPECT_EQ(f.cache.bins[d].count(), Class(d).batch - 1u);
}

TEST(ThreadCacheTest, TheRoomStaysABoundWhileInlinePopsLeaveItShort) {
  // Frees, refills, blocks from the central layer and inline pops of small classes (which give
  // the room nothing back) in a random mix: after every step the bins hold no more than the
  // budget and the room is at most the budget less what they hold. Counts back off and a
  // halving may come where a count would have spared it; the bound must hold throughout.
  const auto budget = static_cast<std::intptr_t>(2 << 20);
  Fixture f(static_cast<std::size_t>(budget));
  const unsigned smalls = SizeClass(fast::kMaxUncreditedSize) + 1;
  std::mt19937_64 rng(5);
  std::vector<std::pair<unsigned, void*>> out;  // blocks the program holds
  for (int i = 0; i < 20000; ++i) {
    const unsigned c = rng() % 4 == 0 ? SizeClass(std::size_t{1} << (12 + rng() % 8))
                                      : static_cast<unsigned>(rng() % smalls);
    const unsigned step = out.size() > 3000 ? 0 : static_cast<unsigned>(rng() % 4);
    if (step == 0 && !out.empty()) {  // a free
      std::swap(out[rng() % out.size()], out.back());
      ASSERT_TRUE(f.cache.Push(f.central, out.back().first, out.back().second));
      out.pop_back();
    } else if (step == 1) {  // an allocation the cache did not serve
      void* p;
      ASSERT_EQ(f.central.Take(c, &p, 1, true), 1u);
      out.emplace_back(c, p);
    } else if (step == 2 && c < smalls && f.cache.bins[c].count() != 0) {
      out.emplace_back(c, InlinePop(f.cache.bins[c]));
    } else if (step == 3) {
      void* p = f.cache.Refill(f.central, c, true);
      ASSERT_NE(p, nullptr);
      out.emplace_back(c, p);
    }
    const auto held = static_cast<std::intptr_t>(f.cache.held_bytes());
    ASSERT_LE(held, budget) << "step " << i;
    ASSERT_LE(f.cache.room.load(), budget - held) << "step " << i;
  }
}

TEST(ThreadCacheTest, TheInlinePopGivesBackTheBytesOfBlocksAboveTheUncreditedSizeOnly) {
  // The real inline pop, on a head of this test's put in the thread's slot 0 for a moment.
  constexpr std::uint64_t kId = 0x7e57;
  const unsigned small = SizeClass(fast::kMaxUncreditedSize);
  const unsigned big = SizeClass(fast::kMaxUncreditedSize + 1);
  ASSERT_NE(small, big);
  alignas(16) static char blocks[2][64];
  void* small_stack[1] = {blocks[0]};
  void* big_stack[1] = {blocks[1]};
  fast::CacheHead head;
  for (auto [c, stack] : {std::pair{small, small_stack}, std::pair{big, big_stack}}) {
    head.bins[c].bottom.store(stack);
    head.bins[c].SetTop(stack + 1);
    head.bins[c].limit = stack + 1;
  }
  fast::Slots& t = fast::tls_slots;
  const std::uint64_t saved_id = t.heap_id[0].load();
  fast::CacheHead* const saved_cache = t.cache[0];
  t.heap_id[0].store(kId);
  t.cache[0] = &head;
  void* a = fast::TryPop(kId, fast::kMaxUncreditedSize);
  const std::intptr_t after_small = head.room.load();
  void* b = fast::TryPop(kId, fast::kMaxUncreditedSize + 1);
  const std::intptr_t after_big = head.room.load();
  t.heap_id[0].store(saved_id);
  t.cache[0] = saved_cache;
  EXPECT_EQ(a, blocks[0]);
  EXPECT_EQ(b, blocks[1]);
  EXPECT_EQ(after_small, 0) << "up to kMaxUncreditedSize: nothing given back";
  EXPECT_EQ(after_big, static_cast<std::intptr_t>(ClassSize(big))) << "above: the class's bytes";
}

TEST(ThreadCacheTest, ABlockLargerThanTheBudgetPassesThrough) {
  Fixture f(2 << 20);
  const unsigned c = SizeClass(3 << 20);
  void* p = f.Get(c, 1)[0];
  // Not taken (the caller gives it to the central layer): taken and drained at once, the cache
  // would for a moment count more than its budget.
  EXPECT_FALSE(f.cache.Push(f.central, c, p));
  EXPECT_EQ(f.cache.bins[c].count(), 0u);
  EXPECT_EQ(f.cache.held_bytes(), 0u);
}

TEST(ThreadCacheTest, AnEmptyBinRefillsABatchAndHandsOutOne) {
  Fixture f(64 << 20);
  const unsigned c = SizeClass(1000);
  void* p = f.cache.Refill(f.central, c, true);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(f.cache.bins[c].count(), Class(c).batch - 1u);
  EXPECT_EQ(f.cache.held_bytes(), (Class(c).batch - 1u) * ClassSize(c));
  // Refilled blocks are free (marked); the one handed out is the caller's to clear.
  for (void** b = f.cache.bins[c].Bottom(); b != f.cache.bins[c].Top(); ++b) {
    EXPECT_TRUE(MarkedFree(kSecret, *b, c));
  }
  // A bin that is not empty hands out its top without the central layer.
  const std::size_t out = f.central.GetCounts().out_bytes;
  void* top = f.cache.bins[c].Top()[-1];
  EXPECT_EQ(f.cache.Refill(f.central, c, true), top);
  EXPECT_EQ(f.central.GetCounts().out_bytes, out);
  // No memory and no growth: nothing.
  Fixture g(64 << 20);
  g.source.set_refuse(true);
  EXPECT_EQ(g.cache.Refill(g.central, c, true), nullptr);
  EXPECT_EQ(g.cache.held_bytes(), 0u);
}

// Empties bin c through Refill (each call hands out the top block); returns how many it held.
std::size_t Empty(Fixture& f, unsigned c) {
  const std::size_t n = f.cache.bins[c].count();
  for (std::size_t i = 0; i < n; ++i) EXPECT_NE(f.cache.Refill(f.central, c, true), nullptr);
  EXPECT_EQ(f.cache.bins[c].count(), 0u);
  return n;
}

// A thread that only allocates a class (the blocks other threads free and flush) refills its bin
// again and again: each refill since the bin last flushed takes twice the batch, up to a quarter
// of the bin and 256 KiB; a flush starts over from one batch.
TEST(ThreadCacheTest, RefillsInARowGrowTheBatchUntilTheBinFlushes) {
  Fixture f(64 << 20);
  const unsigned c = SizeClass(64);
  const std::size_t batch = Class(c).batch;
  const std::size_t most = std::min<std::size_t>(Class(c).bin_cap / 4, (256 << 10) / ClassSize(c));
  ASSERT_GT(most, 4 * batch) << "the class must have room to grow";
  std::size_t expect = batch;
  for (int i = 0; i < 8; ++i) {
    ASSERT_NE(f.cache.Refill(f.central, c, true), nullptr);
    EXPECT_EQ(f.cache.bins[c].count(), expect - 1) << "refill " << i;
    EXPECT_EQ(f.cache.held_bytes(), (expect - 1) * ClassSize(c));
    Empty(f, c);
    expect = std::min(2 * expect, most);
  }
  EXPECT_EQ(expect, most);
  // A full bin flushes: the next refill takes one batch again.
  std::vector<void*> held = f.Get(c, Class(c).bin_cap + 1);
  for (void* b : held) ASSERT_TRUE(f.cache.Push(f.central, c, b));
  Empty(f, c);
  ASSERT_NE(f.cache.Refill(f.central, c, true), nullptr);
  EXPECT_EQ(f.cache.bins[c].count(), batch - 1);
}

// Large classes move whole batches already: a refill streak does not grow theirs.
TEST(ThreadCacheTest, RefillsInARowLeaveTheBatchOfLargeBlocks) {
  Fixture f(64 << 20);
  const unsigned c = SizeClass(64 << 10);
  for (int i = 0; i < 4; ++i) {
    ASSERT_NE(f.cache.Refill(f.central, c, true), nullptr);
    EXPECT_EQ(f.cache.bins[c].count(), Class(c).batch - 1u) << "refill " << i;
    Empty(f, c);
  }
}

// A grown batch still takes no more than the byte budget allows.
TEST(ThreadCacheTest, AGrownRefillStaysWithinTheBudget) {
  const std::size_t budget = 64 << 10;
  Fixture f(budget);
  const unsigned c = SizeClass(1024);
  for (int i = 0; i < 8; ++i) {
    ASSERT_NE(f.cache.Refill(f.central, c, true), nullptr);
    EXPECT_LE(f.cache.held_bytes(), budget) << "refill " << i;
    EXPECT_GE(f.cache.room.load(), 0);
    Empty(f, c);
  }
  EXPECT_EQ(Empty(f, c), 0u);
}

}  // namespace
}  // namespace pinpool::internal
