// Heap: sub-allocation of a pool's chunks, by a private jemalloc arena behind per-thread caches.
//
// The jemalloc arena is created with extent hooks that carve from the pool's Arena and refuse
// everything that would give registered pages back or move them: dalloc and decommit refuse,
// purging is off (no hooks, decay -1), and merge refuses to join extents of different chunks
// (different registrations). So after any churn a block's pages are the pages the devices pinned.
// jemalloc's own metadata stays out of the chunks (metadata_use_hooks = false).
//
// In front of jemalloc, each thread has one ThreadCache per heap (16 B .. 1 MiB, align <= 16):
// allocation pops, free pushes, and jemalloc sees only batched refills and flushes. jemalloc's
// automatic tcache is never used (it is shared by all arenas: notes/jemalloc.md, trap 1). A
// thread's caches are flushed and freed when it exits; a heap's destruction just forgets them.
//
// Misuse: a free block carries a mark (FreeMark) in its first word, so a second free of it
// aborts; frees by address are checked against what the arena and jemalloc know (CheckBlock).
// With debug checks there are no thread caches and a table of live blocks makes every check
// exact. docs/robustness.md says exactly what is caught.
//
// Thread safety: Allocate/Free/Reallocate/UsableSize from any thread; a block may be freed by
// another thread (it joins the freeing thread's cache). Construction and destruction are
// single-threaded.
#ifndef PINPOOL_HEAP_HEAP_H_
#define PINPOOL_HEAP_HEAP_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "arena/arena.h"
#include "heap/size_class.h"
#include "heap/thread_cache.h"
#include "util/mutex.h"

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
  // A heap id no live heap has (ids count from 1; an empty TLS slot holds 0): a pool that has
  // been destroyed sets its copy of the id to this, so its fast path can never hit a cache.
  static constexpr std::uint64_t kDeadId = ~std::uint64_t{0};

  // With `debug_checks` the heap keeps no thread caches and records every live block, so every
  // free is checked exactly (see PoolOptions::debug_checks).
  static absl::StatusOr<std::unique_ptr<Heap>> Create(Arena* arena, bool debug_checks = false);
  ~Heap();
  Heap(const Heap&) = delete;
  Heap& operator=(const Heap&) = delete;

  // The word a free block carries in its first 8 bytes: written when the block enters a thread
  // cache or goes back to jemalloc, cleared when it is handed out. A free whose block already
  // carries it is a double free. The secret is random per heap, and the address is mixed in so
  // that user data copied from another block is not taken for a mark. (Every block is at least
  // 16 bytes and 16-byte aligned, so the word is always the block's own.)
  static std::uint64_t FreeMark(std::uint64_t secret, const void* p) noexcept {
    return secret ^ reinterpret_cast<std::uintptr_t>(p);
  }
  using Word = std::uint64_t __attribute__((may_alias));
  static std::uint64_t FirstWord(const void* p) noexcept { return *static_cast<const Word*>(p); }
  static void SetFirstWord(void* p, std::uint64_t v) noexcept { *static_cast<Word*>(p) = v; }

  // The fast path, for the pool's own copies of id() and secret(): a pop from this thread's
  // cache, or null when that needs more (no cache yet for this heap, an empty bin). Call only
  // with 1 <= size <= kMaxCachedSize and an alignment of at most kMinCachedSize. No call, no
  // lock, no atomic.
  static void* TryAllocateCached(std::uint64_t id, std::size_t size) noexcept {
    ThreadCacheSlots& t = tls_cache_slots;
    if (__builtin_expect(t.heap_id[0] != id, 0)) return nullptr;
    ThreadCache::Bin& bin = t.cache[0]->bins[SizeClass(size)];
    void** top = bin.top;
    if (__builtin_expect(top == bin.bottom, 0)) return nullptr;
    bin.top = --top;
    void* p = *top;
    SetFirstWord(p, 0);  // no longer free
    return p;
  }
  // The fast path of Free: a push, or false when that needs more (see Free), including when
  // the block already carries the free mark (Free then reports the double free). `size` is a
  // size the block was allocated with, 1 .. kMaxCachedSize.
  static bool TryFreeCached(std::uint64_t id, std::uint64_t secret, void* p,
                            std::size_t size) noexcept {
    ThreadCacheSlots& t = tls_cache_slots;
    if (__builtin_expect(t.heap_id[0] != id, 0)) return false;
    const std::uint64_t mark = FreeMark(secret, p);
    if (__builtin_expect(FirstWord(p) == mark, 0)) return false;
    ThreadCache::Bin& bin = t.cache[0]->bins[SizeClass(size)];
    void** top = bin.top;
    if (__builtin_expect(top == bin.limit, 0)) return false;
    SetFirstWord(p, mark);
    *top = p;
    bin.top = top + 1;
    return true;
  }

  std::uint64_t id() const noexcept { return id_; }
  std::uint64_t secret() const noexcept { return secret_; }
  bool debug_checks() const noexcept { return debug_; }

  // Any size (1 .. the pool's max block size) and power-of-two alignment; null if the pool
  // cannot grow. Size and alignment are checked by the caller (the pool).
  void* Allocate(std::size_t size, std::size_t alignment) noexcept;
  // Frees a block. `size` is a size it was allocated with (>= 1), or 0 when unknown. Aborts on
  // a double free, and on what CheckBlock catches for frees by address (size 0) and of sizes
  // above kMaxCachedSize. `what` names the public call in messages.
  void Free(void* p, std::size_t size, const char* what) noexcept;

  // Aborts, naming `p` and the rule, unless `p` may be a live block of this heap: 16-byte
  // aligned, inside space the arena handed to jemalloc, in an extent jemalloc knows (not the
  // middle of a large block), at a region boundary of a small block's class (exact for the
  // power-of-two classes), and not carrying the free mark. With debug checks: exactly a live
  // block, and `size` (when not 0) no larger than it. `p` must lie in a mapped chunk. Returns
  // the block's usable size.
  std::size_t CheckBlock(const void* p, std::size_t size, const char* what) const noexcept;

  // Resizes in place or moves; keeps 16-byte alignment (not more). Null when it cannot (then
  // `p` is untouched).
  void* Reallocate(void* p, std::size_t size) noexcept;
  std::size_t UsableSize(const void* p) const noexcept;

  struct ByteCounts {
    std::size_t allocated = 0;  // bytes in live blocks, by size class
    std::size_t active = 0;     // pages backing them
  };
  ByteCounts Counts() const;
  // Live per-thread caches of this heap.
  std::size_t ThreadCacheCount() const;
  // With debug checks: live blocks and their bytes (as allocated); {0, 0} otherwise.
  std::pair<std::size_t, std::size_t> LiveBlocks() const;

  // For the thread-exit hook in heap.cc: returns a cache's blocks to jemalloc and forgets it.
  void ReleaseCache(ThreadCache* cache) noexcept;

 private:
  struct Hooks;
  Heap(Arena* arena, std::uint64_t id, bool debug_checks);

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
  // jemalloc's allocation, and the debug record of it.
  void* Mallocx(std::size_t size, int flags) noexcept;
  // jemalloc's free of a block already marked free, and the debug record of it.
  void Dallocx(void* p) noexcept;

  struct HookTable;  // jemalloc's extent_hooks_t and a pointer back to this heap
  std::unique_ptr<HookTable> hooks_;
  Arena* const arena_;
  const std::uint64_t id_;
  const std::uint64_t secret_;
  const bool debug_;
  unsigned arena_index_ = 0;
  bool arena_created_ = false;
  int base_flags_ = 0;             // MALLOCX_ARENA(this arena) | MALLOCX_TCACHE_NONE
  std::size_t query_mib_[3] = {};  // experimental.utilization.batch_query
  std::size_t query_miblen_ = 0;

  mutable Mutex mu_;
  std::vector<ThreadCache*> caches_ ABSL_GUARDED_BY(mu_);  // owned by their threads
  // Debug checks only: every live block and the size it was allocated with.
  std::unordered_map<std::uintptr_t, std::size_t> live_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pinpool::internal

#endif  // PINPOOL_HEAP_HEAP_H_
