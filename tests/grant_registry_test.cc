// GrantRegistry on its own (no device needed): a granted block's chunk is tagged so its frees
// take the slow path; freeing a granted block holds it and asks every holder to revoke; it is
// released (with the size its free named) only when its last grant ended, at once when the
// revocation is synchronous; a second free of a held block is reported; counts are exact.
#include "pool/grant_registry.h"

#include <gtest/gtest.h>

#include <memory>
#include <utility>
#include <vector>

#include "arena/arena.h"
#include "pinpool/options.h"
#include "support/counting_domain.h"

namespace pinpool::internal {
namespace {

// A holder that records revocation requests, and ends the grant at once when told to (as a
// range region's synchronous deregistration does).
class FakeHolder final : public GrantHolder {
 public:
  FakeHolder(GrantRegistry& registry, bool synchronous)
      : registry_(registry), synchronous_(synchronous) {}
  void RevokeForFreeLocked(std::uint64_t id) override ABSL_NO_THREAD_SAFETY_ANALYSIS {
    revoked.push_back(id);
    if (synchronous_) registry_.EndLocked(blocks.at(id), this, id);
  }
  std::vector<std::uint64_t> revoked;
  std::map<std::uint64_t, void*> blocks;  // id -> block, for synchronous ends

 private:
  GrantRegistry& registry_;
  const bool synchronous_;
};

class GrantRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    arena_ = Arena::Create({.chunk_size = 2 * kMiB,
                            .max_chunks = 4,
                            .domains = {std::make_shared<pinpool::testing::CountingDomain>()}})
                 .value();
    ASSERT_TRUE(arena_->Reserve(4 * kMiB).ok());
    registry_ = std::make_unique<GrantRegistry>(arena_.get());
    base_ = reinterpret_cast<char*>(arena_->range_base());
  }

  bool Tagged(const void* p) const { return (arena_->EntryOf(p) & Arena::kSlowFreeTag) != 0; }

  std::unique_ptr<Arena> arena_;
  std::unique_ptr<GrantRegistry> registry_;
  char* base_ = nullptr;
};

TEST_F(GrantRegistryTest, AGrantTagsItsChunkUntilItsLastGrantedBlockIsGone) {
  FakeHolder h(*registry_, false);
  void* a = base_ + 4096;
  void* b = base_ + 8192;
  void* other_chunk = base_ + 2 * kMiB;
  MutexLock lock(&registry_->mu());
  EXPECT_FALSE(Tagged(a));
  registry_->AddLocked(a, 4096, &h, 1);
  EXPECT_TRUE(Tagged(a));
  EXPECT_TRUE(Tagged(b)) << "the tag is per chunk";
  EXPECT_FALSE(Tagged(other_chunk));
  EXPECT_NE(arena_->ChunkOf(a), nullptr) << "the tag does not hide the chunk";
  EXPECT_EQ(arena_->ChunkOf(a), Arena::EntryChunk(arena_->EntryOf(a)));
  registry_->AddLocked(b, 4096, &h, 2);
  registry_->EndLocked(a, &h, 1);
  EXPECT_TRUE(Tagged(a)) << "b still has a grant";
  EXPECT_FALSE(registry_->ReachableLocked(a));
  EXPECT_TRUE(registry_->ReachableLocked(b));
  registry_->EndLocked(b, &h, 2);
  EXPECT_FALSE(Tagged(a));
  EXPECT_TRUE(registry_->TakeReleasedLocked().empty()) << "nothing was freed";
}

TEST_F(GrantRegistryTest, AFreedGrantedBlockIsHeldUntilItsLastGrantEnds) {
  FakeHolder h1(*registry_, false), h2(*registry_, false);
  void* a = base_ + 65536;
  MutexLock lock(&registry_->mu());
  registry_->AddLocked(a, 1000, &h1, 7);
  registry_->AddLocked(a, 1000, &h2, 8);
  EXPECT_EQ(registry_->OnFreeLocked(base_ + 128, 64), GrantRegistry::FreeOutcome::kNotGranted);
  EXPECT_EQ(registry_->OnFreeLocked(a, 1000), GrantRegistry::FreeOutcome::kHeld);
  EXPECT_EQ(h1.revoked, std::vector<std::uint64_t>{7});
  EXPECT_EQ(h2.revoked, std::vector<std::uint64_t>{8});
  EXPECT_TRUE(registry_->HeldLocked(a));
  EXPECT_EQ(registry_->countersLocked().held_blocks, 1u);
  EXPECT_EQ(registry_->countersLocked().held_bytes, 1000u);
  EXPECT_EQ(registry_->OnFreeLocked(a, 1000), GrantRegistry::FreeOutcome::kAlreadyHeld);

  registry_->EndLocked(a, &h1, 7);
  EXPECT_TRUE(registry_->TakeReleasedLocked().empty()) << "one grant still reaches it";
  EXPECT_TRUE(Tagged(a));
  registry_->EndLocked(a, &h2, 8);
  const std::vector<GrantRegistry::Released> released = registry_->TakeReleasedLocked();
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0].block, a);
  EXPECT_EQ(released[0].size, 1000u) << "the size the free named";
  EXPECT_FALSE(Tagged(a));
  EXPECT_FALSE(registry_->HeldLocked(a));
  EXPECT_EQ(registry_->countersLocked().held_blocks, 0u);
  EXPECT_EQ(registry_->countersLocked().held_bytes, 0u);
  EXPECT_EQ(registry_->countersLocked().held_ever, 1u);
  EXPECT_TRUE(registry_->TakeReleasedLocked().empty());
}

TEST_F(GrantRegistryTest, ASynchronousRevocationReleasesTheBlockAtOnce) {
  FakeHolder h(*registry_, true);
  void* a = base_ + 3 * kMiB;
  h.blocks[5] = a;
  MutexLock lock(&registry_->mu());
  registry_->AddLocked(a, 4096, &h, 5);
  EXPECT_EQ(registry_->OnFreeLocked(a, 0), GrantRegistry::FreeOutcome::kHeld);
  const std::vector<GrantRegistry::Released> released = registry_->TakeReleasedLocked();
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0].block, a);
  EXPECT_EQ(released[0].size, 0u) << "freed by address: size unknown";
  EXPECT_FALSE(Tagged(a));
  EXPECT_FALSE(registry_->ReachableLocked(a));
}

TEST_F(GrantRegistryTest, HoldersAreCountedForThePoolsDestruction) {
  {
    MutexLock lock(&registry_->mu());
    registry_->AddHolderLocked();
    registry_->AddHolderLocked();
    registry_->RemoveHolderLocked();
  }
  EXPECT_EQ(registry_->holders(), 1u);
  EXPECT_EQ(registry_->Stats().connections, 1u);
}

}  // namespace
}  // namespace pinpool::internal
