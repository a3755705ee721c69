// Instructions per allocate + free pair, counted by valgrind's callgrind: deterministic, so it
// can be compared across commits on a loaded, shared machine where timings cannot.
//
// For each allocator form and size, the program runs `--pairs` allocate + free pairs of that size
// in a loop of its own (after a warm-up that fills the thread caches), with callgrind's collection
// switched on around the loop only and its counts dumped after it under the case's name
// ("<allocator>/<form>/<size>"); bench/instruction-counts.sh runs it under callgrind and turns
// the dumps into a table of instructions per pair. The loop itself costs a few instructions per
// pair: the `loop` row measures it (an allocator that hands out one static buffer), and every row
// includes it, the same for every allocator.
//
// Forms (the calls a user of each makes; the size is opaque to the compiler, as when it comes
// from a message):
//   pinpool   block:    Pool::Allocate(n) + Pool::Deallocate(Block)
//             sized:    Pool::Allocate(n) + Pool::Deallocate(p, n)
//             address:  Pool::Allocate(n) + Pool::Deallocate(p)
//             c:        pinpool_malloc + pinpool_free (the C API)
//   tcmalloc  sized:    tc_malloc + tc_free_sized     (gperftools' libtcmalloc_minimal.so.4,
//             address:  tc_malloc + tc_free            dlopen'ed RTLD_LOCAL, called through a
//   mimalloc  sized:    mi_malloc + mi_free_size       pointer as a PLT call would be)
//             address:  mi_malloc + mi_free
//   glibc     address:  malloc + free
// Pools use the resident (mlock) domain and small chunks: what a domain does happens at growth,
// never on the fast path, and valgrind need not model io_uring.
//
// The small window (`<form>/w16`): the steps of alloc_compare_benchmark's window/small
// (window_sequence.h: 16 blocks outstanding, each step frees a random one and allocates a
// log-uniform 64 B-1 KiB block in its place), one step counted as a pair, for the loop alone and
// the sized and by-address forms of pinpool and tcmalloc.
//
// Outside valgrind the program runs the same loops and says so (the ctest smoke run). Usage:
//   instructions_benchmark [--pairs=N] [--sizes=64,256,...] [--filter=SUBSTRING]
#include <valgrind/callgrind.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_pool.h"
#include "compare_allocators.h"
#include "pinpool/domain.h"
#include "pinpool/pinpool_c.h"
#include "pinpool/pool.h"
#include "window_sequence.h"

namespace {

using pinpool::Block;
using pinpool::Pool;

// Hides a value from the optimizer at no cost: it must assume `v` changed (a size) or escaped
// (a pointer).
template <typename T>
inline void Opaque(T& v) {
  asm volatile("" : "+r"(v));
}
inline void Escape(void* p) { asm volatile("" : : "r"(p) : "memory"); }

// The C++ pools' options: 8 MiB chunks of 4 KiB pages on the resident domain.
pinpool::PoolOptions CxxOptions() {
  pinpool::PoolOptions o;
  o.chunk_size = 8 << 20;
  o.budget = 64 << 20;
  o.initial_size = 8 << 20;
  o.page_size = pinpool::PageSize::k4K;
  o.domains = {pinpool::MakeResidentNotPinnedDomain()};
  return o;
}

Pool& CxxPool() {
  static Pool* pool = &pinpool::bench::LeakedPool(CxxOptions());
  return *pool;
}

// The same pool with two named buffer classes (docs/classes.md): the default class's path must
// cost what it did; a named class's allocation is the same inline pop, its free one call.
Pool& ClassesPool() {
  static Pool* pool = [] {
    pinpool::PoolOptions o = CxxOptions();
    o.classes = {{.name = "receive", .reserved = 16 << 20},
                 {.name = "send"},
                 {.name = "on_reuse", .scrub = pinpool::Scrub::kOnReuse},
                 {.name = "on_class_change", .scrub = pinpool::Scrub::kOnClassChange}};
    return &pinpool::bench::LeakedPool(std::move(o));
  }();
  return *pool;
}

// The C API's pools use the default domain (long-term pin through io_uring); it is made only
// when the C form runs.
pinpool_pool_t* CPool() {
  static pinpool_pool_t* pool = [] {
    pinpool_options_t o;
    pinpool_options_init(&o);
    o.chunk_size = 8 << 20;
    o.budget = 64 << 20;
    o.initial_size = 8 << 20;
    o.page_size = PINPOOL_PAGE_4K;
    pinpool_pool_t* p = nullptr;
    char error[512];
    if (pinpool_create(&o, &p, error, sizeof error) != 0) {
      std::fprintf(stderr, "instructions_benchmark: pinpool_create: %s\n", error);
      std::exit(1);
    }
    return p;
  }();
  return pool;
}

alignas(64) unsigned char static_buffer[64];

// One loop per form, never inlined into another, so that each case's code is its own.
// What a loop uses is fetched before it starts (a program keeps its pool at hand).
#define PAIR_LOOP(name, setup, body)                                         \
  __attribute__((noinline)) void name(std::size_t size, std::size_t pairs) { \
    setup;                                                                   \
    for (std::size_t i = 0; i < pairs; ++i) {                                \
      Opaque(size);                                                          \
      body                                                                   \
    }                                                                        \
  }

PAIR_LOOP(LoopEmpty, (void)0, {
  void* p = static_buffer;
  Opaque(p);
  Escape(p);
})
PAIR_LOOP(LoopPinpoolBlock, Pool& pool = CxxPool(), {
  const Block b = pool.Allocate(size);
  Escape(b.data());
  pool.Deallocate(b);
})
PAIR_LOOP(LoopPinpoolSized, Pool& pool = CxxPool(), {
  void* p = pool.Allocate(size).data();
  Escape(p);
  pool.Deallocate(p, size);
})
PAIR_LOOP(LoopPinpoolAddress, Pool& pool = CxxPool(), {
  void* p = pool.Allocate(size).data();
  Escape(p);
  pool.Deallocate(p);
})
PAIR_LOOP(LoopClassesDefault, Pool& pool = ClassesPool(), {
  const Block b = pool.Allocate(size);
  Escape(b.data());
  pool.Deallocate(b);
})
PAIR_LOOP(LoopClassesNamed, Pool& pool = ClassesPool();
          const pinpool::ClassId cls = pool.ClassOf("receive").value(), {
            const Block b = pool.Allocate(cls, size);
            Escape(b.data());
            pool.Deallocate(b);
          })
// What each scrub policy costs a pair (zeroing the block on its free, for on_reuse).
PAIR_LOOP(LoopScrubOnReuse, Pool& pool = ClassesPool();
          const pinpool::ClassId cls = pool.ClassOf("on_reuse").value(), {
            const Block b = pool.Allocate(cls, size);
            Escape(b.data());
            pool.Deallocate(b);
          })
PAIR_LOOP(LoopScrubOnClassChange, Pool& pool = ClassesPool();
          const pinpool::ClassId cls = pool.ClassOf("on_class_change").value(), {
            const Block b = pool.Allocate(cls, size);
            Escape(b.data());
            pool.Deallocate(b);
          })
PAIR_LOOP(LoopPinpoolC, pinpool_pool_t* pool = CPool(), {
  void* p = pinpool_malloc(pool, size);
  Escape(p);
  pinpool_free(pool, p);
})
PAIR_LOOP(LoopGlibc, (void)0, {
  void* p = std::malloc(size);
  Escape(p);
  std::free(p);
})
#undef PAIR_LOOP

// The same two loops for each allocator loaded by name (compare_allocators.h): sized free and
// free by address, through the function pointers a PLT call would resolve to.
template <pinpool::bench::Loaded& (*kLoad)()>
__attribute__((noinline)) void LoopLoadedSized(std::size_t size, std::size_t pairs) {
  const pinpool::bench::Loaded l = kLoad();
  for (std::size_t i = 0; i < pairs; ++i) {
    Opaque(size);
    void* p = l.malloc_fn(size);
    Escape(p);
    l.sized_free_fn(p, size);
  }
}
template <pinpool::bench::Loaded& (*kLoad)()>
__attribute__((noinline)) void LoopLoadedAddress(std::size_t size, std::size_t pairs) {
  const pinpool::bench::Loaded l = kLoad();
  for (std::size_t i = 0; i < pairs; ++i) {
    Opaque(size);
    void* p = l.malloc_fn(size);
    Escape(p);
    l.free_fn(p);
  }
}

// The small window's steps, `steps` of them (the sequence repeats every kWindowOps). Put frees
// the block in a slot (`put(p, size)`), Get allocates one (`get(size)`).
const pinpool::bench::WindowOps& SmallWindow() {
  static const pinpool::bench::WindowOps ops =
      pinpool::bench::MakeWindowOps(pinpool::bench::kWindowSeed, pinpool::bench::kSmallWindow);
  return ops;
}
template <typename Get, typename Put>
__attribute__((always_inline)) inline void WindowSteps(std::size_t steps, Get get, Put put) {
  constexpr int kW = pinpool::bench::kSmallWindow.window;
  const pinpool::bench::WindowOps& ops = SmallWindow();
  void* blocks[kW];
  std::uint32_t sizes[kW];
  for (int i = 0; i < kW; ++i) {
    sizes[i] = ops.initial[i];
    blocks[i] = get(sizes[i]);
  }
  for (std::size_t i = 0; i < steps; ++i) {
    const std::size_t k = i & (pinpool::bench::kWindowOps - 1);
    const std::uint32_t slot = ops.slot[k];
    put(blocks[slot], sizes[slot]);
    sizes[slot] = ops.size[k];
    blocks[slot] = get(sizes[slot]);
    Escape(blocks[slot]);
  }
  for (int i = 0; i < kW; ++i) put(blocks[i], sizes[i]);
}
// The first argument is unused (the window has its own sizes): the Form signature. The get and
// put lambdas are forced inline, as a caller's own code would have the inline path.
#define WINDOW_LOOP(name, setup, get, put)                              \
  __attribute__((noinline)) void name(std::size_t, std::size_t steps) { \
    setup;                                                              \
    WindowSteps(steps, get, put);                                       \
  }
WINDOW_LOOP(
    WindowEmpty, (void)0,
    [](std::uint32_t n) -> void* {
      void* p = static_buffer + (n & 1);
      Opaque(p);
      return p;
    },
    [](void* p, std::uint32_t) { Escape(p); })
WINDOW_LOOP(
    WindowPinpoolSized, Pool& pool = CxxPool(),
    [&pool](std::uint32_t n) __attribute__((always_inline)) { return pool.Allocate(n).data(); },
    [&pool](void* p, std::uint32_t n) __attribute__((always_inline)) { pool.Deallocate(p, n); })
WINDOW_LOOP(
    WindowPinpoolAddress, Pool& pool = CxxPool(),
    [&pool](std::uint32_t n) __attribute__((always_inline)) { return pool.Allocate(n).data(); },
    [&pool](void* p, std::uint32_t) __attribute__((always_inline)) { pool.Deallocate(p); })
#undef WINDOW_LOOP
template <pinpool::bench::Loaded& (*kLoad)(), bool kSized>
__attribute__((noinline)) void WindowLoaded(std::size_t, std::size_t steps) {
  const pinpool::bench::Loaded l = kLoad();
  WindowSteps(
      steps, [&l](std::uint32_t n) __attribute__((always_inline)) { return l.malloc_fn(n); },
      [&l](void* p, std::uint32_t n) __attribute__((always_inline)) {
        if constexpr (kSized) {
          l.sized_free_fn(p, n);
        } else {
          l.free_fn(p);
        }
      });
}

struct Form {
  const char* name;
  void (*loop)(std::size_t size, std::size_t pairs);
};
constexpr Form kWindowForms[] = {
    {"loop/-", WindowEmpty},
    {"pinpool/sized", WindowPinpoolSized},
    {"pinpool/address", WindowPinpoolAddress},
    {"tcmalloc/sized", WindowLoaded<pinpool::bench::Tcmalloc, true>},
    {"tcmalloc/address", WindowLoaded<pinpool::bench::Tcmalloc, false>},
};
constexpr Form kForms[] = {
    {"loop/-", LoopEmpty},
    {"pinpool/block", LoopPinpoolBlock},
    {"pinpool/sized", LoopPinpoolSized},
    {"pinpool/address", LoopPinpoolAddress},
    {"pinpool/c", LoopPinpoolC},
    {"classes/default", LoopClassesDefault},
    {"classes/named", LoopClassesNamed},
    {"classes/on_reuse", LoopScrubOnReuse},
    {"classes/on_class_change", LoopScrubOnClassChange},
    {"tcmalloc/sized", LoopLoadedSized<pinpool::bench::Tcmalloc>},
    {"tcmalloc/address", LoopLoadedAddress<pinpool::bench::Tcmalloc>},
    {"mimalloc/sized", LoopLoadedSized<pinpool::bench::Mimalloc>},
    {"mimalloc/address", LoopLoadedAddress<pinpool::bench::Mimalloc>},
    {"glibc/address", LoopGlibc},
};

std::vector<std::size_t> ParseSizes(const char* list) {
  std::vector<std::size_t> sizes;
  for (const char* s = list; *s != '\0';) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(s, &end, 10);
    if (end == s || v == 0) {
      std::fprintf(stderr, "instructions_benchmark: bad --sizes list: %s\n", list);
      std::exit(2);
    }
    sizes.push_back(v);
    s = *end == ',' ? end + 1 : end;
  }
  return sizes;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t pairs = 100000;
  std::vector<std::size_t> sizes = {64, 256, 1 << 10, 4 << 10, 16 << 10, 64 << 10};
  std::string filter;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--pairs=", 8) == 0) {
      pairs = std::strtoull(argv[i] + 8, nullptr, 10);
    } else if (std::strncmp(argv[i], "--sizes=", 8) == 0) {
      sizes = ParseSizes(argv[i] + 8);
    } else if (std::strncmp(argv[i], "--filter=", 9) == 0) {
      filter = argv[i] + 9;
    } else {
      std::fprintf(stderr, "usage: %s [--pairs=N] [--sizes=64,256,...] [--filter=SUBSTRING]\n",
                   argv[0]);
      return 2;
    }
  }
  if (pairs == 0) pairs = 1;
  if (RUNNING_ON_VALGRIND == 0) {
    std::printf(
        "not under callgrind: running the loops uncounted (bench/instruction-counts.sh "
        "counts them)\n");
  }
  const auto count = [&](const Form& form, std::size_t size, const std::string& name) {
    if (!filter.empty() && name.find(filter) == std::string::npos) return;
    form.loop(size, 1000);  // warm: pools made, caches filled, code resolved
    CALLGRIND_ZERO_STATS;
    CALLGRIND_TOGGLE_COLLECT;
    form.loop(size, pairs);
    CALLGRIND_TOGGLE_COLLECT;
    CALLGRIND_DUMP_STATS_AT(name.c_str());
    std::printf("%s: %zu pairs\n", name.c_str(), pairs);
  };
  for (const Form& form : kForms) {
    for (const std::size_t size : sizes) {
      count(form, size, std::string(form.name) + "/" + std::to_string(size));
    }
  }
  for (const Form& form : kWindowForms) count(form, 0, std::string(form.name) + "/w16");
  return 0;
}
