// Multithreaded churn: >= 10^6 random-size operations (1 B .. 1 MiB) with cross-thread frees.
// After every allocation: the block lies inside one registered chunk whose keys are the ones the
// domain returned for it, and overlaps no other live block. At every free: its contents are the
// pattern written when it was allocated. Fixed seeds, so a failure reproduces.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "pinpool/pool.h"
#include "support/counting_domain.h"
#include "support/live_set.h"

namespace pinpool {
namespace {

using testing::CountingDomain;
using testing::LiveSet;

struct Live {
  Block block;
  std::uint64_t pattern;
};

std::size_t RandomSize(std::mt19937_64& rng) {
  // Mostly small, a tail up to 1 MiB (log-uniform), as a storage server's buffers are.
  if (rng() % 10 != 0) return 1 + rng() % 4096;
  const double lg = 12.0 + static_cast<double>(rng() % 8001) / 1000.0;  // 2^12 .. 2^20
  return static_cast<std::size_t>(std::exp2(lg));
}

void Fill(const Block& b, std::uint64_t pattern) {
  auto* p = static_cast<unsigned char*>(b.data());
  const std::size_t words = b.size() / 8;
  for (std::size_t i = 0; i < words; ++i) std::memcpy(p + 8 * i, &pattern, 8);
  for (std::size_t i = words * 8; i < b.size(); ++i) p[i] = static_cast<unsigned char>(pattern);
}

bool Check(const Block& b, std::uint64_t pattern) {
  const auto* p = static_cast<const unsigned char*>(b.data());
  const std::size_t words = b.size() / 8;
  for (std::size_t i = 0; i < words; ++i) {
    std::uint64_t w;
    std::memcpy(&w, p + 8 * i, 8);
    if (w != pattern) return false;
  }
  for (std::size_t i = words * 8; i < b.size(); ++i) {
    if (p[i] != static_cast<unsigned char>(pattern)) return false;
  }
  return true;
}

TEST(ChurnTest, MillionOpsAcrossThreadsKeepBlocksInsideRegisteredChunksDisjointAndIntact) {
  constexpr int kThreads = 4;
  constexpr int kOpsPerThread = 260'000;  // >= 10^6 operations in all
  constexpr std::size_t kSlots = 4096;    // shared: a block is often freed by another thread

  auto domain = std::make_shared<CountingDomain>();
  PoolOptions o;
  o.chunk_size = 16 * kMiB;
  o.budget = 1 * kGiB;
  o.page_size = PageSize::kTransparent;
  o.domains.push_back(domain);
  auto pool = Pool::Create(o).value();

  std::vector<std::atomic<Live*>> slots(kSlots);
  for (auto& s : slots) s.store(nullptr);
  LiveSet live;
  std::atomic<std::uint64_t> failures{0}, allocs{0}, frees{0}, cross_frees{0};

  auto worker = [&](int t) {
    std::mt19937_64 rng(0x5eed0000 + t);
    for (int op = 0; op < kOpsPerThread; ++op) {
      auto& slot = slots[rng() % kSlots];
      Live* mine = slot.exchange(nullptr, std::memory_order_acq_rel);
      if (mine != nullptr) {
        if (!Check(mine->block, mine->pattern)) {
          ADD_FAILURE() << "block " << mine->block.data() << " of " << mine->block.size()
                        << " bytes lost its contents";
          ++failures;
        }
        live.Erase(mine->block);
        if (rng() % 2 == 0) {
          pool->Deallocate(mine->block);
        } else {
          pool->Deallocate(mine->block.data());
        }
        ++frees;
        delete mine;
        continue;
      }
      const std::size_t size = RandomSize(rng);
      const std::size_t align = (rng() % 16 == 0) ? (std::size_t{64} << (rng() % 7)) : 16;
      Block b = pool->Allocate(size, align);
      if (!b) {
        ADD_FAILURE() << "allocation of " << size << " failed: " << pool->last_growth_error();
        ++failures;
        continue;
      }
      ++allocs;
      const auto start = reinterpret_cast<std::uintptr_t>(b.data());
      const ChunkInfo& c = b.chunk();
      Keys registered;
      bool ok = start % align == 0 && start >= c.base && start + size <= c.base + c.size &&
                domain->KeysFor(c.base, &registered) && registered.length == c.size &&
                ToUnderlying(registered.lkey) == ToUnderlying(b.lkey()) &&
                b.offset() == start - registered.base;
      if (!ok) {
        ADD_FAILURE() << "block " << b.data() << "+" << size << " is not inside its chunk "
                      << reinterpret_cast<void*>(c.base) << " with that chunk's keys";
        ++failures;
      }
      if (!live.Insert(b)) {
        ADD_FAILURE() << "block " << b.data() << "+" << size << " overlaps a live block";
        ++failures;
      }
      auto* l = new Live{b, rng() | 1};
      Fill(b, l->pattern);
      Live* prev = slot.exchange(l, std::memory_order_acq_rel);
      if (prev != nullptr) {  // another thread filled the slot meanwhile: free theirs
        EXPECT_TRUE(Check(prev->block, prev->pattern));
        live.Erase(prev->block);
        pool->Deallocate(prev->block);
        ++frees;
        ++cross_frees;
        delete prev;
      }
      if (failures > 20) return;
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
  for (auto& th : threads) th.join();

  for (auto& s : slots) {
    if (Live* l = s.exchange(nullptr)) {
      EXPECT_TRUE(Check(l->block, l->pattern));
      pool->Deallocate(l->block);
      delete l;
    }
  }
  EXPECT_EQ(failures.load(), 0u);
  EXPECT_GE(allocs + frees, 1'000'000u);
  EXPECT_EQ(domain->bad_deregisters(), 0u);
  const PoolStats stats = pool->GetStats();
  std::printf("churn: %llu allocations, %llu frees (%llu in races), %zu chunks, %zu MiB mapped\n",
              static_cast<unsigned long long>(allocs.load()),
              static_cast<unsigned long long>(frees.load()),
              static_cast<unsigned long long>(cross_frees.load()), stats.chunks.size(),
              stats.mapped_bytes >> 20);
}

}  // namespace
}  // namespace pinpool
