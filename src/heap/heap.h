// Heap: sub-allocation of a pool's chunks, by a private jemalloc arena.
//
// The jemalloc arena is created with extent hooks that carve from the pool's Arena and refuse
// everything that would give registered pages back or move them: dalloc and decommit refuse,
// purging is off (no hooks, decay -1), and merge refuses to join extents of different chunks
// (different registrations). So after any churn a block's pages are the pages the devices pinned.
// jemalloc's own metadata stays out of the chunks (metadata_use_hooks = false).
//
// Every thread gets its own explicit jemalloc tcache per heap (the automatic tcache is shared by
// all arenas and would mix pool and non-pool memory); the fast path finds it in a thread-local
// array. Tcaches are destroyed when their thread exits or when the heap is destroyed, whichever
// comes first.
//
// Thread safety: Allocate/Free/Reallocate/UsableSize from any thread; a block may be freed by
// another thread. Construction and destruction are single-threaded.
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
#include "heap/jemalloc.h"

namespace pinpool::internal {

// This thread's most recently used (heap, tcache) pairs: the fast path reads slot 0 only. Plain
// data with initial-exec TLS, so reading it is one %fs-relative load and no guard check.
struct ThreadTcacheSlots {
  static constexpr int kSlots = 4;
  std::uint64_t heap_id[kSlots];
  int tcache_flag[kSlots];
};
struct ThreadTcacheOwner;
extern thread_local ThreadTcacheSlots tls_tcache_slots __attribute__((tls_model("initial-exec")));

class Heap {
 public:
  static absl::StatusOr<std::unique_ptr<Heap>> Create(Arena* arena);
  ~Heap();
  Heap(const Heap&) = delete;
  Heap& operator=(const Heap&) = delete;

  // Size and alignment are checked by the caller (the pool).
  void* Allocate(std::size_t size, std::size_t alignment) noexcept {
    int flags = base_flags_ | TcacheFlag();
    // Every size class from 16 B up is a multiple of 16, so up to 16-byte alignment only the
    // 8-byte class falls short; above that jemalloc must be told.
    if (alignment > 16) {
      flags |= MALLOCX_ALIGN(alignment);
    } else if (size < alignment) {
      size = alignment;
    }
    return pinpool_je_mallocx(size, flags);
  }
  void Free(void* p) noexcept { pinpool_je_dallocx(p, base_flags_ | TcacheFlag()); }
  void* Reallocate(void* p, std::size_t size) noexcept {
    return pinpool_je_rallocx(p, size, base_flags_ | TcacheFlag());
  }
  std::size_t UsableSize(const void* p) const noexcept { return pinpool_je_sallocx(p, 0); }

  struct ByteCounts {
    std::size_t allocated = 0;  // bytes in live blocks, by size class
    std::size_t active = 0;     // pages backing them
  };
  ByteCounts Counts() const;
  // Live per-thread caches of this heap.
  std::size_t ThreadCacheCount() const;

  // For the thread registry in heap.cc: forgets and destroys one of this heap's tcaches.
  void DestroyTcache(unsigned tcache) noexcept;

 private:
  struct Hooks;
  Heap(Arena* arena, std::uint64_t id);

  int TcacheFlag() noexcept {
    ThreadTcacheSlots& t = tls_tcache_slots;
    if (__builtin_expect(t.heap_id[0] == id_, 1)) return t.tcache_flag[0];
    return TcacheFlagSlow();
  }
  int TcacheFlagSlow() noexcept;
  // The tcache this thread holds for this heap, from `owner`'s list or newly created.
  int ThreadTcacheFor(ThreadTcacheOwner& owner) noexcept;

  extent_hooks_t hooks_;  // first: the hook functions find the Heap from this address
  Arena* const arena_;
  const std::uint64_t id_;
  unsigned arena_index_ = 0;
  int base_flags_ = 0;

  mutable absl::Mutex mu_;
  std::vector<unsigned> tcaches_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pinpool::internal

#endif  // PINPOOL_HEAP_HEAP_H_
