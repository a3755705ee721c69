// The heap's caches are bounded and given back (src/heap/heap.h, "Drained caches"):
//  - a thread's cache never holds more than its byte budget, the transfer stacks never more than
//    theirs, and the stats say so, also when another thread reads them while the owner pushes
//    and pops (ThreadSanitizer checks the reads);
//  - when the budget is spent, an allocation drains the caches of other threads, including a
//    thread that sits idle and never calls the pool again, before it gives up: memory such a
//    thread freed serves the allocation;
//  - draining while other threads allocate and free keeps every block intact and disjoint.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "pinpool/pool.h"

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

TEST(CacheDrainTest, DrainsWhileOtherThreadsChurnKeepEveryBlockIntactAndDisjoint) {
  auto pool = Pool::Create(Options()).value();
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::mutex mu;
  std::map<std::uintptr_t, std::uintptr_t> live;  // start -> end, of every thread's blocks
  auto insert = [&](const Block& b) {
    const auto s = reinterpret_cast<std::uintptr_t>(b.data());
    std::lock_guard<std::mutex> lock(mu);
    auto next = live.lower_bound(s);
    if ((next != live.end() && next->first < s + b.size()) ||
        (next != live.begin() && std::prev(next)->second > s)) {
      ++failures;
    }
    live[s] = s + b.size();
  };
  auto erase = [&](const Block& b) {
    std::lock_guard<std::mutex> lock(mu);
    live.erase(reinterpret_cast<std::uintptr_t>(b.data()));
  };
  auto churn = [&](int seed) {
    std::mt19937_64 rng(seed);
    std::vector<std::pair<Block, unsigned char>> held;
    while (!stop.load()) {
      if (held.size() < 64 && rng() % 2) {
        Block b = pool->Allocate(16 + rng() % (32 * kKiB));
        if (!b) continue;  // the other thread may have the pool full for a moment
        insert(b);
        const auto v = static_cast<unsigned char>(rng());
        std::memset(b.data(), v, b.size());
        held.push_back({b, v});
      } else if (!held.empty()) {
        const std::size_t k = rng() % held.size();
        const auto [b, v] = held[k];
        const auto* p = static_cast<const unsigned char*>(b.data());
        if (p[0] != v || p[b.size() - 1] != v) ++failures;
        erase(b);
        pool->Deallocate(b);
        held[k] = held.back();
        held.pop_back();
      }
    }
    for (auto& [b, v] : held) {
      erase(b);
      pool->Deallocate(b);
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) threads.emplace_back(churn, t);
  // Fill the pool with large blocks until it refuses (each refusal drains every cache), give
  // them back, again.
  std::uint64_t drains = 0;
  for (int round = 0; round < 20; ++round) {
    std::vector<Block> big;
    for (Block b; (b = pool->Allocate(256 * kKiB));) {
      insert(b);
      big.push_back(b);
    }
    for (Block& b : big) {
      erase(b);
      pool->Deallocate(b);
    }
    drains = pool->GetStats().cache_drains;
  }
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GE(drains, 20u);
}

}  // namespace
}  // namespace pinpool
