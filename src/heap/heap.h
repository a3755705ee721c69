// Heap: sub-allocation of a pool's chunks, by a private jemalloc arena behind per-thread caches.
//
// The jemalloc arena is created with extent hooks that carve from the pool's Arena and refuse
// everything that would give registered pages back or move them: dalloc and decommit refuse,
// purging is off (no hooks, decay -1), and merge refuses to join extents of different chunks
// (different registrations). So after any churn a block's pages are the pages the devices pinned.
// jemalloc's own metadata stays out of the chunks (metadata_use_hooks = false).
//
// In front of jemalloc, each thread has one ThreadCache per heap (16 B .. 64 KiB, align <= 16):
// allocation pops, free pushes, and jemalloc sees only batched refills and flushes. jemalloc's
// automatic tcache is never used (it is shared by all arenas: notes/jemalloc.md, trap 1). A
// thread's caches are flushed and freed when it exits; a heap's destruction just forgets them.
//
// Thread safety: Allocate/Free/Reallocate/UsableSize from any thread; a block may be freed by
// another thread (it joins the freeing thread's cache). Construction and destruction are
// single-threaded.
#ifndef PINPOOL_HEAP_HEAP_H_
#define PINPOOL_HEAP_HEAP_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "arena/arena.h"
#include "heap/size_class.h"
#include "heap/thread_cache.h"

namespace pinpool::internal {

// This thread's most recently used (heap, cache) pairs: the fast path reads slot 0 only. Plain
// data with initial-exec TLS and constinit, so reading it is one %fs-relative load with no
// initialization check.
struct ThreadCacheSlots {
  static constexpr int kSlots = 4;
  std::uint64_t heap_id[kSlots];
  ThreadCache* cache[kSlots];
};
struct ThreadCacheOwner;
// Set when this thread's cache owner has been destroyed (thread exit): frees and allocations
// from destructors that run later (other thread_locals, statics) bypass the caches.
extern constinit thread_local bool tls_caches_gone __attribute__((tls_model("initial-exec")));
extern constinit thread_local ThreadCacheSlots tls_cache_slots
    __attribute__((tls_model("initial-exec")));

class Heap {
 public:
  static absl::StatusOr<std::unique_ptr<Heap>> Create(Arena* arena);
  ~Heap();
  Heap(const Heap&) = delete;
  Heap& operator=(const Heap&) = delete;

  // The fast path: a pop from this thread's cache, or null when that needs more (no cache yet
  // for this heap, an empty bin). Call only with 1 <= size <= kMaxCachedSize and an alignment
  // of at most kMinCachedSize. No call, no lock, no atomic.
  void* TryAllocateCached(std::size_t size) noexcept {
    ThreadCacheSlots& t = tls_cache_slots;
    if (__builtin_expect(t.heap_id[0] != id_, 0)) return nullptr;
    ThreadCache::Bin& bin = t.cache[0]->bins[SizeClass(size)];
    void** top = bin.top;
    if (__builtin_expect(top == bin.bottom, 0)) return nullptr;
    bin.top = --top;
    return *top;
  }
  // The fast path of Free: a push, or false when that needs more (see Free). `size` is a size
  // the block was allocated with, 1 .. kMaxCachedSize.
  bool TryFreeCached(void* p, std::size_t size) noexcept {
    ThreadCacheSlots& t = tls_cache_slots;
    if (__builtin_expect(t.heap_id[0] != id_, 0)) return false;
    ThreadCache::Bin& bin = t.cache[0]->bins[SizeClass(size)];
    void** top = bin.top;
    if (__builtin_expect(top == bin.limit, 0)) return false;
    *top = p;
    bin.top = top + 1;
    return true;
  }

  // Any size (1 .. the pool's max block size) and power-of-two alignment; null if the pool
  // cannot grow. Size and alignment are checked by the caller (the pool).
  void* Allocate(std::size_t size, std::size_t alignment) noexcept;
  // Frees a block. `size` is a size it was allocated with (>= 1), or 0 when unknown.
  void Free(void* p, std::size_t size) noexcept;

  // Resizes in place or moves; keeps 16-byte alignment (not more). Null when it cannot.
  void* Reallocate(void* p, std::size_t size) noexcept;
  std::size_t UsableSize(const void* p) const noexcept;

  struct ByteCounts {
    std::size_t allocated = 0;  // bytes in live blocks, by size class
    std::size_t active = 0;     // pages backing them
  };
  ByteCounts Counts() const;
  // Live per-thread caches of this heap.
  std::size_t ThreadCacheCount() const;

  // For the thread-exit hook in heap.cc: returns a cache's blocks to jemalloc and forgets it.
  void ReleaseCache(ThreadCache* cache) noexcept;

 private:
  struct Hooks;
  Heap(Arena* arena, std::uint64_t id);

  ThreadCache& Cache() noexcept {
    ThreadCacheSlots& t = tls_cache_slots;
    if (__builtin_expect(t.heap_id[0] == id_, 1)) return *t.cache[0];
    return CacheSlow();
  }
  ThreadCache& CacheSlow() noexcept;

  // Fills half of an empty bin from jemalloc and returns one block (null if the pool is full).
  void* Refill(ThreadCache::Bin& bin, unsigned c) noexcept;
  // Returns the `n` oldest blocks of a bin to jemalloc.
  void Flush(ThreadCache::Bin& bin, std::size_t n) noexcept;

  struct HookTable;  // jemalloc's extent_hooks_t and a pointer back to this heap
  std::unique_ptr<HookTable> hooks_;
  Arena* const arena_;
  const std::uint64_t id_;
  unsigned arena_index_ = 0;
  bool arena_created_ = false;
  int base_flags_ = 0;  // MALLOCX_ARENA(this arena) | MALLOCX_TCACHE_NONE

  mutable absl::Mutex mu_;
  std::vector<ThreadCache*> caches_ ABSL_GUARDED_BY(mu_);  // owned by their threads
};

}  // namespace pinpool::internal

#endif  // PINPOOL_HEAP_HEAP_H_
