// Misuse, one test (or more) per rule of docs/robustness.md: each misuse either returns an
// error (an empty Block) or aborts with a message naming the pointer and the rule, and never
// corrupts the pool. Death tests run in a child (threadsafe style: re-executes the binary, as
// ThreadSanitizer requires); the parent checks afterwards that the pool still serves correctly.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "os/os.h"
#include "pinpool/pool.h"
#include "support/counting_domain.h"
#include "support/maps.h"

namespace pinpool {
namespace {

using testing::CountingDomain;
using ::testing::HasSubstr;

// "Deallocate(0x7f...)" as the messages print a pointer.
constexpr const char* kPtr = "\\(0x[0-9a-f]+";

PoolOptions Options(bool debug_checks = false) {
  PoolOptions o;
  o.chunk_size = 4 * kMiB;
  o.budget = 64 * kMiB;
  o.page_size = PageSize::k4K;
  o.domains.push_back(std::make_shared<CountingDomain>());
  o.debug_checks = debug_checks;
  return o;
}

std::string Expect(const char* call, const char* rule) {
  return std::string(call) + kPtr + ".*" + rule;
}

// The pointer, hidden from the compiler's use-after-free analysis (the tests mean to misuse it).
template <typename T>
T* Hide(T* p) {
  asm volatile("" : "+r"(p));
  return p;
}

class MisuseDeathTest : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

// After a misuse was caught (in the death test's child), the parent's pool must still hand out
// disjoint blocks, each inside a chunk, with contents that stay what was written.
void ExpectPoolStillServes(Pool& pool) {
  std::vector<Block> blocks;
  std::set<std::uintptr_t> starts;
  for (int i = 0; i < 2000; ++i) {
    Block b = pool.Allocate(16 + (i % 50) * 16);
    ASSERT_TRUE(b);
    ASSERT_TRUE(starts.insert(reinterpret_cast<std::uintptr_t>(b.data())).second)
        << "block handed out twice";
    std::memset(b.data(), i & 0xff, b.size());
    blocks.push_back(b);
  }
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const auto* p = static_cast<const unsigned char*>(blocks[i].data());
    for (std::size_t j = 0; j < blocks[i].size(); ++j) {
      ASSERT_EQ(p[j], i & 0xff) << "block " << i << " overwritten at byte " << j;
    }
    pool.Deallocate(blocks[i]);
  }
}

// --- double free ------------------------------------------------------------------------------

TEST_F(MisuseDeathTest, DoubleFreeOfABlockAbortsNamingIt) {
  auto pool = Pool::Create(Options()).value();
  Block b = pool->Allocate(64);
  ASSERT_TRUE(b);
  pool->Deallocate(b);
  EXPECT_DEATH(pool->Deallocate(b), Expect("Deallocate", "free already .a double free"));
  EXPECT_DEATH(pool->Deallocate(b.data(), 64), Expect("Deallocate", "free already"));
  EXPECT_DEATH(pool->Deallocate(b.data()), Expect("Deallocate", "free already"));
  EXPECT_DEATH(pool->Reallocate(b, 128), Expect("Reallocate", "free already"));
  EXPECT_DEATH(pool->UsableSize(b.data()), Expect("UsableSize", "free already"));
  ExpectPoolStillServes(*pool);
}

TEST_F(MisuseDeathTest, DoubleFreeOfEverySizeAndAlignmentAborts) {
  auto pool = Pool::Create(Options()).value();
  for (std::size_t size : {std::size_t{1}, std::size_t{16}, std::size_t{100}, std::size_t{4096},
                           std::size_t{20000}, 64 * kKiB, 64 * kKiB + 1, 3 * kMiB}) {
    for (std::size_t align : {std::size_t{16}, std::size_t{256}, std::size_t{8192}}) {
      Block b = pool->Allocate(size, align);
      ASSERT_TRUE(b) << size << " " << align;
      pool->Deallocate(b);
      EXPECT_DEATH(pool->Deallocate(b), Expect("Deallocate", "free already"))
          << size << " " << align;
    }
  }
  ExpectPoolStillServes(*pool);
}

TEST_F(MisuseDeathTest, DoubleFreeAfterTheBlockLeftTheThreadCacheAborts) {
  // A full bin flushes its oldest blocks to the central layer (transfer stacks, then slabs): they
  // keep the mark there.
  auto pool = Pool::Create(Options()).value();
  std::vector<Block> blocks;
  for (int i = 0; i < 1000; ++i) blocks.push_back(pool->Allocate(64));
  for (Block& b : blocks) pool->Deallocate(b);
  EXPECT_DEATH(pool->Deallocate(blocks.front()), Expect("Deallocate", "free already"));
  EXPECT_DEATH(pool->Deallocate(blocks.front().data()), Expect("Deallocate", "free already"));
  ExpectPoolStillServes(*pool);
}

TEST_F(MisuseDeathTest, DoubleFreeByAnotherThreadAborts) {
  auto pool = Pool::Create(Options()).value();
  Block b = pool->Allocate(256);
  std::thread([&] { pool->Deallocate(b); }).join();
  EXPECT_DEATH(pool->Deallocate(b), Expect("Deallocate", "free already"));
  ExpectPoolStillServes(*pool);
}

TEST(MisuseTest, AReusedBlockIsNeverMistakenForAFreeOne) {
  // Allocation clears the mark: a block freed, handed out again and never written is live.
  auto pool = Pool::Create(Options()).value();
  for (std::size_t size : {std::size_t{64}, std::size_t{4096}, 200 * kKiB}) {
    for (int i = 0; i < 200; ++i) {
      Block b = pool->Allocate(size);
      ASSERT_TRUE(b);
      pool->Deallocate(b);  // would abort if the mark of the block's last life were still there
    }
  }
  // And a user who copies a free block's first word into a live block does not forge a mark:
  // the mark mixes in the block's own address.
  Block a = pool->Allocate(64);
  Block c = pool->Allocate(64);
  pool->Deallocate(a);
  std::memcpy(c.data(), a.data(), 8);  // reading freed memory: the test's own misuse
  pool->Deallocate(c);
}

// --- foreign pointers -------------------------------------------------------------------------

TEST_F(MisuseDeathTest, FreeOfAForeignPointerAbortsNamingIt) {
  auto pool = Pool::Create(Options()).value();
  auto other = Pool::Create(Options()).value();
  int on_stack = 0;
  auto on_heap = std::make_unique<std::uint64_t[]>(4);
  Block theirs = other->Allocate(64);
  EXPECT_DEATH(pool->Deallocate(&on_stack), Expect("Deallocate", "not memory of this pool"));
  EXPECT_DEATH(pool->Deallocate(on_heap.get(), 32),
               Expect("Deallocate", "not memory of this pool"));
  EXPECT_DEATH(pool->Deallocate(theirs), Expect("Deallocate", "not memory of this pool"));
  EXPECT_DEATH(pool->Reallocate(theirs, 10), Expect("Reallocate", "not memory of this pool"));
  EXPECT_DEATH(pool->UsableSize(&on_stack), Expect("UsableSize", "not memory of this pool"));
  // In the pool's reserved range, in a chunk never mapped.
  Block mine = pool->Allocate(64);
  void* unmapped = reinterpret_cast<void*>(mine.chunk().base + 5 * pool->chunk_size());
  EXPECT_DEATH(pool->Deallocate(unmapped, 64), Expect("Deallocate", "not memory of this pool"));
  // In a mapped chunk, beyond anything ever handed out.
  void* never = reinterpret_cast<void*>(mine.chunk().base + pool->chunk_size() - 4096);
  EXPECT_DEATH(pool->Deallocate(never), Expect("Deallocate", "no block was ever handed out"));
  other->Deallocate(theirs);
  pool->Deallocate(mine);
  ExpectPoolStillServes(*pool);
}

// --- interior pointers ------------------------------------------------------------------------

TEST_F(MisuseDeathTest, UnalignedInteriorPointersAbortOnEveryFreePath) {
  auto pool = Pool::Create(Options()).value();
  for (std::size_t size : {std::size_t{64}, 100 * kKiB}) {
    Block b = pool->Allocate(size);
    auto* p = static_cast<char*>(b.data());
    const char* rule = "not the start of a block: every block is 16-byte aligned";
    EXPECT_DEATH(pool->Deallocate(p + 8, 16), Expect("Deallocate", rule));
    EXPECT_DEATH(pool->Deallocate(Block(p + 1, 16, &b.chunk())), Expect("Deallocate", rule));
    EXPECT_DEATH(pool->Deallocate(p + 24), Expect("Deallocate", rule));
    EXPECT_DEATH(pool->Reallocate(p + 4, 10), Expect("Reallocate", rule));
    pool->Deallocate(b);
  }
  ExpectPoolStillServes(*pool);
}

TEST_F(MisuseDeathTest, AlignedInteriorPointersAbortOnFreeByAddress) {
  auto pool = Pool::Create(Options()).value();
  // Inside the middle pages of a large block (no page map entry there), by address and sized.
  Block large = pool->Allocate(2 * kMiB);
  auto* l = static_cast<char*>(large.data());
  EXPECT_DEATH(pool->Deallocate(l + 256 * kKiB), Expect("Deallocate", "inside a larger block"));
  EXPECT_DEATH(pool->Deallocate(l + 512 * kKiB, kMiB + 16),
               Expect("Deallocate", "inside a larger block"));
  // Inside a small block: caught exactly (its offset from the slab's start).
  for (std::size_t size : {std::size_t{64}, std::size_t{256}, std::size_t{4096}}) {
    Block b = pool->Allocate(size);
    auto* p = static_cast<char*>(b.data());
    EXPECT_DEATH(pool->Deallocate(p + 16), Expect("Deallocate", "start at multiples of"));
    EXPECT_DEATH(pool->Deallocate(p + size / 2),
                 Expect("Deallocate", "not the start of a block: blocks of"));
    pool->Deallocate(b);
  }
  pool->Deallocate(large);
  ExpectPoolStillServes(*pool);
}

TEST_F(MisuseDeathTest, EveryFreeCatchesAlignedInteriorPointersAndOversizedSizes) {
  // The page map gives every free (sized, by Block, by address) the block's class and its slab's
  // start, so an aligned interior pointer of any class is caught, and so is a size larger than
  // the block, on the fast path itself.
  auto pool = Pool::Create(Options()).value();
  for (std::size_t size : {std::size_t{48}, std::size_t{64}, std::size_t{80}, std::size_t{640},
                           std::size_t{4096}, 20 * kKiB, 100 * kKiB}) {
    Block b = pool->Allocate(size);
    Block neighbour = pool->Allocate(size);
    auto* p = static_cast<char*>(b.data());
    EXPECT_DEATH(pool->Deallocate(p + 16, 16), Expect("Deallocate", "not the start of a block"))
        << size;
    EXPECT_DEATH(pool->Deallocate(Block(p + 32, 16, &b.chunk())),
                 Expect("Deallocate", "not the start of a block"))
        << size;
    EXPECT_DEATH(pool->Deallocate(p + 16), Expect("Deallocate", "not the start of a block"))
        << size;
    EXPECT_DEATH(pool->Deallocate(p, 2 * size + 4096),
                 Expect("Deallocate", "larger than the block"))
        << size;
    pool->Deallocate(b);
    pool->Deallocate(neighbour);
  }
  ExpectPoolStillServes(*pool);
}

TEST_F(MisuseDeathTest, FreeOfABlockNeverHandedOutAborts) {
  // Every block of a new slab carries the free mark until it is handed out: the last block of
  // the slab this 64-byte block came from was never handed out.
  auto pool = Pool::Create(Options()).value();
  Block b = pool->Allocate(64);
  const auto page = reinterpret_cast<std::uintptr_t>(b.data()) & ~std::uintptr_t{4095};
  void* last = reinterpret_cast<void*>(page + 4096 - 64);
  ASSERT_NE(last, b.data());
  EXPECT_DEATH(pool->Deallocate(last, 64), Expect("Deallocate", "free already"));
  EXPECT_DEATH(pool->Deallocate(last), Expect("Deallocate", "free already"));
  pool->Deallocate(b);
  ExpectPoolStillServes(*pool);
}

TEST_F(MisuseDeathTest, DebugChecksCatchEveryInteriorPointerAndWrongSize) {
  auto pool = Pool::Create(Options(/*debug_checks=*/true)).value();
  for (std::size_t size : {std::size_t{48}, std::size_t{80}, std::size_t{320}, 20 * kKiB}) {
    Block b = pool->Allocate(size);
    auto* p = static_cast<char*>(b.data());
    // Aligned interior pointers at offsets the release checks cannot tell from a block start.
    EXPECT_DEATH(pool->Deallocate(p + 16, 16), Expect("Deallocate", "not a live block"));
    EXPECT_DEATH(pool->Deallocate(p + 16), Expect("Deallocate", "not a live block"));
    EXPECT_DEATH(pool->Deallocate(p, 64 * kKiB), Expect("Deallocate", "larger than the block"));
    pool->Deallocate(b);
    EXPECT_DEATH(pool->Deallocate(b), Expect("Deallocate", "not a live block"));
  }
  ExpectPoolStillServes(*pool);
}

// --- sizes and alignments ---------------------------------------------------------------------

TEST_F(MisuseDeathTest, SizeZeroGivesAnEmptyBlockAndFreeOfSizeZeroLooksTheSizeUp) {
  auto pool = Pool::Create(Options()).value();
  EXPECT_FALSE(pool->Allocate(0));
  EXPECT_FALSE(pool->Allocate(0, 64));
  EXPECT_FALSE(pool->Reallocate(pool->Allocate(0), 0));  // realloc(null, 0): allocate 0: empty
  Block b = pool->Allocate(100);
  EXPECT_FALSE(pool->Reallocate(b, 0));  // an error: `b` stays allocated and intact
  EXPECT_GE(pool->UsableSize(b.data()), 100u);
  pool->Deallocate(b.data(), 0);  // size 0 = unknown: as Deallocate(data)
  EXPECT_DEATH(pool->Deallocate(b.data(), 0), "free already");
  ExpectPoolStillServes(*pool);
}

TEST(MisuseTest, SizesThatOverflowGiveEmptyBlocks) {
  auto pool = Pool::Create(Options()).value();
  for (std::size_t size : {SIZE_MAX, SIZE_MAX - 15, SIZE_MAX / 2 + 1, pool->max_block_size() + 1,
                           pool->chunk_size(), std::size_t{1} << 62}) {
    EXPECT_FALSE(pool->Allocate(size)) << size;
    EXPECT_FALSE(pool->Allocate(size, 64)) << size;
    EXPECT_FALSE(pool->Allocate(size, pool->chunk_size())) << size;
  }
  // The largest size at the largest alignment: served, inside one chunk (no wrapped size).
  Block big = pool->Allocate(pool->max_block_size(), pool->chunk_size());
  ASSERT_TRUE(big);
  EXPECT_LE(reinterpret_cast<std::uintptr_t>(big.data()) + big.size(),
            big.chunk().base + big.chunk().size);
  pool->Deallocate(big);
  Block b = pool->Allocate(64);
  std::memset(b.data(), 0x77, 64);
  for (std::size_t size : {SIZE_MAX, SIZE_MAX - 15, pool->max_block_size() + 1}) {
    EXPECT_FALSE(pool->Reallocate(b, size)) << size;
  }
  EXPECT_EQ(static_cast<unsigned char*>(b.data())[63], 0x77);  // untouched
  pool->Deallocate(b);
  EXPECT_EQ(pool->GetStats().growth_failures, 0u) << "an invalid size is not a failed growth";
  ExpectPoolStillServes(*pool);
}

TEST(MisuseTest, BadAlignmentsGiveEmptyBlocks) {
  auto pool = Pool::Create(Options()).value();
  for (std::size_t align :
       {std::size_t{0}, std::size_t{3}, std::size_t{24}, std::size_t{48}, std::size_t{4097},
        SIZE_MAX, pool->chunk_size() * 2, std::size_t{1} << 63}) {
    EXPECT_FALSE(pool->Allocate(64, align)) << align;
    EXPECT_FALSE(pool->Allocate(128 * kKiB, align)) << align;
  }
  Block largest_alignment = pool->Allocate(64, pool->chunk_size());
  ASSERT_TRUE(largest_alignment);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(largest_alignment.data()) % pool->chunk_size(), 0u);
  pool->Deallocate(largest_alignment);
  ExpectPoolStillServes(*pool);
}

// --- the pool's own lifetime ------------------------------------------------------------------

TEST_F(MisuseDeathTest, UsingAPoolAfterItWasDestroyedAborts) {
  // Undefined behaviour, like any use of a destroyed object: caught while the Pool's memory has
  // not been reused (AddressSanitizer always catches it, with its own report).
  const char* rule = "after the pool was destroyed|heap-use-after-free";
  EXPECT_DEATH(
      {
        auto pool = Pool::Create(Options()).value();
        Pool* dangling = Hide(pool.get());
        pool->Deallocate(pool->Allocate(64));  // this thread has a cache of it
        pool.reset();
        dangling->Allocate(64);
      },
      rule);
  EXPECT_DEATH(
      {
        auto pool = Pool::Create(Options()).value();
        Pool* dangling = Hide(pool.get());
        Block b = pool->Allocate(64);
        pool.reset();
        dangling->Deallocate(b);
      },
      rule);
  EXPECT_DEATH(
      {
        auto pool = Pool::Create(Options()).value();
        Pool* dangling = Hide(pool.get());
        Block b = pool->Allocate(64);
        pool.reset();
        (void)dangling->Lookup(b.data());
      },
      rule);
}

TEST(MisuseTest, DestroyingAPoolWithLiveBlocksDeregistersAndUnmapsEverything) {
  auto domain = std::make_shared<CountingDomain>();
  const std::int64_t chunk_bytes = internal::os::counters().chunk_bytes.load();
  PoolOptions o = Options();
  o.domains = {domain};
  std::uintptr_t start = 0, end = 0;
  {
    auto pool = Pool::Create(o).value();
    for (int i = 0; i < 100; ++i) ASSERT_TRUE(pool->Allocate(64 * kKiB + i * 4096));
    const PoolStats s = pool->GetStats();
    start = s.chunks.front().base;
    end = start + s.reserved_bytes;
    EXPECT_GT(domain->live_registrations(), 1u);
    EXPECT_EQ(testing::MappingsIn(start, end).read_write, s.mapped_bytes);
  }
  EXPECT_EQ(domain->live_registrations(), 0u);
  EXPECT_EQ(domain->bad_deregisters(), 0u);
  EXPECT_EQ(internal::os::counters().chunk_bytes.load(), chunk_bytes);
  const testing::RangeMappings m = testing::MappingsIn(start, end);
  EXPECT_EQ(m.read_write + m.none + m.other, 0u) << "the destroyed pool left mappings";
}

TEST(MisuseTest, DebugChecksWarnWhenAPoolIsDestroyedWithLiveBlocks) {
  ::testing::internal::CaptureStderr();
  {
    auto pool = Pool::Create(Options(/*debug_checks=*/true)).value();
    pool->Allocate(100);
    pool->Allocate(5000);
    pool->Deallocate(pool->Allocate(64));
    pool->Allocate(1 * kMiB);
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(err, HasSubstr("destroyed with 3 live blocks"));
  ::testing::internal::CaptureStderr();
  {
    auto pool = Pool::Create(Options(/*debug_checks=*/true)).value();
    pool->Deallocate(pool->Allocate(100));
  }
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST(MisuseTest, DebugChecksPoolWorksAndBypassesTheThreadCaches) {
  auto pool = Pool::Create(Options(/*debug_checks=*/true)).value();
  ExpectPoolStillServes(*pool);
  Block b = pool->Allocate(100);
  Block r = pool->Reallocate(b, 300 * kKiB);
  ASSERT_TRUE(r);
  pool->Deallocate(r);
  EXPECT_EQ(pool->GetStats().thread_caches, 0u);
}

}  // namespace
}  // namespace pinpool
