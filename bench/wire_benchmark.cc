// Data path: RDMA WRITE throughput from pool blocks into pool blocks, against the same loop from
// and into plain buffers registered once with ibv_reg_mr (what perftest's ib_write_bw does), over
// two loopback RC queue pairs on one device (as tests/rdma/rc_pair.h connects them, but keeping
// up to DepthFor(size) work requests in flight, a completion every half of that). The pool
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

struct Qps {
  ibv_cq* cq[2] = {};
  ibv_qp* qp[2] = {};
};

struct Env {
  std::shared_ptr<pinpool::VerbsDomain> domain;
  pinpool::Pool* pool = nullptr;
  Qps qps;
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

std::string ConnectQps(ibv_pd* pd, Qps* q) {
  ibv_context* ctx = pd->context;
  ibv_port_attr port{};
  if (int e = ibv_query_port(ctx, 1, &port); e != 0) return Errno("ibv_query_port", e);
  int gid_index = -1;
  ibv_gid gid{};
  for (int i = 0; i < port.gid_tbl_len && gid_index < 0; ++i) {
    ibv_gid_entry entry{};
    if (ibv_query_gid_ex(ctx, 1, static_cast<std::uint32_t>(i), &entry, 0) != 0) continue;
    static constexpr std::uint8_t kV4[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (entry.gid_type == IBV_GID_TYPE_ROCE_V2 && std::memcmp(entry.gid.raw, kV4, 12) == 0) {
      gid_index = i;
      std::memcpy(gid.raw, entry.gid.raw, sizeof(gid.raw));
    }
  }
  if (gid_index < 0) return "no IPv4-mapped RoCE v2 GID on port 1";
  for (int i = 0; i < 2; ++i) {
    q->cq[i] = ibv_create_cq(ctx, 2 * kMaxDepth, nullptr, nullptr, 0);
    if (q->cq[i] == nullptr) return Errno("ibv_create_cq", errno);
    ibv_qp_init_attr init{};
    init.send_cq = q->cq[i];
    init.recv_cq = q->cq[i];
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = kMaxDepth;
    init.cap.max_recv_wr = 1;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    init.sq_sig_all = 0;
    q->qp[i] = ibv_create_qp(pd, &init);
    if (q->qp[i] == nullptr) return Errno("ibv_create_qp", errno);
  }
  for (int i = 0; i < 2; ++i) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    if (int e = ibv_modify_qp(q->qp[i], &a,
                              IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
        e != 0) {
      return Errno("ibv_modify_qp(INIT)", e);
    }
    a = {};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = port.active_mtu;
    a.dest_qp_num = q->qp[1 - i]->qp_num;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = gid;
    a.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(gid_index);
    a.ah_attr.grh.hop_limit = 1;
    a.ah_attr.port_num = 1;
    if (int e = ibv_modify_qp(q->qp[i], &a,
                              IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
        e != 0) {
      return Errno("ibv_modify_qp(RTR)", e);
    }
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;  // ib_write_bw's default
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    if (int e = ibv_modify_qp(q->qp[i], &a,
                              IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
        e != 0) {
      return Errno("ibv_modify_qp(RTS)", e);
    }
  }
  return "";
}

// Streams WRITEs of `size` bytes (range 0) from (src, lkey) to (dst, rkey) on QP 0 with
// `depth` (range 1) in flight, a completion asked for every depth / 2.
void Stream(benchmark::State& state, void* src, std::uint32_t lkey, void* dst, std::uint32_t rkey) {
  const auto size = static_cast<std::uint32_t>(state.range(0));
  const auto depth = static_cast<int>(state.range(1));
  const int signal_every = depth / 2;
  ibv_qp* qp = E().qps.qp[0];
  ibv_cq* cq = E().qps.cq[0];
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
  if (const std::string err = ConnectQps(pd, &E().qps); !err.empty()) {
    std::fprintf(stderr, "wire_benchmark: %s\n", err.c_str());
    return 1;
  }
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
