// Getting an RDMA-ready buffer (local key for the sge, remote key for a peer) on one device, one
// run, every way a user could get one:
//
//   pool/           pinpool Allocate (+ ToSge + ToRemoteBuffer) + Deallocate: keys come with it
//   verbs_reg/      malloc + ibv_reg_mr + ibv_dereg_mr + free: registering per buffer
//   ucx_direct/     malloc + ucp_mem_map + ucp_rkey_pack + release + ucp_mem_unmap + free, UCX
//                   with its registration caches off (UCX_IB_REG_METHODS=direct,
//                   UCX_RCACHE_ENABLE=n): UCX registering per buffer
//   ucx_cached/     ucp_mem_map + ucp_mem_unmap of a buffer mapped before (UCX's default
//                   registration caches, which MPI-style users rely on): a cache hit
//   ucx_mdcache/    the same with only the IB memory domain's cache (UCX_RCACHE_ENABLE=n): the
//                   cheapest UCX hit measured here
//   ucx_cached_pack/ the same plus ucp_rkey_pack + ucp_rkey_buffer_release, what a peer needs
//   fabric_reg/     fi_mr_reg + fi_mr_key + fi_mr_desc + fi_close on libfabric's verbs provider,
//                   on the same (re-used) buffer each time: a hit when the provider's MR cache
//                   is on (the default); run with FI_MR_CACHE_MAX_COUNT=0 for the uncached
//                   figure (the benchmark is then named fabric_nocache/)
//
// Sizes 4 KiB .. 4 MiB. Needs an RDMA device: run it in the soft-RoCE guest:
//
//   scripts/softroce/run-in-guest.sh build-bench/bench/rdma_ready_benchmark \
//       --benchmark_repetitions=3 --benchmark_format=json
//
// A baseline that cannot be brought up (UCX or libfabric finding no usable device) is reported
// in the output's context ("ucx", "libfabric": the error) and its benchmarks are left out; the
// pool and verbs ones always run. Without a device at all it says why and exits 0 (1 with
// PINPOOL_REQUIRE_RDMA=1).
#include <benchmark/benchmark.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>
#include <ucp/api/ucp.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "bench_verbs.h"
#include "pinpool/pool.h"
#include "pinpool/verbs.h"

namespace {

constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
constexpr std::int64_t kSizes[] = {4 << 10, 64 << 10, 1 << 20, 4 << 20};

struct Env {
  std::shared_ptr<pinpool::VerbsDomain> domain;
  pinpool::Pool* pool = nullptr;
  ucp_context_h ucx_direct = nullptr;
  ucp_context_h ucx_mdcache = nullptr;
  ucp_context_h ucx_cached = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* fabric_domain = nullptr;
};

Env& E() {
  static Env env;
  return env;
}

// A page-aligned, touched buffer that lives for the whole run (the re-used buffer of the cache
// benchmarks).
void* StableBuffer(std::size_t size) {
  void* p = nullptr;
  if (posix_memalign(&p, 4096, size) != 0) std::abort();
  std::memset(p, 1, size);
  return p;
}

void BM_Pool(benchmark::State& state) {
  pinpool::Pool& pool = *E().pool;
  const auto size = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    const pinpool::Block b = pool.Allocate(size);
    ibv_sge sge = pinpool::ToSge(b);
    pinpool::RemoteBuffer remote = pinpool::ToRemoteBuffer(b);
    benchmark::DoNotOptimize(sge);
    benchmark::DoNotOptimize(remote);
    pool.Deallocate(b);
  }
}

void BM_VerbsReg(benchmark::State& state) {
  ibv_pd* pd = E().domain->pd();
  const auto size = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    void* p = std::malloc(size);
    ibv_mr* mr = ibv_reg_mr(pd, p, size, kAccess);
    if (mr == nullptr) {
      state.SkipWithError("ibv_reg_mr failed");
      std::free(p);
      break;
    }
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(p), static_cast<std::uint32_t>(size), mr->lkey};
    benchmark::DoNotOptimize(sge);
    benchmark::DoNotOptimize(mr->rkey);
    ibv_dereg_mr(mr);
    std::free(p);
  }
}

ucs_status_t UcxMap(ucp_context_h context, void* p, std::size_t size, ucp_mem_h* memh) {
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  params.address = p;
  params.length = size;
  return ucp_mem_map(context, &params, memh);
}

// Map (+ pack the rkey) + unmap of `p`; false on an error, reported through `state`.
bool UcxOnce(benchmark::State& state, ucp_context_h context, void* p, std::size_t size, bool pack) {
  ucp_mem_h memh = nullptr;
  if (const ucs_status_t s = UcxMap(context, p, size, &memh); s != UCS_OK) {
    state.SkipWithError((std::string("ucp_mem_map: ") + ucs_status_string(s)).c_str());
    return false;
  }
  if (pack) {
    void* rkey = nullptr;
    std::size_t rkey_size = 0;
    if (const ucs_status_t s = ucp_rkey_pack(context, memh, &rkey, &rkey_size); s != UCS_OK) {
      state.SkipWithError((std::string("ucp_rkey_pack: ") + ucs_status_string(s)).c_str());
      ucp_mem_unmap(context, memh);
      return false;
    }
    benchmark::DoNotOptimize(rkey);
    ucp_rkey_buffer_release(rkey);
  }
  benchmark::DoNotOptimize(memh);
  ucp_mem_unmap(context, memh);
  return true;
}

void BM_UcxDirect(benchmark::State& state) {
  const auto size = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    void* p = std::malloc(size);
    const bool ok = UcxOnce(state, E().ucx_direct, p, size, /*pack=*/true);
    std::free(p);
    if (!ok) break;
  }
}

// The cache benchmarks keep one mapping of the buffer alive for the whole run, as an application
// whose buffer stays registered in the cache would; each iteration is then a lookup.
template <bool kPack, bool kMdOnly>
void BM_UcxCached(benchmark::State& state) {
  ucp_context_h context = kMdOnly ? E().ucx_mdcache : E().ucx_cached;
  const auto size = static_cast<std::size_t>(state.range(0));
  void* p = StableBuffer(size);
  ucp_mem_h warm = nullptr;
  if (UcxMap(context, p, size, &warm) != UCS_OK) {
    state.SkipWithError("ucp_mem_map (warm-up) failed");
    std::free(p);
    return;
  }
  for (auto _ : state) {
    if (!UcxOnce(state, context, p, size, kPack)) break;
  }
  ucp_mem_unmap(context, warm);
  std::free(p);
}

void BM_FabricReg(benchmark::State& state) {
  const auto size = static_cast<std::size_t>(state.range(0));
  void* p = StableBuffer(size);
  constexpr std::uint64_t kFiAccess =
      FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
  for (auto _ : state) {
    fid_mr* mr = nullptr;
    if (const int r = fi_mr_reg(E().fabric_domain, p, size, kFiAccess, 0, 0, 0, &mr, nullptr);
        r != 0) {
      state.SkipWithError((std::string("fi_mr_reg: ") + fi_strerror(-r)).c_str());
      break;
    }
    benchmark::DoNotOptimize(fi_mr_key(mr));
    benchmark::DoNotOptimize(fi_mr_desc(mr));
    fi_close(&mr->fid);
  }
  std::free(p);
}

// How a UCX context registers memory. UCX 1.13 caches registrations at two levels: the ucp
// context (UCX_RCACHE_ENABLE) and the IB memory domain (UCX_IB_REG_METHODS=rcache,...).
enum class UcxCache {
  kNone,     // UCX_RCACHE_ENABLE=n, UCX_IB_REG_METHODS=direct: every map registers
  kMdOnly,   // UCX_RCACHE_ENABLE=n: only the IB memory domain's cache
  kDefault,  // UCX's defaults: both caches
};

// UCX context restricted to the RDMA device. Its memory-domain settings are read from the
// environment when the context is created (ucp_config_modify does not reach them in UCX 1.13:
// measured, a "direct" setting made that way still hit the cache), so they are set around
// ucp_config_read/ucp_init and removed again. Returns the error text on failure.
std::string OpenUcx(UcxCache cache, ucp_context_h* context) {
  const char* reg_methods = cache == UcxCache::kNone ? "direct" : nullptr;
  const char* rcache_enable = cache == UcxCache::kDefault ? nullptr : "n";
  if (reg_methods != nullptr) setenv("UCX_IB_REG_METHODS", reg_methods, 1);
  if (rcache_enable != nullptr) setenv("UCX_RCACHE_ENABLE", rcache_enable, 1);
  struct Unset {
    ~Unset() {
      unsetenv("UCX_IB_REG_METHODS");
      unsetenv("UCX_RCACHE_ENABLE");
    }
  } unset;
  ucp_config_t* config = nullptr;
  if (const ucs_status_t s = ucp_config_read(nullptr, nullptr, &config); s != UCS_OK) {
    return std::string("ucp_config_read: ") + ucs_status_string(s);
  }
  const std::string device = E().domain->device_name() + ":1";
  struct {
    const char* name;
    const char* value;
  } settings[] = {{"NET_DEVICES", device.c_str()}, {"TLS", "rc_verbs,self"}};
  for (const auto& [name, value] : settings) {
    if (const ucs_status_t s = ucp_config_modify(config, name, value); s != UCS_OK) {
      ucp_config_release(config);
      return std::string("ucp_config_modify(") + name + "=" + value + "): " + ucs_status_string(s);
    }
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_RMA;
  const ucs_status_t s = ucp_init(&params, config, context);
  ucp_config_release(config);
  if (s != UCS_OK) return std::string("ucp_init: ") + ucs_status_string(s);
  if (std::getenv("PINPOOL_BENCH_UCX_INFO") != nullptr) ucp_context_print_info(*context, stderr);
  // Prove the mapping reaches the device: a packed rkey of an RDMA registration is tens of bytes.
  void* probe = StableBuffer(4096);
  ucp_mem_h memh = nullptr;
  std::string error;
  if (const ucs_status_t m = UcxMap(*context, probe, 4096, &memh); m != UCS_OK) {
    error = std::string("ucp_mem_map: ") + ucs_status_string(m);
  } else {
    void* rkey = nullptr;
    std::size_t rkey_size = 0;
    if (ucp_rkey_pack(*context, memh, &rkey, &rkey_size) != UCS_OK || rkey_size < 8) {
      error = "ucp_rkey_pack gave no remote key (no RDMA memory domain?)";
    } else {
      ucp_rkey_buffer_release(rkey);
    }
    ucp_mem_unmap(*context, memh);
  }
  std::free(probe);
  return error;
}

std::string OpenFabric() {
  fi_info* hints = fi_allocinfo();
  hints->fabric_attr->prov_name = strdup("verbs");
  hints->ep_attr->type = FI_EP_MSG;
  hints->caps = FI_MSG | FI_RMA;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  fi_info* info = nullptr;
  const int r = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info);
  fi_freeinfo(hints);
  if (r != 0) return std::string("fi_getinfo(prov verbs): ") + fi_strerror(-r);
  std::string error;
  if (const int f = fi_fabric(info->fabric_attr, &E().fabric, nullptr); f != 0) {
    error = std::string("fi_fabric: ") + fi_strerror(-f);
  } else if (const int d = fi_domain(E().fabric, info, &E().fabric_domain, nullptr); d != 0) {
    error = std::string("fi_domain: ") + fi_strerror(-d);
  } else {
    benchmark::AddCustomContext("libfabric_domain", info->domain_attr->name);
  }
  fi_freeinfo(info);
  return error;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  int exit_code = 0;
  E().domain = pinpool::bench::OpenVerbsOrExplain("rdma_ready_benchmark", &exit_code);
  if (E().domain == nullptr) return exit_code;
  {
    pinpool::PoolOptions o;
    o.chunk_size = 8 * pinpool::kMiB;  // 4 MiB blocks fit (7/8 of a chunk)
    o.budget = 32 * pinpool::kMiB;
    o.initial_size = 16 * pinpool::kMiB;
    o.page_size = pinpool::PageSize::kTransparent;
    o.domains = {E().domain};
    auto p = pinpool::Pool::Create(o);
    if (!p.ok()) {
      std::fprintf(stderr, "pool: %s\n", p.status().ToString().c_str());
      return 1;
    }
    E().pool = p->release();  // lives until exit
  }
  benchmark::AddCustomContext("device", E().domain->device_name());

  for (const std::int64_t s : kSizes) {
    benchmark::RegisterBenchmark("pool", BM_Pool)->Arg(s);
    benchmark::RegisterBenchmark("verbs_reg", BM_VerbsReg)->Arg(s);
  }
  if (std::getenv("UCX_IB_REG_METHODS") != nullptr || std::getenv("UCX_RCACHE_ENABLE") != nullptr) {
    std::fprintf(stderr,
                 "rdma_ready_benchmark: unset UCX_IB_REG_METHODS and UCX_RCACHE_ENABLE: "
                 "the benchmark sets them per UCX context\n");
    return 1;
  }
  std::string ucx_error = OpenUcx(UcxCache::kNone, &E().ucx_direct);
  if (ucx_error.empty()) ucx_error = OpenUcx(UcxCache::kMdOnly, &E().ucx_mdcache);
  if (ucx_error.empty()) ucx_error = OpenUcx(UcxCache::kDefault, &E().ucx_cached);
  benchmark::AddCustomContext("ucx", ucx_error.empty() ? "ok" : ucx_error);
  if (ucx_error.empty()) {
    for (const std::int64_t s : kSizes) {
      benchmark::RegisterBenchmark("ucx_direct", BM_UcxDirect)->Arg(s);
      benchmark::RegisterBenchmark("ucx_mdcache", BM_UcxCached<false, true>)->Arg(s);
      benchmark::RegisterBenchmark("ucx_cached", BM_UcxCached<false, false>)->Arg(s);
      benchmark::RegisterBenchmark("ucx_cached_pack", BM_UcxCached<true, false>)->Arg(s);
    }
  } else {
    std::fprintf(stderr, "rdma_ready_benchmark: UCX unavailable: %s\n", ucx_error.c_str());
  }
  const std::string fabric_error = OpenFabric();
  benchmark::AddCustomContext("libfabric", fabric_error.empty() ? "ok" : fabric_error);
  if (fabric_error.empty()) {
    const char* count = std::getenv("FI_MR_CACHE_MAX_COUNT");
    const bool nocache = count != nullptr && std::strcmp(count, "0") == 0;
    for (const std::int64_t s : kSizes) {
      benchmark::RegisterBenchmark(nocache ? "fabric_nocache" : "fabric_reg", BM_FabricReg)->Arg(s);
    }
  } else {
    std::fprintf(stderr, "rdma_ready_benchmark: libfabric verbs unavailable: %s\n",
                 fabric_error.c_str());
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
