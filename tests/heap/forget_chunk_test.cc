// Heap::ForgetChunk (src/heap/forget_chunk.cc): the heap lets go of one chunk for good.
//  - with blocks of the chunk free in other threads' caches, on the transfer stacks, in slabs
//    and in free spans, it lists exactly the chunk's live blocks (with their usable sizes), the
//    page heap's invariants hold after, and once the chunk is made inaccessible (PROT_NONE)
//    those threads allocate and free on (their caches refill, spans are made) without anything
//    touching it or handing out a block of it;
//  - with debug checks, its live blocks leave the table of live blocks;
//  - a chunk the heap never took is nothing to forget.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "arena/arena.h"
#include "heap/heap.h"
#include "pinpool/options.h"
#include "support/counting_domain.h"

namespace pinpool {
namespace {

using internal::Heap;
using pinpool::testing::CountingDomain;

constexpr std::size_t kChunk = 2 * kMiB;
constexpr std::size_t kSizes[] = {48, 256, 4096, 20000, 100 * 1024};

std::unique_ptr<internal::Arena> MakeArena(std::size_t chunks) {
  internal::ArenaConfig config{
      .chunk_size = kChunk, .max_chunks = chunks, .domains = {std::make_shared<CountingDomain>()}};
  return internal::Arena::Create(std::move(config)).value();
}

std::uintptr_t ChunkBase(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) & ~(kChunk - 1);
}

TEST(ForgetChunk, ListsExactlyTheLiveBlocksAndNothingTouchesTheChunkAfter) {
  auto arena = MakeArena(8);
  auto heap = Heap::Create(arena.get()).value();
  constexpr int kThreads = 3;
  std::vector<std::vector<void*>> live(kThreads);
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::atomic<std::uintptr_t> doomed{0};
  std::atomic<int> handed_out_from_doomed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Phase 1: blocks of every size; every other one freed, into this thread's cache first.
      std::vector<void*> all;
      for (int i = 0; i < 120; ++i) {
        void* p = heap->Allocate(kSizes[(i + t) % 5], 16);
        ASSERT_NE(p, nullptr);
        all.push_back(p);
      }
      for (std::size_t i = 0; i < all.size(); ++i) {
        if (i % 2 == 0) {
          heap->Free(all[i], 0, "test");
        } else {
          live[t].push_back(all[i]);
        }
      }
      ready.fetch_add(1);
      while (!go.load()) std::this_thread::yield();
      // Phase 2: the chunk is gone; allocate and free on.
      std::vector<void*> more;
      for (int i = 0; i < 300; ++i) {
        void* p = heap->Allocate(kSizes[(i * 7 + t) % 5], 16);
        if (p == nullptr) break;
        if (ChunkBase(p) == doomed.load()) handed_out_from_doomed.fetch_add(1);
        static_cast<char*>(p)[0] = 1;
        more.push_back(p);
      }
      for (void* p : live[t]) {
        if (ChunkBase(p) != doomed.load()) heap->Free(p, 0, "test");
      }
      for (void* p : more) heap->Free(p, 0, "test");
    });
  }
  while (ready.load() != kThreads) std::this_thread::yield();
  const std::uintptr_t base = ChunkBase(live[0][0]);
  std::vector<Heap::LostBlock> expected;
  for (const auto& v : live) {
    for (void* p : v) {
      if (ChunkBase(p) == base) expected.push_back({p, heap->UsableSize(p)});
    }
  }
  std::sort(expected.begin(), expected.end(),
            [](const auto& a, const auto& b) { return a.data < b.data; });
  const auto index = static_cast<std::uint32_t>((base - arena->range_base()) / kChunk);
  ASSERT_TRUE(arena->BeginGiveBack(index).ok());
  auto lost = heap->ForgetChunk(base);
  ASSERT_TRUE(lost.ok()) << lost.status();
  ASSERT_EQ(lost->size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ((*lost)[i].data, expected[i].data) << i;
    EXPECT_EQ((*lost)[i].size, expected[i].size) << i;
  }
  heap->Verify();
  // Nothing may touch the chunk any more: a touch faults.
  ASSERT_EQ(mprotect(reinterpret_cast<void*>(base), kChunk, PROT_NONE), 0);
  doomed = base;
  go = true;
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(handed_out_from_doomed.load(), 0);
  heap->Verify();
  ASSERT_EQ(mprotect(reinterpret_cast<void*>(base), kChunk, PROT_READ | PROT_WRITE), 0);
  heap.reset();
  arena->FinishGiveBack(index);
}

TEST(ForgetChunk, DebugChecksForgetTheLiveBlocksAndAChunkNeverTakenIsNothing) {
  auto arena = MakeArena(4);
  ASSERT_TRUE(arena->Reserve(2 * kChunk).ok());
  auto heap = Heap::Create(arena.get(), /*debug_checks=*/true).value();
  std::vector<void*> blocks;
  for (int i = 0; i < 10; ++i) blocks.push_back(heap->Allocate(kSizes[i % 5], 16));
  const std::uintptr_t base = ChunkBase(blocks[0]);
  for (void* p : blocks) ASSERT_EQ(ChunkBase(p), base);
  heap->Free(blocks[0], 0, "test");
  EXPECT_EQ(heap->LiveBlocks().first, 9u);
  // The other chunk the arena has: the heap never took it.
  const std::uintptr_t other = base == arena->range_base() ? base + kChunk : arena->range_base();
  auto none = heap->ForgetChunk(other);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  ASSERT_TRUE(
      arena->BeginGiveBack(static_cast<std::uint32_t>((base - arena->range_base()) / kChunk)).ok());
  auto lost = heap->ForgetChunk(base);
  ASSERT_TRUE(lost.ok());
  EXPECT_EQ(lost->size(), 9u);
  EXPECT_EQ(heap->LiveBlocks().first, 0u);
  heap->Verify();
  // The heap grows into the other chunk now.
  void* p = heap->Allocate(4096, 16);
  ASSERT_NE(p, nullptr);
  EXPECT_NE(ChunkBase(p), base);
  heap->Free(p, 0, "test");
}

}  // namespace
}  // namespace pinpool
