// The arena's owner record (src/arena/chunk_owner.h): each transition the contract lists, seen
// through Arena::OwnerOf. A published chunk is nobody's; Carve gives it to the owner its caller
// names (a heap and its class, an array); an array's run is held and then returned; BeginGiveBack
// withdraws it for good and returns the owner it had (kept in `was`, with the class); ReturnChunk
// and HoldArrayRun leave a withdrawn chunk alone; Trim unmaps an unowned chunk. Addresses outside
// the range or in slots with no chunk are kUnmapped.
#include <gtest/gtest.h>

#include <memory>

#include "arena/arena.h"
#include "pinpool/options.h"
#include "support/counting_domain.h"

namespace pinpool {
namespace {

using internal::ChunkOwner;
using pinpool::testing::CountingDomain;

constexpr std::size_t kChunk = 2 * kMiB;

TEST(ChunkOwner, EachTransitionOfTheArenaShowsInOwnerOf) {
  auto d = std::make_shared<CountingDomain>();
  internal::ArenaConfig config{.chunk_size = kChunk, .max_chunks = 4, .domains = {d}};
  auto arena = internal::Arena::Create(std::move(config)).value();
  const std::uintptr_t base = arena->range_base();
  const auto at = [&](std::size_t i) { return reinterpret_cast<void*>(base + i * kChunk); };
  const auto kind = [&](std::size_t i) { return arena->OwnerOf(at(i)).kind; };

  EXPECT_EQ(kind(0), ChunkOwner::kUnmapped) << "nothing grown yet";
  ASSERT_TRUE(arena->Reserve(2 * kChunk).ok());
  EXPECT_EQ(kind(0), ChunkOwner::kUnowned);
  EXPECT_EQ(kind(1), ChunkOwner::kUnowned);
  EXPECT_EQ(kind(2), ChunkOwner::kUnmapped);
  EXPECT_EQ(kind(4), ChunkOwner::kUnmapped) << "past the range";
  EXPECT_EQ(arena->OwnerOf(reinterpret_cast<void*>(base - 1)).kind, ChunkOwner::kUnmapped);

  // Carve: the first carve of a chunk names its owner; later carves in it keep that owner.
  ASSERT_EQ(arena->Carve(kChunk / 2, 4096, ChunkOwner::Heap(3)), at(0));
  EXPECT_EQ(kind(0), ChunkOwner::kHeap);
  EXPECT_EQ(arena->OwnerOf(at(0)).heap_class, 3);
  ASSERT_NE(arena->Carve(kChunk / 4, 4096, ChunkOwner::Heap(3)), nullptr);
  EXPECT_EQ(arena->OwnerOf(at(0)).heap_class, 3);
  ASSERT_EQ(arena->Carve(kChunk, kChunk, ChunkOwner::Array()), at(1));
  EXPECT_EQ(kind(1), ChunkOwner::kArray);
  EXPECT_EQ(arena->OwnerOf(at(1)).heap_class, 0);

  // An array's run: held, then returned (nobody's again, carvable again).
  EXPECT_TRUE(arena->HoldArrayRun(at(1)));
  EXPECT_EQ(kind(1), ChunkOwner::kArrayHeld);
  arena->ReturnChunk(at(1));
  EXPECT_EQ(kind(1), ChunkOwner::kUnowned);

  // Withdrawn: the owner it had comes back, and stays in the record.
  const absl::StatusOr<ChunkOwner> was = arena->BeginGiveBack(0);
  ASSERT_TRUE(was.ok()) << was.status();
  EXPECT_EQ(was->kind, ChunkOwner::kHeap);
  EXPECT_EQ(was->heap_class, 3);
  EXPECT_EQ(kind(0), ChunkOwner::kWithdrawn);
  EXPECT_EQ(arena->OwnerOf(at(0)).was, ChunkOwner::kHeap);
  EXPECT_EQ(arena->OwnerOf(at(0)).heap_class, 3) << "a late free still finds the class's heap";
  EXPECT_TRUE(arena->Withdrawn(at(0)));
  arena->ReturnChunk(at(0));  // the heap letting go of it: ignored
  EXPECT_EQ(kind(0), ChunkOwner::kWithdrawn);
  EXPECT_FALSE(arena->HoldArrayRun(at(0))) << "a withdrawn run is lost, not held";
  EXPECT_EQ(kind(0), ChunkOwner::kWithdrawn);
  EXPECT_EQ(arena->BeginGiveBack(0).status().code(), absl::StatusCode::kFailedPrecondition);

  // Trim unmaps the unowned chunk; a given-back one stays withdrawn for good.
  EXPECT_EQ(arena->Trim(0), kChunk);
  EXPECT_EQ(kind(1), ChunkOwner::kUnmapped);
  arena->FinishGiveBack(0);
  EXPECT_EQ(kind(0), ChunkOwner::kWithdrawn);
  EXPECT_EQ(arena->ChunkOf(at(0)), nullptr);

  // A withdrawn array run keeps what it was.
  ASSERT_TRUE(arena->Reserve(kChunk).ok());
  void* run = arena->Carve(kChunk, kChunk, ChunkOwner::Array());
  ASSERT_NE(run, nullptr);
  const std::uint32_t index =
      static_cast<std::uint32_t>((reinterpret_cast<std::uintptr_t>(run) - base) / kChunk);
  const absl::StatusOr<ChunkOwner> array_was = arena->BeginGiveBack(index);
  ASSERT_TRUE(array_was.ok());
  EXPECT_EQ(array_was->kind, ChunkOwner::kArray);
  EXPECT_EQ(arena->OwnerOf(run).was, ChunkOwner::kArray);
  arena->FinishGiveBack(index);
}

}  // namespace
}  // namespace pinpool
