// Destroying a pool deregisters and unmaps everything it created: VmPin (the default domain's
// long-term pins), VmLck and the mapped size (VmSize) return to where they were, however many
// pools come and go.
#include <gtest/gtest.h>
#include <malloc.h>

#include <atomic>
#include <cstdio>
#include <thread>
#include <utility>
#include <vector>

#include "pinpool/pool.h"
#include "support/counting_domain.h"
#include "support/proc_status.h"
#include "support/sanitizers.h"

namespace pinpool {
namespace {

using testing::ProcStatusBytes;

// Whether /proc/self/maps has any mapping overlapping [start, end).
bool AnythingMappedIn(std::uintptr_t start, std::uintptr_t end) {
  FILE* f = std::fopen("/proc/self/maps", "r");
  if (f == nullptr) return true;
  char line[512];
  bool found = false;
  while (!found && std::fgets(line, sizeof line, f) != nullptr) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line, "%lx-%lx", &lo, &hi) == 2) found = lo < end && start < hi;
  }
  std::fclose(f);
  return found;
}

// Creates a pool, uses it, leaves some blocks live, destroys it; returns the range it reserved.
std::pair<std::uintptr_t, std::uintptr_t> UseAPool() {
  PoolOptions o;
  o.chunk_size = 8 * kMiB;
  o.budget = 256 * kMiB;
  o.initial_size = 16 * kMiB;
  o.page_size = PageSize::kTransparent;
  auto pool = Pool::Create(o).value();
  std::vector<Block> blocks;
  for (int i = 0; i < 2000; ++i) blocks.push_back(pool->Allocate(64 + 97 * i));
  for (int i = 0; i < 20; ++i) blocks.push_back(pool->Allocate(3 * kMiB));
  EXPECT_GE(ProcStatusBytes("VmPin"), static_cast<long long>(16 * kMiB));
  for (std::size_t i = 0; i < blocks.size(); i += 2) pool->Deallocate(blocks[i]);
  // The rest are still live when the pool goes: destruction must not depend on them being freed.
  const PoolStats stats = pool->GetStats();
  const std::uintptr_t start = stats.chunks.front().base;
  EXPECT_TRUE(AnythingMappedIn(start, start + stats.reserved_bytes));
  return {start, start + stats.reserved_bytes};
}

TEST(LifecycleTest, DestroyUnmapsTheRangeAndReturnsPinnedLockedAndMappedBytes) {
  // One glibc malloc arena: a pool's threads that find the main arena's lock taken would make
  // glibc map another 64 MiB arena (seen once in 20 runs on a loaded machine), which is not a
  // pool's leak.
  mallopt(M_ARENA_MAX, 1);
  UseAPool();  // first uses set up the heap's and glibc's own process-wide state, which stays
  UseAPool();
  const long long pinned = ProcStatusBytes("VmPin");
  const long long locked = ProcStatusBytes("VmLck");
  const long long mapped = ProcStatusBytes("VmSize");
  for (int i = 0; i < 5; ++i) {
    const auto [start, end] = UseAPool();
    EXPECT_FALSE(AnythingMappedIn(start, end)) << "pool " << i << " left a mapping in its range";
    EXPECT_EQ(ProcStatusBytes("VmPin"), pinned) << "after pool " << i;
    EXPECT_EQ(ProcStatusBytes("VmLck"), locked) << "after pool " << i;
  }
  // A leak per pool (a chunk is 8 MiB, the range 256 MiB, the heap's metadata 1 MiB) adds
  // up over five pools; the allocators' own bookkeeping moves VmSize by less than 4 MiB.
  // (Under ASan, its allocator's quarantine maps memory of its own: the per-range check above
  // still holds there.)
  if (!testing::kAsan) {
    EXPECT_LT(ProcStatusBytes("VmSize") - mapped, 4ll << 20);
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
  std::atomic<bool> used{false}, go{false};  // outlive the block: `late` reads them after it
  {
    PoolOptions o;
    o.chunk_size = 2 * kMiB;
    o.budget = 8 * kMiB;
    auto pool = Pool::Create(o).value();
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
