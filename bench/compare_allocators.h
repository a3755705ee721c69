// The allocators alloc_compare_benchmark puts side by side, each in two free flavours, all
// callable in ONE process without any of them replacing the process's malloc:
//
//   pinpool   sized:   Pool::Allocate + Pool::Deallocate(Block)     (the Block carries the size)
//             address: pinpool_malloc + pinpool_free                 (the C API, drop-in use)
//             (libpinpool.so, like any user; two pools, one per flavour)
//   jemalloc  a separate renamed copy (pinpool_je_*, statically linked, default options):
//             sized: malloc + sdallocx(p, n, 0); address: malloc + free
//   mimalloc  Debian's libmimalloc.so.2, dlopen'ed RTLD_LOCAL:
//             sized: mi_malloc + mi_free_size; address: mi_malloc + mi_free
//   tcmalloc  gperftools' libtcmalloc_minimal.so.4, dlopen'ed RTLD_LOCAL:
//             sized: tc_malloc + tc_free_sized; address: tc_malloc + tc_free
//   glibc     this program's own malloc + free (glibc 2.36 has no sized free: one flavour)
//
// mimalloc's and tcmalloc's shared objects also define `malloc`; linking them would make them
// this program's malloc and leave no glibc to compare with. Loaded with RTLD_LOCAL after start-up
// they cannot interpose (the process's `malloc` was already bound), and their prefixed entry
// points are called through a function pointer: the same indirect jump a PLT call makes, which is
// how an application linking the shared library calls them. CheckMallocIsGlibc() proves it.
//
// Each adapter: `Handle Get(n)` (null/empty on failure), `void* Ptr(h)`, `void Put(h, n)` where n
// is the size the block was asked for (what a program knows when it frees). Adapters are forced
// inline (PINPOOL_BENCH_INLINE), so the shapes call each allocator as a program's own call site
// does: left to itself, gcc kept pinpool's sized adapters out of line (two calls a pair, the Block
// returned through memory; 14.4 ns a 64 B pair against 9.3 ns for the C API's two calls into the
// library), a cost no program calling Pool::Allocate pays. So are the accessors of each
// allocator's pool or entry points (a function-static behind a guard): kept out of line in the
// window shape, they cost pinpool two calls an operation that a program holding its pool in a
// variable does not make.
#ifndef PINPOOL_BENCH_COMPARE_ALLOCATORS_H_
#define PINPOOL_BENCH_COMPARE_ALLOCATORS_H_

#include <dlfcn.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench_pool.h"
#include "pinpool/pinpool_c.h"
#include "pinpool/pool.h"

extern "C" {  // the bench's own copy of jemalloc (renamed archive, default options)
void* pinpool_je_malloc(size_t);
void pinpool_je_free(void*);
void pinpool_je_sdallocx(void*, size_t, int);
}

namespace pinpool::bench {

#define PINPOOL_BENCH_INLINE __attribute__((always_inline))  // see the top of this file

enum class Free { kSized, kAddress };
inline const char* FreeName(Free f) { return f == Free::kSized ? "sized" : "address"; }

struct Loaded {
  void* (*malloc_fn)(std::size_t) = nullptr;
  void (*free_fn)(void*) = nullptr;
  void (*sized_free_fn)(void*, std::size_t) = nullptr;
};

// dlopen(RTLD_LOCAL) + dlsym of a prefixed malloc / free / sized free. Aborts with the reason
// when one is absent: a comparison silently missing a baseline is worse than none.
inline Loaded Load(const char* library, const char* malloc_name, const char* free_name,
                   const char* sized_free_name) {
  void* handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    std::fprintf(stderr, "alloc_compare_benchmark: %s\n", dlerror());
    std::abort();
  }
  Loaded l;
  l.malloc_fn = reinterpret_cast<void* (*)(std::size_t)>(dlsym(handle, malloc_name));
  l.free_fn = reinterpret_cast<void (*)(void*)>(dlsym(handle, free_name));
  l.sized_free_fn = reinterpret_cast<void (*)(void*, std::size_t)>(dlsym(handle, sized_free_name));
  if (l.malloc_fn == nullptr || l.free_fn == nullptr || l.sized_free_fn == nullptr) {
    std::fprintf(stderr, "alloc_compare_benchmark: %s lacks %s/%s/%s\n", library, malloc_name,
                 free_name, sized_free_name);
    std::abort();
  }
  return l;
}

PINPOOL_BENCH_INLINE inline Loaded& Mimalloc() {
  static Loaded l = Load("libmimalloc.so.2", "mi_malloc", "mi_free", "mi_free_size");
  return l;
}
PINPOOL_BENCH_INLINE inline Loaded& Tcmalloc() {
  static Loaded l = Load("libtcmalloc_minimal.so.4", "tc_malloc", "tc_free", "tc_free_sized");
  return l;
}

// Room for the largest shape on two threads (a batch of 64 x 4 MiB each: 512 MiB) and what the
// caches may hold beside it, mapped and pinned up front: growth is not what is measured.
// PINPOOL_BENCH_INITIAL_MIB changes how much (the smoke run maps little and lets pools grow).
inline PoolOptions ComparePoolOptions() {
  PoolOptions o;
  o.chunk_size = 64 * kMiB;
  o.budget = 1 * kGiB;
  const char* initial = std::getenv("PINPOOL_BENCH_INITIAL_MIB");
  o.initial_size = (initial != nullptr ? std::strtoull(initial, nullptr, 10) : 768) * kMiB;
  o.page_size = PageSize::kTransparent;
  return o;
}

PINPOOL_BENCH_INLINE inline Pool& SizedPool() {
  static Pool* pool = &LeakedPool(ComparePoolOptions());
  return *pool;
}

// The drop-in user's pool: made through the C API, as such a user makes it.
PINPOOL_BENCH_INLINE inline pinpool_pool_t* AddressPool() {
  static pinpool_pool_t* pool = [] {
    const PoolOptions cxx = ComparePoolOptions();
    pinpool_options_t o;
    pinpool_options_init(&o);
    o.chunk_size = cxx.chunk_size;
    o.budget = cxx.budget;
    o.initial_size = cxx.initial_size;
    o.page_size = PINPOOL_PAGE_TRANSPARENT;
    pinpool_pool_t* p = nullptr;
    char error[512];
    if (pinpool_create(&o, &p, error, sizeof error) != 0) {
      std::fprintf(stderr, "pinpool_create: %s\n", error);
      std::abort();
    }
    return p;
  }();
  return pool;
}

template <Free F>
struct PinpoolAlloc;
template <>
struct PinpoolAlloc<Free::kSized> {
  using Handle = Block;
  PINPOOL_BENCH_INLINE static Handle Get(std::size_t n) { return SizedPool().Allocate(n); }
  PINPOOL_BENCH_INLINE static void* Ptr(const Handle& h) { return h.data(); }
  PINPOOL_BENCH_INLINE static void Put(const Handle& h, std::size_t) { SizedPool().Deallocate(h); }
};
template <>
struct PinpoolAlloc<Free::kAddress> {
  using Handle = void*;
  PINPOOL_BENCH_INLINE static Handle Get(std::size_t n) { return pinpool_malloc(AddressPool(), n); }
  PINPOOL_BENCH_INLINE static void* Ptr(Handle h) { return h; }
  PINPOOL_BENCH_INLINE static void Put(Handle h, std::size_t) { pinpool_free(AddressPool(), h); }
};

template <Free F>
struct JemallocAlloc {
  using Handle = void*;
  PINPOOL_BENCH_INLINE static Handle Get(std::size_t n) { return pinpool_je_malloc(n); }
  PINPOOL_BENCH_INLINE static void* Ptr(Handle h) { return h; }
  PINPOOL_BENCH_INLINE static void Put(Handle h, std::size_t n) {
    if constexpr (F == Free::kSized) {
      pinpool_je_sdallocx(h, n, 0);
    } else {
      pinpool_je_free(h);
    }
  }
};

// The C++ API with a plain pointer, as a program that needs no keys holds its blocks (control
// messages, RPC headers): Allocate(n).data() (the Block's chunk lookup is then dead code and
// compiled away), freed by Deallocate(p, n) (sized) or Deallocate(p) (by address), both inline
// like Deallocate(Block). The same pool as PinpoolAlloc<kSized>.
template <Free F>
struct PinpoolPointerAlloc {
  using Handle = void*;
  PINPOOL_BENCH_INLINE static Handle Get(std::size_t n) { return SizedPool().Allocate(n).data(); }
  PINPOOL_BENCH_INLINE static void* Ptr(Handle h) { return h; }
  // Deallocate(p) is Deallocate(p, 0): size 0 means unknown.
  PINPOOL_BENCH_INLINE static void Put(Handle h, std::size_t n) {
    SizedPool().Deallocate(h, F == Free::kSized ? n : 0);
  }
};

template <Loaded& (*L)(), Free F>
struct LoadedAlloc {
  using Handle = void*;
  PINPOOL_BENCH_INLINE static Handle Get(std::size_t n) { return L().malloc_fn(n); }
  PINPOOL_BENCH_INLINE static void* Ptr(Handle h) { return h; }
  PINPOOL_BENCH_INLINE static void Put(Handle h, std::size_t n) {
    if constexpr (F == Free::kSized) {
      L().sized_free_fn(h, n);
    } else {
      L().free_fn(h);
    }
  }
};
template <Free F>
using MimallocAlloc = LoadedAlloc<Mimalloc, F>;
template <Free F>
using TcmallocAlloc = LoadedAlloc<Tcmalloc, F>;

struct GlibcAlloc {
  using Handle = void*;
  PINPOOL_BENCH_INLINE static Handle Get(std::size_t n) { return std::malloc(n); }
  PINPOOL_BENCH_INLINE static void* Ptr(Handle h) { return h; }
  PINPOOL_BENCH_INLINE static void Put(Handle h, std::size_t) { std::free(h); }
};

// Where a symbol resolved, for the context line that proves which malloc the program runs on.
inline std::string ObjectOf(void* symbol) {
  Dl_info info{};
  if (symbol == nullptr || dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return "?";
  return info.dli_fname;
}

// Loads the baselines and makes the pools (mapping and pinning is not what is measured); returns
// the object `malloc` resolves to, or aborts when that is not glibc's.
inline std::string LoadAllAndCheckMallocIsGlibc() {
  Mimalloc();
  Tcmalloc();
  SizedPool();
  AddressPool();
  const std::string malloc_object = ObjectOf(dlsym(RTLD_DEFAULT, "malloc"));
  if (malloc_object.find("libc.so") == std::string::npos) {
    std::fprintf(stderr, "alloc_compare_benchmark: malloc resolves to %s, not glibc\n",
                 malloc_object.c_str());
    std::abort();
  }
  return malloc_object;
}

}  // namespace pinpool::bench

#endif  // PINPOOL_BENCH_COMPARE_ALLOCATORS_H_
