// Sending a pool block over loopback TCP with io_uring, 4 KiB to 1 MiB, in one run:
//   send/zero_copy/<bytes>  IORING_OP_SEND_ZC from the block's fixed buffer through
//                           IoUringZeroCopy (pinpool/io_uring_zero_copy.h): the block is freed
//                           at the first completion and held by the pool until the notification
//   send/copy/<bytes>       IORING_OP_SEND of the same block: the kernel copies it into the
//                           socket, and the block is free again at the completion
// Each iteration allocates a block, writes its first and last byte (as an application fills it),
// sends it with MSG_WAITALL and waits for the send's completion; a thread on the other end reads
// and discards. Bytes per second, and for zero copy the sends whose notification was still
// pending when their block was freed (deferred_frees, per send).
//
//   build/bench/io_uring_zero_copy_benchmark --benchmark_repetitions=5
#include <arpa/inet.h>
#include <benchmark/benchmark.h>
#include <liburing.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "pinpool/io_uring.h"
#include "pinpool/io_uring_zero_copy.h"
#include "pinpool/pool.h"

namespace {

struct Connection {
  int sender = -1;
  int receiver = -1;
  std::thread drain;
  std::atomic<bool> stop{false};

  Connection() {
    const int listener = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (bind(listener, reinterpret_cast<sockaddr*>(&addr), len) != 0 || listen(listener, 1) != 0 ||
        getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      std::perror("listen");
      std::abort();
    }
    sender = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(sender, reinterpret_cast<sockaddr*>(&addr), len) != 0) std::abort();
    receiver = accept(listener, nullptr, nullptr);
    close(listener);
    drain = std::thread([this] {
      std::vector<char> buf(1 << 20);
      while (read(receiver, buf.data(), buf.size()) > 0) {
      }
    });
  }
  ~Connection() {
    shutdown(sender, SHUT_WR);
    drain.join();
    close(sender);
    close(receiver);
  }
};

struct Sender {
  std::shared_ptr<pinpool::IoUringDomain> domain;
  std::unique_ptr<pinpool::Pool> pool;
  std::unique_ptr<pinpool::IoUringZeroCopy> zc;
  std::unique_ptr<Connection> connection;

  Sender() {
    domain = pinpool::IoUringDomain::Create(64).value();
    pinpool::PoolOptions o;
    o.chunk_size = 64 * pinpool::kMiB;
    o.budget = 256 * pinpool::kMiB;
    o.initial_size = 64 * pinpool::kMiB;
    o.domains = {domain};
    pool = pinpool::Pool::Create(o).value();
    zc = pinpool::IoUringZeroCopy::Create(*pool).value();
    connection = std::make_unique<Connection>();
  }
  ~Sender() {
    (void)zc->Drain(domain->ring(), std::chrono::seconds(10));
    connection.reset();
    zc.reset();
  }
};

Sender& Get() {
  static Sender* s = new Sender;  // for the process's life: benchmarks run one after another
  return *s;
}

// Waits for the next completion of `ring` and hands it to the tracker; returns it.
io_uring_cqe Next(Sender& s) {
  io_uring* ring = s.domain->ring();
  io_uring_cqe* cqe = nullptr;
  io_uring_wait_cqe(ring, &cqe);
  const io_uring_cqe c = *cqe;
  io_uring_cqe_seen(ring, cqe);
  s.zc->OnCompletion(ring, c);
  return c;
}

pinpool::Block Fill(Sender& s, std::size_t size) {
  pinpool::Block b = s.pool->Allocate(size);
  static_cast<char*>(b.data())[0] = 1;
  static_cast<char*>(b.data())[size - 1] = 1;
  return b;
}

void BM_SendZeroCopy(benchmark::State& state) {
  Sender& s = Get();
  io_uring* ring = s.domain->ring();
  const auto size = static_cast<std::size_t>(state.range(0));
  const std::uint64_t deferred_before =
      pinpool::FigureValue(s.pool->GetStats().grants.figures,
                           pinpool::IoUringZeroCopyFigures::kDeferredFrees)
          .value_or(0);
  std::uint64_t id = 0;
  for (auto _ : state) {
    const pinpool::Block b = Fill(s, size);
    if (!s.zc->PrepareSend(ring, io_uring_get_sqe(ring), s.connection->sender, b, 0, size,
                           MSG_WAITALL, ++id)
             .ok()) {
      state.SkipWithError("PrepareSend");
      break;
    }
    io_uring_submit(ring);
    // The send's result (notifications of earlier sends may come first).
    for (;;) {
      const io_uring_cqe c = Next(s);
      if (c.user_data != id || (c.flags & IORING_CQE_F_NOTIF) != 0) continue;
      if (c.res != static_cast<int>(size)) state.SkipWithError("short send");
      break;
    }
    s.pool->Deallocate(b);  // held until its notification if that has not come
  }
  (void)s.zc->Drain(ring, std::chrono::seconds(10));
  const std::uint64_t deferred =
      pinpool::FigureValue(s.pool->GetStats().grants.figures,
                           pinpool::IoUringZeroCopyFigures::kDeferredFrees)
          .value_or(0) -
      deferred_before;
  state.counters["deferred_frees"] =
      benchmark::Counter(static_cast<double>(deferred), benchmark::Counter::kAvgIterations);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * size));
}

void BM_SendCopy(benchmark::State& state) {
  Sender& s = Get();
  io_uring* ring = s.domain->ring();
  const auto size = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    const pinpool::Block b = Fill(s, size);
    io_uring_sqe* sqe = io_uring_get_sqe(ring);
    io_uring_prep_send(sqe, s.connection->sender, b.data(), size, MSG_WAITALL);
    io_uring_sqe_set_data64(sqe, 0);
    io_uring_submit(ring);
    if (Next(s).res != static_cast<int>(size)) state.SkipWithError("short send");
    s.pool->Deallocate(b);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * size));
}

void Sizes(benchmark::internal::Benchmark* b) {
  for (int kib : {4, 16, 64, 256, 1024}) b->Arg(kib * 1024);
}

BENCHMARK(BM_SendZeroCopy)->Name("send/zero_copy")->Apply(Sizes)->UseRealTime();
BENCHMARK(BM_SendCopy)->Name("send/copy")->Apply(Sizes)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
