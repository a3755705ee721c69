// Trim: whole idle chunks go back (deregistered from every domain, unmapped) down to the floor,
// and only idle ones.
//  - after everything is freed (from several threads, so thread caches hold blocks), Trim brings
//    VmPin, the domain's registered bytes, the mapped bytes and the mappings in the pool's range
//    down to the floor; the pool then grows again, with fresh registrations, and serves right data;
//  - a chunk with one live block, or a granted (kSlowFreeTag) chunk, is never given back;
//  - the trim policy (trim_interval_ms) does it on its own;
//  - stress (TSan in the tsan preset): trims racing allocation and free never take a chunk under a
//    live block: every block stays writable and its keys stay its chunk's live registration.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "arena/arena.h"
#include "pinpool/pool.h"
#include "support/counting_domain.h"
#include "support/maps.h"
#include "support/proc_status.h"
#include "support/sanitizers.h"

namespace pinpool {
namespace {

using pinpool::testing::CountingDomain;
using pinpool::testing::MappingsIn;
using pinpool::testing::ProcStatusBytes;

constexpr std::size_t kChunk = 2 * kMiB;

PoolOptions Options(std::vector<std::shared_ptr<Domain>> domains, std::size_t chunks = 16) {
  PoolOptions o;
  o.chunk_size = kChunk;
  o.budget = chunks * kChunk;
  o.page_size = PageSize::k4K;
  o.numa_node = kNoNumaNode;
  o.domains = std::move(domains);
  return o;
}

std::uintptr_t RangeStart(const Pool& pool) {
  const PoolStats s = pool.GetStats();
  return s.chunks.empty() ? 0 : s.chunks.front().base - s.chunks.front().index * kChunk;
}

// Fills about `bytes` with blocks of mixed sizes; half of them from a second thread, which keeps
// them in its cache when it frees them.
std::vector<Block> Fill(Pool& pool, std::size_t bytes) {
  std::vector<Block> blocks;
  std::size_t got = 0;
  const std::size_t sizes[] = {64, 4 * kKiB, 100 * kKiB, 700 * kKiB};
  for (int i = 0; got < bytes; ++i) {
    Block b = pool.Allocate(sizes[i % 4]);
    EXPECT_TRUE(b);
    if (!b) break;
    std::memset(b.data(), 0x5a, b.size());
    got += b.size();
    blocks.push_back(b);
  }
  return blocks;
}

TEST(Trim, AfterFreeingEverythingPinsRegistrationsAndMappingsGoDownToTheFloor) {
  absl::StatusOr<std::shared_ptr<Domain>> pin = MakeLongTermPinDomain();
  ASSERT_TRUE(pin.ok()) << pin.status();
  auto counting = std::make_shared<CountingDomain>("counting");
  const long long pinned_before = ProcStatusBytes("VmPin");
  auto pool = Pool::Create(Options({*pin, counting})).value();

  // 10 chunks' worth, half freed by a thread that exits (its cache goes to the central layer),
  // half by this thread (its cache keeps them).
  std::vector<Block> blocks = Fill(*pool, 10 * kChunk);
  std::thread other([&] {
    for (std::size_t i = 0; i < blocks.size(); i += 2) pool->Deallocate(blocks[i]);
  });
  other.join();
  for (std::size_t i = 1; i < blocks.size(); i += 2) pool->Deallocate(blocks[i]);
  const PoolStats full = pool->GetStats();
  const std::size_t chunks = full.chunks.size();
  ASSERT_GE(chunks, 10u);
  EXPECT_EQ(ProcStatusBytes("VmPin") - pinned_before, static_cast<long long>(chunks * kChunk));
  const std::uintptr_t start = RangeStart(*pool);
  EXPECT_EQ(MappingsIn(start, start + full.reserved_bytes).read_write, chunks * kChunk);

  const std::size_t given = pool->Trim(2 * kChunk);
  EXPECT_EQ(given, (chunks - 2) * kChunk);
  const PoolStats trimmed = pool->GetStats();
  EXPECT_EQ(trimmed.mapped_bytes, 2 * kChunk);
  EXPECT_EQ(trimmed.chunks.size(), 2u);
  EXPECT_EQ(trimmed.domains[0].registered_bytes, 2 * kChunk);
  EXPECT_EQ(trimmed.domains[1].registered_bytes, 2 * kChunk);
  EXPECT_EQ(counting->live_registrations(), 2u);
  EXPECT_EQ(counting->bad_deregisters(), 0u);
  EXPECT_EQ(ProcStatusBytes("VmPin") - pinned_before, static_cast<long long>(2 * kChunk));
  const testing::RangeMappings m = MappingsIn(start, start + trimmed.reserved_bytes);
  EXPECT_EQ(m.read_write, 2 * kChunk) << "trimmed chunks still mapped";
  EXPECT_EQ(m.none, trimmed.reserved_bytes - 2 * kChunk);
  EXPECT_EQ(m.holes, 0u);
  EXPECT_EQ(trimmed.growth.trims, chunks - 2);
  EXPECT_EQ(trimmed.growth.trimmed_bytes, (chunks - 2) * kChunk);
  EXPECT_EQ(pool->Trim(2 * kChunk), 0u) << "nothing more above the floor";

  // It grows again: fresh registrations, the keys blocks report are live, the data is right.
  std::vector<Block> again = Fill(*pool, 8 * kChunk);
  for (const Block& b : again) {
    Keys k;
    ASSERT_TRUE(counting->KeysFor(b.chunk().base, &k));
    EXPECT_EQ(ToUnderlying(k.lkey), ToUnderlying(b.lkey(1)));
    const auto* p = static_cast<const unsigned char*>(b.data());
    EXPECT_EQ(p[0], 0x5a);
    EXPECT_EQ(p[b.size() - 1], 0x5a);
  }
  EXPECT_GE(pool->GetStats().chunks.size(), 8u);
  EXPECT_EQ(ProcStatusBytes("VmPin") - pinned_before,
            static_cast<long long>(pool->GetStats().chunks.size() * kChunk));
  for (const Block& b : again) pool->Deallocate(b);
  EXPECT_GT(pool->Trim(0), 0u);
  EXPECT_EQ(pool->GetStats().mapped_bytes, 0u);
  EXPECT_EQ(ProcStatusBytes("VmPin"), pinned_before);
  pool.reset();
  EXPECT_EQ(ProcStatusBytes("VmPin"), pinned_before);
}

TEST(Trim, NeverGivesBackAChunkWithALiveBlock) {
  auto d = std::make_shared<CountingDomain>();
  auto pool = Pool::Create(Options({d})).value();
  // Blocks of 1.5 MiB: one per chunk.
  std::vector<Block> blocks;
  for (int i = 0; i < 6; ++i) blocks.push_back(pool->Allocate(kChunk * 3 / 4));
  for (const Block& b : blocks) ASSERT_TRUE(b);
  const Block kept = blocks[3];
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    if (i != 3) pool->Deallocate(blocks[i]);
  }
  EXPECT_EQ(pool->Trim(0), 5 * kChunk);
  const PoolStats s = pool->GetStats();
  ASSERT_EQ(s.chunks.size(), 1u);
  EXPECT_EQ(s.chunks[0].base, kept.chunk().base);
  Keys k;
  ASSERT_TRUE(d->KeysFor(kept.chunk().base, &k));
  EXPECT_EQ(ToUnderlying(k.lkey), ToUnderlying(kept.lkey()));
  std::memset(kept.data(), 1, kept.size());  // still mapped
  pool->Deallocate(kept);
  EXPECT_EQ(pool->Trim(0), kChunk);
  EXPECT_EQ(d->live_registrations(), 0u);
}

TEST(Trim, TheArenaKeepsCarvedAndGrantedChunks) {
  auto d = std::make_shared<CountingDomain>();
  internal::ArenaConfig config{.chunk_size = kChunk, .max_chunks = 4, .domains = {d}};
  auto arena = internal::Arena::Create(std::move(config)).value();
  ASSERT_TRUE(arena->Reserve(3 * kChunk).ok());
  const std::uintptr_t base = arena->range_base();
  void* carved = arena->Carve(4096, 4096);  // in chunk 0
  ASSERT_EQ(reinterpret_cast<std::uintptr_t>(carved), base);
  arena->SetGranted(reinterpret_cast<void*>(base + 2 * kChunk), true);
  EXPECT_EQ(arena->Trim(0), kChunk) << "only chunk 1 is idle";
  EXPECT_EQ(arena->ChunkOf(reinterpret_cast<void*>(base + kChunk)), nullptr);
  EXPECT_NE(arena->ChunkOf(carved), nullptr);
  arena->ReturnChunk(carved);
  arena->SetGranted(reinterpret_cast<void*>(base + 2 * kChunk), false);
  EXPECT_EQ(arena->Trim(kChunk), kChunk) << "down to the floor of one chunk";
  EXPECT_EQ(arena->Trim(0), kChunk);
  EXPECT_EQ(d->live_registrations(), 0u);
  EXPECT_EQ(arena->Stats().chunks.size(), 0u);
  // Grows again into the freed slots.
  EXPECT_NE(arena->Carve(kChunk, kChunk), nullptr);
  EXPECT_EQ(d->live_registrations(), 1u);
}

TEST(Trim, ThePolicyTrimsOnItsOwn) {
  auto d = std::make_shared<CountingDomain>();
  PoolOptions o = Options({d});
  o.trim_interval_ms = 5;
  o.trim_floor = kChunk;
  auto pool = Pool::Create(o).value();
  std::vector<Block> blocks = Fill(*pool, 4 * kChunk);
  for (const Block& b : blocks) pool->Deallocate(b);
  for (int i = 0; i < 1000 && pool->GetStats().mapped_bytes > kChunk; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(pool->GetStats().mapped_bytes, kChunk);
  EXPECT_GE(pool->GetStats().growth.trims, 3u);
  EXPECT_EQ(d->live_registrations(), 1u);
}

TEST(Trim, RacingAllocationAndFreeNeverTakesAChunkUnderALiveBlock) {
  auto d = std::make_shared<CountingDomain>();
  d->set_concurrent(true);
  PoolOptions o = Options({d}, 24);
  o.populate = false;
  auto pool = Pool::Create(o).value();
  const auto run_for = std::chrono::milliseconds((testing::kTsan || testing::kAsan) ? 1500 : 800);
  const auto stop_at = std::chrono::steady_clock::now() + run_for;
  std::atomic<bool> bad{false};
  std::atomic<std::uint64_t> trimmed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t + 1);
      std::vector<Block> live;
      while (std::chrono::steady_clock::now() < stop_at) {
        if (live.size() < 64 && rng() % 3 != 0) {
          const std::size_t size = std::size_t{16} << (rng() % 17);  // 16 B .. 1 MiB
          Block b = pool->Allocate(size);
          if (!b) continue;
          std::memset(b.data(), t + 1, b.size());
          Keys k;
          if (!d->KeysFor(b.chunk().base, &k) || ToUnderlying(k.lkey) != ToUnderlying(b.lkey())) {
            bad = true;
          }
          live.push_back(b);
        } else if (!live.empty()) {
          const std::size_t i = rng() % live.size();
          const Block b = live[i];
          const auto* p = static_cast<const unsigned char*>(b.data());
          Keys k;
          if (p[0] != t + 1 || p[b.size() - 1] != t + 1 || !d->KeysFor(b.chunk().base, &k)) {
            bad = true;
          }
          pool->Deallocate(b);
          live[i] = live.back();
          live.pop_back();
        }
      }
      for (const Block& b : live) pool->Deallocate(b);
    });
  }
  threads.emplace_back([&] {
    while (std::chrono::steady_clock::now() < stop_at) {
      trimmed += pool->Trim(0);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  for (std::thread& t : threads) t.join();
  EXPECT_FALSE(bad.load()) << "a live block's chunk was trimmed or its keys changed";
  EXPECT_GT(trimmed.load(), 0u) << "the race never trimmed anything: the test proves nothing";
  pool->Trim(0);
  EXPECT_EQ(pool->GetStats().mapped_bytes, 0u);
  EXPECT_EQ(d->live_registrations(), 0u);
  EXPECT_EQ(d->bad_deregisters(), 0u);
}

}  // namespace
}  // namespace pinpool
