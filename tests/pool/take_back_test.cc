// Taking memory back (Pool::GiveBack, the lease on a chunk's file; docs/backing.md, "Taking
// memory back"), on the host's real kernel with the long-term pin and io_uring domains: a memfd
// chunk refuses another process's truncate by construction (seals: EPERM) and the pool is
// untouched; a tmpfs file chunk holding a granted block is given back within the lease-break time
// when another process truncates its file: its grant revoked and confirmed, deregistered (VmPin
// drops), unmapped, its file gone, io_uring's next access through its fixed buffer fails, the
// application told which blocks it lost, the other chunk intact,
// and the truncate then completes. GiveBack by the application waits for unconfirmed grants and
// finishes on a later call; bad input is refused; frees of lost blocks are accepted.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "pinpool/grant_lock.h"
#include "pinpool/io_uring.h"
#include "pinpool/pool.h"
#include "support/child_process.h"
#include "support/counting_domain.h"
#include "support/fake_grant_holder.h"
#include "support/fixed_io.h"
#include "support/make_pool.h"
#include "support/proc_status.h"

namespace pinpool {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
using testing::ProcStatusBytes;

using FakeHolder = testing::FakeGrantHolder;
using testing::FixedIo;
using testing::ScratchFile;

std::string MakeDir() {
  char tmpl[] = "/dev/shm/pinpool-takeback-XXXXXX";
  return mkdtemp(tmpl) != nullptr ? tmpl : "";
}

std::size_t FilesIn(const std::string& dir) {
  std::size_t n = 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

// Whether [p, p + n) is mapped at all (mincore fails with ENOMEM on an unmapped range) and
// accessible (the range is PROT_NONE after a give back: msync still works, so read the maps).
bool Accessible(const void* p) {
  FILE* f = std::fopen("/proc/self/maps", "r");
  char line[512];
  bool ok = false;
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  while (std::fgets(line, sizeof line, f) != nullptr) {
    unsigned long lo = 0, hi = 0;
    char perms[5] = {};
    if (std::sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) == 3 && a >= lo && a < hi) {
      ok = perms[0] == 'r';
    }
  }
  std::fclose(f);
  return ok;
}

// 2 MiB chunks of 4 KiB pages, `chunks` of them mapped, on `domains` (none: the default
// long-term pin domain).
std::unique_ptr<Pool> MakePool(BackingKind kind, std::size_t chunks, const std::string& dir = "",
                               std::vector<std::shared_ptr<Domain>> domains = {}) {
  return testing::MakePool({.budget = 8 * kMiB,
                            .initial_size = chunks * 2 * kMiB,
                            .domains = std::move(domains),
                            .backing = kind,
                            .directory = dir});
}

// Blocks until every chunk has one: large blocks land in whole chunks, lowest first.
std::vector<Block> BlocksInTwoChunks(Pool& pool) {
  std::vector<Block> blocks;
  for (int i = 0; i < 2; ++i) {
    blocks.push_back(pool.Allocate(1536 * 1024));  // one per chunk
  }
  for (int i = 0; i < 4; ++i) blocks.push_back(pool.Allocate(4096));
  return blocks;
}

TEST(TakeBackTest, AnotherProcessTruncatingAChunkFileGetsItOnlyAfterItIsGivenBack) {
  const std::string dir = MakeDir();
  ASSERT_FALSE(dir.empty());
  // The long-term pin domain and an io_uring ring whose fixed buffers the test uses.
  auto pin = MakeLongTermPinDomain();
  ASSERT_TRUE(pin.ok()) << pin.status();
  auto ring = IoUringDomain::Create(8);
  ASSERT_TRUE(ring.ok()) << ring.status();
  auto pool = MakePool(BackingKind::kFiles, 2, dir, {*pin, *ring});
  ASSERT_NE(pool, nullptr);
  ScratchFile scratch("pinpool_take_back_test");
  ASSERT_GE(scratch.fd(), 0) << "no non-tmpfs directory for a scratch file";
  ASSERT_EQ(FilesIn(dir), 2u);
  const long long pinned_before = ProcStatusBytes("VmPin");
  std::vector<Block> blocks = BlocksInTwoChunks(*pool);
  for (const Block& b : blocks) ASSERT_TRUE(b);
  ASSERT_NE(blocks[0].chunk().index, blocks[1].chunk().index);
  const Block& doomed = blocks[0];
  const Block& kept = blocks[1];
  std::memset(kept.data(), 'K', kept.size());
  ASSERT_EQ(FixedIo((*ring)->ring(), true, scratch.fd(), doomed, 1, 0),
            static_cast<int>(doomed.size()));
  // A grant reaches the doomed block; a second block of its chunk was freed (not lost).
  FakeHolder holder(/*synchronous=*/true);
  {
    GrantLock lock(*pool);
    lock.AddHolder();
    ASSERT_TRUE(lock.CheckLive(doomed).ok());
    lock.Begin(doomed, holder, 1);
    holder.blocks[1] = doomed.data();
  }
  std::vector<void*> lost_expected = {doomed.data()};
  for (std::size_t i = 2; i < blocks.size(); ++i) {
    if (blocks[i].chunk().index == doomed.chunk().index) lost_expected.push_back(blocks[i].data());
  }
  std::sort(lost_expected.begin(), lost_expected.end());
  std::string path;
  for (const ChunkStats& c : pool->GetStats().chunks) {
    if (c.index == doomed.chunk().index) path = c.backing.substr(std::strlen("file "));
  }
  ASSERT_FALSE(path.empty());

  // Another process truncates the file by its path: the kernel holds it in truncate() until the
  // lease is released, which pinpool does last.
  int done[2];
  ASSERT_EQ(pipe(done), 0);
  const auto t0 = std::chrono::steady_clock::now();
  testing::ChildProcess child([&] {
    const int rc = truncate(path.c_str(), 0);
    const char byte = rc == 0 ? 'y' : 'n';
    (void)!write(done[1], &byte, 1);
    return rc == 0 ? 0 : 1;
  });
  std::vector<LostChunk> lost;
  while (lost.empty() && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10)) {
    lost = pool->TakeLostChunks();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const bool truncated = child.ExitsWith(0);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(truncated) << "the truncate failed";
  EXPECT_LT(seconds, 10.0) << "well within /proc/sys/fs/lease-break-time (45 s by default)";
  std::printf("the other process's truncate returned %.3f s after it started\n", seconds);

  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].index, doomed.chunk().index);
  EXPECT_EQ(lost[0].size, 2 * kMiB);
  EXPECT_NE(lost[0].reason.find("lease"), std::string::npos) << lost[0].reason;
  std::vector<void*> got;
  for (const LostBlock& b : lost[0].blocks) got.push_back(b.data);
  EXPECT_EQ(got, lost_expected);
  EXPECT_EQ(holder.revoked, std::vector<std::uint64_t>{1});  // revoked and confirmed first
  // Unmapped, deregistered (VmPin down by the chunk), its file gone; the other chunk intact.
  EXPECT_FALSE(Accessible(doomed.data()));
  EXPECT_FALSE(pool->Contains(doomed.data()));
  EXPECT_EQ(FilesIn(dir), 1u);
  // Both domains pin it (io_uring fixed buffers are long-term pins too).
  EXPECT_EQ(ProcStatusBytes("VmPin"), pinned_before - static_cast<long long>(2 * 2 * kMiB));
  const PoolStats stats = pool->GetStats();
  EXPECT_EQ(stats.chunks.size(), 1u);
  EXPECT_EQ(stats.chunks_given_back, 1u);
  EXPECT_EQ(stats.growths, 2u) << "the chunk given back was added once";
  EXPECT_EQ(stats.lost_blocks, lost_expected.size());
  for (std::size_t i = 0; i < kept.size(); ++i) ASSERT_EQ(static_cast<char*>(kept.data())[i], 'K');
  // The device's next access through the chunk's registration fails; the other chunk's works.
  EXPECT_LT(FixedIo((*ring)->ring(), true, scratch.fd(), doomed, 1, 0), 0);
  EXPECT_EQ(FixedIo((*ring)->ring(), true, scratch.fd(), kept, 1, 0),
            static_cast<int>(kept.size()));
  // Lost blocks: frees accepted and ignored; nothing of the chunk is handed out again.
  pool->Deallocate(doomed);
  EXPECT_EQ(pool->GetStats().lost_block_frees, 1u);
  EXPECT_EQ(pool->UsableSize(doomed.data()), 0u);
  EXPECT_FALSE(pool->Reallocate(doomed, 64));
  for (int i = 0; i < 200; ++i) {
    const Block b = pool->Allocate(8192);
    if (!b) break;
    EXPECT_NE(b.chunk().index, doomed.chunk().index);
  }
  {
    GrantLock lock(*pool);
    lock.RemoveHolder();
  }
  close(done[0]);
  close(done[1]);
  pool.reset();
  EXPECT_EQ(FilesIn(dir), 0u);
  rmdir(dir.c_str());
}

TEST(TakeBackTest, AMemfdChunkRefusesAnotherProcessesTruncateAndThePoolIsUntouched) {
  auto pool = MakePool(BackingKind::kMemfd, 1);
  ASSERT_NE(pool, nullptr);
  const Block b = pool->Allocate(4096);
  ASSERT_TRUE(b);
  std::memset(b.data(), 'M', b.size());
  // The chunk's memfd, as another process of this user (or root) can reach it.
  std::string path;
  for (int fd = 0; fd < 1024 && path.empty(); ++fd) {
    char link[256] = {};
    const std::string p = "/proc/" + std::to_string(getpid()) + "/fd/" + std::to_string(fd);
    if (readlink(p.c_str(), link, sizeof link - 1) > 0 &&
        std::strncmp(link, "/memfd:pinpool", 14) == 0) {
      path = p;
    }
  }
  ASSERT_FALSE(path.empty());
  testing::ChildProcess child([&] {
    const int fd = open(path.c_str(), O_RDWR);
    const bool refused = fd >= 0 && ftruncate(fd, 0) != 0 && errno == EPERM &&
                         truncate(path.c_str(), 0) != 0 && errno == EPERM;
    return refused ? 0 : 1;
  });
  EXPECT_TRUE(child.ExitsWith(0)) << "a truncate was not refused";
  EXPECT_EQ(pool->GetStats().chunks_given_back, 0u);
  EXPECT_EQ(pool->GetStats().chunks.size(), 1u);
  EXPECT_TRUE(pool->TakeLostChunks().empty());
  for (std::size_t i = 0; i < b.size(); ++i) ASSERT_EQ(static_cast<char*>(b.data())[i], 'M');
  pool->Deallocate(b);
}

TEST(TakeBackTest, GiveBackWaitsForUnconfirmedGrantsAndFinishesOnALaterCall) {
  auto created = MakePool(BackingKind::kAnonymous, 2);
  ASSERT_NE(created, nullptr);
  Pool& pool = *created;
  std::vector<Block> blocks = BlocksInTwoChunks(pool);
  const Block& doomed = blocks[0];
  FakeHolder holder(/*synchronous=*/false);
  {
    GrantLock lock(pool);
    lock.AddHolder();
    lock.Begin(doomed, holder, 7);
  }
  EXPECT_EQ(pool.GiveBack(doomed.data(), std::chrono::milliseconds(20)).code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(holder.revoked, std::vector<std::uint64_t>{7});
  EXPECT_TRUE(pool.TakeLostChunks().empty());
  EXPECT_TRUE(Accessible(doomed.data())) << "unmapped before its grant's end was confirmed";
  {
    GrantLock lock(pool);
    // No new grant on a withdrawn chunk.
    EXPECT_EQ(lock.CheckLive(doomed).code(), absl::StatusCode::kFailedPrecondition);
    lock.End(doomed.data(), holder, 7);
  }
  // Freed while withdrawn: ignored, so no longer lost? It was live when the chunk was withdrawn.
  EXPECT_TRUE(pool.GiveBack(doomed.data(), std::chrono::milliseconds(20)).ok());
  const std::vector<LostChunk> lost = pool.TakeLostChunks();
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_NE(lost[0].reason.find("Pool::GiveBack"), std::string::npos);
  ASSERT_FALSE(lost[0].blocks.empty());
  EXPECT_EQ(lost[0].blocks[0].data, doomed.data());
  EXPECT_FALSE(Accessible(doomed.data()));
  // Again: nothing more to do. Bad input: not the pool's memory.
  EXPECT_TRUE(pool.GiveBack(doomed.data()).ok());
  int local = 0;
  EXPECT_EQ(pool.GiveBack(&local).code(), absl::StatusCode::kInvalidArgument);
  {
    GrantLock lock(pool);
    lock.RemoveHolder();
  }
}

// A pool destroyed while a give back waits for a revocation deregisters that chunk with the
// others: no registration left behind.
TEST(TakeBackTest, APoolDestroyedWithAGiveBackPendingLeavesNothingRegistered) {
  auto d = std::make_shared<testing::CountingDomain>();
  auto pool = MakePool(BackingKind::kAnonymous, 2, "", {d});
  ASSERT_NE(pool, nullptr);
  const Block b = pool->Allocate(4096);
  FakeHolder holder(/*synchronous=*/false);
  {
    GrantLock lock(*pool);
    lock.AddHolder();
    lock.Begin(b, holder, 1);
  }
  EXPECT_EQ(pool->GiveBack(b.data(), std::chrono::milliseconds(5)).code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(d->live_registrations(), 2u) << "deregistered before its grant's end was confirmed";
  {
    GrantLock lock(*pool);
    lock.RemoveHolder();  // its grant never confirmed
  }
  pool.reset();
  EXPECT_EQ(d->live_registrations(), 0u);
}

// A named buffer class's chunk (docs/classes.md): the class's own heap forgets it and its live
// blocks are reported; the class keeps allocating from its other chunks, and the chunk given back
// stays counted as the class's (its cap, like the budget, has one chunk fewer).
TEST(TakeBackTest, AChunkOfANamedClassIsForgottenByThatClasssHeap) {
  PoolOptions o;
  o.page_size = PageSize::k4K;
  o.chunk_size = 2 * kMiB;
  o.budget = 8 * kMiB;
  o.classes = {{.name = "rx", .reserved = 4 * kMiB, .cap = 6 * kMiB}};
  auto created = Pool::Create(o);
  ASSERT_TRUE(created.ok()) << created.status();
  Pool& pool = **created;
  const ClassId rx = pool.ClassOf("rx").value();
  const Block a = pool.Allocate(rx, 4096), b = pool.Allocate(rx, 4096);
  ASSERT_TRUE(a && b);
  ASSERT_EQ(a.chunk().index, b.chunk().index);
  pool.Deallocate(b);
  ASSERT_TRUE(pool.GiveBack(a.data()).ok());
  const std::vector<LostChunk> lost = pool.TakeLostChunks();
  ASSERT_EQ(lost.size(), 1u);
  ASSERT_EQ(lost[0].blocks.size(), 1u);
  EXPECT_EQ(lost[0].blocks[0].data, a.data());
  pool.Deallocate(a);  // ignored
  // The class grows into other chunks; two more fit under its cap of three.
  std::vector<Block> more;
  for (int i = 0; i < 2; ++i) {
    more.push_back(pool.Allocate(rx, 1536 * kKiB));
    ASSERT_TRUE(more.back()) << i;
    EXPECT_NE(more.back().chunk().index, a.chunk().index);
  }
  EXPECT_FALSE(pool.Allocate(rx, 1536 * kKiB)) << "the class's cap has one chunk fewer";
  for (const Block& m : more) pool.Deallocate(m);
}

// Stress (TSan in the tsan preset): threads allocate and free blocks of every size on every chunk
// (never touching their bytes: a block lost with its chunk faults) while a chunk is given back
// under them. Once GiveBack has returned, no allocation hands out a block of that chunk; frees
// of its blocks, before and after, are accepted; the lost blocks reported are blocks the threads
// held at the time.
TEST(TakeBackTest, GivingBackAChunkWhileOtherThreadsAllocateAndFreeIsSafe) {
  auto pool = MakePool(BackingKind::kAnonymous, 4);
  ASSERT_NE(pool, nullptr);
  std::atomic<std::uintptr_t> gone{0};
  std::atomic<bool> stop{false};
  std::atomic<int> from_gone{0};
  constexpr int kThreads = 3;
  std::vector<std::thread> threads;
  std::vector<std::vector<void*>> ever(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<Block> held;
      std::uint64_t x = 88172645463325252ull + t;
      while (!stop.load(std::memory_order_relaxed)) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        const std::uintptr_t gone_now = gone.load(std::memory_order_acquire);
        if (held.size() < 64 && (x & 3) != 0) {
          const Block b = pool->Allocate(std::size_t{16} << (x >> 8) % 15);  // 16 B .. 256 KiB
          if (!b) continue;
          const auto base = reinterpret_cast<std::uintptr_t>(b.data()) & ~(2 * kMiB - 1);
          if (gone_now != 0 && base == gone_now) from_gone.fetch_add(1);
          ever[t].push_back(b.data());
          held.push_back(b);
        } else if (!held.empty()) {
          const std::size_t k = (x >> 20) % held.size();
          pool->Deallocate(held[k]);
          held[k] = held.back();
          held.pop_back();
        }
      }
      for (const Block& b : held) pool->Deallocate(b);
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const PoolStats before = pool->GetStats();
  ASSERT_GE(before.chunks.size(), 2u);
  const ChunkStats& doomed = before.chunks[before.chunks.size() / 2];
  ASSERT_TRUE(pool->GiveBack(reinterpret_cast<void*>(doomed.base)).ok());
  gone.store(doomed.base, std::memory_order_release);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  stop = true;
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(from_gone.load(), 0) << "a block of the chunk given back was handed out again";
  const std::vector<LostChunk> lost = pool->TakeLostChunks();
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].base, doomed.base);
  for (const LostBlock& b : lost[0].blocks) {
    bool handed_out = false;
    for (const auto& v : ever) handed_out |= std::find(v.begin(), v.end(), b.data) != v.end();
    EXPECT_TRUE(handed_out) << b.data << " was never allocated";
  }
  const PoolStats after = pool->GetStats();
  EXPECT_EQ(after.chunks_given_back, 1u);
  EXPECT_EQ(after.live_bytes, 0u) << "the blocks the threads freed came back";
}

}  // namespace
}  // namespace pinpool
