// Arrays (pinpool/array.h, Pool::AllocateArray): layout across chunks, keys per domain, runs,
// small arrays as one block, stats, buffer classes, and every error AllocateArray promises, each
// leaving nothing mapped or registered behind.
#include "pinpool/array.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "pinpool/grant_lock.h"
#include "pinpool/pool.h"
#include "pinpool/take_back.h"
#include "support/counting_domain.h"
#include "support/fake_grant_holder.h"

namespace pinpool {
namespace {

using testing::CountingDomain;
using ::testing::HasSubstr;

constexpr std::size_t kChunk = 4 * kMiB;

PoolOptions Options(std::vector<std::shared_ptr<Domain>> domains, std::size_t budget = 64 * kMiB) {
  PoolOptions o;
  o.chunk_size = kChunk;
  o.budget = budget;
  o.page_size = PageSize::k4K;
  o.domains = std::move(domains);
  return o;
}

std::uintptr_t Addr(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

// Every promise of the layout, for every element: inside one chunk, aligned, `stride` apart in
// its run, the keys Lookup (and the domains) give for its address, runs in element order.
void ExpectLayout(const Pool& pool, const Array& a, std::size_t alignment,
                  const std::vector<std::shared_ptr<CountingDomain>>& domains) {
  std::size_t next = 0;
  for (const ArrayRun& run : a.runs()) {
    ASSERT_EQ(run.first, next);
    ASSERT_GE(run.count, 1u);
    next += run.count;
  }
  ASSERT_EQ(next, a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    const Block e = a.Element(i);
    ASSERT_TRUE(e) << i;
    ASSERT_EQ(e.size(), a.element_size());
    ASSERT_EQ(Addr(e.data()) % alignment, 0u) << i;
    const auto first = pool.Lookup(e.data());
    const auto last = pool.Lookup(static_cast<std::byte*>(e.data()) + e.size() - 1);
    ASSERT_TRUE(first && last) << i;
    ASSERT_EQ(&first->chunk(), &last->chunk()) << "element " << i << " straddles two chunks";
    ASSERT_EQ(&e.chunk(), &first->chunk()) << i;
    const ArrayRun& run = a.runs()[i / a.elements_per_chunk()];
    ASSERT_TRUE(i >= run.first && i < run.first + run.count) << i;
    ASSERT_EQ(Addr(e.data()), Addr(run.base) + (i - run.first) * a.stride()) << i;
    ASSERT_EQ(e.domain_count(), domains.size());
    for (std::size_t d = 0; d < domains.size(); ++d) {
      Keys registered;
      ASSERT_TRUE(domains[d]->KeysFor(e.chunk().base, &registered)) << i;
      ASSERT_EQ(ToUnderlying(e.rkey(d)), ToUnderlying(registered.rkey)) << i;
      ASSERT_EQ(ToUnderlying(e.lkey(d)), ToUnderlying(first->lkey(d))) << i;
      ASSERT_EQ(e.offset(d), Addr(e.data()) - registered.base) << i;
    }
  }
}

TEST(ArrayTest, ElementsSpanChunksNeverStraddleOneAndCarryEveryDomainsKeys) {
  auto d0 = std::make_shared<CountingDomain>("d0");
  auto d1 = std::make_shared<CountingDomain>("d1");
  auto pool = Pool::Create(Options({d0, d1})).value();
  // 4160-byte elements aligned to 64: 1008 per 4 MiB chunk, 2368 bytes of each chunk's tail left.
  constexpr std::size_t kCount = 3500;
  auto a = pool->AllocateArray(kCount, 4160, 64);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_FALSE(a->in_block());
  EXPECT_EQ(a->size(), kCount);
  EXPECT_EQ(a->stride(), 4160u);
  EXPECT_EQ(a->elements_per_chunk(), kChunk / 4160);
  EXPECT_EQ(a->runs().size(), 4u);
  ExpectLayout(*pool, *a, 64, {d0, d1});
  // Distinct memory: a pattern per element survives writing all the others.
  for (std::size_t i = 0; i < kCount; ++i) std::memset(a->Element(i).data(), i & 0xff, 4160);
  for (std::size_t i = 0; i < kCount; ++i) {
    const auto* p = static_cast<const unsigned char*>(a->Element(i).data());
    ASSERT_EQ(p[0], i & 0xff) << i;
    ASSERT_EQ(p[4159], i & 0xff) << i;
  }
  EXPECT_FALSE(a->Element(kCount)) << "past the end";
  EXPECT_FALSE((*a)[SIZE_MAX]);
  pool->Deallocate(std::move(*a));
  EXPECT_FALSE(*a) << "freed arrays are empty";
}

TEST(ArrayTest, AMillionPagesOfFourKiBAcrossManyChunksAgreeWithLookup) {
  // A KV cache's size: 10^6 elements of 4 KiB (3.8 GiB) in 64 MiB chunks, registered with a fake
  // domain and not populated, so the host only reserves the address space.
  auto d = std::make_shared<CountingDomain>();
  PoolOptions o = Options({d}, 4 * kGiB);
  o.chunk_size = 64 * kMiB;
  o.populate = false;
  auto pool = Pool::Create(o).value();
  auto a = pool->AllocateArray(1'000'000, 4096, 4096);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->elements_per_chunk(), 16384u);
  EXPECT_EQ(a->runs().size(), 62u);  // ceil(10^6 / 16384)
  EXPECT_EQ(a->runs().back().count, 1'000'000u - 61 * 16384);
  ExpectLayout(*pool, *a, 4096, {d});
  EXPECT_EQ(pool->GetStats().array_bytes, 62 * 64 * kMiB);
  pool->Deallocate(std::move(*a));
}

TEST(ArrayTest, ASmallArrayIsOneBlockAndCountsAsLiveBytes) {
  auto d = std::make_shared<CountingDomain>();
  auto pool = Pool::Create(Options({d})).value();
  auto a = pool->AllocateArray(100, 48, 16);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->in_block());
  ASSERT_EQ(a->runs().size(), 1u);
  EXPECT_EQ(a->elements_per_chunk(), 100u);
  ExpectLayout(*pool, *a, 16, {d});
  EXPECT_EQ(pool->UsableSize(a->runs()[0].base) >= 4800, true) << "the block is live";
  PoolStats s = pool->GetStats();
  EXPECT_EQ(s.arrays, 1u);
  EXPECT_EQ(s.array_bytes, 0u);
  EXPECT_GE(s.live_bytes, 4800u);
  pool->Deallocate(std::move(*a));
  s = pool->GetStats();
  EXPECT_EQ(s.arrays, 0u);
  EXPECT_EQ(s.live_bytes, 0u);
}

TEST(ArrayTest, StatsCountWholeChunksAndFreeingGivesThemBackToTrim) {
  auto d = std::make_shared<CountingDomain>();
  auto pool = Pool::Create(Options({d})).value();
  auto a = pool->AllocateArray(3 * 1024 - 1, 4096, 4096);  // three chunks, the last not full
  ASSERT_TRUE(a.ok()) << a.status();
  PoolStats s = pool->GetStats();
  EXPECT_EQ(s.arrays, 1u);
  EXPECT_EQ(s.array_bytes, 3 * kChunk);
  EXPECT_EQ(s.mapped_bytes, 3 * kChunk);
  EXPECT_EQ(s.mapped_unused_bytes(), 0u) << "an array's chunks are in use";
  EXPECT_EQ(pool->Trim(0), 0u) << "Trim never takes an array's chunks";
  pool->Deallocate(std::move(*a));
  s = pool->GetStats();
  EXPECT_EQ(s.arrays, 0u);
  EXPECT_EQ(s.array_bytes, 0u);
  EXPECT_EQ(pool->Trim(0), 3 * kChunk) << "freed, the chunks are idle";
  EXPECT_EQ(d->live_registrations(), 0u);
  pool->Deallocate(Array());  // an empty array is ignored
}

// A chunk of an array given back (docs/backing.md: the application asks, or a lease breaks): the
// array's run in it is reported lost, whole; the array's other chunks are untouched, and freeing
// the array afterwards gives back the others and nothing of the lost one.
TEST(ArrayTest, AChunkGivenBackIsLostToItsArrayWhichCanStillBeFreed) {
  auto d = std::make_shared<CountingDomain>();
  auto pool = Pool::Create(Options({d})).value();
  auto a = pool->AllocateArray(3 * 1024, 4096, 4096);  // three whole chunks
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->runs().size(), 3u);
  const Block middle = a->Run(1);
  std::memset(a->Run(2).data(), 0x5a, 4096);
  ASSERT_TRUE(pool->GiveBack(middle.data()).ok());
  const std::vector<LostChunk> lost = pool->TakeLostChunks();
  ASSERT_EQ(lost.size(), 1u);
  ASSERT_EQ(lost[0].blocks.size(), 1u) << "the array's run in the chunk";
  EXPECT_EQ(Addr(lost[0].blocks[0].data), lost[0].base);
  EXPECT_EQ(lost[0].blocks[0].size, kChunk);
  EXPECT_EQ(static_cast<unsigned char*>(a->Run(2).data())[4095], 0x5a);  // others intact
  pool->Deallocate(std::move(*a));
  EXPECT_EQ(pool->GetStats().arrays, 0u);
  EXPECT_EQ(pool->Trim(0), 2 * kChunk) << "the two chunks left are idle again";
  EXPECT_EQ(d->live_registrations(), 0u);
}

TEST(ArrayTest, ChunksOfAFreedArrayServeBlocksAndNewArrays) {
  auto d = std::make_shared<CountingDomain>();
  auto pool = Pool::Create(Options({d}, 2 * kChunk)).value();
  auto a = pool->AllocateArray(2 * 1024, 4096, 4096);  // the whole budget
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_FALSE(pool->Allocate(4096)) << "the budget is the array's";
  pool->Deallocate(std::move(*a));
  Block b = pool->Allocate(4096);
  EXPECT_TRUE(b);
  pool->Deallocate(b);
  auto again = pool->AllocateArray(1024, 4096, 4096);
  EXPECT_TRUE(again.ok()) << again.status();
  pool->Deallocate(std::move(*again));
}

// Slices: a subrange cut at the runs, each slice's offset and length in its run, and nothing for
// an empty or out-of-range subrange.
TEST(ArrayTest, SlicesCutASubrangeAtItsRunsAndAreEmptyOutOfRange) {
  auto d = std::make_shared<CountingDomain>();
  auto pool = Pool::Create(Options({d})).value();
  auto a = pool->AllocateArray(1000, 12288, 4096);  // 341 per chunk: runs of 341, 341, 318
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->runs().size(), 3u);
  const std::vector<ArraySlice> all = a->Slices(0);
  ASSERT_EQ(all.size(), 3u);
  for (std::size_t r = 0; r < 3; ++r) {
    EXPECT_EQ(all[r].run, r);
    EXPECT_EQ(all[r].first, a->runs()[r].first);
    EXPECT_EQ(all[r].count, a->runs()[r].count);
    EXPECT_EQ(all[r].offset, 0u);
    EXPECT_EQ(all[r].length, a->Run(r).size());
  }
  // [300, 700): the end of run 0, all of run 1, the start of run 2.
  const std::vector<ArraySlice> mid = a->Slices(300, 400);
  ASSERT_EQ(mid.size(), 3u);
  EXPECT_EQ(mid[0].first, 300u);
  EXPECT_EQ(mid[0].count, 41u);
  EXPECT_EQ(mid[0].offset, 300u * 12288);
  EXPECT_EQ(mid[0].length, 41u * 12288);
  EXPECT_EQ(mid[1].count, 341u);
  EXPECT_EQ(mid[2].first, 682u);
  EXPECT_EQ(mid[2].count, 18u);
  EXPECT_EQ(mid[2].offset, 0u);
  for (const ArraySlice& s : mid) {
    EXPECT_EQ(static_cast<std::byte*>(a->Run(s.run).data()) + s.offset, a->Element(s.first).data());
  }
  const std::vector<ArraySlice> one = a->Slices(999, 1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].run, 2u);
  EXPECT_EQ(one[0].length, 12288u);
  EXPECT_EQ(a->Slices(999).size(), 1u) << "SIZE_MAX: to the end";
  for (auto [first, count] : {std::pair<std::size_t, std::size_t>{0, 0},
                              {1000, 1},
                              {999, 2},
                              {1, SIZE_MAX - 1},
                              {1000, SIZE_MAX}}) {
    EXPECT_TRUE(a->Slices(first, count).empty()) << first << " +" << count;
  }
  EXPECT_TRUE(Array().Slices(0).empty());
  pool->Deallocate(std::move(*a));
}

// GrantSlices (pinpool/grant_lock.h), what both providers' GrantArray are made of: one grant call
// per slice in order; a failure undoes what was made and keeps its code, naming the run; an
// empty or out-of-range subrange calls nothing.
TEST(ArrayGrantTest, GrantSlicesGrantsEachRunOnceAndUndoesAllOnAFailure) {
  auto d = std::make_shared<CountingDomain>();
  auto pool = Pool::Create(Options({d})).value();
  auto a = pool->AllocateArray(1000, 12288, 4096);  // runs of 341, 341, 318
  ASSERT_TRUE(a.ok()) << a.status();
  std::vector<ArraySlice> granted;
  int undone = 0;
  const auto record = [&](const ArraySlice& s) {
    granted.push_back(s);
    return absl::OkStatus();
  };
  const auto undo = [&] { ++undone; };
  ASSERT_TRUE(GrantSlices(*a, 300, 400, "test", record, undo).ok());
  const std::vector<ArraySlice> want = a->Slices(300, 400);
  ASSERT_EQ(granted.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(granted[i].run, want[i].run);
    EXPECT_EQ(granted[i].offset, want[i].offset);
    EXPECT_EQ(granted[i].length, want[i].length);
  }
  EXPECT_EQ(undone, 0);

  granted.clear();
  const absl::Status failed = GrantSlices(
      *a, 0, SIZE_MAX, "test",
      [&](const ArraySlice& s) {
        if (s.run == 1) return absl::ResourceExhaustedError("no more regions");
        granted.push_back(s);
        return absl::OkStatus();
      },
      undo);
  EXPECT_EQ(failed.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(
      std::string(failed.message()),
      ::testing::AllOf(::testing::HasSubstr("test: run 1 of the array (elements [341, 682))"),
                       ::testing::HasSubstr("after 1 runs granted and now revoked"),
                       ::testing::HasSubstr("no more regions")));
  EXPECT_EQ(granted.size(), 1u) << "run 2 never asked";
  EXPECT_EQ(undone, 1);

  granted.clear();
  for (auto [first, count] : {std::pair<std::size_t, std::size_t>{1000, 1}, {10, 0}}) {
    const absl::Status bad = GrantSlices(*a, first, count, "test", record, undo);
    EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument) << first;
  }
  EXPECT_TRUE(granted.empty());
  EXPECT_EQ(undone, 1);
  pool->Deallocate(std::move(*a));
}

TEST(ArrayTest, BadInputIsAClearErrorAndLeavesNothingMappedOrRegistered) {
  auto d = std::make_shared<CountingDomain>();
  auto pool = Pool::Create(Options({d}, 16 * kMiB)).value();
  struct Case {
    std::size_t count, size, alignment;
    absl::StatusCode code;
    const char* says;
  };
  const Case cases[] = {
      {0, 64, 1, absl::StatusCode::kInvalidArgument, "at least one element"},
      {10, 0, 1, absl::StatusCode::kInvalidArgument, "elements of 0 bytes"},
      {10, 64, 3, absl::StatusCode::kInvalidArgument, "not a power of two"},
      {10, 64, 0, absl::StatusCode::kInvalidArgument, "not a power of two"},
      {10, 64, 128, absl::StatusCode::kInvalidArgument, "larger than the element"},
      {2, kChunk + 1, 1, absl::StatusCode::kInvalidArgument, "larger than the pool's chunk"},
      {SIZE_MAX / 2, 4096, 4096, absl::StatusCode::kInvalidArgument, "overflows"},
      {SIZE_MAX / 4096 + 1, 4096, 1, absl::StatusCode::kInvalidArgument, "overflows"},
      // count x stride fits, its whole chunks do not (before: the chunk count wrapped to 0 and
      // an array of no memory and 2^64-1 elements came back).
      {SIZE_MAX, 1, 1, absl::StatusCode::kInvalidArgument, "overflows"},
      {SIZE_MAX - 1, 1, 1, absl::StatusCode::kInvalidArgument, "overflows"},
      {SIZE_MAX - kChunk, 1, 1, absl::StatusCode::kResourceExhausted, "budget of 4 chunks"},
      {5 * 1024, 4096, 4096, absl::StatusCode::kResourceExhausted, "budget of 4 chunks"},
  };
  for (const Case& c : cases) {
    auto a = pool->AllocateArray(c.count, c.size, c.alignment);
    ASSERT_FALSE(a.ok()) << c.count << " x " << c.size << " / " << c.alignment;
    EXPECT_EQ(a.status().code(), c.code) << a.status();
    EXPECT_THAT(a.status().message(), HasSubstr(c.says));
    EXPECT_THAT(a.status().message(), HasSubstr("AllocateArray"));
    const PoolStats s = pool->GetStats();
    EXPECT_EQ(s.mapped_bytes, 0u) << a.status();
    EXPECT_EQ(s.arrays, 0u);
    EXPECT_EQ(d->live_registrations(), 0u);
  }
}

TEST(ArrayTest, AFailureHalfWayGivesBackEveryChunkAndUnmapsWhatItMapped) {
  auto d = std::make_shared<CountingDomain>();
  auto pool = Pool::Create(Options({d})).value();
  Block b = pool->Allocate(4096);  // one chunk the heap keeps
  ASSERT_TRUE(b);
  d->FailRegistration(3);  // the array's third chunk fails to register
  auto a = pool->AllocateArray(4 * 1024, 4096, 4096);
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(a.status().message(), HasSubstr("got 2 of the 4 chunks"));
  EXPECT_THAT(a.status().message(), HasSubstr("injected registration failure"));
  PoolStats s = pool->GetStats();
  EXPECT_EQ(s.mapped_bytes, kChunk) << "only the heap's chunk stays";
  EXPECT_EQ(s.arrays, 0u);
  EXPECT_EQ(s.array_bytes, 0u);
  EXPECT_EQ(d->live_registrations(), 1u);
  // With the fault gone it works, and the heap's block is untouched.
  std::memset(b.data(), 0x5a, 4096);
  auto ok = pool->AllocateArray(4 * 1024, 4096, 4096);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(static_cast<unsigned char*>(b.data())[4095], 0x5a);
  pool->Deallocate(std::move(*ok));
  pool->Deallocate(b);
}

// Chunks the heap holds idle (every block freed) are the pool's own: an array that needs them is
// served, as it is after Trim (before: it was refused, "the pool's budget ... is used up", with
// nothing live).
TEST(ArrayTest, AnArrayTakesBackTheChunksTheHeapHoldsIdle) {
  auto d = std::make_shared<CountingDomain>();
  auto pool = Pool::Create(Options({d}, 16 * kMiB)).value();
  std::vector<Block> blocks;
  for (Block b; (b = pool->Allocate(1 << 20));) blocks.push_back(b);
  ASSERT_EQ(pool->GetStats().mapped_bytes, 16 * kMiB);
  for (const Block& b : blocks) pool->Deallocate(b);
  ASSERT_EQ(pool->GetStats().live_bytes, 0u);
  auto a = pool->AllocateArray(4 * 1024, 4096, 4096);  // every chunk of the budget
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->runs().size(), 4u);
  EXPECT_EQ(d->live_registrations(), 4u) << "the idle chunks themselves, not new ones";
  pool->Deallocate(std::move(*a));
  // And the heap serves blocks again afterwards.
  Block b = pool->Allocate(1 << 20);
  EXPECT_TRUE(b);
  pool->Deallocate(b);
}

// The same through named classes: the default class's idle chunks go back through the ledger.
TEST(ArrayTest, AnArrayTakesBackIdleChunksThroughTheClassLedger) {
  auto d = std::make_shared<CountingDomain>();
  PoolOptions o = Options({d}, 16 * kMiB);
  o.classes = {{.name = "rpc", .reserved = 0, .cap = 8 * kMiB, .scrub = Scrub::kNone}};
  auto pool = Pool::Create(o).value();
  const ClassId rpc = *pool->ClassOf("rpc");
  std::vector<Block> blocks;
  for (Block b; (b = pool->Allocate(rpc, 1 << 20));) blocks.push_back(b);
  for (Block b; (b = pool->Allocate(1 << 20));) blocks.push_back(b);
  ASSERT_EQ(pool->GetStats().mapped_bytes, 16 * kMiB);
  for (const Block& b : blocks) pool->Deallocate(b);
  auto a = pool->AllocateArray(4 * 1024, 4096, 4096);
  ASSERT_TRUE(a.ok()) << a.status();
  pool->Deallocate(std::move(*a));
}

TEST(ArrayTest, ArraysGoThroughTheClassLedgerAsTheDefaultClass) {
  auto d = std::make_shared<CountingDomain>();
  PoolOptions o = Options({d}, 8 * kChunk);
  o.classes.push_back({.name = "rx", .reserved = 6 * kChunk});
  auto pool = Pool::Create(o).value();
  // Two chunks are not reserved: an array of three would take a reserved one.
  auto big = pool->AllocateArray(3 * 1024, 4096, 4096);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(big.status().message(), HasSubstr("reserved"));
  EXPECT_EQ(pool->GetStats().mapped_bytes, 0u);
  auto fits = pool->AllocateArray(2 * 1024, 4096, 4096);
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_EQ(pool->GetStats().classes[0].held_bytes, 2 * kChunk);
  // The reserved class still gets its chunks.
  const ClassId rx = pool->ClassOf("rx").value();
  Block r = pool->Allocate(rx, 64);
  EXPECT_TRUE(r);
  pool->Deallocate(r);
  pool->Deallocate(std::move(*fits));
  EXPECT_EQ(pool->GetStats().classes[0].held_bytes, 0u);
}

TEST(ArrayTest, AFreedArraysChunksAreZeroedBeforeAScrubbingClassTakesThem) {
  auto d = std::make_shared<CountingDomain>();
  PoolOptions o = Options({d}, 4 * kChunk);
  o.classes.push_back({.name = "other", .scrub = Scrub::kOnReuse});
  auto pool = Pool::Create(o).value();
  // The default class does not scrub: a freed array's bytes may be seen again by the default
  // class (as a freed block's are). What the class ledger zeroes is the chunk changing class.
  auto a = pool->AllocateArray(4 * 1024, 4096, 4096);
  ASSERT_TRUE(a.ok()) << a.status();
  for (const ArrayRun& run : a->runs()) std::memset(run.base, 0xee, kChunk);
  pool->Deallocate(std::move(*a));
  const ClassId other = pool->ClassOf("other").value();
  Block b = pool->Allocate(other, 4096);
  ASSERT_TRUE(b);
  const auto* p = static_cast<const unsigned char*>(b.data());
  for (std::size_t i = 0; i < 4096; ++i) ASSERT_EQ(p[i], 0) << "array bytes seen by another class";
  pool->Deallocate(b);
}

using FakeHolder = testing::FakeGrantHolder;

TEST(ArrayGrantTest, RunsOfALiveArrayAreGrantableAndNothingElseOfItIs) {
  auto d = std::make_shared<CountingDomain>();
  auto pool = Pool::Create(Options({d})).value();
  Array a = pool->AllocateArray(3 * 1024, 4096, 4096).value();
  Array small = pool->AllocateArray(4, 64, 64).value();
  EXPECT_FALSE(a.Run(3));
  EXPECT_EQ(a.Run(1).size(), 1024u * 4096);
  {
    GrantLock lock(*pool);
    for (std::size_t r = 0; r < 3; ++r) EXPECT_TRUE(lock.CheckLive(a.Run(r)).ok()) << r;
    EXPECT_TRUE(lock.CheckLive(small.Run(0)).ok()) << "a small array's block";
    EXPECT_EQ(lock.CheckLive(a.Element(5)).code(), absl::StatusCode::kInvalidArgument)
        << "an element inside a run is not a run";
    EXPECT_EQ(lock.CheckLive(Block(a.Run(0).data(), 2 * kChunk, &a.Run(0).chunk())).code(),
              absl::StatusCode::kInvalidArgument)
        << "more than a chunk";
  }
  const Block run0 = a.Run(0);
  pool->Deallocate(std::move(a));
  pool->Deallocate(std::move(small));
  GrantLock lock(*pool);
  EXPECT_FALSE(lock.CheckLive(run0).ok()) << "a freed array's run";
}

TEST(ArrayGrantTest, AFreedArrayKeepsItsGrantedRunsUntilTheirGrantsEnd) {
  auto d = std::make_shared<CountingDomain>();
  auto pool = Pool::Create(Options({d})).value();
  FakeHolder holder(/*synchronous=*/false);
  Array a = pool->AllocateArray(3 * 1024, 4096, 4096).value();
  const Block run1 = a.Run(1);
  {
    GrantLock lock(*pool);
    ASSERT_TRUE(lock.CheckLive(run1).ok());
    lock.Begin(run1, holder, 7);
  }
  pool->Deallocate(std::move(a));
  EXPECT_EQ(holder.revoked, std::vector<std::uint64_t>{7});
  PoolStats s = pool->GetStats();
  EXPECT_EQ(s.arrays, 0u);
  EXPECT_EQ(s.array_bytes, 0u);
  EXPECT_EQ(s.grants.held_blocks, 1u);
  EXPECT_EQ(s.grants.held_bytes, run1.size());
  {
    GrantLock lock(*pool);
    EXPECT_TRUE(lock.Held(run1.data()));
    EXPECT_EQ(lock.CheckLive(run1).code(), absl::StatusCode::kFailedPrecondition);
  }
  // The other two chunks are free again; the held one is never handed out: the budget's other
  // 15 chunks take arrays and blocks, and none lies in it.
  EXPECT_EQ(pool->Trim(0), 2 * kChunk) << "the two runs no grant reached went back";
  std::vector<Array> arrays;
  for (;;) {
    auto next = pool->AllocateArray(1024, 4096, 4096);
    if (!next.ok()) break;
    ASSERT_NE(next->runs()[0].base, run1.data()) << "a held run was handed out again";
    arrays.push_back(std::move(*next));
  }
  EXPECT_EQ(arrays.size(), 15u);
  EXPECT_FALSE(pool->Allocate(4096)) << "the budget is spent, the held chunk stays out";
  for (Array& x : arrays) pool->Deallocate(std::move(x));
  { GrantLock(*pool).End(run1.data(), holder, 7); }
  s = pool->GetStats();
  EXPECT_EQ(s.grants.held_blocks, 0u);
  EXPECT_EQ(pool->Trim(0), 16 * kChunk) << "released, the run's chunk is idle again";
}

TEST(ArrayGrantTest, ASynchronousRevocationGivesTheRunBackAtOnce) {
  auto d = std::make_shared<CountingDomain>();
  auto pool = Pool::Create(Options({d})).value();
  FakeHolder holder(/*synchronous=*/true);
  Array a = pool->AllocateArray(2 * 1024, 4096, 4096).value();
  const Block run0 = a.Run(0);
  holder.blocks[1] = run0.data();
  { GrantLock(*pool).Begin(run0, holder, 1); }
  pool->Deallocate(std::move(a));
  EXPECT_EQ(holder.revoked, std::vector<std::uint64_t>{1});
  EXPECT_EQ(pool->GetStats().grants.held_blocks, 0u);
  EXPECT_EQ(pool->Trim(0), 2 * kChunk);
}

TEST(ArrayDeathTest, FreeingAnElementOrAnotherPoolsArrayAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto d = std::make_shared<CountingDomain>();
  auto pool = Pool::Create(Options({d})).value();
  auto other = Pool::Create(Options({d})).value();
  auto a = pool->AllocateArray(2 * 1024, 4096, 4096).value();
  EXPECT_DEATH(pool->Deallocate(a.Element(5).data()), "Deallocate");
  EXPECT_DEATH(pool->Deallocate(a.Element(0).data()), "Deallocate");
  EXPECT_DEATH(other->Deallocate(std::move(a)), "not an array of this pool");
  pool->Deallocate(std::move(a));
}

TEST(ArrayDeathTest, FreeingElementZeroOfAOneBlockArrayMakesItsOwnFreeADoubleFree) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto d = std::make_shared<CountingDomain>();
  auto pool = Pool::Create(Options({d})).value();
  Array a = pool->AllocateArray(8, 64, 64).value();
  ASSERT_TRUE(a.in_block());
  EXPECT_DEATH(
      {
        pool->Deallocate(a.Element(0).data());
        pool->Deallocate(std::move(a));
      },
      "free already");
  pool->Deallocate(std::move(a));
}

TEST(ArrayDeathTest, AChunkTheHeapHadBeforeKeepsNoBlockAnArrayElementCouldBeFreedAs) {
  // The heap carves 64 KiB blocks from its chunk, frees them and gives the chunk back (Trim,
  // keeping it mapped); the array takes it: its elements, at the old blocks' starts, are not
  // blocks to Deallocate.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto d = std::make_shared<CountingDomain>();
  auto pool = Pool::Create(Options({d}, kChunk)).value();
  std::vector<Block> blocks;
  for (int i = 0; i < 16; ++i) blocks.push_back(pool->Allocate(64 * kKiB));
  const void* first = blocks[0].data();
  for (const Block& b : blocks) pool->Deallocate(b);
  EXPECT_EQ(pool->Trim(kChunk), 0u) << "the chunk stays mapped";
  auto a = pool->AllocateArray(1024, 4096, 4096);
  ASSERT_TRUE(a.ok()) << a.status() << " (the heap kept its chunk)";
  ASSERT_EQ(reinterpret_cast<std::uintptr_t>(a->runs()[0].base), pool->Lookup(first)->chunk().base)
      << "the array has the heap's old chunk";
  for (const Block& b : blocks) {
    EXPECT_DEATH(pool->Deallocate(b.data()), "Deallocate") << b.data();
  }
  pool->Deallocate(std::move(*a));
}

}  // namespace
}  // namespace pinpool
