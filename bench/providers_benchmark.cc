// A put (RDMA write) from a buffer, through UCX and through libfabric, every way a user of those
// providers gets the buffer ready, on one RDMA device (soft-RoCE in the guest), in one run:
//
//   ucx/pool/SIZE          pinpool Allocate + fill + UcxPut (the chunk's memh) + flush +
//                          Deallocate: the chunk was mapped once by pinpool::UcxDomain
//   ucx/map_each/SIZE      malloc + fill + ucp_mem_map + put (that memh) + flush + ucp_mem_unmap +
//                          free, UCX's registration caches off (UCX_RCACHE_ENABLE=n,
//                          UCX_IB_REG_METHODS=direct): UCX mapping each buffer itself (UCX
//                          1.13 then also registers a zero-copy put's buffer on its own: it
//                          ignores the memory handle)
//   ucx/cache_fresh/SIZE   mmap of a fresh buffer + fill + put (no memh) + flush + munmap, UCX's
//                          defaults: its registration cache meets a buffer it has never seen
//   ucx/cache_reused/SIZE  the same buffer every time + fill + put + flush, UCX's defaults: the
//                          cache's best case (the MPI pattern), for reference
//   fabric/pool/SIZE       Allocate + fill + fi_writemsg with the chunk's descriptor + completion
//                          + Deallocate (verbs;ofi_rxm; pinpool::FabricDomain registered once)
//   fabric/reg_each_cache/SIZE    mmap fresh + fill + fi_mr_reg + write + completion + fi_close +
//                          munmap, with the verbs provider's registration cache (its default)
//   fabric/reg_each_nocache/SIZE  the same with FI_MR_CACHE_MAX_COUNT=0 (read once per process:
//                          run the program again with it set; it then runs only the fabric ones
//                          that need it)
//
// Sizes 4 KiB, 64 KiB, 1 MiB. Every put goes from one worker (endpoint) to another of the same
// process over the device (UCX_TLS=rc; UCX_IB_GID_INDEX=0 on rxe) into one pool block of the
// target, and is complete at the target (flushed, or its completion read) before the next.
//
//   scripts/softroce/run-in-guest.sh --env UCX_IB_GID_INDEX=0 --env FI_UNIVERSE_SIZE=64 \
//       build/bench/providers_benchmark
//
// Without an RDMA device it says why and exits 0 (1 with PINPOOL_REQUIRE_RDMA=1). An provider that
// cannot be brought up is reported in the context ("ucx", "libfabric") and its benchmarks left out.
#include <benchmark/benchmark.h>
#include <rdma/fi_rma.h>
#include <sys/mman.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "bench_verbs.h"
#include "fabric_pair.h"
#include "pinpool/fabric.h"
#include "pinpool/pinpool.h"
#include "pinpool/ucx.h"

namespace {

constexpr std::int64_t kSizes[] = {4 << 10, 64 << 10, 1 << 20};
constexpr std::size_t kMaxSize = 1 << 20;

std::unique_ptr<pinpool::Pool> MakePool(std::shared_ptr<pinpool::Domain> domain) {
  pinpool::PoolOptions o;
  o.chunk_size = 8 * pinpool::kMiB;
  o.budget = 32 * pinpool::kMiB;
  o.initial_size = 8 * pinpool::kMiB;
  o.page_size = pinpool::PageSize::kTransparent;
  o.domains = {std::move(domain)};
  auto pool = pinpool::Pool::Create(o);
  if (!pool.ok()) {
    std::fprintf(stderr, "providers_benchmark: pool: %s\n", pool.status().ToString().c_str());
    std::exit(1);
  }
  return *std::move(pool);
}

void* Fresh(std::size_t size) {
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) std::abort();
  return p;
}

// --- UCX ---------------------------------------------------------------------------------------

// One context with two workers and an endpoint between them, a target block to put into.
struct Ucx {
  ucp_context_h context = nullptr;
  ucp_worker_h initiator = nullptr, target = nullptr;
  ucp_ep_h ep = nullptr;
  std::unique_ptr<pinpool::Pool> target_pool, local_pool;
  pinpool::Block target_block;
  pinpool::UcxRkey rkey;
  pinpool::UcxRemote remote;
};
Ucx* ucx_default = nullptr;  // UCX's registration caches on (its defaults)
Ucx* ucx_direct = nullptr;   // caches off: every ucp_mem_map registers

// Opens a Ucx; `direct` turns the caches off (read from the environment at ucp_init). Returns
// the error text, empty on success.
std::string OpenUcx(Ucx& u, bool direct) {
  if (direct) {
    setenv("UCX_IB_REG_METHODS", "direct", 1);
    setenv("UCX_RCACHE_ENABLE", "n", 1);
  }
  ucp_config_t* config = nullptr;
  ucs_status_t s = ucp_config_read(nullptr, nullptr, &config);
  if (s == UCS_OK) s = ucp_config_modify(config, "TLS", "rc");
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_RMA;
  if (s == UCS_OK) s = ucp_init(&params, config, &u.context);
  if (config != nullptr) ucp_config_release(config);
  unsetenv("UCX_IB_REG_METHODS");
  unsetenv("UCX_RCACHE_ENABLE");
  if (s != UCS_OK) return std::string("ucp_init: ") + ucs_status_string(s);
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  if (ucp_worker_create(u.context, &wp, &u.initiator) != UCS_OK ||
      ucp_worker_create(u.context, &wp, &u.target) != UCS_OK) {
    return "ucp_worker_create failed";
  }
  auto exposed = pinpool::UcxDomain::Wrap(u.context, {.trusted_whole_chunk = true});
  auto local = pinpool::UcxDomain::Wrap(u.context, {});
  u.target_pool = MakePool(*exposed);
  u.local_pool = MakePool(*local);
  u.target_block = u.target_pool->Allocate(kMaxSize);
  // Wire-up needs the target to answer: progress it until the first flush, then never again
  // (rc_verbs puts are one-sided).
  std::atomic<bool> stop{false};
  std::thread progress([&] {
    while (!stop.load()) ucp_worker_progress(u.target);
  });
  ucp_address_t* address = nullptr;
  std::size_t length = 0;
  ucp_worker_get_address(u.target, &address, &length);
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
  ep.address = address;
  s = ucp_ep_create(u.initiator, &ep, &u.ep);
  ucp_worker_release_address(u.target, address);
  absl::Status flushed =
      s == UCS_OK ? pinpool::UcxFlush(u.initiator, u.ep) : pinpool::UcxError(s, "ucp_ep_create");
  stop = true;
  progress.join();
  if (!flushed.ok()) return flushed.ToString();
  auto peer = pinpool::ToUcxPeerBlock(u.target_block);
  auto rkey = pinpool::UcxRkey::Unpack(u.ep, peer->packed_rkey);
  if (!rkey.ok()) return rkey.status().ToString();
  u.rkey = *std::move(rkey);
  u.remote = {.address = peer->address, .length = peer->length, .rkey = u.rkey.get()};
  return {};
}

// Put + flush of `size` bytes at `p` (with `memh` when given), waited for.
bool UcxPutFlush(benchmark::State& state, Ucx& u, void* p, std::size_t size, ucp_mem_h memh) {
  ucp_request_param_t param{};
  if (memh != nullptr) {
    param.op_attr_mask = UCP_OP_ATTR_FIELD_MEMH;
    param.memh = memh;
  }
  absl::Status s = pinpool::UcxWait(
      u.initiator, ucp_put_nbx(u.ep, p, size, u.remote.address, u.rkey.get(), &param));
  if (s.ok()) s = pinpool::UcxFlush(u.initiator, u.ep);
  if (!s.ok()) state.SkipWithError(s.ToString().c_str());
  return s.ok();
}

void BM_UcxPool(benchmark::State& state) {
  Ucx& u = *ucx_default;
  const auto size = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    pinpool::Block b = u.local_pool->Allocate(size);
    std::memset(b.data(), 1, size);
    auto put = pinpool::UcxPut(u.ep, b, 0, size, u.remote, 0);
    absl::Status s = put.ok() ? pinpool::UcxWait(u.initiator, *put) : put.status();
    if (s.ok()) s = pinpool::UcxFlush(u.initiator, u.ep);
    u.local_pool->Deallocate(b);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
  }
}

void BM_UcxMapEach(benchmark::State& state) {
  Ucx& u = *ucx_direct;
  const auto size = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    void* p = std::malloc(size);
    std::memset(p, 1, size);
    ucp_mem_map_params_t mp{};
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = p;
    mp.length = size;
    ucp_mem_h memh = nullptr;
    if (ucp_mem_map(u.context, &mp, &memh) != UCS_OK) {
      state.SkipWithError("ucp_mem_map failed");
      std::free(p);
      break;
    }
    const bool ok = UcxPutFlush(state, u, p, size, memh);
    ucp_mem_unmap(u.context, memh);
    std::free(p);
    if (!ok) break;
  }
}

void BM_UcxCacheFresh(benchmark::State& state) {
  Ucx& u = *ucx_default;
  const auto size = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    void* p = Fresh(size);
    std::memset(p, 1, size);
    const bool ok = UcxPutFlush(state, u, p, size, nullptr);
    munmap(p, size);
    if (!ok) break;
  }
}

void BM_UcxCacheReused(benchmark::State& state) {
  Ucx& u = *ucx_default;
  const auto size = static_cast<std::size_t>(state.range(0));
  void* p = Fresh(size);
  for (auto _ : state) {
    std::memset(p, 1, size);
    if (!UcxPutFlush(state, u, p, size, nullptr)) break;
  }
  munmap(p, size);
}

// --- libfabric -----------------------------------------------------------------------------------

struct Fabric {
  pinpool::testing::FabricPair pair;
  std::unique_ptr<pinpool::Pool> target_pool, local_pool;
  pinpool::Block target_block;
  pinpool::FabricRemote remote;
};
Fabric* fabric = nullptr;

std::string OpenFabric(Fabric& f) {
  if (std::string e = f.pair.Open("verbs"); !e.empty()) return e;
  auto exposed = pinpool::FabricDomain::Wrap(f.pair.target.domain, f.pair.info(),
                                             {.trusted_whole_chunk = {.write = true}});
  auto local = pinpool::FabricDomain::Wrap(f.pair.initiator.domain, f.pair.info());
  if (!exposed.ok()) return exposed.status().ToString();
  if (!local.ok()) return local.status().ToString();
  f.target_pool = MakePool(*exposed);
  f.local_pool = MakePool(*local);
  f.target_block = f.target_pool->Allocate(kMaxSize);
  f.remote = *pinpool::ToFabricRemote(f.target_block);
  // A first write connects rxm to the peer (with the target progressing), then no more progress.
  pinpool::Block b = f.local_pool->Allocate(64);
  absl::Status s = pinpool::FabricWriteSync(f.pair.initiator.ep, f.pair.initiator.cq, b, 0, 64,
                                            f.pair.initiator.peer, f.remote, 0);
  f.local_pool->Deallocate(b);
  f.pair.StopTargetProgress();
  benchmark::AddCustomContext("libfabric_domain", (*exposed)->name());
  return s.ok() ? std::string() : s.ToString();
}

// One write of `size` bytes at `p` with descriptor `desc`, and its completion.
bool FabricWrite(benchmark::State& state, Fabric& f, void* p, std::size_t size, void* desc) {
  iovec iov{p, size};
  fi_rma_iov rma{f.remote.address, size, f.remote.key};
  fi_msg_rma msg{};
  msg.msg_iov = &iov;
  msg.desc = &desc;
  msg.iov_count = 1;
  msg.addr = f.pair.initiator.peer;
  msg.rma_iov = &rma;
  msg.rma_iov_count = 1;
  ssize_t r;
  fi_cq_tagged_entry e;
  while ((r = fi_writemsg(f.pair.initiator.ep, &msg, FI_COMPLETION)) == -FI_EAGAIN) {
    fi_cq_read(f.pair.initiator.cq, &e, 1);
  }
  if (r != 0) {
    state.SkipWithError((std::string("fi_writemsg: ") + fi_strerror(static_cast<int>(-r))).c_str());
    return false;
  }
  while ((r = fi_cq_read(f.pair.initiator.cq, &e, 1)) == -FI_EAGAIN) {
  }
  if (r != 1) {
    state.SkipWithError("write completion failed");
    return false;
  }
  return true;
}

void BM_FabricPool(benchmark::State& state) {
  Fabric& f = *fabric;
  const auto size = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    pinpool::Block b = f.local_pool->Allocate(size);
    std::memset(b.data(), 1, size);
    const bool ok = FabricWrite(state, f, b.data(), size, pinpool::FabricDesc(b));
    f.local_pool->Deallocate(b);
    if (!ok) break;
  }
}

void BM_FabricRegEach(benchmark::State& state) {
  Fabric& f = *fabric;
  const auto size = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    void* p = Fresh(size);
    std::memset(p, 1, size);
    fid_mr* mr = nullptr;
    if (const int r =
            fi_mr_reg(f.pair.initiator.domain, p, size, FI_READ | FI_WRITE, 0, 0, 0, &mr, nullptr);
        r != 0) {
      state.SkipWithError((std::string("fi_mr_reg: ") + fi_strerror(-r)).c_str());
      munmap(p, size);
      break;
    }
    const bool ok = FabricWrite(state, f, p, size, fi_mr_desc(mr));
    fi_close(&mr->fid);
    munmap(p, size);
    if (!ok) break;
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  int exit_code = 0;
  auto device = pinpool::bench::OpenVerbsOrExplain("providers_benchmark", &exit_code);
  if (device == nullptr) return exit_code;
  benchmark::AddCustomContext("device", device->device_name());
  device.reset();
  const char* count = std::getenv("FI_MR_CACHE_MAX_COUNT");
  const bool fabric_nocache = count != nullptr && std::strcmp(count, "0") == 0;
  if (std::getenv("UCX_IB_REG_METHODS") != nullptr || std::getenv("UCX_RCACHE_ENABLE") != nullptr) {
    std::fprintf(stderr,
                 "providers_benchmark: unset UCX_IB_REG_METHODS and UCX_RCACHE_ENABLE: the "
                 "benchmark sets them per UCX context\n");
    return 1;
  }
  setenv("UCX_IB_GID_INDEX", "0", 0);   // rxe: UCX's UD wire-up needs GID 0 (docs/providers.md)
  setenv("FI_UNIVERSE_SIZE", "64", 0);  // rxe: verbs;ofi_rxm's default CQ is too large

  std::string ucx_error;
  if (!fabric_nocache) {
    ucx_default = new Ucx;
    ucx_direct = new Ucx;
    ucx_error = OpenUcx(*ucx_default, false);
    if (ucx_error.empty()) ucx_error = OpenUcx(*ucx_direct, true);
    benchmark::AddCustomContext("ucx", ucx_error.empty() ? ucp_get_version_string() : ucx_error);
    if (ucx_error.empty()) {
      for (const std::int64_t s : kSizes) {
        benchmark::RegisterBenchmark("ucx/pool", BM_UcxPool)->Arg(s);
        benchmark::RegisterBenchmark("ucx/map_each", BM_UcxMapEach)->Arg(s);
        benchmark::RegisterBenchmark("ucx/cache_fresh", BM_UcxCacheFresh)->Arg(s);
        benchmark::RegisterBenchmark("ucx/cache_reused", BM_UcxCacheReused)->Arg(s);
      }
    } else {
      std::fprintf(stderr, "providers_benchmark: UCX unavailable: %s\n", ucx_error.c_str());
    }
  }
  fabric = new Fabric;
  const std::string fabric_error = OpenFabric(*fabric);
  benchmark::AddCustomContext("libfabric", fabric_error.empty() ? "ok" : fabric_error);
  if (fabric_error.empty()) {
    for (const std::int64_t s : kSizes) {
      if (!fabric_nocache) benchmark::RegisterBenchmark("fabric/pool", BM_FabricPool)->Arg(s);
      benchmark::RegisterBenchmark(
          fabric_nocache ? "fabric/reg_each_nocache" : "fabric/reg_each_cache", BM_FabricRegEach)
          ->Arg(s);
    }
  } else {
    std::fprintf(stderr, "providers_benchmark: libfabric verbs unavailable: %s\n",
                 fabric_error.c_str());
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  // The providers' objects live until exit: no teardown ordering to get wrong in a benchmark.
  return ucx_error.empty() && fabric_error.empty() ? 0 : 1;
}
