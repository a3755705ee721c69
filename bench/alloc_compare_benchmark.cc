// Allocation fast path, pinpool against the general-purpose allocators a user would otherwise
// put under their buffers, all in ONE process and one run, so every ratio compares figures taken
// minutes apart on the same machine under the same load:
//
//   pinpool   Pool::Allocate + Pool::Deallocate(Block)       (libpinpool.so, like any user)
//   jemalloc  malloc/free of a separate renamed copy (pinpool_je_*, statically linked, default
//             options: the pinpool_jemalloc target)
//   mimalloc  mi_malloc/mi_free    (Debian's libmimalloc.so.2, dlopen'ed RTLD_LOCAL)
//   tcmalloc  tc_malloc/tc_free    (gperftools' libtcmalloc_minimal.so.4, dlopen'ed RTLD_LOCAL)
//   glibc     malloc/free          (this program's own malloc, which none of the above replaces)
//
// mimalloc's and tcmalloc's shared objects also define `malloc`; linking them would make them this
// program's malloc and leave no glibc to compare with. Loaded with RTLD_LOCAL after start-up they
// cannot interpose (the process's `malloc` was already bound), and their prefixed entry points
// are called through a function pointer: the same indirect jump a PLT call makes, which is how an
// application linking the shared library calls them. main() checks that `malloc` is still glibc's.
//
// Shapes: `pair` is one allocate + free; `batch` allocates 64 blocks then frees them (time per
// allocate+free, i.e. per iteration / 64). Sizes 64 B .. 1 MiB; 1 and 2 threads (each thread
// its own loop; time per thread). With repetitions, a `min` aggregate (best repetition) is
// reported beside mean/median/stddev.
//
//   build/bench/alloc_compare_benchmark --benchmark_repetitions=5 \
//       --benchmark_enable_random_interleaving=true --benchmark_format=json > alloc.json
#include <benchmark/benchmark.h>
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_pool.h"
#include "pinpool/pool.h"

extern "C" {  // the bench's own copy of jemalloc (renamed archive, default options)
void* pinpool_je_malloc(size_t);
void pinpool_je_free(void*);
}

namespace {

constexpr int kBatch = 64;
constexpr std::array<std::size_t, 8> kSizes = {64,       256,      1 << 10,   4 << 10,
                                               16 << 10, 64 << 10, 256 << 10, 1 << 20};

using MallocFn = void* (*)(std::size_t);
using FreeFn = void (*)(void*);

struct Loaded {
  MallocFn malloc_fn = nullptr;
  FreeFn free_fn = nullptr;
};

// dlopen(RTLD_LOCAL) + dlsym of a prefixed malloc/free pair. Aborts with the reason when absent:
// a comparison silently missing a baseline is worse than none.
Loaded Load(const char* library, const char* malloc_name, const char* free_name) {
  void* handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    std::fprintf(stderr, "alloc_compare_benchmark: %s\n", dlerror());
    std::abort();
  }
  Loaded l;
  l.malloc_fn = reinterpret_cast<MallocFn>(dlsym(handle, malloc_name));
  l.free_fn = reinterpret_cast<FreeFn>(dlsym(handle, free_name));
  if (l.malloc_fn == nullptr || l.free_fn == nullptr) {
    std::fprintf(stderr, "alloc_compare_benchmark: %s lacks %s/%s\n", library, malloc_name,
                 free_name);
    std::abort();
  }
  return l;
}

Loaded& Mimalloc() {
  static Loaded l = Load("libmimalloc.so.2", "mi_malloc", "mi_free");
  return l;
}
Loaded& Tcmalloc() {
  static Loaded l = Load("libtcmalloc_minimal.so.4", "tc_malloc", "tc_free");
  return l;
}

pinpool::Pool& SharedPool() {
  static pinpool::Pool* pool = [] {
    pinpool::PoolOptions o;
    o.chunk_size = 64 * pinpool::kMiB;
    o.budget = 512 * pinpool::kMiB;
    // Two threads x a batch of 64 x 1 MiB fit without growing during a measurement.
    o.initial_size = 256 * pinpool::kMiB;
    o.page_size = pinpool::PageSize::kTransparent;
    return &pinpool::bench::LeakedPool(o);
  }();
  return *pool;
}

// One allocator as the benchmark loops see it. `Handle` is what must be kept to free.
struct PinpoolAlloc {
  using Handle = pinpool::Block;
  static Handle Get(std::size_t n) { return SharedPool().Allocate(n); }
  static void* Ptr(const Handle& h) { return h.data(); }
  static void Put(const Handle& h) { SharedPool().Deallocate(h); }
};
struct JemallocAlloc {
  using Handle = void*;
  static Handle Get(std::size_t n) { return pinpool_je_malloc(n); }
  static void* Ptr(Handle h) { return h; }
  static void Put(Handle h) { pinpool_je_free(h); }
};
struct MimallocAlloc {
  using Handle = void*;
  static Handle Get(std::size_t n) { return Mimalloc().malloc_fn(n); }
  static void* Ptr(Handle h) { return h; }
  static void Put(Handle h) { Mimalloc().free_fn(h); }
};
struct TcmallocAlloc {
  using Handle = void*;
  static Handle Get(std::size_t n) { return Tcmalloc().malloc_fn(n); }
  static void* Ptr(Handle h) { return h; }
  static void Put(Handle h) { Tcmalloc().free_fn(h); }
};
struct GlibcAlloc {
  using Handle = void*;
  static Handle Get(std::size_t n) { return std::malloc(n); }
  static void* Ptr(Handle h) { return h; }
  static void Put(Handle h) { std::free(h); }
};

template <typename A>
void Pair(benchmark::State& state) {
  const auto size = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    typename A::Handle h = A::Get(size);
    benchmark::DoNotOptimize(A::Ptr(h));
    A::Put(h);
  }
}

template <typename A>
void Batch(benchmark::State& state) {
  const auto size = static_cast<std::size_t>(state.range(0));
  typename A::Handle handles[kBatch];
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) {
      handles[i] = A::Get(size);
      benchmark::DoNotOptimize(A::Ptr(handles[i]));
    }
    for (int i = 0; i < kBatch; ++i) A::Put(handles[i]);
  }
  state.counters["batch"] = benchmark::Counter(kBatch, benchmark::Counter::kAvgThreads);
}

// Best of the repetitions: other work on a shared machine only ever adds time to a run, so the
// minimum is the steadiest estimate of the fast path (scripts report it beside the median).
double Min(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

template <typename A>
void Register(const char* name) {
  for (const std::size_t size : kSizes) {
    for (const int threads : {1, 2}) {
      benchmark::RegisterBenchmark((std::string("pair/") + name).c_str(), Pair<A>)
          ->Arg(static_cast<std::int64_t>(size))
          ->Threads(threads)
          ->UseRealTime()
          ->ComputeStatistics("min", Min);
      benchmark::RegisterBenchmark((std::string("batch/") + name).c_str(), Batch<A>)
          ->Arg(static_cast<std::int64_t>(size))
          ->Threads(threads)
          ->UseRealTime()
          ->ComputeStatistics("min", Min);
    }
  }
}

// Where a symbol resolved, for the context line that proves which malloc the program runs on.
std::string ObjectOf(void* symbol) {
  Dl_info info{};
  if (symbol == nullptr || dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return "?";
  return info.dli_fname;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  Mimalloc();
  Tcmalloc();
  SharedPool();  // mapping and pinning 256 MiB is not what is measured
  const std::string malloc_object = ObjectOf(dlsym(RTLD_DEFAULT, "malloc"));
  if (malloc_object.find("libc.so") == std::string::npos) {
    std::fprintf(stderr, "alloc_compare_benchmark: malloc resolves to %s, not glibc\n",
                 malloc_object.c_str());
    return 1;
  }
  benchmark::AddCustomContext("malloc", malloc_object);
  benchmark::AddCustomContext("mimalloc", ObjectOf(reinterpret_cast<void*>(Mimalloc().malloc_fn)));
  benchmark::AddCustomContext("tcmalloc", ObjectOf(reinterpret_cast<void*>(Tcmalloc().malloc_fn)));
  Register<PinpoolAlloc>("pinpool");
  Register<JemallocAlloc>("jemalloc");
  Register<MimallocAlloc>("mimalloc");
  Register<TcmallocAlloc>("tcmalloc");
  Register<GlibcAlloc>("glibc");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
