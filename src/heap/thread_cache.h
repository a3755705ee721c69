// ThreadCache: one thread's free blocks of one heap, a stack per size class, so that the fast
// path is an array pop or push with no lock, no atomic read-modify-write and no call.
//
// Bounds, both kept by each bin's capacity (limit - bottom), the one thing the fast path tests:
//   - by count: a capacity is at most Class(c).bin_cap blocks (a few MiB of small and medium
//     classes, 64 blocks of large ones), so a window of outstanding blocks freed in random order
//     stays in the bins;
//   - by bytes: the capacities of all bins, in bytes (`allotted`), never pass the thread's byte
//     budget, so neither do the blocks the bins hold. A bin starts with no capacity; a push onto
//     a full bin (the slow path) doubles its capacity (at least a batch, at most bin_cap) as far
//     as the budget allows; when the budget allows nothing, every bin the thread uses is halved
//     first, its oldest blocks given to the central layer (so classes the thread stopped using
//     give their share to the ones it uses), and the bin grows with what that freed. A refill
//     grows an empty bin to a batch only as far as the budget allows, never by halving others.
// A bin full at its class's bin_cap gives its older half to the central layer; an empty bin
// takes up to Class(c).batch blocks from it. Flushed blocks go to the transfer stacks, where any
// thread finds them. Keeping the budget this way (tcmalloc's per-list maximum lengths, bounded
// by a per-thread total) costs the fast path nothing beyond the bin's own limit test: no byte
// count is updated on a push or a pop.
//
// Invariant: every block in bin c is a block of class c (the page map's class, never a size a
// caller named) and carries the heap's free mark until it is handed out.
//
// Thread safety: the owning thread uses the bins; another thread may empty them only through the
// heap's drain handshake (`busy`, `drain`: see Heap), and counts what they hold for stats
// (held_bytes: the bins the owner published, each bin's top read atomically). The other member
// functions are for the owner, or for a drainer that holds the handshake.
#ifndef PINPOOL_HEAP_THREAD_CACHE_H_
#define PINPOOL_HEAP_THREAD_CACHE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "heap/central_cache.h"
#include "heap/metadata.h"
#include "heap/size_class.h"
#include "pinpool/fast_path.h"

namespace pinpool::internal {

// The head (handshake words, bins) is the inline fast path's (pinpool/fast_path.h):
// its layout is part of the ABI.
struct ThreadCache : fast_v2::CacheHead {
  // A stack of free blocks: [bottom, top) are held, top grows towards limit; the most recently
  // freed block is reused first. Storage comes from the heap's MetadataArena on the bin's first
  // push (a thread pays only for the classes it uses); until then top == bottom == limit == null
  // (empty and full: the slow path).
  using Bin = fast_v2::Bin;

  ThreadCache(std::uint64_t heap_id, std::size_t budget, MetadataArena* metadata);
  ~ThreadCache();
  ThreadCache(const ThreadCache&) = delete;
  ThreadCache& operator=(const ThreadCache&) = delete;

  // busy and drain (the drain handshake, Heap) are the head's.
  const std::uint64_t heap_id;
  const std::size_t budget;
  ThreadCache* next_free = nullptr;  // the heap's list of caches of exited threads, for reuse

  // Bytes the bins hold: from any thread (stats), exact when the owner is not in the middle of a
  // pop or push.
  std::size_t held_bytes() const noexcept;
  // Bytes of the bins' capacities (owner): never above `budget`.
  std::size_t allotted_bytes() const noexcept { return allotted_; }
  // Blocks bin c may hold now (owner).
  std::size_t capacity(unsigned c) const noexcept {
    return static_cast<std::size_t>(bins[c].limit - bins[c].bottom);
  }

  // --- slow paths (owner, or a drainer under the handshake) ----------------------------------
  // An empty bin refilled from the central layer; returns one block (taken out of the bin), or
  // null when the central layer had none (and could not grow, or `grow` is false).
  void* Refill(CentralCache& central, unsigned c, bool grow) noexcept;
  // Pushes a block when the fast path could not: makes storage, grows a full bin's capacity
  // (halving every bin first when the budget allows no growth), or flushes the older half of a
  // bin full at bin_cap. A block the budget leaves no room for (one larger than the budget, after
  // halving) goes to the central layer here. False only when the bin's storage cannot be made
  // (then the caller returns the block to the central layer itself).
  bool Push(CentralCache& central, unsigned c, void* p) noexcept;
  // The `n` oldest blocks of bin c to the central layer.
  void FlushOldest(CentralCache& central, unsigned c, std::size_t n) noexcept;
  // Halves every bin's capacity, giving the oldest blocks that no longer fit to the central layer.
  void Scavenge(CentralCache& central) noexcept;
  // Classes whose bins have storage (the ones this thread has used), for Scavenge and FlushAll.
  unsigned used_classes() const noexcept { return used_count_.load(std::memory_order_relaxed); }
  // Every block to the central layer (capacities stay); returns their bytes.
  std::size_t FlushAll(CentralCache& central) noexcept;

 private:
  bool MakeStorage(unsigned c) noexcept;
  // Sets bin c's capacity to `blocks` (>= its count), keeping `allotted_`.
  void SetCapacity(unsigned c, std::size_t blocks) noexcept;
  // Raises bin c's capacity towards `want` blocks (at most bin_cap) as far as the budget allows;
  // returns the capacity.
  std::size_t Grow(unsigned c, std::size_t want) noexcept;
  MetadataArena* const metadata_;
  std::size_t allotted_ = 0;
  // used_[0, used_count_) are the classes whose bins have storage; published with a release
  // store (after the bin's bottom is set), for held_bytes on other threads.
  std::uint8_t used_[kNumClasses] = {};
  std::atomic<unsigned> used_count_{0};
};

}  // namespace pinpool::internal

#endif  // PINPOOL_HEAP_THREAD_CACHE_H_
