// The heap's caches are bounded and given back (src/heap/heap.h, "Drained caches"):
//  - a thread's cache never holds more than its byte budget, the transfer stacks never more than
//    theirs, and the stats say so, also when another thread reads them while the owner pushes
//    and pops (ThreadSanitizer checks the reads);
//  - when the budget is spent, an allocation drains the caches of other threads, including a
//    thread that sits idle and never calls the pool again, before it gives up: memory such a
//    thread freed serves the allocation;
//  - draining while other threads allocate and free keeps every block intact and disjoint, also
//    while they switch between more pools than the inline path's slots (a drainer marks the
//    owner's first slot, which the owner's switches move between slots and clear);
//  - a destroyed pool's cache head stays valid while a thread's slots hold it.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <tuple>
#include <vector>

#include "heap/thread_cache.h"
#include "pinpool/pool.h"
#include "support/live_set.h"

namespace pinpool {
namespace {

PoolOptions Options() {
  PoolOptions o;
  o.chunk_size = 2 * kMiB;
  o.budget = 64 * kMiB;  // 32 chunks; a thread cache may hold 2 MiB, the transfer stacks 4 MiB
  o.page_size = PageSize::k4K;
  o.populate = false;
  return o;
}

// One step of a random churn: while fewer than `most` blocks are held, allocates a block of
// 16 B << (0 .. shifts - 1) unless the rng says free (1 in `odds`); else frees a random held
// block. False when an allocation failed.
bool ChurnStep(Pool& pool, std::mt19937_64& rng, std::vector<Block>& held, std::size_t most,
               unsigned odds, unsigned shifts) {
  if (held.size() < most && rng() % odds) {
    Block b = pool.Allocate(std::size_t{16} << (rng() % shifts));
    if (!b) return false;
    held.push_back(b);
  } else if (!held.empty()) {
    const std::size_t k = rng() % held.size();
    pool.Deallocate(held[k]);
    held[k] = held.back();
    held.pop_back();
  }
  return true;
}

TEST(CacheDrainTest, CachesKeepToTheirBudgetsAndTheStatsSaySo) {
  auto pool = Pool::Create(Options()).value();
  const PoolStats limits = pool->GetStats();
  EXPECT_EQ(limits.thread_cache_limit_bytes, 2 * kMiB);
  EXPECT_EQ(limits.transfer_cache_limit_bytes, 4 * kMiB);
  std::thread([&] {
    std::mt19937_64 rng(5);
    std::vector<Block> held;
    for (int i = 0; i < 4000; ++i) {
      ASSERT_TRUE(ChurnStep(*pool, rng, held, 200, 3, 15));  // 16 B .. 256 KiB
      if (i % 50 == 0) {
        const PoolStats s = pool->GetStats();
        ASSERT_LE(s.thread_cache_bytes, s.thread_cache_limit_bytes) << "op " << i;
        ASSERT_LE(s.transfer_cache_bytes, s.transfer_cache_limit_bytes) << "op " << i;
        ASSERT_EQ(s.cached_bytes, s.thread_cache_bytes + s.transfer_cache_bytes);
      }
    }
    for (Block& b : held) pool->Deallocate(b);
    const PoolStats s = pool->GetStats();
    EXPECT_GT(s.thread_cache_bytes, 0u) << "the freed blocks wait in this thread's cache";
    EXPECT_LE(s.thread_cache_bytes, s.thread_cache_limit_bytes);
  }).join();
  // The thread is gone: its cache went back.
  EXPECT_EQ(pool->GetStats().thread_cache_bytes, 0u);
}

TEST(CacheDrainTest, StatsReadWhileTheOwnerChurnsCountItsCacheWithinTheBudget) {
  // The owner touches only its cache's fast path and slow path; this thread reads the stats,
  // which count what the owner's bins hold, at the same time (ThreadSanitizer checks the reads).
  auto pool = Pool::Create(Options()).value();
  std::atomic<bool> done{false};
  std::thread owner([&] {
    std::mt19937_64 rng(11);
    std::vector<Block> held;
    for (int i = 0; i < 200000; ++i) {
      ASSERT_TRUE(ChurnStep(*pool, rng, held, 300, 2, 13));  // 16 B .. 64 KiB
    }
    for (Block& b : held) pool->Deallocate(b);
    done.store(true);
  });
  std::size_t reads = 0, nonzero = 0;
  while (!done.load()) {
    const PoolStats s = pool->GetStats();
    ASSERT_LE(s.thread_cache_bytes, s.thread_cache_limit_bytes) << "read " << reads;
    nonzero += s.thread_cache_bytes != 0;
    ++reads;
  }
  owner.join();
  EXPECT_GT(nonzero, 0u) << "the reads saw the owner's cache hold blocks";
  EXPECT_EQ(pool->GetStats().thread_cache_bytes, 0u) << "the owner is gone: its cache went back";
}

// A thread that freed memory and then sleeps, never calling the pool again until told to.
class IdleHolder {
 public:
  explicit IdleHolder(Pool& pool, std::size_t block, std::size_t bytes)
      : thread_([this, &pool, block, bytes] {
          std::vector<Block> blocks;
          for (std::size_t n = 0; n < bytes; n += block) {
            Block b = pool.Allocate(block);
            if (!b) break;
            blocks.push_back(b);
          }
          for (Block& b : blocks) pool.Deallocate(b);
          std::unique_lock<std::mutex> lock(mu_);
          freed_ = true;
          cv_.notify_all();
          cv_.wait(lock, [&] { return go_; });
          // Awake again: its cache (drained meanwhile) must still work.
          for (int i = 0; i < 1000; ++i) {
            Block b = pool.Allocate(block);
            if (b) pool.Deallocate(b);
          }
        }) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return freed_; });
  }
  ~IdleHolder() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      go_ = true;
      cv_.notify_all();
    }
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool freed_ = false;
  bool go_ = false;
  std::thread thread_;
};

TEST(CacheDrainTest, AnAllocationThatWouldFailForBudgetDrainsAnIdleThreadsCacheAndSucceeds) {
  auto pool = Pool::Create(Options()).value();
  // Another thread allocates 6 MiB of 64 KiB blocks and frees them: 2 MiB stay in its cache (a
  // chunk's worth, spread over the chunks they came from), then it sleeps.
  IdleHolder holder(*pool, 64 * kKiB, 6 * kMiB);
  const PoolStats before = pool->GetStats();
  ASSERT_GT(before.thread_cache_bytes, 0u);
  ASSERT_LE(before.thread_cache_bytes, 2 * kMiB);
  ASSERT_EQ(before.cache_drains, 0u);
  // This thread takes the largest blocks, one per chunk, until the pool refuses. Every chunk can
  // hold one only if the sleeping thread's cached blocks go back to the page heap.
  std::vector<Block> big;
  for (Block b; (b = pool->Allocate(pool->max_block_size()));) {
    std::memset(b.data(), 0x5a, 64);
    big.push_back(b);
  }
  const PoolStats after = pool->GetStats();
  EXPECT_EQ(big.size(), 32u) << "one largest block per chunk: " << after.ToString();
  EXPECT_GE(after.cache_drains, 1u);
  EXPECT_EQ(after.thread_cache_bytes, 0u) << "the sleeping thread's cache was drained";
  EXPECT_EQ(after.transfer_cache_bytes, 0u);
  EXPECT_EQ(after.mapped_bytes, 64 * kMiB);
  for (Block& b : big) pool->Deallocate(b);
}

// Every block handed out and not yet freed, across threads and pools: counts a block that
// overlaps another (handed out twice) or whose contents changed while it was held.
class Ledger {
 public:
  void Insert(const Block& b) {
    if (!live_.Insert(b)) ++failures_;
  }
  void Erase(const Block& b) { live_.Erase(b); }
  void Fail() { ++failures_; }
  int failures() const { return failures_.load(); }

 private:
  testing::LiveSet live_;
  std::atomic<int> failures_{0};
};

// One step of a churn over `pools` that checks every block it frees: allocates (filling the
// block with a random byte) while fewer than 64 are held and the rng says so, else frees one.
void LedgerStep(const std::vector<Pool*>& pools, std::mt19937_64& rng, Ledger& ledger,
                std::vector<std::tuple<Pool*, Block, unsigned char>>& held) {
  if (held.size() < 64 && rng() % 2) {
    Pool* pool = pools[rng() % pools.size()];
    Block b = pool->Allocate(16 + rng() % (32 * kKiB));
    if (!b) return;  // another thread may have the pool full for a moment
    ledger.Insert(b);
    const auto v = static_cast<unsigned char>(rng());
    std::memset(b.data(), v, b.size());
    held.push_back({pool, b, v});
  } else if (!held.empty()) {
    const std::size_t k = rng() % held.size();
    const auto [pool, b, v] = held[k];
    const auto* p = static_cast<const unsigned char*>(b.data());
    if (p[0] != v || p[b.size() - 1] != v) ledger.Fail();
    ledger.Erase(b);
    pool->Deallocate(b);
    held[k] = held.back();
    held.pop_back();
  }
}

// Fills `pool` with 256 KiB blocks until it refuses (each refusal drains every cache) and gives
// them back, `rounds` times; returns the pool's drain count.
std::uint64_t DrainRounds(Pool& pool, Ledger& ledger, int rounds) {
  for (int round = 0; round < rounds; ++round) {
    std::vector<Block> big;
    for (Block b; (b = pool.Allocate(256 * kKiB));) {
      ledger.Insert(b);
      big.push_back(b);
    }
    for (Block& b : big) {
      ledger.Erase(b);
      pool.Deallocate(b);
    }
  }
  return pool.GetStats().cache_drains;
}

TEST(CacheDrainTest, DrainsWhileOtherThreadsChurnKeepEveryBlockIntactAndDisjoint) {
  auto pool = Pool::Create(Options()).value();
  std::atomic<bool> stop{false};
  Ledger ledger;
  auto churn = [&](int seed) {
    std::mt19937_64 rng(seed);
    std::vector<std::tuple<Pool*, Block, unsigned char>> held;
    while (!stop.load()) LedgerStep({pool.get()}, rng, ledger, held);
    for (auto& [p, b, v] : held) {
      ledger.Erase(b);
      p->Deallocate(b);
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) threads.emplace_back(churn, t);
  const std::uint64_t drains = DrainRounds(*pool, ledger, 20);
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(ledger.failures(), 0);
  EXPECT_GE(drains, 20u);
}

// A drainer marks the owner's first slot when it holds the drained cache; owners that switch
// between more pools than slots move marked and unmarked slots around, put a drained cache
// back in the first slot (the library then waits for the drain) and take caches from their
// thread's list: blocks stay intact and disjoint throughout.
TEST(CacheDrainTest, DrainsWhileOtherThreadsSwitchBetweenMorePoolsThanSlotsKeepBlocksIntact) {
  std::vector<std::unique_ptr<Pool>> owned;
  std::vector<Pool*> pools;
  for (int i = 0; i < fast::Slots::kSlots + 2; ++i) {
    owned.push_back(Pool::Create(Options()).value());
    pools.push_back(owned.back().get());
  }
  std::atomic<bool> stop{false};
  Ledger ledger;
  auto churn = [&](int seed) {
    std::mt19937_64 rng(seed);
    std::vector<std::tuple<Pool*, Block, unsigned char>> held;
    while (!stop.load()) LedgerStep(pools, rng, ledger, held);
    for (auto& [p, b, v] : held) {
      ledger.Erase(b);
      p->Deallocate(b);
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) threads.emplace_back(churn, t + 10);
  // Drains of two of the pools, one after the other, while the threads switch.
  for (int round = 0; round < 40; ++round) DrainRounds(*pools[round % 2], ledger, 1);
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(ledger.failures(), 0);
  EXPECT_GE(pools[0]->GetStats().cache_drains + pools[1]->GetStats().cache_drains, 40u);
}

// A thread's slots keep a destroyed pool's cache head until the thread moves it out or exits:
// its inline calls of other pools set that head's `busy` before they test the slot's id, so the
// head must outlive the pool (AddressSanitizer reports a use after free otherwise), and it is
// deleted when it leaves the slots or the thread exits (counted: internal::ThreadCache's heads).
TEST(CacheDrainTest, ADestroyedPoolsHeadLivesWhileASlotHoldsItAndNoLonger) {
  constexpr int kSlots = fast::Slots::kSlots;
  const auto use = [](Pool& pool) {
    for (int i = 0; i < 100; ++i) {
      Block b = pool.Allocate(64);
      ASSERT_TRUE(b);
      std::memset(b.data(), 1, b.size());
      pool.Deallocate(b);
    }
  };
  const std::size_t start = internal::ThreadCache::live_heads();
  {
    std::vector<std::unique_ptr<Pool>> fresh;
    for (int i = 0; i < kSlots; ++i) fresh.push_back(Pool::Create(Options()).value());
    // Threads of their own: slots that hold nothing from other tests.
    std::thread evicts([&] {
      auto doomed = Pool::Create(Options()).value();
      const std::size_t before = internal::ThreadCache::live_heads();
      use(*doomed);  // slot 0: the doomed pool's head
      doomed.reset();
      EXPECT_EQ(internal::ThreadCache::live_heads(), before + 1) << "kept while in a slot";
      use(*fresh[0]);  // sets the dead head's busy first, then moves it to slot 1
      EXPECT_EQ(internal::ThreadCache::live_heads(), before + 2);
      for (int i = 1; i < kSlots; ++i) use(*fresh[i]);  // the last one pushes it out
      EXPECT_EQ(internal::ThreadCache::live_heads(), before + kSlots) << "deleted once out";
    });
    evicts.join();
    std::thread exits([&] {
      auto doomed = Pool::Create(Options()).value();
      use(*doomed);
      doomed.reset();
      use(*fresh[0]);
    });  // exits with the dead head in slot 1: deleted then
    exits.join();
    for (auto& pool : fresh) EXPECT_EQ(pool->GetStats().live_bytes, 0u);
  }  // the pools' caches of the exited threads go with them
  EXPECT_EQ(internal::ThreadCache::live_heads(), start);
}

}  // namespace
}  // namespace pinpool
