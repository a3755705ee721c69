// PageHeap: whole pages of a pool's chunks, in spans. It takes a chunk at a time from its
// ChunkSource (the pool's arena) and never gives one back; inside the chunks it hands out spans
// (a slab of one size class, or one large block), records them in the PageMap, and takes them
// back, merging each freed span with free neighbours. Only on request (ReleaseIdleChunks, for the
// pool's Trim) does it give back a chunk that is one free span, to its source. A span never crosses
// a chunk boundary: one block, one registration.
//
// Free spans sit on segregated lists by page count (exact up to 32 pages, then four lists per
// doubling) with a bitmap of non-empty lists, so finding a fitting span is a few bit operations
// and freeing one is O(1) (two-level segregated fit). A request takes the first span that fits
// from its own list, else the head of the next non-empty larger list (which always fits). Pages
// are never purged, decommitted or unmapped: a freed span's pages stay mapped, registered and
// pinned, and are only ever reused by this heap.
//
// Thread safety: every member takes the page heap's lock, except page_map() readers (see
// PageMap). Lock order: a class's lock in the central layer, then this lock, then the arena's.
// Growth lets go of this lock while the source adds a chunk (GrowLocked), so a registration never
// holds up allocations the page heap can serve from what it has.
#ifndef PINPOOL_HEAP_PAGE_HEAP_H_
#define PINPOOL_HEAP_PAGE_HEAP_H_

#include <cstddef>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "heap/page_map.h"
#include "heap/span.h"
#include "heap/spin_lock.h"

namespace pinpool::internal {

// Where a page heap gets chunks: `chunk_size` bytes aligned to `chunk_size`, inside the range its
// PageMap covers, or null when there are no more (the budget is spent, or growth failed). A chunk
// the page heap lets go of (ReleaseIdleChunks) goes back through ReturnChunk; the source may hand
// it out again later.
class ChunkSource {
 public:
  virtual void* NewChunk() = 0;
  virtual void ReturnChunk(void* chunk) = 0;

 protected:
  ~ChunkSource() = default;
};

class PageHeap {
 public:
  // Its page map and span records come from `metadata`; ok() is false when that had no memory.
  PageHeap(std::uintptr_t base, unsigned chunk_shift, std::size_t max_chunks, ChunkSource* source,
           MetadataArena* metadata);
  ~PageHeap();
  bool ok() const noexcept { return map_.ok(); }
  PageHeap(const PageHeap&) = delete;
  PageHeap& operator=(const PageHeap&) = delete;

  const PageMap& page_map() const noexcept { return map_; }
  // PageMap::SetGrantTag, without the lock (an atomic read-modify-write of one entry).
  void SetGrantTag(const void* p, bool on) noexcept {
    map_.SetGrantTag(reinterpret_cast<std::uintptr_t>(p), on);
  }

  // A span of `pages` pages starting at a multiple of `alignment` (a power of two, at least a
  // page, at most a chunk) for class `cls`, recorded in the page map as a slab (every page, at
  // most PageMap::kMaxDelta + 1 of them) or a large block (its first page). Takes a new chunk from
  // the source when no free span fits and `grow` is true. Null when it cannot.
  Span* Allocate(std::size_t pages, unsigned cls, std::size_t alignment, bool grow);
  // Gives a slab or large block's span back: clears its page map entries and merges it with the
  // free spans beside it.
  void Free(Span* span);
  // Lets go of every chunk that is one free span (no slab, no large block in it): forgets its
  // span and hands the chunk back to the source (ReturnChunk, under this lock: the lock order
  // allows the arena's). The chunk's page map arrays stay (all entries 0), for lock-free readers
  // and for when the source hands the chunk out again. Returns how many chunks went back.
  std::size_t ReleaseIdleChunks();
  // Forgets the chunk at `chunk` (forget_chunk.cc, for Heap::ForgetChunk): calls `used` with each
  // of its slabs and large blocks, then takes its free spans off the free lists, clears its page
  // map entries and span records and counts it as released (never to be grown into again unless
  // the source hands it out anew). Nothing when the chunk is not the page heap's or was released.
  // The caller holds every class's lock in the central layer (so no slab of it is in use).
  void ForgetChunk(std::uintptr_t chunk, absl::FunctionRef<void(const Span&)> used);
  // Gives back the span of the large block starting at p (a start the page map names).
  void FreeLarge(std::uintptr_t p);
  // The slab holding block p. The caller owns a block of that slab, so the slab cannot go away
  // meanwhile (it holds the class's lock).
  Span* SlabOf(std::uintptr_t p) const noexcept {
    return map_.SpanAt(PageMap::SpanStart(map_.EntryAt(p), p));
  }

  // What lies at p, for the checks of a free that the page map alone cannot explain: the span
  // holding p (walking back to the span's first page), or null in a chunk not taken yet.
  struct Where {
    const Span* span = nullptr;
    Span::State state = Span::State::kFree;
    std::uintptr_t start = 0;
    std::size_t bytes = 0;
  };
  Where Find(std::uintptr_t p);

  struct Counts {
    std::size_t chunks = 0;      // chunks taken from the source
    std::size_t used_pages = 0;  // in slabs and large blocks
    std::size_t free_pages = 0;  // in free spans
    std::size_t free_spans = 0;
    std::size_t metadata_bytes = 0;
  };
  Counts GetCounts() const;

  // Checks every structural invariant (tests): spans tile each chunk, free spans are on the
  // right lists and never adjacent, page map entries match. Aborts naming the first broken one.
  void Verify() const;

 private:
  static constexpr unsigned kBuckets = 88;  // page counts up to 2^18 (a 1 GiB chunk)
  static unsigned BucketOf(std::size_t pages) noexcept;
  static std::size_t BucketMin(unsigned b) noexcept;

  Span* FindFitLocked(std::size_t pages) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Span* FindAlignedLocked(std::size_t pages, std::size_t alignment)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool GrowLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes [at, at + pages) out of free span s, putting what is left on either side back.
  Span* CarveLocked(Span* s, std::uintptr_t at, std::size_t pages)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void InsertFreeLocked(Span* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveFreeLocked(Span* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A new free span [start, start + pages) recorded at its first and last page.
  Span* NewFreeLocked(std::uintptr_t start, std::size_t pages) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FreeLocked(Span* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  ChunkSource* const source_;
  const std::size_t chunk_size_;
  PageMap map_;
  mutable SpinLock mu_;
  SpanStore spans_ ABSL_GUARDED_BY(mu_);
  Span* lists_[kBuckets] ABSL_GUARDED_BY(mu_) = {};
  std::uint64_t nonempty_[2] ABSL_GUARDED_BY(mu_) = {};
  std::size_t chunks_ ABSL_GUARDED_BY(mu_) = 0;
  std::size_t released_ ABSL_GUARDED_BY(mu_) = 0;  // chunks given back with ReleaseIdleChunks
  std::size_t used_pages_ ABSL_GUARDED_BY(mu_) = 0;
  std::size_t free_pages_ ABSL_GUARDED_BY(mu_) = 0;
  std::size_t free_spans_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pinpool::internal

#endif  // PINPOOL_HEAP_PAGE_HEAP_H_
