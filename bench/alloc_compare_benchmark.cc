// Allocation, pinpool against the general-purpose allocators a user would otherwise put under
// their buffers (bench/compare_allocators.h: jemalloc, mimalloc, tcmalloc, glibc), on the shapes
// RDMA programs have, all in ONE process so every ratio compares figures taken minutes apart on
// the same machine under the same load. Every allocator runs every shape twice: with its sized
// free and with its free by address (pinpool: Deallocate(Block) and the C API's pinpool_free;
// `pinpoolptr`: the C++ API holding plain pointers, Deallocate(p, n) and Deallocate(p)).
//
// Shapes (time per allocate + free; every random choice comes from sequences generated once with
// fixed seeds, the same for every allocator):
//   pair/<free>/<alloc>/<size>        allocate, free at once. 64 B .. 4 MiB; 1 and 2 threads
//                                     (each thread its own loop; time per thread).
//   batch/<free>/<alloc>/<size>       64 allocations, then the 64 frees (time / 64).
//   window/<shape>/<free>/<alloc>     W blocks stay outstanding; each step frees a random one and
//                                     allocates a block of a random size in its place (posted
//                                     receives, in-flight RPCs completing out of order):
//                                       small    64 B - 1 KiB,  W = 16
//                                       medium   4 - 64 KiB,    W = 256
//                                       64k      64 KiB,        W = 256
//                                       64k1024  64 KiB,        W = 1024 (64 MiB outstanding)
//                                       large    1 - 4 MiB,     W = 16
//                                     sizes log-uniform in the range; 1 and 2 threads (each its
//                                     own window).
//   prodcons/<free>/<alloc>           two threads: one allocates 64 B - 64 KiB (log-uniform) and
//                                     passes the blocks through a 256-slot ring to the other,
//                                     which frees them (time per block).
// glibc has no sized free: it runs once, under `address`, and the report uses that figure for
// the sized rows too. Blocks are never touched (as the fastest possible user), so what is
// measured is the allocator alone. With repetitions, a `min` aggregate (best repetition) is
// reported beside mean/median/stddev.
//
//   build/bench/alloc_compare_benchmark --benchmark_repetitions=5 \
//       --benchmark_enable_random_interleaving=true --benchmark_format=json > alloc.json
#include <benchmark/benchmark.h>
#include <immintrin.h>
#include <sched.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "compare_allocators.h"
#include "window_sequence.h"

namespace {

using pinpool::bench::Free;
using pinpool::bench::FreeName;

constexpr int kBatch = 64;
constexpr std::array<std::size_t, 9> kSizes = {64,       256,       1 << 10, 4 << 10, 16 << 10,
                                               64 << 10, 256 << 10, 1 << 20, 4 << 20};

// --- the pre-generated sequences -----------------------------------------------------------------

using pinpool::bench::WindowShape;
constexpr WindowShape kWindows[] = {pinpool::bench::kSmallWindow,
                                    {"medium", 4 << 10, 64 << 10, 256},
                                    {"64k", 64 << 10, 64 << 10, 256},
                                    {"64k1024", 64 << 10, 64 << 10, 1024},
                                    {"large", 1 << 20, 4 << 20, 16}};

constexpr std::size_t kOps = pinpool::bench::kWindowOps;
using pinpool::bench::LogUniform;
using pinpool::bench::WindowOps;

const WindowOps& OpsFor(const WindowShape& shape) {
  static std::vector<WindowOps> all = [] {
    std::vector<WindowOps> v;
    std::uint64_t seed = pinpool::bench::kWindowSeed;  // the first shape's, then one more each
    for (const WindowShape& s : kWindows) v.push_back(pinpool::bench::MakeWindowOps(seed++, s));
    return v;
  }();
  return all[&shape - kWindows];
}

const std::vector<std::uint32_t>& ProducerSizes() {
  static std::vector<std::uint32_t> sizes = [] {
    std::mt19937_64 rng(1399);
    std::vector<std::uint32_t> v;
    for (std::size_t i = 0; i < kOps; ++i) {
      v.push_back(static_cast<std::uint32_t>(LogUniform(rng, 64, 64 << 10)));
    }
    return v;
  }();
  return sizes;
}

// --- the shapes --------------------------------------------------------------------------------

template <typename A>
void Pair(benchmark::State& state) {
  const auto size = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    typename A::Handle h = A::Get(size);
    benchmark::DoNotOptimize(A::Ptr(h));
    A::Put(h, size);
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
    for (int i = 0; i < kBatch; ++i) A::Put(handles[i], size);
  }
  state.counters["batch"] = benchmark::Counter(kBatch, benchmark::Counter::kAvgThreads);
}

template <typename A>
void Window(benchmark::State& state, const WindowShape* shape) {
  const WindowOps& ops = OpsFor(*shape);
  std::vector<typename A::Handle> handles(shape->window);
  std::vector<std::uint32_t> sizes(ops.initial);
  for (int i = 0; i < shape->window; ++i) {
    handles[i] = A::Get(sizes[i]);
    if (!A::Ptr(handles[i])) state.SkipWithError("allocation failed");
  }
  // Each thread walks the same sequence from its own place in it.
  std::size_t i = static_cast<std::size_t>(state.thread_index()) * (kOps / 2);
  for (auto _ : state) {
    const std::size_t k = i++ & (kOps - 1);
    const std::uint32_t slot = ops.slot[k];
    A::Put(handles[slot], sizes[slot]);
    sizes[slot] = ops.size[k];
    handles[slot] = A::Get(sizes[slot]);
    benchmark::DoNotOptimize(A::Ptr(handles[slot]));
  }
  for (int s = 0; s < shape->window; ++s) A::Put(handles[s], sizes[s]);
}

// A single-producer single-consumer ring of blocks between the benchmark's two threads. The same
// for every allocator: its cost is in every figure alike.
template <typename Handle>
struct Ring {
  static constexpr std::size_t kSlots = 256;
  struct Slot {
    Handle handle;
    std::uint32_t size;
  };
  alignas(64) std::atomic<std::size_t> head{0};  // written by the producer
  alignas(64) std::atomic<std::size_t> tail{0};  // written by the consumer
  alignas(64) Slot slots[kSlots];
};

inline void Spin(int& spins) {
  if (++spins < 64) {
    _mm_pause();
  } else {
    spins = 0;
    sched_yield();  // two shared cores: let the other side run
  }
}

template <typename A>
void ProducerConsumer(benchmark::State& state) {
  static Ring<typename A::Handle> ring;
  const std::vector<std::uint32_t>& sizes = ProducerSizes();
  if (state.thread_index() == 0) {  // before the start barrier: the consumer waits there
    ring.head.store(0);
    ring.tail.store(0);
  }
  if (state.thread_index() == 0) {
    std::size_t head = 0;
    for (auto _ : state) {
      const std::uint32_t size = sizes[head & (kOps - 1)];
      typename A::Handle h = A::Get(size);
      benchmark::DoNotOptimize(A::Ptr(h));
      int spins = 0;
      while (head - ring.tail.load(std::memory_order_acquire) == ring.kSlots) Spin(spins);
      ring.slots[head % ring.kSlots] = {h, size};
      ring.head.store(++head, std::memory_order_release);
    }
  } else {
    std::size_t tail = 0;
    for (auto _ : state) {
      int spins = 0;
      while (ring.head.load(std::memory_order_acquire) == tail) Spin(spins);
      const auto slot = ring.slots[tail % ring.kSlots];
      ring.tail.store(++tail, std::memory_order_release);
      A::Put(slot.handle, slot.size);
    }
  }
}

// --- registration ------------------------------------------------------------------------------

// Best of the repetitions: other work on a shared machine only ever adds time to a run, so the
// minimum is the steadiest estimate (scripts report it beside the median).
double Min(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

template <typename A>
void Register(Free free, const char* name) {
  const std::string tail = std::string(FreeName(free)) + "/" + name;
  for (const int threads : {1, 2}) {
    for (const std::size_t size : kSizes) {
      benchmark::RegisterBenchmark(("pair/" + tail).c_str(), Pair<A>)
          ->Arg(static_cast<std::int64_t>(size))
          ->Threads(threads)
          ->UseRealTime()
          ->ComputeStatistics("min", Min);
      benchmark::RegisterBenchmark(("batch/" + tail).c_str(), Batch<A>)
          ->Arg(static_cast<std::int64_t>(size))
          ->Threads(threads)
          ->UseRealTime()
          ->ComputeStatistics("min", Min);
    }
    for (const WindowShape& shape : kWindows) {
      benchmark::RegisterBenchmark(("window/" + std::string(shape.name) + "/" + tail).c_str(),
                                   Window<A>, &shape)
          ->Threads(threads)
          ->UseRealTime()
          ->ComputeStatistics("min", Min);
    }
  }
  benchmark::RegisterBenchmark(("prodcons/" + tail).c_str(), ProducerConsumer<A>)
      ->Threads(2)
      ->UseRealTime()
      ->ComputeStatistics("min", Min);
}

template <template <Free> class A>
void RegisterBoth(const char* name) {
  Register<A<Free::kSized>>(Free::kSized, name);
  Register<A<Free::kAddress>>(Free::kAddress, name);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace pinpool::bench;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("malloc", LoadAllAndCheckMallocIsGlibc());
  benchmark::AddCustomContext("mimalloc", ObjectOf(reinterpret_cast<void*>(Mimalloc().malloc_fn)));
  benchmark::AddCustomContext("tcmalloc", ObjectOf(reinterpret_cast<void*>(Tcmalloc().malloc_fn)));
  RegisterBoth<PinpoolAlloc>("pinpool");
  RegisterBoth<PinpoolPointerAlloc>("pinpoolptr");
  RegisterBoth<JemallocAlloc>("jemalloc");
  RegisterBoth<MimallocAlloc>("mimalloc");
  RegisterBoth<TcmallocAlloc>("tcmalloc");
  Register<GlibcAlloc>(Free::kAddress, "glibc");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
