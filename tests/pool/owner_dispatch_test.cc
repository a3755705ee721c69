// The pool's slow paths dispatch on the chunk's owner record (src/arena/chunk_owner.h): for each
// kind of owner, Deallocate, UsableSize, Reallocate and GrantLock::CheckLive do what the headers
// promise. A named class's block goes to that class's heap (its scrub zeroes it on free; its
// usable size and reallocation are the class heap's); an array's run is grantable while the
// array lives and no block of any heap; a block of a chunk given back is lost (usable size 0,
// not reallocated, its free accepted and counted); an address in no chunk aborts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "pinpool/grant_lock.h"
#include "pinpool/pool.h"
#include "support/counting_domain.h"
#include "support/make_pool.h"

namespace pinpool {
namespace {

using testing::CountingDomain;

std::unique_ptr<Pool> MakeClassPool() {
  PoolOptions o = testing::OptionsOf({.domains = {std::make_shared<CountingDomain>()}});
  o.classes = {{.name = "rx", .reserved = 2 * kMiB, .cap = 4 * kMiB, .scrub = Scrub::kOnReuse}};
  return testing::MakePoolWith(std::move(o));
}

// Zeroed, but for the words a free block keeps (the heap's free mark and its free list's link).
bool Scrubbed(const void* p, std::size_t n) {
  const auto* w = static_cast<const std::uint64_t*>(p);
  return std::count_if(w, w + n / 8, [](std::uint64_t x) { return x != 0; }) <= 2;
}

TEST(OwnerDispatch, ANamedClasssBlockGoesToThatClasssHeap) {
  auto pool = MakeClassPool();
  ASSERT_NE(pool, nullptr);
  const ClassId rx = pool->ClassOf("rx").value();
  const Block a = pool->Allocate(rx, 4096);
  const Block keep = pool->Allocate(rx, 4096);  // keeps the chunk the class's
  ASSERT_TRUE(a && keep);
  EXPECT_GE(pool->UsableSize(a.data()), 4096u) << "the class's heap knows it";
  std::memset(a.data(), 0xab, 4096);
  // Moved within the class (it scrubs: a reallocation that grows moves and zeroes the old block).
  const Block grown = pool->Reallocate(a, 3 * 4096);
  ASSERT_TRUE(grown);
  EXPECT_GE(pool->UsableSize(grown.data()), 3 * 4096u);
  EXPECT_TRUE(Scrubbed(a.data(), 4096)) << "the class's scrub ran on the old block";
  std::memset(grown.data(), 0xcd, 3 * 4096);
  pool->Deallocate(grown);
  EXPECT_TRUE(Scrubbed(grown.data(), 3 * 4096)) << "freed through the class's scrub";
  const std::vector<ClassStats> classes = pool->GetStats().classes;
  ASSERT_EQ(classes.size(), 2u);
  EXPECT_GE(classes[1].scrubbed_bytes, 4 * 4096u);
  pool->Deallocate(keep);
}

TEST(OwnerDispatch, AnArraysRunIsGrantableWhileItLivesAndIsNoHeapsBlock) {
  auto pool = testing::MakePool({.domains = {std::make_shared<CountingDomain>()}});
  ASSERT_NE(pool, nullptr);
  absl::StatusOr<Array> a = pool->AllocateArray(2 * 512, 4096, 4096);  // two chunks
  ASSERT_TRUE(a.ok()) << a.status();
  void* run = a->Element(0).data();
  const Block whole = a->Run(0);
  {
    GrantLock lock(*pool);
    EXPECT_TRUE(lock.CheckLive(whole).ok()) << lock.CheckLive(whole);
  }
  // Not a block of any heap (pool.h: what is not a block's start aborts), a run or an element.
  void* element = a->Element(3).data();
  for (void* p : {run, element}) {
    EXPECT_DEATH(pool->UsableSize(p),
                 "UsableSize\\(0x[0-9a-f]+\\): not a block: it lies in a chunk of an array");
    EXPECT_DEATH(pool->Deallocate(p),
                 "Deallocate\\(0x[0-9a-f]+\\): not a block: it lies in a chunk of an array");
    EXPECT_DEATH(pool->Reallocate(p, 64),
                 "Reallocate\\(0x[0-9a-f]+\\): not a block: it lies in a chunk of an array");
  }
  pool->Deallocate(std::move(*a));
  GrantLock lock(*pool);
  EXPECT_FALSE(lock.CheckLive(whole).ok()) << "the array is freed";
}

TEST(OwnerDispatch, ABlockOfAChunkGivenBackIsLost) {
  auto pool = MakeClassPool();
  ASSERT_NE(pool, nullptr);
  const ClassId rx = pool->ClassOf("rx").value();
  const Block plain = pool->Allocate(4096), classy = pool->Allocate(rx, 4096);
  ASSERT_TRUE(plain && classy);
  ASSERT_NE(plain.chunk().index, classy.chunk().index);
  ASSERT_TRUE(pool->GiveBack(plain.data()).ok());
  ASSERT_TRUE(pool->GiveBack(classy.data()).ok());
  EXPECT_EQ(pool->TakeLostChunks().size(), 2u);
  for (const Block& b : {plain, classy}) {
    EXPECT_EQ(pool->UsableSize(b.data()), 0u);
    EXPECT_FALSE(pool->Reallocate(b, 8192));
    {
      GrantLock lock(*pool);
      EXPECT_EQ(lock.CheckLive(b).code(), absl::StatusCode::kInvalidArgument) << "no chunk now";
    }
    const std::uint64_t before = pool->GetStats().lost_block_frees;
    pool->Deallocate(b);  // accepted
    EXPECT_EQ(pool->GetStats().lost_block_frees, before + 1);
  }
}

TEST(OwnerDispatch, AnAddressInNoChunkAborts) {
  auto pool = testing::MakePool({.domains = {std::make_shared<CountingDomain>()}});
  ASSERT_NE(pool, nullptr);
  const Block b = pool->Allocate(64);  // one chunk mapped; the next slot has none
  ASSERT_TRUE(b);
  int on_stack = 0;
  void* unmapped_slot = reinterpret_cast<char*>(b.chunk().base) + b.chunk().size;
  for (void* p : {static_cast<void*>(&on_stack), unmapped_slot}) {
    EXPECT_DEATH(pool->Deallocate(p), "Deallocate\\(0x[0-9a-f]+\\): not memory of this pool");
    EXPECT_DEATH(pool->UsableSize(p), "UsableSize\\(0x[0-9a-f]+\\): not memory of this pool");
    EXPECT_DEATH(pool->Reallocate(p, 128), "Reallocate\\(0x[0-9a-f]+\\): not memory of this pool");
  }
  pool->Deallocate(b);
}

}  // namespace
}  // namespace pinpool
