// Pool API semantics: options validation, allocation, keys, lookup, reallocation, misuse.
#include "pinpool/pool.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "support/counting_domain.h"
#include "support/proc_status.h"
#include "support/sanitizers.h"

namespace pinpool {
namespace {

using testing::CountingDomain;
using ::testing::HasSubstr;

PoolOptions SmallOptions(std::shared_ptr<Domain> domain = nullptr) {
  PoolOptions o;
  o.chunk_size = 4 * kMiB;
  o.budget = 64 * kMiB;
  o.page_size = PageSize::k4K;
  if (domain) o.domains.push_back(std::move(domain));
  return o;
}

TEST(PoolOptionsTest, RejectsBadChunkSizes) {
  for (std::size_t bad : {std::size_t{0}, 3 * kMiB, kMiB, 2 * kGiB}) {
    PoolOptions o = SmallOptions();
    o.chunk_size = bad;
    auto pool = Pool::Create(o);
    ASSERT_FALSE(pool.ok()) << bad;
    EXPECT_EQ(pool.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(pool.status().message(), HasSubstr("chunk_size"));
  }
}

TEST(PoolOptionsTest, RejectsBudgetBelowChunkAndInitialAboveBudget) {
  PoolOptions o = SmallOptions();
  o.budget = kMiB;
  EXPECT_THAT(Pool::Create(o).status().message(), HasSubstr("budget"));
  o = SmallOptions();
  o.initial_size = o.budget + 1;
  EXPECT_THAT(Pool::Create(o).status().message(), HasSubstr("initial_size"));
  o = SmallOptions();  // 5 MiB rounds up to 8 MiB of chunks; a 5 MiB budget holds one chunk
  o.budget = 5 * kMiB;
  o.initial_size = 5 * kMiB;
  EXPECT_EQ(Pool::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = SmallOptions();
  o.domains.push_back(nullptr);
  EXPECT_EQ(Pool::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = SmallOptions();
  o.page_size = PageSize::k1G;
  o.require_page_size = true;
  EXPECT_THAT(Pool::Create(o).status().message(), HasSubstr("require_page_size"));
}

TEST(PoolTest, BlockCarriesItsChunksKeysForEveryDomain) {
  auto a = std::make_shared<CountingDomain>("a");
  auto b = std::make_shared<CountingDomain>("b");
  PoolOptions o = SmallOptions(a);
  o.domains.push_back(b);
  auto pool = Pool::Create(o).value();
  Block block = pool->Allocate(1000);
  ASSERT_TRUE(block);
  EXPECT_EQ(block.size(), 1000u);
  EXPECT_EQ(block.domain_count(), 2u);
  const ChunkInfo& chunk = block.chunk();
  EXPECT_LE(chunk.base, reinterpret_cast<std::uintptr_t>(block.data()));
  EXPECT_LE(reinterpret_cast<std::uintptr_t>(block.data()) + block.size(), chunk.base + chunk.size);
  Keys expect_a, expect_b;
  ASSERT_TRUE(a->KeysFor(chunk.base, &expect_a));
  ASSERT_TRUE(b->KeysFor(chunk.base, &expect_b));
  EXPECT_EQ(block.lkey(0), expect_a.lkey);
  EXPECT_EQ(block.rkey(1), expect_b.rkey);
  EXPECT_NE(ToUnderlying(block.lkey(0)), ToUnderlying(block.lkey(1)));
  EXPECT_EQ(block.offset(0), reinterpret_cast<std::uintptr_t>(block.data()) - chunk.base);
  std::memset(block.data(), 0x5a, block.size());
  pool->Deallocate(block);
}

TEST(PoolTest, LookupOfInteriorPointersGivesTheSameChunkAndOffset) {
  auto domain = std::make_shared<CountingDomain>();
  auto pool = Pool::Create(SmallOptions(domain)).value();
  Block block = pool->Allocate(64 * kKiB);
  ASSERT_TRUE(block);
  auto* bytes = static_cast<char*>(block.data());
  for (std::size_t off : {std::size_t{0}, std::size_t{1}, std::size_t{4095}, 64 * kKiB - 1}) {
    std::optional<Location> loc = pool->Lookup(bytes + off);
    ASSERT_TRUE(loc.has_value());
    EXPECT_EQ(&loc->chunk(), &block.chunk());
    EXPECT_EQ(loc->lkey(), block.lkey());
    EXPECT_EQ(loc->offset(), block.offset() + off);
  }
  int on_stack = 0;
  EXPECT_FALSE(pool->Lookup(&on_stack).has_value());
  auto heap_int = std::make_unique<int>(1);
  EXPECT_FALSE(pool->Contains(heap_int.get()));
  pool->Deallocate(block);
}

TEST(PoolTest, AlignmentIsHonouredAndInvalidRequestsGiveEmptyBlocks) {
  auto pool = Pool::Create(SmallOptions()).value();
  for (std::size_t align : {std::size_t{1}, std::size_t{16}, std::size_t{64}, std::size_t{4096},
                            std::size_t{64} * kKiB, std::size_t{2} * kMiB}) {
    Block b = pool->Allocate(100, align);
    ASSERT_TRUE(b) << align;
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data()) % align, 0u) << align;
    pool->Deallocate(b);
  }
  EXPECT_FALSE(pool->Allocate(0));
  EXPECT_FALSE(pool->Allocate(100, 3));                  // not a power of two
  EXPECT_FALSE(pool->Allocate(100, 8 * kMiB));           // larger than a chunk
  EXPECT_FALSE(pool->Allocate(pool->chunk_size() + 1));  // larger than a chunk
  EXPECT_FALSE(pool->Allocate(SIZE_MAX));
  EXPECT_EQ(pool->max_block_size(), 3.5 * kMiB);
  EXPECT_FALSE(pool->Allocate(pool->max_block_size() + 1));
  Block largest = pool->Allocate(pool->max_block_size());
  ASSERT_TRUE(largest) << pool->last_growth_error();
  pool->Deallocate(largest);
}

TEST(PoolTest, ReallocateKeepsContentsAndKeys) {
  auto domain = std::make_shared<CountingDomain>();
  auto pool = Pool::Create(SmallOptions(domain)).value();
  Block b = pool->Allocate(100);
  ASSERT_TRUE(b);
  std::memset(b.data(), 0x33, 100);
  Block bigger = pool->Reallocate(b, 3 * kMiB);
  ASSERT_TRUE(bigger);
  EXPECT_EQ(bigger.size(), 3 * kMiB);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(static_cast<unsigned char*>(bigger.data())[i], 0x33);
  Keys registered;
  ASSERT_TRUE(domain->KeysFor(bigger.chunk().base, &registered));
  EXPECT_EQ(bigger.lkey(), registered.lkey);
  Block too_big = pool->Reallocate(bigger, pool->chunk_size() + 1);
  EXPECT_FALSE(too_big);  // and `bigger` is still allocated and intact
  EXPECT_EQ(static_cast<unsigned char*>(bigger.data())[99], 0x33);
  EXPECT_GE(pool->UsableSize(bigger.data()), 3 * kMiB);
  pool->Deallocate(bigger);
}

TEST(PoolTest, ShrinkingToAFewBytesKeepsSixteenByteBlocksWhole) {
  // No block is below 16 bytes (the free mark needs 8): a block shrunk to a few bytes and freed
  // must never come back overlapping its neighbour (as a jemalloc 8-byte block once could).
  auto pool = Pool::Create(SmallOptions()).value();
  for (int i = 0; i < 200; ++i) {
    Block b = pool->Allocate(64);
    Block small = pool->Reallocate(b, 1 + i % 8);
    ASSERT_TRUE(small);
    if (i % 2) {
      pool->Deallocate(small);
    } else {
      pool->Deallocate(small.data());
    }
  }
  for (int i = 0; i < 200; ++i) {
    Block b = pool->Allocate(16);
    ASSERT_TRUE(b);
    EXPECT_GE(pool->UsableSize(b.data()), 16u);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data()) % 16, 0u);
  }
}

TEST(PoolTest, SizedFreeByAddressTakesTheFastPathAndWorks) {
  auto pool = Pool::Create(SmallOptions()).value();
  std::vector<void*> ps;
  for (int i = 1; i < 1000; ++i) ps.push_back(pool->Allocate(i * 7).data());
  for (int i = 1; i < 1000; ++i) pool->Deallocate(ps[i - 1], i * 7);
  pool->Deallocate(nullptr, 10);
  Block again = pool->Allocate(7);
  EXPECT_TRUE(again);
}

TEST(PoolTest, FreeByAddressAndNullAreAccepted) {
  auto pool = Pool::Create(SmallOptions()).value();
  Block b = pool->Allocate(12345);
  ASSERT_TRUE(b);
  pool->Deallocate(b.data());
  pool->Deallocate(nullptr);
  pool->Deallocate(Block{});
  EXPECT_EQ(pool->UsableSize(nullptr), 0u);
}

TEST(PoolTest, TwoPoolsNeverShareMemory) {
  auto p1 = Pool::Create(SmallOptions()).value();
  auto p2 = Pool::Create(SmallOptions()).value();
  std::vector<Block> b1, b2;
  for (int i = 0; i < 1000; ++i) {
    b1.push_back(p1->Allocate(64 + i));
    b2.push_back(p2->Allocate(64 + i));
    ASSERT_TRUE(p1->Contains(b1.back().data()));
    ASSERT_FALSE(p2->Contains(b1.back().data()));
    ASSERT_TRUE(p2->Contains(b2.back().data()));
    ASSERT_FALSE(p1->Contains(b2.back().data()));
  }
  for (auto& b : b1) p1->Deallocate(b);
  for (auto& b : b2) p2->Deallocate(b);
}

TEST(PoolTest, PlainMallocNeverReturnsPoolMemoryAfterPoolFrees) {
  // Freeing a pool block must never put it where the application's allocator could hand it out
  // (the trap of a cache shared between allocators, such as a thread cache keyed only by size
  // class that both the application's malloc and the pool would feed).
  auto pool = Pool::Create(SmallOptions()).value();
  for (int round = 0; round < 100; ++round) {
    Block b = pool->Allocate(64);
    pool->Deallocate(b);
    void* m = std::malloc(64);
    ASSERT_FALSE(pool->Contains(m));
    std::free(m);
  }
}

TEST(PoolDeathTest, FreeingForeignPointerAbortsNamingIt) {
  auto pool = Pool::Create(SmallOptions()).value();
  int on_stack = 0;
  EXPECT_DEATH(pool->Deallocate(&on_stack), "not memory of this pool");
  auto other = Pool::Create(SmallOptions()).value();
  Block b = other->Allocate(64);
  EXPECT_DEATH(pool->Deallocate(b), "Deallocate\\(0x[0-9a-f]+\\): not memory of this pool");
  other->Deallocate(b);
  // Inside the pool's reserved range but in a chunk never mapped: the fast path must not take it.
  Block mine = pool->Allocate(64);
  const std::uintptr_t unmapped = mine.chunk().base + 3 * pool->chunk_size();
  Block forged(reinterpret_cast<void*>(unmapped), 64, &mine.chunk());
  EXPECT_DEATH(pool->Deallocate(forged), "not memory of this pool");
  EXPECT_DEATH(pool->Deallocate(forged.data(), 64), "not memory of this pool");
  pool->Deallocate(mine);
}

TEST(PoolTest, StatsDescribeChunksDomainsAndBytes) {
  auto domain = std::make_shared<CountingDomain>("fake");
  PoolOptions o = SmallOptions(domain);
  o.initial_size = 8 * kMiB;
  auto pool = Pool::Create(o).value();
  Block b = pool->Allocate(100 * kKiB);
  ASSERT_TRUE(b);
  PoolStats s = pool->GetStats();
  EXPECT_EQ(s.mapped_bytes, 8 * kMiB);
  EXPECT_EQ(s.chunks.size(), 2u);
  EXPECT_EQ(s.budget_bytes, 64 * kMiB);
  EXPECT_GE(s.reserved_bytes, s.budget_bytes);
  EXPECT_EQ(s.pinned_bytes, 0u);  // the fake domain pins nothing
  EXPECT_GE(s.live_bytes, 100 * kKiB);
  ASSERT_EQ(s.domains.size(), 1u);
  EXPECT_EQ(s.domains[0].name, "fake");
  EXPECT_EQ(s.domains[0].registrations, 2u);
  EXPECT_EQ(s.domains[0].registered_bytes, 8 * kMiB);
  EXPECT_THAT(s.ToString(), HasSubstr("domain fake"));
  pool->Deallocate(b);
}

TEST(PoolTest, DestroyDeregistersEveryChunkWithItsOwnKeys) {
  auto domain = std::make_shared<CountingDomain>();
  {
    PoolOptions o = SmallOptions(domain);
    auto pool = Pool::Create(o).value();
    std::vector<Block> blocks;
    for (int i = 0; i < 10; ++i) blocks.push_back(pool->Allocate(3 * kMiB));  // ~10 chunks
    EXPECT_GE(domain->live_registrations(), 8u);
  }
  EXPECT_EQ(domain->live_registrations(), 0u);
  EXPECT_EQ(domain->bad_deregisters(), 0u);
  EXPECT_EQ(domain->register_calls(), domain->deregister_calls());
}

TEST(PoolTest, FailedRegistrationUndoesEarlierDomainsAndTheMapping) {
  auto a = std::make_shared<CountingDomain>("a");
  auto b = std::make_shared<CountingDomain>("b");
  PoolOptions o = SmallOptions(a);
  o.domains.push_back(b);
  auto pool = Pool::Create(o).value();
  b->FailRegistration(1);
  const long long rss = testing::ProcStatusBytes("VmRSS");
  EXPECT_FALSE(pool->Allocate(64));
  // The populated 4 MiB chunk was unmapped again, not left behind.
  // (Under ASan/TSan their allocators' first use of a size adds to RSS: below the 4 MiB still.)
  const long long slack = static_cast<long long>((testing::kMlockIsANoOp ? 3 : 2) * kMiB);
  EXPECT_LT(testing::ProcStatusBytes("VmRSS") - rss, slack);
  EXPECT_THAT(std::string(pool->last_growth_error().message()),
              HasSubstr("injected registration failure"));
  EXPECT_EQ(a->live_registrations(), 0u);  // domain a's registration was undone
  EXPECT_EQ(pool->GetStats().mapped_bytes, 0u);
  Block ok = pool->Allocate(64);  // the next growth succeeds
  ASSERT_TRUE(ok);
  EXPECT_EQ(a->live_registrations(), 1u);
  EXPECT_EQ(b->live_registrations(), 1u);
  pool->Deallocate(ok);
}

}  // namespace
}  // namespace pinpool
