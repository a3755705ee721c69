// Growth off the allocation path and parallel start-up, with counting fake domains that can take
// their time, hold registrations at a gate, and count how many ran at once:
//  - Reserve builds chunks on several threads at once, but never calls a domain that did not opt
//    in concurrently; a registration failing in a worker is reported, nothing half-registered;
//  - nobody waits for a lock held across a registration: while one chunk is held at the gate,
//    stats and allocations that fit are served, and an allocation that needs room waits for that
//    chunk instead of growing another;
//  - the low watermark is kept by the pool's thread (allocations then never grow the pool
//    themselves) and by Replenish from the application's loop; a background failure is reported
//    through the pool.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "pinpool/pool.h"
#include "support/counting_domain.h"
#include "support/wait_until.h"

namespace pinpool {
namespace {

using pinpool::testing::CountingDomain;
using ::testing::HasSubstr;

constexpr std::size_t kChunk = 2 * kMiB;

PoolOptions Options(std::shared_ptr<Domain> domain) {
  PoolOptions o;
  o.chunk_size = kChunk;
  o.budget = 16 * kChunk;
  o.page_size = PageSize::k4K;
  o.populate = false;  // the fakes do not need the pages; keeps the tests fast
  o.numa_node = kNoNumaNode;
  o.domains = {std::move(domain)};
  return o;
}

// Every domain holds exactly the chunks the pool reports, with the keys it reports.
void ExpectWhole(const Pool& pool, const CountingDomain& d, std::size_t index = 0) {
  const PoolStats s = pool.GetStats();
  EXPECT_EQ(d.live_registrations(), s.chunks.size());
  EXPECT_EQ(d.bad_deregisters(), 0u);
  EXPECT_EQ(s.domains[index].registered_bytes, s.chunks.size() * kChunk);
  for (const ChunkStats& c : s.chunks) {
    Keys k;
    ASSERT_TRUE(d.KeysFor(c.base, &k)) << "chunk " << c.index << " is not registered";
    EXPECT_EQ(ToUnderlying(k.lkey), ToUnderlying(c.keys[index].lkey));
  }
}

TEST(ParallelReserve, BuildsChunksOnSeveralThreadsAtOnce) {
  auto d = std::make_shared<CountingDomain>("parallel");
  d->set_concurrent(true);
  d->set_delay(std::chrono::milliseconds(20));
  PoolOptions o = Options(d);
  o.reserve_threads = 4;
  o.initial_size = 8 * kChunk;
  auto pool = Pool::Create(o).value();
  EXPECT_EQ(d->register_calls(), 8u);
  EXPECT_GE(d->max_in_flight(), 2) << "Reserve registered one chunk at a time";
  ExpectWhole(*pool, *d);
  const PoolStats s = pool->GetStats();
  EXPECT_GE(s.growth.seconds_to_first_chunk, 0);
  EXPECT_GE(s.growth.seconds_to_initial_size, s.growth.seconds_to_first_chunk);
  EXPECT_EQ(s.growth.chunks_growing, 0u);
}

TEST(ParallelReserve, NeverCallsADomainConcurrentlyThatDidNotOptIn) {
  auto d = std::make_shared<CountingDomain>("serial");  // concurrent_registration() false
  d->set_delay(std::chrono::milliseconds(10));
  PoolOptions o = Options(d);
  o.reserve_threads = 4;
  o.initial_size = 6 * kChunk;
  auto pool = Pool::Create(o).value();
  EXPECT_EQ(d->register_calls(), 6u);
  EXPECT_EQ(d->max_in_flight(), 1);
  ExpectWhole(*pool, *d);
}

TEST(ParallelReserve, AFailingWorkerIsReportedAndLeavesNothingHalfRegistered) {
  auto d = std::make_shared<CountingDomain>("fails");
  auto e = std::make_shared<CountingDomain>("second");
  d->set_concurrent(true);
  e->set_concurrent(true);
  PoolOptions o = Options(d);
  o.domains.push_back(e);
  o.reserve_threads = 3;
  auto pool = Pool::Create(o).value();
  e->FailRegistration(2);  // d has registered that chunk: it must be undone
  const absl::Status s = pool->Reserve(6 * kChunk);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr("Reserve(12 MiB)"), HasSubstr("domain 1 (second)"),
                    HasSubstr("injected registration failure")));
  EXPECT_EQ(pool->last_growth_error().message(),
            s.message().substr(s.message().find("then: ") + 6));
  const PoolStats st = pool->GetStats();
  EXPECT_EQ(st.growth_failures, 1u);
  EXPECT_EQ(st.growth.chunks_growing, 0u);
  EXPECT_LT(st.chunks.size(), 6u);
  ExpectWhole(*pool, *d);
  ExpectWhole(*pool, *e, 1);
  EXPECT_EQ(d->live_registrations(), e->live_registrations());
  // And it grows on afterwards.
  ASSERT_TRUE(pool->Reserve(6 * kChunk).ok());
  EXPECT_EQ(pool->GetStats().chunks.size(), 6u);
  ExpectWhole(*pool, *d);
}

// Runs `f` on another thread; true when it finished within `seconds` (then it was not waiting
// for the registration held at the gate). The thread is left in `pending`, to be joined once the
// gate is open (a std::async future would wait for it when destroyed).
template <typename F>
bool FinishesWithin(double seconds, F f, std::vector<std::future<void>>& pending) {
  pending.push_back(std::async(std::launch::async, std::move(f)));
  return pending.back().wait_for(std::chrono::duration<double>(seconds)) ==
         std::future_status::ready;
}

TEST(GrowthOffTheLock, NoOneWaitsForALockHeldAcrossARegistration) {
  auto d = std::make_shared<CountingDomain>("gated");
  d->set_concurrent(true);
  PoolOptions o = Options(d);
  o.initial_size = kChunk;
  o.low_watermark = 2 * kChunk;
  o.grow_in_background = false;
  auto pool = Pool::Create(o).value();
  Block first = pool->Allocate(kChunk / 4);
  ASSERT_TRUE(first);

  // Replenish holds the next chunk at the gate, mid-registration.
  d->SetGate(false);
  std::future<absl::Status> replenish =
      std::async(std::launch::async, [&] { return pool->Replenish(1); });
  d->AwaitAtGate(1);

  std::vector<std::future<void>> pending;
  PoolStats during;
  EXPECT_TRUE(FinishesWithin(
      5, [&] { during = pool->GetStats(); }, pending))
      << "GetStats waited for the registration";
  Block fits;
  EXPECT_TRUE(FinishesWithin(
      5, [&] { fits = pool->Allocate(kChunk / 4); }, pending))
      << "an allocation that fits waited for the registration";

  // An allocation that needs the chunk in flight waits for it, and does not grow another.
  Block big;
  EXPECT_FALSE(FinishesWithin(
      0.2, [&] { big = pool->Allocate(kChunk * 3 / 4); }, pending));
  d->SetGate(true);
  for (std::future<void>& f : pending) f.get();
  EXPECT_EQ(during.growth.chunks_growing, 1u);
  EXPECT_TRUE(fits);
  ASSERT_TRUE(replenish.get().ok());
  ASSERT_TRUE(big);
  const PoolStats after = pool->GetStats();
  EXPECT_EQ(after.growth.growth_waits, 1u);
  EXPECT_EQ(after.growth.allocation_growths, 0u) << "the waiting allocation grew a chunk itself";
  EXPECT_EQ(after.chunks.size(), 2u);
  ExpectWhole(*pool, *d);
  pool->Deallocate(first);
  pool->Deallocate(fits);
  pool->Deallocate(big);
}

// Allocates `blocks` blocks of `size` with `pause` between them; returns them.
std::vector<Block> Steady(Pool& pool, int blocks, std::size_t size,
                          std::chrono::microseconds pause) {
  std::vector<Block> out;
  for (int i = 0; i < blocks; ++i) {
    out.push_back(pool.Allocate(size));
    EXPECT_TRUE(out.back());
    std::this_thread::sleep_for(pause);
  }
  return out;
}

TEST(Watermark, ThePoolsThreadKeepsAllocationsFromGrowingThePool) {
  for (const bool watermark : {true, false}) {
    SCOPED_TRACE(watermark ? "with a watermark" : "without");
    auto d = std::make_shared<CountingDomain>("slow");
    d->set_concurrent(true);
    d->set_delay(std::chrono::milliseconds(5));
    PoolOptions o = Options(d);
    o.initial_size = kChunk;
    o.low_watermark = watermark ? 2 * kChunk : 0;
    auto pool = Pool::Create(o).value();
    // 6 chunks' worth, a 64 KiB block every 0.5 ms: ~16 ms per chunk, the grower needs ~5.
    std::vector<Block> blocks = Steady(*pool, 6 * 32, 64 * kKiB, std::chrono::microseconds(500));
    const PoolStats s = pool->GetStats();
    if (watermark) {
      EXPECT_EQ(s.growth.allocation_growths, 0u);
      EXPECT_GE(s.growth.background_growths, 5u);
      EXPECT_EQ(s.growth.low_watermark, 2 * kChunk);
    } else {
      EXPECT_GE(s.growth.allocation_growths, 5u);
      EXPECT_EQ(s.growth.background_growths, 0u);
    }
    for (const Block& b : blocks) pool->Deallocate(b);
    // The keeper may still be adding the chunk it started before the frees (registered, not yet
    // in the stats): compare once nothing is in flight.
    testing::WaitUntil([&] { return pool->GetStats().growth.chunks_growing == 0; },
                       std::chrono::seconds(10));
    ExpectWhole(*pool, *d);
  }
}

TEST(Watermark, ReplenishKeepsItFromTheApplicationsLoop) {
  auto d = std::make_shared<CountingDomain>("loop");
  PoolOptions o = Options(d);
  o.initial_size = kChunk;
  o.low_watermark = 2 * kChunk;
  o.grow_in_background = false;
  auto pool = Pool::Create(o).value();
  EXPECT_TRUE(pool->NeedsReplenish()) << "2 MiB of room, 4 MiB watermark";
  ASSERT_TRUE(pool->Replenish().ok());
  EXPECT_FALSE(pool->NeedsReplenish());
  EXPECT_EQ(pool->GetStats().chunks.size(), 2u);
  std::vector<Block> blocks;
  for (int i = 0; i < 40; ++i) {  // a bit more than one chunk
    blocks.push_back(pool->Allocate(64 * kKiB));
    if (pool->NeedsReplenish()) {  // the event loop's turn
      ASSERT_TRUE(pool->Replenish(1).ok());
    }
  }
  const PoolStats s = pool->GetStats();
  EXPECT_GE(s.growth.room_bytes + s.growth.chunks_growing * kChunk, 2 * kChunk);
  EXPECT_EQ(s.growth.allocation_growths, 0u);
  EXPECT_GE(s.growth.background_growths, 2u);
  for (const Block& b : blocks) pool->Deallocate(b);
  ExpectWhole(*pool, *d);
}

TEST(Watermark, ABackgroundFailureIsReportedThroughThePool) {
  auto d = std::make_shared<CountingDomain>("refuses");
  d->set_concurrent(true);
  PoolOptions o = Options(d);
  o.initial_size = kChunk;
  auto pool_options = o;
  pool_options.low_watermark = 2 * kChunk;
  d->FailRegistration(2);  // the first is Create's, the second the grower's
  auto pool = Pool::Create(pool_options).value();
  for (int i = 0; i < 500 && pool->GetStats().growth_failures == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const PoolStats s = pool->GetStats();
  EXPECT_GE(s.growth_failures, 1u);
  EXPECT_THAT(std::string(pool->last_growth_error().message()),
              HasSubstr("injected registration failure"));
  // The grower retries after backing off and succeeds.
  for (int i = 0; i < 500 && pool->GetStats().chunks.size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_GE(pool->GetStats().chunks.size(), 2u);
  ExpectWhole(*pool, *d);
}

TEST(Watermark, IsCheckedAgainstTheBudget) {
  PoolOptions o = Options(std::make_shared<CountingDomain>());
  o.low_watermark = o.budget + kChunk;
  const auto pool = Pool::Create(o);
  EXPECT_EQ(pool.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(pool.status().message()), HasSubstr("low_watermark"));
}

}  // namespace
}  // namespace pinpool
