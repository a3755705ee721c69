// Destroying a pool deregisters and unmaps everything it created: VmLck and the mapped size
// (VmSize) return to where they were, however many pools come and go.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "pinpool/pool.h"
#include "support/counting_domain.h"
#include "support/proc_status.h"

namespace pinpool {
namespace {

using testing::ProcStatusBytes;

constexpr long long kTolerance = 1 << 20;

void UseAPool() {
  PoolOptions o;
  o.chunk_size = 8 * kMiB;
  o.budget = 256 * kMiB;
  o.initial_size = 16 * kMiB;
  o.page_size = PageSize::kTransparent;
  auto pool = Pool::Create(o).value();
  std::vector<Block> blocks;
  for (int i = 0; i < 2000; ++i) blocks.push_back(pool->Allocate(64 + 97 * i));
  for (int i = 0; i < 20; ++i) blocks.push_back(pool->Allocate(3 * kMiB));
  EXPECT_GT(ProcStatusBytes("VmLck"), static_cast<long long>(16 * kMiB));
  for (std::size_t i = 0; i < blocks.size(); i += 2) pool->Deallocate(blocks[i]);
  // The rest are still live when the pool goes: destruction must not depend on them being freed.
}

TEST(LifecycleTest, DestroyReturnsLockedAndMappedBytesToTheirLevels) {
  UseAPool();  // first use sets up jemalloc's own process-wide state, which stays
  const long long locked = ProcStatusBytes("VmLck");
  const long long mapped = ProcStatusBytes("VmSize");
  for (int i = 0; i < 5; ++i) {
    UseAPool();
    EXPECT_EQ(ProcStatusBytes("VmLck"), locked) << "after pool " << i;
    // glibc's and jemalloc's own bookkeeping moves VmSize by some KiB; a chunk left mapped
    // would move it by 8 MiB, the reservation by 256 MiB.
    EXPECT_NEAR(ProcStatusBytes("VmSize"), mapped, kTolerance) << "after pool " << i;
  }
}

TEST(LifecycleTest, ThreadsThatExitAndPoolsThatGoInEitherOrderLeakNoThreadCaches) {
  // Each thread gets a cache per pool; 2500 thread x pool pairs, and every cache must be given
  // back when its thread exits.
  for (int round = 0; round < 50; ++round) {
    PoolOptions o;
    o.chunk_size = 2 * kMiB;
    o.budget = 8 * kMiB;
    o.domains.push_back(std::make_shared<testing::CountingDomain>());
    auto pool = Pool::Create(o).value();
    std::vector<std::thread> threads;
    for (int t = 0; t < 50; ++t) {
      threads.emplace_back([&] {
        Block b = pool->Allocate(100);
        ASSERT_TRUE(b);
        pool->Deallocate(b);
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(pool->GetStats().thread_caches, 0u) << "exited threads kept their caches";
  }
  // A thread that outlives the pool it used.
  std::thread late;
  {
    PoolOptions o;
    o.chunk_size = 2 * kMiB;
    o.budget = 8 * kMiB;
    auto pool = Pool::Create(o).value();
    std::atomic<bool> used{false}, go{false};
    late = std::thread([&, p = pool.get()] {
      Block b = p->Allocate(100);
      p->Deallocate(b);
      used = true;
      while (!go) std::this_thread::yield();
    });
    while (!used) std::this_thread::yield();
    EXPECT_EQ(pool->GetStats().thread_caches, 1u);
    pool.reset();
    go = true;
  }
  late.join();  // its exit must not touch the destroyed pool's cache
}

// Pool memory freed by a thread_local destructor that runs after the thread's caches are gone
// (it was constructed before the thread's first allocation, so it is destroyed after).
struct HolderOfPoolMemory {
  Pool* pool = nullptr;
  void* block = nullptr;
  ~HolderOfPoolMemory() {
    if (pool != nullptr) pool->Deallocate(block);
  }
};

TEST(LifecycleTest, FreesFromLateThreadLocalDestructorsBypassTheGoneCaches) {
  PoolOptions o;
  o.chunk_size = 2 * kMiB;
  o.budget = 8 * kMiB;
  auto pool = Pool::Create(o).value();
  std::thread t([&] {
    thread_local HolderOfPoolMemory holder;  // constructed first: destroyed last
    holder.pool = pool.get();
    holder.block = pool->Allocate(100).data();
    pool->Deallocate(pool->Allocate(200));
  });
  t.join();
  // Had the late free re-created a cache for the exiting thread, nobody would ever release it.
  EXPECT_EQ(pool->GetStats().thread_caches, 0u);
}

}  // namespace
}  // namespace pinpool
