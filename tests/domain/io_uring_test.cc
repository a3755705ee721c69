// The io_uring fixed-buffer domain on the host's real io_uring: blocks are read and written with
// READ_FIXED / WRITE_FIXED using only their BufferIndex, through a file on a real filesystem
// (tmpfs punts to a worker and proves less), including after heavy allocation churn, which is
// where a heap that gave registered pages back would make the ring see stale pages.
#include "pinpool/io_uring.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <liburing.h>
#include <linux/magic.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "pinpool/pool.h"
#include "support/fixed_io.h"
#include "support/proc_status.h"
#include "support/unprivileged.h"

namespace pinpool {
namespace {

using ::testing::AllOf;
using testing::FixedIo;
using ::testing::HasSubstr;
using testing::ProcStatusBytes;
using testing::ScratchFile;

std::shared_ptr<IoUringDomain> Ring() {
  auto ring = IoUringDomain::Create(8);
  EXPECT_TRUE(ring.ok()) << ring.status();
  return ring.ok() ? *ring : nullptr;
}

PoolOptions Options(std::shared_ptr<Domain> domain) {
  PoolOptions o;
  o.chunk_size = 4 * kMiB;
  o.budget = 64 * kMiB;
  o.page_size = PageSize::kTransparent;
  o.domains.push_back(std::move(domain));
  return o;
}

void Fill(const Block& b, unsigned seed) {
  std::mt19937 rng(seed);
  auto* p = static_cast<unsigned char*>(b.data());
  for (std::size_t i = 0; i < b.size(); ++i) p[i] = static_cast<unsigned char>(rng());
}

TEST(IoUringTest, WriteFixedThenReadFixedAcrossChunksIsByteExact) {
  ScratchFile file("pinpool_io_uring_test");
  ASSERT_GE(file.fd(), 0) << "no non-tmpfs directory to write a scratch file in";
  auto ring = Ring();
  auto pool = Pool::Create(Options(ring)).value();
  // Sizes that land in different chunks (3 MiB blocks need a chunk each).
  std::vector<Block> out, in;
  for (std::size_t size : {std::size_t{4096}, std::size_t{3} * kMiB, std::size_t{65536},
                           std::size_t{3} * kMiB, std::size_t{12345}}) {
    out.push_back(pool->Allocate(size));
    in.push_back(pool->Allocate(size));
    ASSERT_TRUE(out.back() && in.back());
  }
  EXPECT_GE(pool->GetStats().chunks.size(), 3u);
  EXPECT_NE(ToUnderlying(out[1].buffer_index()), ToUnderlying(out[3].buffer_index()));
  off_t offset = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    Fill(out[i], 100 + static_cast<unsigned>(i));
    ASSERT_EQ(FixedIo(ring->ring(), true, file.fd(), out[i], 0, offset),
              static_cast<int>(out[i].size()));
    std::memset(in[i].data(), 0, in[i].size());
    ASSERT_EQ(FixedIo(ring->ring(), false, file.fd(), in[i], 0, offset),
              static_cast<int>(in[i].size()));
    EXPECT_EQ(std::memcmp(in[i].data(), out[i].data(), out[i].size()), 0) << "block " << i;
    offset += static_cast<off_t>(out[i].size());
  }
  for (auto& b : out) pool->Deallocate(b);
  for (auto& b : in) pool->Deallocate(b);
}

TEST(IoUringTest, AfterChurnWriteFixedWritesWhatTheCpuLastWrote) {
  ScratchFile file("pinpool_io_uring_test");
  ASSERT_GE(file.fd(), 0);
  auto ring = Ring();
  auto pool = Pool::Create(Options(ring)).value();
  std::mt19937_64 rng(7);
  std::vector<Block> live;
  for (int op = 0; op < 100'000; ++op) {  // 10^5 allocate/free operations, 16 B .. 1 MiB
    if (!live.empty() && (live.size() > 200 || rng() % 3 == 0)) {
      std::swap(live[rng() % live.size()], live.back());
      pool->Deallocate(live.back());
      live.pop_back();
    } else {
      const std::size_t size = std::size_t{16} << (rng() % 17);
      Block b = pool->Allocate(size);
      ASSERT_TRUE(b) << pool->last_growth_error();
      static_cast<unsigned char*>(b.data())[0] = 1;  // dirty its pages, as a user would
      static_cast<unsigned char*>(b.data())[size - 1] = 1;
      live.push_back(b);
    }
  }
  // Every live block: the CPU writes, the ring writes it to the file, the file must match.
  // Then the other way: the ring reads into the block, the CPU must see it.
  off_t offset = 0;
  std::vector<unsigned char> back;
  for (std::size_t i = 0; i < live.size(); ++i) {
    const Block& b = live[i];
    Fill(b, 1000 + static_cast<unsigned>(i));
    ASSERT_EQ(FixedIo(ring->ring(), true, file.fd(), b, 0, offset), static_cast<int>(b.size()));
    back.assign(b.size(), 0);
    ASSERT_EQ(pread(file.fd(), back.data(), back.size(), offset),
              static_cast<ssize_t>(back.size()));
    ASSERT_EQ(std::memcmp(back.data(), b.data(), b.size()), 0)
        << "WRITE_FIXED of block " << b.data() << " (" << b.size()
        << " bytes) wrote other bytes than the CPU wrote: its pages were replaced";
    std::memset(b.data(), 0, b.size());
    ASSERT_EQ(FixedIo(ring->ring(), false, file.fd(), b, 0, offset), static_cast<int>(b.size()));
    ASSERT_EQ(std::memcmp(back.data(), b.data(), b.size()), 0)
        << "READ_FIXED into block " << b.data() << " is not what the CPU sees";
    offset += static_cast<off_t>(b.size());
  }
  EXPECT_GT(live.size(), 150u);
  for (auto& b : live) pool->Deallocate(b);
}

TEST(IoUringTest, SlotsAreTakenPerChunkAndReleasedWithThePool) {
  auto ring = Ring();
  {
    auto pool = Pool::Create(Options(ring)).value();
    std::vector<Block> blocks;
    for (int i = 0; i < 3; ++i) blocks.push_back(pool->Allocate(3 * kMiB));
    EXPECT_EQ(ring->slots_in_use(), pool->GetStats().chunks.size());
    EXPECT_GE(ring->slots_in_use(), 3u);
  }
  EXPECT_EQ(ring->slots_in_use(), 0u);
}

TEST(IoUringTest, BadOptionsAndAForeignTableAreRefusedClearly) {
  IoUringDomainOptions o;
  o.slots = 0;
  EXPECT_EQ(IoUringDomain::Create(8, o).status().code(), absl::StatusCode::kInvalidArgument);
  io_uring ring;
  ASSERT_EQ(io_uring_queue_init(4, &ring, 0), 0);
  ASSERT_EQ(io_uring_register_buffers_sparse(&ring, 4), 0);  // the application's own table
  auto wrapped = IoUringDomain::Wrap(&ring);
  EXPECT_EQ(wrapped.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(wrapped.status().message()), HasSubstr("register_table = false"));
  IoUringDomainOptions use_theirs;
  use_theirs.register_table = false;
  use_theirs.first_slot = 2;
  use_theirs.slots = 2;
  auto shared = IoUringDomain::Wrap(&ring, use_theirs);
  ASSERT_TRUE(shared.ok()) << shared.status();
  {
    auto pool = Pool::Create(Options(*shared)).value();
    Block b = pool->Allocate(100);
    ASSERT_TRUE(b);
    EXPECT_EQ(ToUnderlying(b.buffer_index()), 2u);
    pool->Deallocate(b);
  }
  shared->reset();
  io_uring_queue_exit(&ring);
}

TEST(IoUringMemlockTest, SixteenMiBPoolOverAnEightMiBLimitFailsNamingItAndKeepsNothing) {
  testing::RunAsUnprivileged([] {
    auto ring = IoUringDomain::Create(8).value();
    const long long pinned = ProcStatusBytes("VmPin");
    PoolOptions o = Options(ring);
    o.chunk_size = 16 * kMiB;
    o.initial_size = 16 * kMiB;
    auto pool = Pool::Create(o);
    ASSERT_FALSE(pool.ok());
    EXPECT_EQ(pool.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(std::string(pool.status().message()),
                AllOf(HasSubstr("RLIMIT_MEMLOCK is 8 MiB"), HasSubstr("ulimit -l")));
    EXPECT_EQ(ring->slots_in_use(), 0u);
    EXPECT_EQ(ProcStatusBytes("VmPin"), pinned);
    std::fprintf(stderr, "as the user sees it: %s\n", pool.status().ToString().c_str());
  });
}

TEST(IoUringMemlockTest, GrowthUntilTheKernelRefusesGivesTheSameErrorAndKeepsServing) {
  testing::RunAsUnprivileged([] {
    auto ring = IoUringDomain::Create(8).value();
    const long long pinned = ProcStatusBytes("VmPin");
    PoolOptions o = Options(ring);
    o.chunk_size = 2 * kMiB;
    std::vector<Block> blocks;
    {
      auto pool = Pool::Create(o).value();
      for (Block b; (b = pool->Allocate(kMiB));) blocks.push_back(b);
      EXPECT_GE(blocks.size(), 3u);
      EXPECT_LE(blocks.size(), 8u);
      EXPECT_THAT(std::string(pool->last_growth_error().message()),
                  HasSubstr("RLIMIT_MEMLOCK is 8 MiB"));
      EXPECT_EQ(ring->slots_in_use(), pool->GetStats().chunks.size());
      pool->Deallocate(blocks.back());
      EXPECT_TRUE(pool->Allocate(kMiB));  // what it has, it still serves
    }
    EXPECT_EQ(ring->slots_in_use(), 0u);
    EXPECT_EQ(ProcStatusBytes("VmPin"), pinned);
  });
}

}  // namespace
}  // namespace pinpool
