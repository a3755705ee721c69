// ThreadCache: one thread's free blocks of one heap, a stack per size class, so that the fast
// path is an array pop or push with no lock, no atomic read-modify-write and no call.
//
// Bounds: each bin has a capacity (its limit - bottom: what the fast path's push tests), at most
// Class(c).bin_cap blocks (a few MiB of small and medium classes, 16 blocks of large ones, so a
// window of outstanding blocks freed in random order stays in the bins), and the capacities of
// all bins, in bytes, stay within the thread's byte budget: so do the blocks they hold, and the
// fast path counts no bytes. Capacity is given on demand: a bin starts with none; a push onto a
// full bin doubles its capacity (at least a batch) from the budget left, then from the spare
// capacity of other bins (what they could hold but do not); when blocks hold the whole budget,
// every bin gives its older half to the central layer and drops its spare capacity (so classes
// the thread stopped using drain away and do not hold the budget); a bin at its count bound
// gives its older half back. An empty bin takes a batch from the central layer, as far as its
// capacity can grow. A block larger than the whole budget passes through to the central layer.
// Flushed blocks go to the transfer stacks, where any thread finds them.
//
// Invariants: every block in bin c is a block of class c (the page map's class, never a size a
// caller named) and carries the heap's free mark until it is handed out; count <= capacity <=
// bin_cap per bin; the sum of capacity * class size over the bins (committed) <= budget.
//
// Thread safety: the owning thread uses the bins; another thread may empty them only through the
// heap's drain handshake (`busy`, `drain`: see Heap), and reads the bins' words for stats
// (held_bytes). The other member functions are for the owner, or for a drainer that holds the
// handshake.
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

// The head (handshake words, bins) is the inline fast path's (pinpool/fast_path.h): its layout
// is part of the ABI.
struct ThreadCache : fast_v4::CacheHead {
  // A stack of free blocks: [bottom, top) are held, top grows towards limit; the most recently
  // freed block is reused first. Storage comes from the heap's MetadataArena on the bin's first
  // push (a thread pays only for the classes it uses); until then top == bottom == limit == null
  // (empty and full: the slow path).
  using Bin = fast_v4::Bin;

  ThreadCache(std::uint64_t heap_id, std::size_t budget, MetadataArena* metadata);
  ~ThreadCache();
  ThreadCache(const ThreadCache&) = delete;
  ThreadCache& operator=(const ThreadCache&) = delete;

  // busy and drain (the drain handshake, Heap) are the head's.
  const std::uint64_t heap_id;
  const std::size_t budget;
  ThreadCache* next_free = nullptr;  // the heap's list of caches of exited threads, for reuse

  // Blocks bin c holds, and may hold before a push goes to the slow path.
  std::size_t count(unsigned c) const noexcept { return Span(bins[c].bottom, bins[c].top); }
  std::size_t capacity(unsigned c) const noexcept { return Span(bins[c].bottom, bins[c].limit); }
  // Bytes the bins hold: exact for the owner (or a drainer under the handshake); from another
  // thread, a recent value (stats).
  std::size_t held_bytes() const noexcept;
  // Bytes of capacity the bins have: at most the budget.
  std::size_t committed_bytes() const noexcept { return committed_; }

  // --- slow paths (owner, or a drainer under the handshake) ----------------------------------
  // An empty bin refilled from the central layer; returns one block (taken out of the bin), or
  // null when the central layer had none (and could not grow, or `grow` is false).
  void* Refill(CentralCache& central, unsigned c, bool grow) noexcept;
  // Pushes a block when the fast path could not: makes storage, gives a full bin capacity (see
  // the top of this file), or flushes its older half. A block of a class larger than the budget
  // goes to the central layer. False only when the bin's storage cannot be made (then the caller
  // returns the block to the central layer itself).
  bool Push(CentralCache& central, unsigned c, void* p) noexcept;
  // The `n` oldest blocks of bin c to the central layer.
  void FlushOldest(CentralCache& central, unsigned c, std::size_t n) noexcept;
  // Halves every bin, oldest blocks first, and drops every bin's spare capacity.
  void Scavenge(CentralCache& central) noexcept;
  // Classes whose bins have storage (the ones this thread has used), for Scavenge and FlushAll.
  unsigned used_classes() const noexcept { return used_count_; }
  // Every block to the central layer; returns their bytes.
  std::size_t FlushAll(CentralCache& central) noexcept;

 private:
  static std::size_t Span(const std::atomic<void**>& from, const std::atomic<void**>& to) {
    return static_cast<std::size_t>(to.load(std::memory_order_relaxed) -
                                    from.load(std::memory_order_relaxed));
  }
  bool MakeStorage(unsigned c) noexcept;
  // Sets bin c's capacity to n blocks (count <= n <= bin_cap), keeping committed_.
  void SetCapacity(unsigned c, std::size_t n) noexcept;
  // Raises bin c's capacity towards `want` blocks (at most bin_cap) within the budget, taking
  // other bins' spare capacity when the budget left is short. Returns the capacity it has.
  std::size_t Grow(unsigned c, std::size_t want) noexcept;
  MetadataArena* const metadata_;
  std::size_t committed_ = 0;
  std::uint8_t used_[kNumClasses] = {};
  unsigned used_count_ = 0;
};

}  // namespace pinpool::internal

#endif  // PINPOOL_HEAP_THREAD_CACHE_H_
