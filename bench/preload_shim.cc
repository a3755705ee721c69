// The preload shim: a BENCHMARK DEVICE that makes one pinpool pool the malloc of an unmodified
// program (LD_PRELOAD=libpinpool_preload.so), so that third-party allocator benchmarks
// (bench/third-party.sh) can run on pinpool beside glibc, tcmalloc and mimalloc. It is not a
// supported way to use pinpool, and nothing installs it: linking pinpool never replaces the
// application's malloc (docs/preload-shim.md says why; in short, every byte of the program's heap
// becomes pinned memory, a forked child has none of it (chunks are MADV_DONTFORK), and the pool's
// keys, grants and classes mean nothing to code that only calls malloc).
//
// What it owns: malloc, free, calloc, realloc, posix_memalign, aligned_alloc, memalign, valloc,
// pvalloc and malloc_usable_size (libstdc++'s operator new and delete call these). Everything goes
// to ONE pool through the inline C++ API (Pool::Allocate / Deallocate), except:
//   - calls before the shim's constructor has made the pool, and calls made while this thread is
//     inside the pool (its creation, a thread's first allocation, growth: the library's own
//     vectors and strings), which go to glibc's allocator (its __libc_* entry points);
//   - sizes or alignments the pool cannot serve (above max_block_size(), or the budget spent),
//     which glibc serves too.
// A free, realloc or malloc_usable_size tells the two apart by address: the pool's whole range is
// reserved at creation and never moves, so `p - base < size` is exact. A pointer glibc gave stays
// glibc's (realloc keeps it there).
//
// Invariants: g_pool is null until the pool, its range and the real malloc_usable_size are all set;
// once set nothing here changes again (the pool is never destroyed: threads and static destructors
// may free after main returns). Before the constructor runs (other libraries' constructors,
// ld.so) nothing here has dynamic initialization to wait for: every global is constinit.
//
// Thread safety: any thread may call anything at any time; t_inside is per thread. The pool is made
// in the constructor, where libpinpool and its dependencies are already initialized (the shim
// depends on them), not lazily on a first malloc, which can come from a library initialized before
// libpinpool (libstdc++'s exception pool) and would run the pool's code on unconstructed statics.
//
// fork(): the child has no mapping of any chunk, so its first touch of heap memory would crash
// somewhere unrelated; the child instead aborts at once saying why (pthread_atfork). glibc's
// system() and posix_spawn() do not run fork handlers and need no heap in the child: they work.
//
// Environment: PINPOOL_PRELOAD_BUDGET_MIB (default 4096) and PINPOOL_PRELOAD_CHUNK_MIB (default
// 16: the pool maps, zeroes and pins its first chunk before main, a few milliseconds a program
// pays at start; blocks up to 7/8 of a chunk); PINPOOL_PRELOAD_STATS=1 prints, at exit, what went
// to glibc and some of the pool's stats.
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "bench_pool.h"
#include "pinpool/pool.h"

extern "C" {  // glibc's allocator under its own names (exported for exactly this use)
void* __libc_malloc(size_t);
void __libc_free(void*);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
}

namespace {

using pinpool::Pool;

// Set once by the constructor (the pool last, with release), read with acquire: whoever sees the
// pool sees the rest. The range is 0 bytes until then: no pointer is the pool's. A free reads the
// range alone (relaxed): a pointer in it came from the pool, through whatever handed it over.
constinit std::atomic<Pool*> g_pool{nullptr};
constinit std::atomic<std::uintptr_t> g_base{0};
constinit std::atomic<std::size_t> g_size{0};
using UsableSizeFn = std::size_t (*)(void*);
constinit UsableSizeFn g_glibc_usable_size = nullptr;

// This thread is inside the pool: what it allocates now is glibc's.
constinit thread_local bool t_inside __attribute__((tls_model("initial-exec"))) = false;

// What went to glibc after the pool existed (PINPOOL_PRELOAD_STATS): rare paths only.
constinit std::atomic<std::uint64_t> g_glibc_inside{0};   // allocations from inside the pool
constinit std::atomic<std::uint64_t> g_glibc_refused{0};  // sizes/alignments the pool refused
constinit std::atomic<std::uint64_t> g_glibc_frees{0};    // frees of glibc's pointers

bool Owned(const void* p) noexcept {
  return reinterpret_cast<std::uintptr_t>(p) - g_base.load(std::memory_order_relaxed) <
         g_size.load(std::memory_order_relaxed);
}

// The pool when this call may use it; null sends the call to glibc.
inline Pool* PoolForCall() noexcept {
  Pool* pool = g_pool.load(std::memory_order_acquire);
  if (__builtin_expect(pool == nullptr || t_inside, 0)) {
    if (pool != nullptr) g_glibc_inside.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  return pool;
}

// Runs `f` with this thread marked inside the pool: a malloc it makes goes to glibc.
template <typename F>
inline auto Inside(F f) noexcept {
  const bool was = t_inside;
  t_inside = true;
  auto r = f();
  t_inside = was;
  return r;
}

// A block from the pool (`from_pool(pool)`) when this call may use it and the pool can serve it,
// else `from_glibc()`.
template <typename P, typename G>
inline void* PoolOrGlibc(P from_pool, G from_glibc) noexcept {
  if (Pool* pool = PoolForCall()) {
    if (void* p = Inside([&] { return from_pool(*pool); })) return p;
    g_glibc_refused.fetch_add(1, std::memory_order_relaxed);
  }
  return from_glibc();
}

// malloc(0) is a unique pointer; the pool refuses 0 bytes.
void* Allocate(std::size_t size) noexcept {
  size += size == 0;
  return PoolOrGlibc([&](Pool& pool) { return pool.Allocate(size).data(); },
                     [&] { return __libc_malloc(size); });
}

// `alignment`: a power of two (the callers check).
void* AllocateAligned(std::size_t alignment, std::size_t size) noexcept {
  size += size == 0;
  return PoolOrGlibc([&](Pool& pool) { return pool.Allocate(size, alignment).data(); },
                     [&] { return __libc_memalign(alignment, size); });
}

void* AllocateZeroed(std::size_t n, std::size_t size) noexcept {
  std::size_t bytes;
  if (__builtin_mul_overflow(n, size, &bytes)) {
    errno = ENOMEM;
    return nullptr;
  }
  return PoolOrGlibc(
      [&](Pool& pool) {
        void* p = pool.Allocate(bytes + (bytes == 0)).data();
        if (p != nullptr) std::memset(p, 0, bytes);  // a reused block holds what it held
        return p;
      },
      [&] { return __libc_calloc(n, size); });
}

void Free(void* p) noexcept {
  if (__builtin_expect(Owned(p), 1)) {
    Pool* pool = g_pool.load(std::memory_order_relaxed);  // set: it gave p
    Inside([&] {
      pool->Deallocate(p);
      return 0;
    });
    return;
  }
  if (p == nullptr) return;
  if (g_size.load(std::memory_order_relaxed) != 0) {
    g_glibc_frees.fetch_add(1, std::memory_order_relaxed);
  }
  __libc_free(p);
}

std::size_t UsableSize(void* p) noexcept {
  if (p == nullptr) return 0;
  if (Owned(p)) {
    return Inside([&] { return g_pool.load(std::memory_order_relaxed)->UsableSize(p); });
  }
  return g_glibc_usable_size != nullptr ? g_glibc_usable_size(p) : 0;
}

void* Reallocate(void* p, std::size_t size) noexcept {
  if (p == nullptr) return Allocate(size);
  if (size == 0) {  // as glibc: frees, returns null
    Free(p);
    return nullptr;
  }
  if (!Owned(p)) return __libc_realloc(p, size);
  Pool* pool = g_pool.load(std::memory_order_relaxed);
  if (void* q = Inside([&] { return pool->Reallocate(p, size).data(); })) return q;
  // Too large for a block (or the budget spent): glibc takes it over.
  g_glibc_refused.fetch_add(1, std::memory_order_relaxed);
  void* q = __libc_malloc(size);
  if (q == nullptr) return nullptr;  // p untouched, errno set by glibc
  std::memcpy(q, p, std::min(size, UsableSize(p)));
  Free(p);
  return q;
}

std::size_t EnvMiB(const char* name, std::size_t fallback) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback) * pinpool::kMiB;
}

void AbortInForkedChild() {
  static const char kMessage[] =
      "pinpool preload shim: fork() with pinpool as this program's malloc: the child has no "
      "mapping of the pool's chunks (MADV_DONTFORK), so its heap is gone; this program cannot "
      "run on the shim (docs/preload-shim.md)\n";
  (void)!write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
  std::abort();
}

void PrintStats() {
  Pool* pool = g_pool.load(std::memory_order_acquire);
  if (pool == nullptr) return;
  t_inside = true;  // GetStats and printf allocate: from glibc
  const pinpool::PoolStats s = pool->GetStats();
  std::fprintf(stderr,
               "pinpool preload shim: to glibc: %llu allocations from inside the pool, %llu the "
               "pool refused (too large or budget spent), %llu frees of glibc's pointers\n"
               "pinpool preload shim: pool: %zu MiB mapped, %llu growths, %llu cache drains, "
               "%llu allocations on the slow path (those above 64 KiB sampled 1 in 32)\n",
               static_cast<unsigned long long>(g_glibc_inside.load()),
               static_cast<unsigned long long>(g_glibc_refused.load()),
               static_cast<unsigned long long>(g_glibc_frees.load()),
               s.mapped_bytes / pinpool::kMiB, static_cast<unsigned long long>(s.growths),
               static_cast<unsigned long long>(s.cache_drains),
               static_cast<unsigned long long>(s.allocate_slow_latency.count));
  t_inside = false;
}

__attribute__((constructor)) void MakePool() {
  t_inside = true;  // everything the pool's creation allocates is glibc's
  pinpool::PoolOptions o;
  o.chunk_size = EnvMiB("PINPOOL_PRELOAD_CHUNK_MIB", 16);
  o.budget = EnvMiB("PINPOOL_PRELOAD_BUDGET_MIB", 4096);
  o.initial_size = o.chunk_size;  // one chunk: its position gives the range's base
  // Transparent huge pages, as the allocation benchmarks: reserved hugetlb pages stay for the
  // tests that need them. The default domain (long-term pin) needs RLIMIT_MEMLOCK or root.
  o.page_size = pinpool::PageSize::kTransparent;
  o.reserve_threads = 1;  // growth inside malloc starts no threads
  Pool& pool = pinpool::bench::LeakedPool(std::move(o));
  const pinpool::PoolStats s = pool.GetStats();
  g_base.store(s.chunks.at(0).base - std::uintptr_t{s.chunks[0].index} * pool.chunk_size(),
               std::memory_order_relaxed);
  g_size.store(s.reserved_bytes, std::memory_order_relaxed);
  g_glibc_usable_size = reinterpret_cast<UsableSizeFn>(dlsym(RTLD_NEXT, "malloc_usable_size"));
  pthread_atfork(nullptr, nullptr, AbortInForkedChild);
  if (const char* v = std::getenv("PINPOOL_PRELOAD_STATS"); v != nullptr && *v == '1') {
    std::atexit(PrintStats);
  }
  g_pool.store(&pool, std::memory_order_release);
  t_inside = false;
}

}  // namespace

// The malloc family, exported (the library is built with hidden visibility).
#define PINPOOL_SHIM_API extern "C" __attribute__((visibility("default")))

PINPOOL_SHIM_API void* malloc(size_t size) noexcept { return Allocate(size); }
PINPOOL_SHIM_API void free(void* p) noexcept { Free(p); }
PINPOOL_SHIM_API void* calloc(size_t n, size_t size) noexcept { return AllocateZeroed(n, size); }
PINPOOL_SHIM_API void* realloc(void* p, size_t size) noexcept { return Reallocate(p, size); }
PINPOOL_SHIM_API int posix_memalign(void** out, size_t alignment, size_t size) noexcept {
  if (alignment < sizeof(void*) || (alignment & (alignment - 1)) != 0) return EINVAL;
  void* p = AllocateAligned(alignment, size);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}
PINPOOL_SHIM_API void* aligned_alloc(size_t alignment, size_t size) noexcept {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    errno = EINVAL;
    return nullptr;
  }
  return AllocateAligned(alignment, size);
}
PINPOOL_SHIM_API void* memalign(size_t alignment, size_t size) noexcept {
  // As glibc: an alignment that is not a power of two is rounded up to one.
  if (alignment <= 1) return Allocate(size);
  if (alignment > (SIZE_MAX >> 1) + 1) {
    errno = EINVAL;
    return nullptr;
  }
  return AllocateAligned(std::size_t{1} << (64 - __builtin_clzll(alignment - 1)), size);
}
PINPOOL_SHIM_API void* valloc(size_t size) noexcept {
  return AllocateAligned(static_cast<std::size_t>(sysconf(_SC_PAGESIZE)), size);
}
PINPOOL_SHIM_API void* pvalloc(size_t size) noexcept {
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return AllocateAligned(page, (size + page - 1) & ~(page - 1));
}
PINPOOL_SHIM_API size_t malloc_usable_size(void* p) noexcept { return UsableSize(p); }
