// The pool's grant bookkeeping through its public face (pinpool/grant_lock.h), with a fake
// remote-access mechanism and no device: freeing a granted block holds it and asks every holder
// to revoke; it is handed out again only when its last grant ended (at once for a synchronous
// revocation); other blocks of the same chunk free and reuse as usual; a second free of a held
// block, resizing a granted block and destroying a pool under a holder are refused; the counts
// are exact.
#include "pinpool/grant_lock.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <vector>

#include "pinpool/pool.h"
#include "support/counting_domain.h"
#include "support/fake_grant_holder.h"
#include "support/make_pool.h"

namespace pinpool {
namespace {

using testing::CountingDomain;

using FakeHolder = testing::FakeGrantHolder;

std::unique_ptr<Pool> MakePool() {
  return testing::MakePool({.budget = 8 * kMiB,
                            .initial_size = 2 * kMiB,
                            .page_size = PoolOptions().page_size,
                            .domains = {std::make_shared<CountingDomain>()}});
}

TEST(GrantLockTest, AFreedGrantedBlockIsHeldUntilItsLastGrantEnds) {
  std::unique_ptr<Pool> pool = MakePool();
  FakeHolder h1(false), h2(false);
  const Block a = pool->Allocate(1000);
  const Block neighbour = pool->Allocate(1000);
  ASSERT_EQ(a.chunk().index, neighbour.chunk().index);
  {
    GrantLock lock(*pool);
    lock.Begin(a, h1, 7);
    lock.Begin(a, h2, 8);
  }
  pool->Deallocate(a);
  EXPECT_EQ(h1.revoked, std::vector<std::uint64_t>{7});
  EXPECT_EQ(h2.revoked, std::vector<std::uint64_t>{8});
  {
    GrantLock lock(*pool);
    EXPECT_TRUE(lock.Held(a.data()));
    EXPECT_FALSE(lock.Held(neighbour.data()));
  }
  GrantStats s = pool->GetStats().grants;
  EXPECT_EQ(s.held_blocks, 1u);
  EXPECT_EQ(s.held_bytes, 1000u);
  // Not handed out while held; the neighbour in the same (tagged) chunk frees and comes back.
  pool->Deallocate(neighbour);
  std::vector<Block> got;
  for (int i = 0; i < 100; ++i) {
    got.push_back(pool->Allocate(1000));
    ASSERT_NE(got.back().data(), a.data()) << "a held block was handed out again";
  }
  EXPECT_EQ(got.front().data(), neighbour.data()) << "other frees in the chunk work as usual";
  for (const Block& b : got) pool->Deallocate(b);

  { GrantLock(*pool).End(a.data(), h1, 7); }
  EXPECT_EQ(pool->GetStats().grants.held_blocks, 1u) << "one grant still reaches it";
  { GrantLock(*pool).End(a.data(), h2, 8); }
  s = pool->GetStats().grants;
  EXPECT_EQ(s.held_blocks, 0u);
  EXPECT_EQ(s.held_bytes, 0u);
  EXPECT_EQ(s.held_ever, 1u);
  const Block again = pool->Allocate(1000);
  EXPECT_EQ(again.data(), a.data()) << "released into this thread's cache (LIFO)";
  pool->Deallocate(again);
}

TEST(GrantLockTest, ASynchronousRevocationReleasesTheBlockAtOnce) {
  std::unique_ptr<Pool> pool = MakePool();
  FakeHolder h(true);
  const Block a = pool->Allocate(4096);
  h.blocks[5] = a.data();
  { GrantLock(*pool).Begin(a, h, 5); }
  pool->Deallocate(a.data());  // by address: the size is looked up
  EXPECT_EQ(h.revoked, std::vector<std::uint64_t>{5});
  EXPECT_EQ(pool->GetStats().grants.held_blocks, 0u);
  const Block again = pool->Allocate(4096);
  EXPECT_EQ(again.data(), a.data());
  pool->Deallocate(again);
}

TEST(GrantLockDeathTest, MisuseOfGrantedBlocksAndPoolsIsRefused) {
  std::unique_ptr<Pool> pool = MakePool();
  FakeHolder h(false);
  const Block a = pool->Allocate(256);
  { GrantLock(*pool).Begin(a, h, 1); }
  EXPECT_FALSE(pool->Reallocate(a, 512)) << "a granted block is never moved";
  pool->Deallocate(a);
  EXPECT_DEATH(pool->Deallocate(a), "still held until its remote grants are revoked");
  {
    GrantLock lock(*pool);
    lock.AddHolder();
  }
  EXPECT_EQ(pool->GetStats().grants.connections, 1u);
  EXPECT_DEATH(pool.reset(), "grant holders .VerbsRemoteAccess, FabricRemoteAccess. still use it");
  {
    GrantLock lock(*pool);
    lock.RemoveHolder();
    lock.End(a.data(), h, 1);
  }
}

// CheckLive, which every grant mechanism calls before it registers anything: a freed block is an
// error to return (never an abort), whether it is held for its grants or back in the heap (in a
// thread cache, or its span given back), and so is a pointer that is no block's start.
TEST(GrantLockTest, CheckLiveTellsAFreedBlockFromALiveOneWithoutAborting) {
  for (const bool debug : {false, true}) {
    SCOPED_TRACE(debug ? "debug_checks" : "default");
    PoolOptions o;
    o.chunk_size = 2 * kMiB;
    o.budget = 8 * kMiB;
    o.initial_size = 2 * kMiB;
    o.debug_checks = debug;
    o.domains = {std::make_shared<CountingDomain>()};
    std::unique_ptr<Pool> pool = Pool::Create(o).value();
    FakeHolder holder(false);
    const Block live = pool->Allocate(1000);
    const Block cached = pool->Allocate(1000);   // freed to the thread cache
    const Block big = pool->Allocate(1 * kMiB);  // freed back to the page heap
    const Block held = pool->Allocate(1000);     // freed while granted: held
    {
      GrantLock lock(*pool);
      lock.Begin(held, holder, 1);
    }
    pool->Deallocate(cached);
    pool->Deallocate(big);
    pool->Deallocate(held);
    GrantLock lock(*pool);
    EXPECT_TRUE(lock.CheckLive(live).ok()) << lock.CheckLive(live);
    for (const Block& freed : {cached, big, held}) {
      const absl::Status s = lock.CheckLive(freed);
      EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
      EXPECT_NE(s.message().find("was freed"), std::string::npos) << s;
    }
    const Block interior(static_cast<char*>(live.data()) + 16, 16, &live.chunk());
    EXPECT_TRUE(absl::IsInvalidArgument(lock.CheckLive(interior))) << lock.CheckLive(interior);
    EXPECT_TRUE(absl::IsInvalidArgument(lock.CheckLive(Block()))) << lock.CheckLive(Block());
    lock.End(held.data(), holder, 1);
  }
}

}  // namespace
}  // namespace pinpool
