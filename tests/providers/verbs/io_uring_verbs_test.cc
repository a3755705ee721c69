// One chunk registered with an RDMA device and an io_uring ring at once: a block is read from a
// file with READ_FIXED (its BufferIndex) and RDMA-written to another block (its lkey and the
// peer block's rkey), with no copy and no registration per I/O. Runs in the soft-RoCE guest.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <liburing.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "pinpool/io_uring.h"
#include "verbs_test_support.h"

namespace pinpool::testing {
namespace {

class IoUringVerbsTest : public VerbsTest {};

TEST_F(IoUringVerbsTest, FileReadWithReadFixedIsRdmaWrittenToAnotherBlockByteExact) {
  absl::StatusOr<std::shared_ptr<IoUringDomain>> ring = IoUringDomain::Create(8);
  ASSERT_TRUE(ring.ok()) << ring.status();
  std::unique_ptr<Pool> pool = MakePool({domain_, *ring});
  ASSERT_NE(pool, nullptr);

  // The file: a pattern, on the filesystem of the working directory (the build tree).
  const std::string path = "./pinpool_io_uring_verbs." + std::to_string(getpid());
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0) << path;
  unlink(path.c_str());
  constexpr std::size_t kSizes[] = {4096, 65536, 300000};
  std::size_t total = 0;
  for (std::size_t s : kSizes) total += s;
  std::vector<std::uint8_t> file(total);
  for (std::size_t i = 0; i < total; ++i) file[i] = PatternByte(42, i);
  ASSERT_EQ(pwrite(fd, file.data(), total, 0), static_cast<ssize_t>(total));

  std::unique_ptr<RcPair> pair = Connect(domain_->pd(), domain_->pd());
  ASSERT_NE(pair, nullptr);
  off_t offset = 0;
  for (std::size_t size : kSizes) {
    Block from = pool->Allocate(size);
    Block to = pool->Allocate(size);
    ASSERT_TRUE(from && to);
    ASSERT_EQ(from.domain_count(), 2u);
    std::memset(from.data(), 0, size);
    std::memset(to.data(), 0xee, size);

    io_uring_sqe* sqe = io_uring_get_sqe((*ring)->ring());
    io_uring_prep_read_fixed(sqe, fd, from.data(), static_cast<unsigned>(size), offset,
                             static_cast<int>(ToUnderlying(from.buffer_index(1))));
    ASSERT_EQ(io_uring_submit((*ring)->ring()), 1);
    io_uring_cqe* cqe = nullptr;
    ASSERT_EQ(io_uring_wait_cqe((*ring)->ring(), &cqe), 0);
    ASSERT_EQ(cqe->res, static_cast<int>(size)) << "READ_FIXED: " << std::strerror(-cqe->res);
    io_uring_cqe_seen((*ring)->ring(), cqe);

    absl::StatusOr<ibv_wc_status> wc =
        pair->Write(RcPair::Side::kA, ToSge(from, 0), ToRemoteBuffer(to, 0));
    ASSERT_TRUE(wc.ok()) << wc.status();
    ASSERT_EQ(*wc, IBV_WC_SUCCESS) << StatusName(*wc);
    EXPECT_EQ(std::memcmp(to.data(), file.data() + offset, size), 0)
        << size << "-byte block: the RDMA-written copy differs from the file";
    offset += static_cast<off_t>(size);
    pool->Deallocate(from);
    pool->Deallocate(to);
  }
  close(fd);
  EXPECT_EQ(pool->GetStats().domains.size(), 2u);
}

}  // namespace
}  // namespace pinpool::testing
