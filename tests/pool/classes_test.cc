// Buffer classes (PoolOptions::classes, docs/classes.md): a reservation holds under a runaway
// class on another thread, a class at its cap fails alone with an error naming it, frees of any
// kind find the block's class, stats per class, bad options and ids are refused clearly, and a
// scrubbing class never shows another class a byte it wrote (each policy, under churn).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "pinpool/pool.h"
#include "support/counting_domain.h"

namespace pinpool {
namespace {

using ::testing::AllOf;
using testing::CountingDomain;
using ::testing::HasSubstr;

PoolOptions Options(std::size_t budget, std::vector<BufferClass> classes) {
  PoolOptions o;
  o.chunk_size = 2 * kMiB;
  o.budget = budget;
  o.page_size = PageSize::k4K;
  o.domains.push_back(std::make_shared<CountingDomain>());
  o.classes = std::move(classes);
  return o;
}

const ClassStats& StatsOf(const PoolStats& s, const std::string& name) {
  for (const ClassStats& c : s.classes) {
    if (c.name == name) return c;
  }
  ADD_FAILURE() << "no class " << name;
  static const ClassStats none;
  return none;
}

// The brpc stall: a sender floods its class on one thread (its cap, 160 MiB, is more than the
// pool can give it once the receive class's 64 MiB are kept) while a receiver takes its whole
// reservation on another, starting when the flood is well under way. Every receive allocation
// succeeds; the sender fails alone, with an error naming it and its numbers.
TEST(ClassesTest, ReservationHoldsWhileARunawayClassFloodsOnAnotherThread) {
  auto pool = Pool::Create(Options(192 * kMiB, {{.name = "receive", .reserved = 64 * kMiB},
                                                {.name = "send", .cap = 160 * kMiB}}))
                  .value();
  const ClassId receive = pool->ClassOf("receive").value();
  const ClassId send = pool->ClassOf("send").value();
  EXPECT_EQ(pool->ClassOf("default").value(), kDefaultClass);

  std::atomic<std::size_t> sent_bytes{0};
  std::vector<Block> sent;
  std::thread sender([&] {
    for (Block b; (b = pool->Allocate(send, 64 * kKiB));) {
      sent.push_back(b);
      sent_bytes += b.size();
    }
    // It keeps failing, alone, as it keeps trying.
    for (int i = 0; i < 100; ++i) EXPECT_FALSE(pool->Allocate(send, 4 * kKiB));
  });
  std::vector<Block> received;
  std::thread receiver([&] {
    while (sent_bytes.load() < 64 * kMiB) {
    }
    for (std::size_t bytes = 0; bytes < 64 * kMiB; bytes += 4 * kKiB) {
      Block b = pool->Allocate(receive, 4 * kKiB);
      ASSERT_TRUE(b) << "receive allocation failed after " << bytes
                     << " bytes: " << pool->class_error(receive);
      received.push_back(b);
    }
  });
  sender.join();
  receiver.join();
  EXPECT_EQ(received.size(), 64 * kMiB / (4 * kKiB));
  // The sender held everything but the reservation (a few blocks sit in its cache).
  EXPECT_LE(sent.size() * 64 * kKiB, 128 * kMiB);
  EXPECT_GE(sent.size() * 64 * kKiB, 120 * kMiB);
  const absl::Status error = pool->class_error(send);
  EXPECT_EQ(error.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(error.message()),
              AllOf(HasSubstr("buffer class \"send\" cannot have another chunk"),
                    HasSubstr("holds 64 chunks of 2 MiB (128 MiB), reserved 0 B, cap 160 MiB"),
                    HasSubstr("budget is 192 MiB")));
  EXPECT_TRUE(pool->class_error(receive).ok()) << pool->class_error(receive);
  EXPECT_FALSE(pool->Allocate(1 * kMiB)) << "the default class has nothing left either";

  const PoolStats s = pool->GetStats();
  ASSERT_EQ(s.classes.size(), 3u);
  EXPECT_EQ(s.classes[0].name, "default");
  EXPECT_EQ(StatsOf(s, "receive").reserved_bytes, 64 * kMiB);
  EXPECT_EQ(StatsOf(s, "receive").held_bytes, 64 * kMiB);
  EXPECT_EQ(StatsOf(s, "receive").live_bytes, 64 * kMiB);
  EXPECT_EQ(StatsOf(s, "send").held_bytes, 128 * kMiB);
  EXPECT_EQ(StatsOf(s, "send").cap_bytes, 160 * kMiB);
  EXPECT_GT(StatsOf(s, "send").refusals, 0u);
  EXPECT_EQ(StatsOf(s, "receive").refusals, 0u);

  // Freed receive buffers are re-posted from the class at once, with the sender still flooding.
  for (int round = 0; round < 3; ++round) {
    for (Block& b : received) pool->Deallocate(b);
    for (Block& b : received) {
      b = pool->Allocate(receive, 4 * kKiB);
      ASSERT_TRUE(b);
    }
  }
  for (Block& b : received) pool->Deallocate(b);
  for (Block& b : sent) pool->Deallocate(b);
  EXPECT_EQ(pool->GetStats().live_bytes, 0u);
}

// A class at its cap fails alone, on two threads, while the default class keeps what nobody
// reserved or holds.
TEST(ClassesTest, AClassAtItsCapFailsAloneNamingItsNumbers) {
  auto pool = Pool::Create(Options(192 * kMiB, {{.name = "receive", .reserved = 64 * kMiB},
                                                {.name = "send", .cap = 96 * kMiB}}))
                  .value();
  const ClassId receive = pool->ClassOf("receive").value();
  const ClassId send = pool->ClassOf("send").value();
  std::vector<Block> sent;
  std::thread sender([&] {
    for (Block b; (b = pool->Allocate(send, 64 * kKiB));) sent.push_back(b);
  });
  std::vector<Block> received;
  for (std::size_t bytes = 0; bytes < 64 * kMiB; bytes += 4 * kKiB) {
    received.push_back(pool->Allocate(receive, 4 * kKiB));
    ASSERT_TRUE(received.back());
  }
  sender.join();
  EXPECT_THAT(std::string(pool->class_error(send).message()),
              AllOf(HasSubstr("buffer class \"send\" reached its cap"), HasSubstr("cap 96 MiB"),
                    HasSubstr("holds 48 chunks of 2 MiB (96 MiB)")));
  EXPECT_EQ(pool->GetStats().classes[2].held_bytes, 96 * kMiB);
  // The default class has what nobody reserved or holds: 192 - 64 - 96 = 32 MiB.
  std::vector<Block> other;
  for (Block b; (b = pool->Allocate(1 * kMiB));) other.push_back(b);
  EXPECT_GE(other.size(), 28u);
  EXPECT_LE(other.size(), 32u);
  EXPECT_THAT(std::string(pool->class_error(kDefaultClass).message()),
              HasSubstr("buffer class \"default\" cannot have another chunk"));

  EXPECT_EQ(StatsOf(pool->GetStats(), "default").held_bytes, 32 * kMiB);

  for (Block& b : received) pool->Deallocate(b);
  for (Block& b : sent) pool->Deallocate(b);
  for (Block& b : other) pool->Deallocate(b);
  EXPECT_EQ(pool->GetStats().live_bytes, 0u);
}

// Without a reservation the receive class is what the flood starves: the stall the classes fix
// (and the proof that the test above would see it).
TEST(ClassesTest, WithoutAReservationTheFloodStarvesTheOtherClass) {
  auto pool = Pool::Create(Options(64 * kMiB, {{.name = "receive"}, {.name = "send"}})).value();
  const ClassId receive = pool->ClassOf("receive").value();
  const ClassId send = pool->ClassOf("send").value();
  std::vector<Block> sent;
  for (Block b; (b = pool->Allocate(send, 64 * kKiB));) sent.push_back(b);
  EXPECT_FALSE(pool->Allocate(receive, 4 * kKiB));
  EXPECT_THAT(std::string(pool->class_error(receive).message()),
              HasSubstr("buffer class \"receive\" cannot have another chunk"));
  for (Block& b : sent) pool->Deallocate(b);
}

TEST(ClassesTest, ACapIsNeverExceededAndFreedRoomIsServedAgain) {
  auto pool = Pool::Create(Options(64 * kMiB, {{.name = "small", .cap = 9 * kMiB}})).value();
  const ClassId small = pool->ClassOf("small").value();
  std::vector<Block> blocks;
  for (Block b; (b = pool->Allocate(small, 1 * kMiB));) blocks.push_back(b);
  EXPECT_EQ(blocks.size(), 8u);  // 9 MiB rounds down to 4 chunks of 2 MiB: two 1 MiB blocks each
  EXPECT_EQ(pool->GetStats().classes[1].held_bytes, 8 * kMiB);
  EXPECT_EQ(pool->GetStats().classes[1].cap_bytes, 8 * kMiB);
  EXPECT_THAT(std::string(pool->class_error(small).message()),
              AllOf(HasSubstr("\"small\" reached its cap"), HasSubstr("cap 8 MiB")));
  // The default class is not held back by it.
  Block other = pool->Allocate(1 * kMiB);
  EXPECT_TRUE(other);
  pool->Deallocate(other);
  pool->Deallocate(blocks.back());
  blocks.back() = pool->Allocate(small, 1 * kMiB);
  EXPECT_TRUE(blocks.back());
  for (Block& b : blocks) pool->Deallocate(b);
}

// A class's block freed every way (Block, sized, by address, on another thread), resized and
// measured goes back to its own class, never to the default heap.
TEST(ClassesTest, EveryFreeFindsTheBlocksClass) {
  auto pool = Pool::Create(Options(64 * kMiB, {{.name = "a", .cap = 8 * kMiB}})).value();
  const ClassId a = pool->ClassOf("a").value();
  for (int round = 0; round < 200; ++round) {
    Block b1 = pool->Allocate(a, 100);
    Block b2 = pool->Allocate(a, 5000);
    Block b3 = pool->Allocate(a, 200 * kKiB, 4096);
    ASSERT_TRUE(b1 && b2 && b3);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b3.data()) % 4096, 0u);
    EXPECT_GE(pool->UsableSize(b1.data()), 100u);
    Block moved = pool->Reallocate(b1, 3000);
    ASSERT_TRUE(moved);
    pool->Deallocate(moved.data());
    pool->Deallocate(b2.data(), b2.size());
    std::thread([&] { pool->Deallocate(b3); }).join();
  }
  const PoolStats s = pool->GetStats();
  EXPECT_EQ(s.classes[1].live_bytes, 0u);
  EXPECT_EQ(s.classes[0].held_bytes, 0u) << "nothing of class a went to the default heap";
  EXPECT_LE(s.classes[1].held_bytes, 8 * kMiB);
  EXPECT_EQ(s.live_bytes, 0u);
}

TEST(ClassesTest, StatsPrintEveryClass) {
  auto pool =
      Pool::Create(
          Options(64 * kMiB, {{.name = "rx", .reserved = 4 * kMiB, .scrub = Scrub::kOnReuse}}))
          .value();
  Block b = pool->Allocate(pool->ClassOf("rx").value(), 1000);
  const PoolStats s = pool->GetStats();
  EXPECT_EQ(StatsOf(s, "rx").live_bytes, 1024u);
  EXPECT_THAT(s.ToJson(),
              AllOf(HasSubstr("\"classes\": [\n    {\n      \"name\": \"default\""),
                    HasSubstr("\"name\": \"rx\""), HasSubstr("\"scrub\": \"on_reuse\"")));
  EXPECT_THAT(s.ToOpenMetrics(), HasSubstr("pinpool_class_reserved_bytes{class=\"rx\""));
  EXPECT_THAT(s.ToString(), HasSubstr("classes (2)"));
  pool->Deallocate(b);
  EXPECT_EQ(StatsOf(pool->GetStats(), "rx").scrubbed_bytes, 1024u);
  // A pool without named classes reports none.
  auto plain = Pool::Create(Options(16 * kMiB, {})).value();
  EXPECT_TRUE(plain->GetStats().classes.empty());
  EXPECT_EQ(plain->ClassOf("default").value(), kDefaultClass);
  EXPECT_EQ(plain->ClassOf("rx").status().code(), absl::StatusCode::kNotFound);
}

TEST(ClassesTest, BadClassesAreRefusedNamingTheClass) {
  const auto error = [](std::size_t budget, std::vector<BufferClass> classes) {
    const auto pool = Pool::Create(Options(budget, std::move(classes)));
    EXPECT_EQ(pool.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(pool.status().message());
  };
  EXPECT_THAT(
      error(64 * kMiB,
            {{.name = "rx", .reserved = 40 * kMiB}, {.name = "tx", .reserved = 30 * kMiB}}),
      AllOf(HasSubstr("rx: 40 MiB, tx: 30 MiB"), HasSubstr("more than the budget (64 MiB)")));
  // Reservations round up to chunks: 3 x 21 MiB is 66 MiB in chunks of 2 MiB.
  EXPECT_THAT(error(64 * kMiB, {{.name = "a", .reserved = 21 * kMiB},
                                {.name = "b", .reserved = 21 * kMiB},
                                {.name = "c", .reserved = 21 * kMiB}}),
              HasSubstr("66 MiB in all"));
  EXPECT_THAT(error(64 * kMiB, {{.name = "rx"}, {.name = "rx"}}),
              HasSubstr("classes[0] and classes[1] are both named \"rx\""));
  EXPECT_THAT(error(64 * kMiB, {{.name = "rx", .reserved = 8 * kMiB, .cap = 4 * kMiB}}),
              HasSubstr("class \"rx\": cap 4 MiB"));
  EXPECT_THAT(error(64 * kMiB, {{.name = "rx", .cap = 1 * kMiB}}), HasSubstr("class \"rx\": cap"));
  EXPECT_THAT(error(64 * kMiB, {{.name = "rx", .cap = 128 * kMiB}}),
              HasSubstr("above the pool's budget"));
  EXPECT_THAT(error(64 * kMiB, {{.name = ""}}), HasSubstr("classes[0] is named \"\""));
  EXPECT_THAT(error(64 * kMiB, {{.name = "default"}}), HasSubstr("not \"default\""));

  auto pool = Pool::Create(Options(64 * kMiB, {{.name = "rx"}, {.name = "tx"}})).value();
  EXPECT_THAT(std::string(pool->ClassOf("bulk").status().message()),
              HasSubstr("no buffer class \"bulk\" in this pool (it has: default, rx, tx)"));
}

TEST(ClassesDeathTest, AClassIdOfNoClassAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto pool = Pool::Create(Options(64 * kMiB, {{.name = "rx"}})).value();
  EXPECT_DEATH(pool->Allocate(ClassId{7}, 64), "Allocate\\(class 7\\).*not one of its classes");
  EXPECT_DEATH(pool->Allocate(ClassId{2}, 64, 64), "not one of its classes");
}

// A named class's block is checked on its free as closely as a default one (its free takes the
// library's path): a double free and an interior pointer abort naming the rule, scrubbing or not.
TEST(ClassesDeathTest, MisusedFreesOfAClassBlockAbort) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (Scrub scrub : {Scrub::kNone, Scrub::kOnReuse}) {
    auto pool = Pool::Create(Options(64 * kMiB, {{.name = "rx", .scrub = scrub}})).value();
    const ClassId rx = pool->ClassOf("rx").value();
    Block b = pool->Allocate(rx, 256);
    Block keep = pool->Allocate(rx, 256);
    pool->Deallocate(b);
    EXPECT_DEATH(pool->Deallocate(b), "free already");
    EXPECT_DEATH(pool->Deallocate(static_cast<char*>(keep.data()) + 16),
                 "not the start of a block");
    // Unaligned: the class heap's checked push rejects it (no block starts off a multiple of 16).
    EXPECT_DEATH(pool->Deallocate(static_cast<char*>(keep.data()) + 8), "not the start of a block");
    pool->Deallocate(keep);
  }
}

// Tenants A and B (one class each) churn on two threads, each filling every block it gets with
// its own 8-byte word and counting the other's words in every block it gets (words, not bytes:
// the heap's free marks are random words that hold any byte); Trim keeps handing idle chunks
// from one class to the other. Returns how many words of the other tenant were seen.
std::size_t ChurnTwoTenants(Scrub scrub) {
  auto pool = Pool::Create(Options(32 * kMiB,
                                   {{.name = "A", .scrub = scrub}, {.name = "B", .scrub = scrub}}))
                  .value();
  std::atomic<std::size_t> foreign{0};
  const auto tenant = [&](const char* name, std::uint64_t own, std::uint64_t other, unsigned seed) {
    const ClassId cls = pool->ClassOf(name).value();
    std::mt19937 rng(seed);
    std::vector<Block> held;
    for (int round = 0; round < 60; ++round) {
      for (int i = 0; i < 400; ++i) {
        const std::size_t size = std::size_t{16} << (rng() % 13);  // 16 B .. 64 KiB
        Block b = pool->Allocate(cls, size);
        if (!b) break;  // the other tenant holds the budget for now
        auto* p = static_cast<std::uint64_t*>(b.data());  // sizes are multiples of 16
        foreign += static_cast<std::size_t>(std::count(p, p + b.size() / 8, other));
        std::fill(p, p + b.size() / 8, own);
        held.push_back(b);
      }
      std::shuffle(held.begin(), held.end(), rng);
      for (Block& b : held) pool->Deallocate(b);
      held.clear();
      pool->Trim(SIZE_MAX);  // idle chunks back to the arena, mapped: the next class takes them
    }
  };
  constexpr std::uint64_t kA = 0xA5A5A5A5A5A5A5A5;
  constexpr std::uint64_t kB = 0x5B5B5B5B5B5B5B5B;
  std::thread a(tenant, "A", kA, kB, 1);
  std::thread b(tenant, "B", kB, kA, 2);
  a.join();
  b.join();
  return foreign;
}

TEST(ScrubTest, OnReuseNoTenantEverSeesTheOthersBytes) {
  EXPECT_EQ(ChurnTwoTenants(Scrub::kOnReuse), 0u);
}

TEST(ScrubTest, OnClassChangeNoTenantEverSeesTheOthersBytes) {
  EXPECT_EQ(ChurnTwoTenants(Scrub::kOnClassChange), 0u);
}

// Without scrubbing the same churn leaks: the hazard the policies close, and the proof that the
// check above can see a leak.
TEST(ScrubTest, WithoutScrubTheChurnShowsTheOthersBytes) {
  EXPECT_GT(ChurnTwoTenants(Scrub::kNone), 0u);
}

// on_reuse: every block a class hands out is zero, even one its own thread just freed.
TEST(ScrubTest, OnReuseEveryBlockComesOutZero) {
  auto pool = Pool::Create(Options(16 * kMiB, {{.name = "z", .scrub = Scrub::kOnReuse}})).value();
  const ClassId z = pool->ClassOf("z").value();
  std::mt19937 rng(3);
  std::vector<Block> held;
  for (int i = 0; i < 20000; ++i) {
    if (held.size() > 64 || (!held.empty() && rng() % 2 == 0)) {
      const std::size_t k = rng() % held.size();
      pool->Deallocate(held[k]);
      held[k] = held.back();
      held.pop_back();
      continue;
    }
    Block b = pool->Allocate(z, 1 + rng() % 9000);
    ASSERT_TRUE(b);
    const auto* p = static_cast<const unsigned char*>(b.data());
    ASSERT_EQ(std::count(p, p + pool->UsableSize(b.data()), 0),
              static_cast<std::ptrdiff_t>(pool->UsableSize(b.data())))
        << "allocation " << i;
    std::memset(b.data(), 0xee, b.size());
    held.push_back(b);
  }
  for (Block& b : held) pool->Deallocate(b);
}

}  // namespace
}  // namespace pinpool
