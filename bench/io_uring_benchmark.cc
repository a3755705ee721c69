// READ_FIXED into a pool block (registered once, with its chunk) vs the same read into a buffer
// registered for that one operation (a sparse-slot update before and after: the cheapest way to
// register per I/O), and a plain IORING_OP_READ with no registration, in one run. 4 KiB and
// 64 KiB reads from a page-cache-hot file on a real filesystem (the working directory).
//
//   build/bench/io_uring_benchmark --benchmark_repetitions=5
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/magic.h>
#include <sys/uio.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "pinpool/io_uring.h"
#include "pinpool/pool.h"

namespace {

constexpr std::size_t kFileSize = 16 << 20;

struct Setup {
  std::shared_ptr<pinpool::IoUringDomain> domain;  // the pool's ring (slots from 1 on)
  std::unique_ptr<pinpool::Pool> pool;
  int fd = -1;
  std::string path;
};

Setup& Get() {
  static Setup* s = [] {
    auto* setup = new Setup;
    struct statfs fs;
    if (statfs(".", &fs) != 0 || fs.f_type == TMPFS_MAGIC) {
      std::fprintf(stderr, "run from a directory on a real filesystem, not tmpfs\n");
      std::abort();
    }
    setup->path = "./pinpool_io_uring_bench." + std::to_string(getpid());
    setup->fd = open(setup->path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    std::vector<char> data(kFileSize, 'x');
    if (setup->fd < 0 ||
        write(setup->fd, data.data(), data.size()) != static_cast<ssize_t>(kFileSize)) {
      std::perror("bench file");
      std::abort();
    }
    unlink(setup->path.c_str());  // gone when the process is
    pinpool::IoUringDomainOptions o;
    o.first_slot = 1;  // slot 0 is for the per-operation registration
    o.slots = 64;
    setup->domain = pinpool::IoUringDomain::Create(8, o).value();
    // Pinpool registered slots 1..64; make the table cover slot 0 too: it already does
    // (first_slot + slots entries, sparse).
    pinpool::PoolOptions po;
    po.chunk_size = 4 * pinpool::kMiB;
    po.budget = 16 * pinpool::kMiB;
    po.initial_size = 4 * pinpool::kMiB;
    po.domains.push_back(setup->domain);
    setup->pool = pinpool::Pool::Create(po).value();
    return setup;
  }();
  return *s;
}

int Complete(io_uring* ring) {
  io_uring_submit(ring);
  io_uring_cqe* cqe = nullptr;
  io_uring_wait_cqe(ring, &cqe);
  const int res = cqe->res;
  io_uring_cqe_seen(ring, cqe);
  return res;
}

void BM_ReadFixedPoolBlock(benchmark::State& state) {
  Setup& s = Get();
  const auto size = static_cast<std::size_t>(state.range(0));
  pinpool::Block b = s.pool->Allocate(size, 4096);
  io_uring* ring = s.domain->ring();
  off_t off = 0;
  for (auto _ : state) {
    io_uring_prep_read_fixed(io_uring_get_sqe(ring), s.fd, b.data(), size, off,
                             static_cast<int>(pinpool::ToUnderlying(b.buffer_index())));
    if (Complete(ring) != static_cast<int>(size)) state.SkipWithError("short read");
    off = (off + size) % kFileSize;
  }
  s.pool->Deallocate(b);
  state.SetBytesProcessed(state.iterations() * size);
}

void BM_ReadRegisteredPerOperation(benchmark::State& state) {
  Setup& s = Get();
  const auto size = static_cast<std::size_t>(state.range(0));
  void* buf = std::aligned_alloc(4096, size);
  io_uring* ring = s.domain->ring();
  off_t off = 0;
  __u64 tag = 0;
  for (auto _ : state) {
    iovec iov{buf, size};
    if (io_uring_register_buffers_update_tag(ring, 0, &iov, &tag, 1) != 1) {
      state.SkipWithError("register");
    }
    io_uring_prep_read_fixed(io_uring_get_sqe(ring), s.fd, buf, size, off, 0);
    if (Complete(ring) != static_cast<int>(size)) state.SkipWithError("short read");
    iovec empty{nullptr, 0};
    io_uring_register_buffers_update_tag(ring, 0, &empty, &tag, 1);
    off = (off + size) % kFileSize;
  }
  std::free(buf);
  state.SetBytesProcessed(state.iterations() * size);
}

void BM_ReadPlainUnregistered(benchmark::State& state) {
  Setup& s = Get();
  const auto size = static_cast<std::size_t>(state.range(0));
  void* buf = std::aligned_alloc(4096, size);
  io_uring* ring = s.domain->ring();
  off_t off = 0;
  for (auto _ : state) {
    io_uring_prep_read(io_uring_get_sqe(ring), s.fd, buf, size, off);
    if (Complete(ring) != static_cast<int>(size)) state.SkipWithError("short read");
    off = (off + size) % kFileSize;
  }
  std::free(buf);
  state.SetBytesProcessed(state.iterations() * size);
}

BENCHMARK(BM_ReadFixedPoolBlock)->Arg(4096)->Arg(65536);
BENCHMARK(BM_ReadRegisteredPerOperation)->Arg(4096)->Arg(65536);
BENCHMARK(BM_ReadPlainUnregistered)->Arg(4096)->Arg(65536);

}  // namespace

BENCHMARK_MAIN();
