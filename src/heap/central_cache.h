// CentralCache: the layer every thread of a pool shares, between the thread caches and the page
// heap. Per size class, under the class's own lock:
//   - the transfer stack: free blocks that thread caches flushed, handed out again to any thread
//     in batches (a block freed by one thread is reused by another without touching spans);
//   - for slab classes, the slabs that have free blocks, each with its free set as a bitmap.
// A batch that does not fit the transfer stack goes back to its slab (an empty slab goes back to
// the page heap) or, for a large block, straight to the page heap; a batch the stack cannot fill
// comes from slabs, new slabs, or new large blocks.
//
// Bounds: the transfer stack of a class holds at most Class(c).transfer_cap blocks, and all
// stacks together at most `transfer_limit` bytes (checked before each push; concurrent pushes can
// pass it by at most one batch per thread). DrainTransfer() empties every stack.
//
// Every free block here carries the heap's free mark (written into fresh slab blocks and large
// blocks when they are made); nothing else is written into the chunks.
//
// Thread safety: all members, from any thread. Lock order: a class's lock, then the page heap's.
#ifndef PINPOOL_HEAP_CENTRAL_CACHE_H_
#define PINPOOL_HEAP_CENTRAL_CACHE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "heap/metadata.h"
#include "heap/page_heap.h"
#include "heap/size_class.h"
#include "heap/spin_lock.h"

namespace pinpool::internal {

class CentralCache {
 public:
  // Transfer stacks come from `metadata` (each made on its class's first flush). With
  // `zero_new_spans`, every slab and large block is zeroed when its span is made, so that no
  // free mark (or byte) of an earlier span on the same pages shows through (a scrubbing class:
  // blocks then come out all zero; see BufferClass::scrub).
  CentralCache(PageHeap* pages, MetadataArena* metadata, std::uint64_t secret,
               std::size_t transfer_limit, bool zero_new_spans = false);
  ~CentralCache();
  CentralCache(const CentralCache&) = delete;
  CentralCache& operator=(const CentralCache&) = delete;

  // Up to `n` free blocks of class c into `out`; returns how many. `grow` lets the page heap take
  // a new chunk when it has no room, for the first block only (0 blocks then means the pool is
  // full; the rest of a batch comes only from memory the heap already has).
  std::size_t Take(unsigned c, void** out, std::size_t n, bool grow);
  // One free block of class c (a large class) whose address is a multiple of `alignment` (above
  // a page); null when none can be made.
  void* TakeAligned(unsigned c, std::size_t alignment, bool grow);
  // `n` free blocks of class c back (each carrying the free mark).
  void Put(unsigned c, void* const* blocks, std::size_t n);
  // Every block on the transfer stacks back to its slab or the page heap; returns their bytes.
  std::size_t DrainTransfer();

  // Forgets the chunk [chunk, chunk + chunk_size) (forget_chunk.cc, for Heap::ForgetChunk): with
  // every class locked, drops its blocks from the transfer stacks, unlinks its slabs, has the
  // page heap forget it, and calls `live` with each block of it that is handed out (live, or in a
  // thread cache: the caller empties those first) and its class's size.
  void ForgetChunk(std::uintptr_t chunk, std::size_t chunk_size,
                   absl::FunctionRef<void(std::uintptr_t, std::size_t)> live);

  std::size_t transfer_limit() const noexcept { return transfer_limit_; }
  struct Counts {
    std::size_t out_bytes = 0;       // blocks handed out to threads: live, or in thread caches
    std::size_t transfer_bytes = 0;  // blocks on the transfer stacks
    std::size_t slabs = 0;           // slabs in use
  };
  Counts GetCounts() const;

 private:
  struct alignas(64) PerClass {
    SpinLock mu;
    void** stack ABSL_GUARDED_BY(mu) = nullptr;  // the transfer stack (made on first use)
    std::size_t count ABSL_GUARDED_BY(mu) = 0;
    Span* partial ABSL_GUARDED_BY(mu) = nullptr;  // slabs with free blocks
    std::size_t out ABSL_GUARDED_BY(mu) = 0;
    std::size_t slabs ABSL_GUARDED_BY(mu) = 0;
  };

  void Link(PerClass& k, Span* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(k.mu);
  void Unlink(PerClass& k, Span* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(k.mu);
  // One block back to its slab, or its span to the page heap.
  void ReturnLocked(PerClass& k, unsigned c, void* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(k.mu);

  PageHeap* const pages_;
  MetadataArena* const metadata_;
  const std::uint64_t secret_;
  const bool zero_new_spans_;
  const std::size_t transfer_limit_;
  std::atomic<std::size_t> transfer_bytes_{0};
  std::unique_ptr<PerClass[]> classes_;
};

}  // namespace pinpool::internal

#endif  // PINPOOL_HEAP_CENTRAL_CACHE_H_
