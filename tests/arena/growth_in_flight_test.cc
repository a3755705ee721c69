// The process's chunks in flight (src/arena/growth_in_flight.h):
//  - the counters: a claim adds and is checked with the totals, a refused claim is taken back, an
//    unclaim ends it, and a forked child starts at zero;
//  - through two pools: a chunk one pool holds in flight (at a fake domain's gate) counts against
//    another pool's RLIMIT_MEMLOCK headroom, so the second is refused where, each counting only
//    its own, both would have passed; once the first chunk is published or its build fails, the
//    room is there again.
#include "arena/growth_in_flight.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <future>
#include <memory>
#include <string>

#include "pinpool/pool.h"
#include "support/counting_domain.h"
#include "support/unprivileged.h"

namespace pinpool {
namespace {

using internal::ClaimGrowth;
using internal::GrowthCharge;
using internal::GrowthInFlight;
using internal::UnclaimGrowth;
using pinpool::testing::CountingDomain;
using ::testing::HasSubstr;

constexpr std::size_t kChunk = 2 * kMiB;

absl::Status Accept(const GrowthCharge&) { return absl::OkStatus(); }

TEST(GrowthInFlight, ClaimsAddUpAndEnd) {
  const GrowthCharge base = GrowthInFlight();
  const GrowthCharge chunk{2 * kChunk, kChunk, 3 * kChunk};
  GrowthCharge seen;
  ASSERT_TRUE(ClaimGrowth(chunk, [&](const GrowthCharge& t) {
                seen = t;
                return absl::OkStatus();
              }).ok());
  EXPECT_EQ(seen.pin, base.pin + 2 * kChunk) << "checked with the chunk itself";
  EXPECT_EQ(seen.lock, base.lock + kChunk);
  EXPECT_EQ(seen.cgroup, base.cgroup + 3 * kChunk);
  ASSERT_TRUE(ClaimGrowth(chunk, [&](const GrowthCharge& t) {
                seen = t;
                return absl::OkStatus();
              }).ok());
  EXPECT_EQ(seen.pin, base.pin + 4 * kChunk) << "and with the claim before it";
  UnclaimGrowth(chunk);
  UnclaimGrowth(chunk);
  EXPECT_EQ(GrowthInFlight().pin, base.pin);
  EXPECT_EQ(GrowthInFlight().lock, base.lock);
  EXPECT_EQ(GrowthInFlight().cgroup, base.cgroup);
}

TEST(GrowthInFlight, ARefusedClaimIsTakenBack) {
  const GrowthCharge base = GrowthInFlight();
  const absl::Status s = ClaimGrowth(
      {kChunk, 0, 0}, [](const GrowthCharge&) { return absl::ResourceExhaustedError("no room"); });
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "no room");
  EXPECT_EQ(GrowthInFlight().pin, base.pin);
}

TEST(GrowthInFlight, AForkedChildStartsAtZero) {
  ASSERT_TRUE(ClaimGrowth({kChunk, kChunk, kChunk}, Accept).ok());
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const GrowthCharge t = GrowthInFlight();
    _exit(t.pin == 0 && t.lock == 0 && t.cgroup == 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the child saw its parent's claim as its own";
  EXPECT_GE(GrowthInFlight().pin, kChunk) << "the parent's claim is still the parent's";
  UnclaimGrowth({kChunk, kChunk, kChunk});
}

// A pool of 2 MiB chunks whose fake domain says it pins long-term (so its growth is checked
// against RLIMIT_MEMLOCK, though nothing is pinned and VmPin stays where it is).
std::unique_ptr<Pool> PinningPool(std::shared_ptr<CountingDomain> d) {
  PoolOptions o;
  o.chunk_size = kChunk;
  o.budget = 8 * kChunk;
  o.page_size = PageSize::k4K;
  o.populate = false;
  o.numa_node = kNoNumaNode;
  o.grow_in_background = false;
  o.domains = {std::move(d)};
  return Pool::Create(o).value();
}

TEST(GrowthInFlight, AnotherPoolsChunkInFlightCountsAgainstTheMemlockLimit) {
  // Unprivileged with 4 MiB of RLIMIT_MEMLOCK: room for two chunks in all.
  testing::RunAsUnprivileged(
      [] {
        auto gated = std::make_shared<CountingDomain>("gated", Pinning::kLongTerm);
        gated->SetGate(false);
        auto first = PinningPool(gated);
        std::future<absl::Status> held =
            std::async(std::launch::async, [&] { return first->Reserve(kChunk); });
        gated->AwaitAtGate(1);  // first's chunk is in flight: claimed, not published

        auto other = std::make_shared<CountingDomain>("other", Pinning::kLongTerm);
        auto second = PinningPool(other);
        const absl::Status refused = second->Reserve(2 * kChunk);
        EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
        EXPECT_THAT(std::string(refused.message()),
                    AllOf(HasSubstr("1 chunk(s) added"), HasSubstr("RLIMIT_MEMLOCK is 4 MiB"),
                          HasSubstr("pinning 6 MiB more"), HasSubstr("PoolOptions::budget")))
            << "the second chunk, with its first and the first pool's in flight";
        EXPECT_EQ(second->GetStats().chunks.size(), 1u);

        gated->SetGate(true);
        EXPECT_TRUE(held.get().ok());
        EXPECT_TRUE(second->Reserve(2 * kChunk).ok())
            << "published, the first pool's chunk is no longer in flight (and the fake pins "
               "nothing, so VmPin has room)";

        // A build that fails ends its claim as well.
        auto failing = std::make_shared<CountingDomain>("failing", Pinning::kLongTerm);
        failing->FailRegistration(1);
        auto third = PinningPool(failing);
        EXPECT_EQ(third->Reserve(kChunk).code(), absl::StatusCode::kResourceExhausted);
        EXPECT_TRUE(third->Reserve(2 * kChunk).ok()) << "the failed chunk still counted";
        EXPECT_EQ(GrowthInFlight().pin, 0u);
      },
      4 * kMiB);
}

}  // namespace
}  // namespace pinpool
