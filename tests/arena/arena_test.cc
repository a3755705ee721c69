// The arena on its own, with counting fake domains: growth by whole chunks published in the
// chunk table (ChunkOf, Carved), registration with every domain or none (a domain refusing
// undoes the others and the mapping), the budget in chunks with an error naming it, Reserve,
// first-fit carving that never hands out the same bytes twice, and its own stats.
#include "arena/arena.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <utility>

#include "pinpool/options.h"
#include "support/counting_domain.h"
#include "support/maps.h"

namespace pinpool::internal {
namespace {

using pinpool::testing::CountingDomain;
using ::testing::HasSubstr;

class ArenaTest : public ::testing::Test {
 protected:
  std::unique_ptr<Arena> Make(std::size_t max_chunks, int domains = 2) {
    ArenaConfig config{.chunk_size = 2 * kMiB, .max_chunks = max_chunks};
    for (int d = 0; d < domains; ++d) {
      domains_.push_back(std::make_shared<CountingDomain>("d" + std::to_string(d)));
      config.domains.push_back(domains_.back());
    }
    absl::StatusOr<std::unique_ptr<Arena>> arena = Arena::Create(std::move(config));
    EXPECT_TRUE(arena.ok()) << arena.status();
    return arena.ok() ? *std::move(arena) : nullptr;
  }
  std::vector<std::shared_ptr<CountingDomain>> domains_;
};

TEST_F(ArenaTest, CarvingGrowsByWholeChunksEachRegisteredWithEveryDomain) {
  std::unique_ptr<Arena> arena = Make(4);
  ASSERT_NE(arena, nullptr);
  EXPECT_EQ(arena->Stats().chunks.size(), 0u) << "nothing is mapped before it is needed";
  void* a = arena->Carve(kMiB, 4096);
  ASSERT_NE(a, nullptr);
  const ChunkInfo* chunk = arena->ChunkOf(a);
  ASSERT_NE(chunk, nullptr);
  EXPECT_EQ(chunk->index, 0u);
  EXPECT_EQ(chunk->domain_count, 2u);
  for (std::size_t d = 0; d < 2; ++d) {
    Keys keys;
    ASSERT_TRUE(domains_[d]->KeysFor(chunk->base, &keys)) << "domain " << d;
    EXPECT_EQ(ToUnderlying(chunk->keys[d].lkey), ToUnderlying(keys.lkey));
    EXPECT_EQ(chunk->keys[d].length, 2 * kMiB);
  }
  EXPECT_TRUE(arena->Carved(a));
  EXPECT_FALSE(arena->Carved(static_cast<char*>(a) + kMiB)) << "the chunk's unused tail";

  // A second MiB fits the first chunk; a third does not, so a second chunk is mapped.
  void* b = arena->Carve(kMiB, 16);
  void* c = arena->Carve(kMiB, 16);
  ASSERT_TRUE(b && c);
  EXPECT_EQ(arena->ChunkOf(b), chunk);
  EXPECT_NE(arena->ChunkOf(c), chunk);
  const ArenaStats s = arena->Stats();
  EXPECT_EQ(s.chunks.size(), 2u);
  EXPECT_EQ(s.domains.size(), 2u);
  EXPECT_EQ(s.domains[0].registrations, 2u);
  EXPECT_EQ(s.domains[1].registered_bytes, 4 * kMiB);
  EXPECT_EQ(s.domains[0].name, "d0");
  EXPECT_EQ(domains_[0]->live_registrations(), 2u);
  // Outside the range, or in a chunk not mapped yet: no chunk.
  EXPECT_EQ(arena->ChunkOf(reinterpret_cast<void*>(arena->range_base() - 1)), nullptr);
  EXPECT_EQ(arena->ChunkOf(reinterpret_cast<void*>(arena->range_base() + 3 * 2 * kMiB)), nullptr);
}

TEST_F(ArenaTest, CarvedSpaceIsNeverHandedOutTwiceAndHonoursAlignment) {
  std::unique_ptr<Arena> arena = Make(2, 1);
  ASSERT_NE(arena, nullptr);
  std::set<std::uintptr_t> starts;
  std::uintptr_t end = 0;
  for (std::size_t align : {16u, 4096u, 65536u, 16u, 1u << 20}) {
    void* p = arena->Carve(4096, align);
    ASSERT_NE(p, nullptr);
    const auto at = reinterpret_cast<std::uintptr_t>(p);
    EXPECT_EQ(at % align, 0u);
    EXPECT_GE(at, end) << "carving is first fit over the unused tail: it only moves forward";
    end = at + 4096;
    EXPECT_TRUE(starts.insert(at).second);
  }
  EXPECT_EQ(arena->Carve(0, 16), nullptr);
  EXPECT_EQ(arena->Carve(4 * kMiB, 16), nullptr) << "larger than a chunk";
  EXPECT_EQ(arena->Carve(16, 3), nullptr) << "not a power of two";
}

TEST_F(ArenaTest, ARefusingDomainUndoesTheOthersAndTheMapping) {
  std::unique_ptr<Arena> arena = Make(4);
  ASSERT_NE(arena, nullptr);
  ASSERT_TRUE(arena->Reserve(2 * kMiB).ok());
  domains_[1]->FailRegistration(1);
  const std::uintptr_t lo = arena->range_base(), hi = lo + 4 * 2 * kMiB;
  const std::uint64_t mapped_before = testing::MappingsIn(lo, hi).read_write;
  const absl::Status s = arena->Reserve(4 * kMiB);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("domain 1 (d1)"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("injected registration failure"));
  EXPECT_EQ(domains_[0]->live_registrations(), 1u) << "domain 0's registration was undone";
  EXPECT_EQ(domains_[1]->live_registrations(), 1u);
  EXPECT_EQ(domains_[0]->bad_deregisters(), 0u);
  EXPECT_EQ(testing::MappingsIn(lo, hi).read_write, mapped_before)
      << "the failed chunk was unmapped";
  EXPECT_EQ(arena->ChunkOf(reinterpret_cast<void*>(arena->range_base() + 2 * kMiB)), nullptr);
  EXPECT_EQ(arena->Stats().growth_failures, 1u);
  EXPECT_EQ(arena->last_growth_error().code(), s.code());
  // The next growth works.
  EXPECT_TRUE(arena->Reserve(4 * kMiB).ok());
  EXPECT_EQ(domains_[0]->live_registrations(), 2u);
}

TEST_F(ArenaTest, TheBudgetIsWholeChunksAndRunningOutSaysSo) {
  std::unique_ptr<Arena> arena = Make(2, 1);
  ASSERT_NE(arena, nullptr);
  EXPECT_EQ(arena->Stats().reserved_bytes, 4 * kMiB);
  ASSERT_NE(arena->Carve(2 * kMiB, 16), nullptr);
  ASSERT_NE(arena->Carve(2 * kMiB, 16), nullptr);
  EXPECT_EQ(arena->Carve(16, 16), nullptr);
  const absl::Status s = arena->last_growth_error();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()), HasSubstr("budget of 4 MiB is used up"));
  EXPECT_EQ(arena->Reserve(6 * kMiB).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(domains_[0]->live_registrations(), 2u);
}

TEST_F(ArenaTest, DestructionDeregistersEveryChunkAndUnmapsTheRange) {
  std::uintptr_t base = 0;
  {
    std::unique_ptr<Arena> arena = Make(4);
    ASSERT_NE(arena, nullptr);
    ASSERT_TRUE(arena->Reserve(6 * kMiB).ok());
    base = arena->range_base();
    EXPECT_EQ(domains_[1]->live_registrations(), 3u);
  }
  for (const auto& d : domains_) {
    EXPECT_EQ(d->live_registrations(), 0u);
    EXPECT_EQ(d->bad_deregisters(), 0u);
  }
  const testing::RangeMappings after = testing::MappingsIn(base, base + 4 * 2 * kMiB);
  EXPECT_EQ(after.read_write + after.none + after.other, 0u) << "the whole range is unmapped";
}

}  // namespace
}  // namespace pinpool::internal
