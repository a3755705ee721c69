// Moves a file to a peer's block with no copy and no registration per I/O: READ_FIXED from the
// file into a pool block (its io_uring BufferIndex), then, when an RDMA device is present, RDMA
// WRITE from that block to the peer block (its lkey, the peer's address and rkey). Both
// registrations were made once, when the pool registered the chunk with the ring and the PD.
// Here the "peer" is a second QP of this process (loopback); across hosts only the RemoteBuffer
// would travel over your control channel.
//
//   file_to_peer [FILE]     (default: this program's own binary)
#include <fcntl.h>
#include <liburing.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "pinpool/io_uring.h"
#include "pinpool/pool.h"
#include "pinpool/verbs.h"
#include "rc_pair.h"

int main(int argc, char** argv) {
  const char* path = argc > 1 ? argv[1] : "/proc/self/exe";
  const int fd = open(path, O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    std::perror(path);
    return 1;
  }
  const std::size_t size = std::min<std::size_t>(st.st_size, 1 << 20);

  auto ring = pinpool::IoUringDomain::Create(8);
  if (!ring.ok()) {
    std::fprintf(stderr, "io_uring: %s\n", ring.status().ToString().c_str());
    return 1;
  }
  pinpool::PoolOptions options;
  options.chunk_size = 4 * pinpool::kMiB;
  options.budget = 16 * pinpool::kMiB;
  options.domains.push_back(*ring);
  auto verbs = pinpool::VerbsDomain::Open({.access = {.trusted_whole_chunk = {.write = true}}});
  if (verbs.ok()) {
    options.domains.push_back(*verbs);
  } else {
    std::printf("no RDMA device (%s): READ_FIXED only\n", verbs.status().ToString().c_str());
  }
  auto pool = pinpool::Pool::Create(options);
  if (!pool.ok()) {
    std::fprintf(stderr, "pool: %s\n", pool.status().ToString().c_str());
    return 1;
  }

  pinpool::Block block = (*pool)->Allocate(size);
  io_uring* r = (*ring)->ring();
  io_uring_prep_read_fixed(io_uring_get_sqe(r), fd, block.data(), static_cast<unsigned>(size), 0,
                           static_cast<int>(pinpool::ToUnderlying(block.buffer_index(0))));
  io_uring_submit(r);
  io_uring_cqe* cqe = nullptr;
  io_uring_wait_cqe(r, &cqe);
  const int got = cqe->res;
  io_uring_cqe_seen(r, cqe);
  if (got != static_cast<int>(size)) {
    std::fprintf(stderr, "READ_FIXED returned %d (%s)\n", got, got < 0 ? std::strerror(-got) : "");
    return 1;
  }
  std::printf("READ_FIXED %zu bytes of %s into buffer index %u at %p\n", size, path,
              pinpool::ToUnderlying(block.buffer_index(0)), block.data());

  if (verbs.ok()) {
    pinpool::Block peer = (*pool)->Allocate(size);
    auto pair = pinpool::testing::RcPair::Connect((*verbs)->pd(), (*verbs)->pd());
    if (!pair.ok()) {
      std::fprintf(stderr, "QPs: %s\n", pair.status().ToString().c_str());
      return 1;
    }
    auto wc = (*pair)->Write(pinpool::testing::RcPair::Side::kA, pinpool::ToSge(block, 1),
                             pinpool::ToRemoteBuffer(peer, 1));
    if (!wc.ok() || *wc != IBV_WC_SUCCESS) {
      std::fprintf(stderr, "RDMA WRITE failed\n");
      return 1;
    }
    const bool same = std::memcmp(peer.data(), block.data(), size) == 0;
    std::printf("RDMA WRITE with lkey %#x to rkey %#x at %p: %s\n",
                pinpool::ToUnderlying(block.lkey(1)), pinpool::ToUnderlying(peer.rkey(1)),
                peer.data(), same ? "identical" : "DIFFERENT");
    if (!same) return 1;
    (*pool)->Deallocate(peer);
  }
  (*pool)->Deallocate(block);
  close(fd);
  return 0;
}
