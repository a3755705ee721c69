// Data path: RDMA WRITE throughput from pool blocks into pool blocks, against the same loop from
// and into plain buffers registered once with ibv_reg_mr (what perftest's ib_write_bw does), over
// two loopback RC queue pairs on one device (support/rc_pair.h, keeping up to DepthFor(size) work
// requests in flight, a completion every half of that). The pool
// must cost nothing here: a block is an address and an lkey like any other.
// scripts/run-benchmarks.sh runs `ib_write_bw` on the same device and sizes in the same guest.
//
//   scripts/softroce/run-in-guest.sh build-bench/bench/wire_benchmark --benchmark_min_time=2
//
// Each benchmark iteration posts one WRITE (waiting first for a free slot); bytes_per_second
// counts the bytes whose completions arrived inside the timed loop: the steady-state throughput
// (the first posts, before any completion, are timed too, as in ib_write_bw). Without a device it
// says why and exits 0 (1 with PINPOOL_REQUIRE_RDMA=1).
#include <benchmark/benchmark.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "bench_verbs.h"
#include "pinpool/pool.h"
#include "pinpool/verbs.h"
#include "rc_pair.h"

namespace {

// Work requests in flight: ib_write_bw's default tx depth (128), but at most ~8 MiB in flight so
// that the slowest size still completes many rounds in a run (soft-RoCE under emulation moves
// tens of MB/s). scripts/run-benchmarks.sh gives ib_write_bw the same depth (-t) and completion
// moderation (-Q = depth / 2).
constexpr int kMaxDepth = 128;
constexpr std::int64_t kSizes[] = {4 << 10, 64 << 10, 1 << 20};
constexpr int DepthFor(std::int64_t size) {
  const std::int64_t d = (std::int64_t{8} << 20) / size;
  return d > kMaxDepth ? kMaxDepth : (d < 8 ? 8 : static_cast<int>(d));
}
constexpr std::size_t kMaxSize = 1 << 20;

struct Env {
  std::shared_ptr<pinpool::VerbsDomain> domain;
  pinpool::Pool* pool = nullptr;
  std::unique_ptr<pinpool::testing::RcPair> pair;  // WRITEs go from side A
  // Plain buffers registered once, for the baseline.
  void* plain_src = nullptr;
  void* plain_dst = nullptr;
  ibv_mr* plain_src_mr = nullptr;
  ibv_mr* plain_dst_mr = nullptr;
};

Env& E() {
  static Env env;
  return env;
}

std::string Errno(const char* what, int err) {
  return std::string(what) + ": " + std::strerror(err);
}

// Streams WRITEs of `size` bytes (range 0) from (src, lkey) to (dst, rkey) on QP 0 with
// `depth` (range 1) in flight, a completion asked for every depth / 2.
void Stream(benchmark::State& state, void* src, std::uint32_t lkey, void* dst, std::uint32_t rkey) {
  const auto size = static_cast<std::uint32_t>(state.range(0));
  const auto depth = static_cast<int>(state.range(1));
  const int signal_every = depth / 2;
  using Side = pinpool::testing::RcPair::Side;
  ibv_qp* qp = E().pair->qp(Side::kA);
  ibv_cq* cq = E().pair->cq(Side::kA);
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(src), size, lkey};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.wr.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(dst);
  wr.wr.rdma.rkey = rkey;
  int outstanding = 0;
  std::uint64_t posted = 0;
  std::uint64_t completed = 0;  // what the throughput counts: WRITEs the device finished
  ibv_wc wc[8];
  // Polls once, or until `min_free` slots are free. False on an error (reported).
  auto reap = [&](int min_free) {
    do {
      const int n = ibv_poll_cq(cq, 8, wc);
      if (n < 0) {
        state.SkipWithError("ibv_poll_cq failed");
        return false;
      }
      for (int i = 0; i < n; ++i) {
        if (wc[i].status != IBV_WC_SUCCESS) {
          state.SkipWithError(ibv_wc_status_str(wc[i].status));
          return false;
        }
        outstanding -= signal_every;  // a completion retires its unsignaled predecessors
        completed += static_cast<std::uint64_t>(signal_every);
      }
    } while (depth - outstanding < min_free);
    return true;
  };
  auto post = [&] {
    wr.wr_id = posted;
    wr.send_flags = (posted % signal_every == static_cast<std::uint64_t>(signal_every) - 1)
                        ? IBV_SEND_SIGNALED
                        : 0;
    ibv_send_wr* bad = nullptr;
    if (const int e = ibv_post_send(qp, &wr, &bad); e != 0) {
      state.SkipWithError(Errno("ibv_post_send", e).c_str());
      return false;
    }
    ++posted;
    ++outstanding;
    return true;
  };
  for (auto _ : state) {
    if (!reap(1) || !post()) break;
  }
  // Only completions seen inside the timed loop count, so the steady-state rate is what is
  // reported. Untimed: pad to a signaled WRITE and drain, leaving the QP empty for the next run.
  const std::uint64_t counted = completed;
  while (!state.error_occurred() && posted % signal_every != 0) {
    if (!reap(1) || !post()) break;
  }
  if (!state.error_occurred()) reap(depth);
  state.SetBytesProcessed(static_cast<std::int64_t>(counted) * size);
  state.counters["depth"] = depth;
}

void BM_PoolBlocks(benchmark::State& state) {
  const auto size = static_cast<std::size_t>(state.range(0));
  pinpool::Pool& pool = *E().pool;
  const pinpool::Block src = pool.Allocate(size);
  const pinpool::Block dst = pool.Allocate(size);
  if (!src || !dst) {
    state.SkipWithError("pool Allocate failed");
    return;
  }
  std::memset(src.data(), 0x5a, size);
  const ibv_sge sge = pinpool::ToSge(src);
  const pinpool::RemoteBuffer remote = pinpool::ToRemoteBuffer(dst);
  Stream(state, src.data(), sge.lkey, reinterpret_cast<void*>(remote.address),
         pinpool::ToUnderlying(remote.rkey));
  if (!state.error_occurred() && std::memcmp(src.data(), dst.data(), size) != 0) {
    state.SkipWithError("destination block does not hold the source's bytes");
  }
  pool.Deallocate(src);
  pool.Deallocate(dst);
}

void BM_RegisteredOnce(benchmark::State& state) {
  const auto size = static_cast<std::size_t>(state.range(0));
  std::memset(E().plain_src, 0xa5, size);
  Stream(state, E().plain_src, E().plain_src_mr->lkey, E().plain_dst, E().plain_dst_mr->rkey);
  if (!state.error_occurred() && std::memcmp(E().plain_src, E().plain_dst, size) != 0) {
    state.SkipWithError("destination buffer does not hold the source's bytes");
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  int exit_code = 0;
  E().domain = pinpool::bench::OpenVerbsOrExplain("wire_benchmark", &exit_code);
  if (E().domain == nullptr) return exit_code;
  pinpool::PoolOptions o;
  o.chunk_size = 4 * pinpool::kMiB;
  o.budget = 8 * pinpool::kMiB;
  o.initial_size = 4 * pinpool::kMiB;
  o.page_size = pinpool::PageSize::kTransparent;
  o.domains = {E().domain};
  auto pool = pinpool::Pool::Create(o);
  if (!pool.ok()) {
    std::fprintf(stderr, "pool: %s\n", pool.status().ToString().c_str());
    return 1;
  }
  E().pool = pool->release();
  ibv_pd* pd = E().domain->pd();
  for (void** p : {&E().plain_src, &E().plain_dst}) {
    if (posix_memalign(p, 4096, kMaxSize) != 0) return 1;
    std::memset(*p, 0, kMaxSize);
  }
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  E().plain_src_mr = ibv_reg_mr(pd, E().plain_src, kMaxSize, access);
  E().plain_dst_mr = ibv_reg_mr(pd, E().plain_dst, kMaxSize, access);
  if (E().plain_src_mr == nullptr || E().plain_dst_mr == nullptr) {
    std::perror("ibv_reg_mr");
    return 1;
  }
  // ib_write_bw's timeout (14), and room for the deepest stream.
  absl::StatusOr<std::unique_ptr<pinpool::testing::RcPair>> pair =
      pinpool::testing::RcPair::Connect(
          pd, pd, {.max_send_wr = kMaxDepth, .max_recv_wr = 1, .timeout = 14});
  if (!pair.ok()) {
    std::fprintf(stderr, "wire_benchmark: %s\n", pair.status().ToString().c_str());
    return 1;
  }
  E().pair = *std::move(pair);
  benchmark::AddCustomContext("device", E().domain->device_name());
  for (const std::int64_t s : kSizes) {
    benchmark::RegisterBenchmark("write/pool", BM_PoolBlocks)
        ->Args({s, DepthFor(s)})
        ->UseRealTime();
    benchmark::RegisterBenchmark("write/registered_once", BM_RegisteredOnce)
        ->Args({s, DepthFor(s)})
        ->UseRealTime();
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
