// ThreadCache: one thread's free blocks of one heap, a stack per size class, so that the fast
// path is an array pop or push with no lock, no atomic read-modify-write and no call.
//
// Bounds, both checked on the fast path:
//   - by count: bin c holds at most Class(c).bin_cap blocks (a few MiB of small and medium
//     classes, 16 blocks of large ones), so a window of outstanding blocks freed in random order
//     stays in the bins;
//   - by bytes: `room` is at most the thread's byte budget less what its bins hold (every push
//     and refill takes from it, every flush and pop gives back but the inline pop of a size up
//     to fast::kMaxUncreditedSize, which keeps its pairs off the word); a
//     free that would take it below zero goes to the slow path, which counts the bins again
//     (Recount: room is then exact; after counts that found too little, only every few
//     shortfalls) and, if the block still does not fit, gives the older half
//     of every bin the thread uses to the central layer (so classes it stopped using drain away
//     and do not hold the budget); a refill takes no more than the budget allows. What the bins
//     hold is never more than the budget.
// A full bin gives its older half to the central layer; an empty bin takes Class(c).batch blocks
// from it, twice as many for each refill since the bin last flushed (RefillBatch: a thread that
// allocates what other threads free takes its blocks a few hundred at a time, not 32). Flushed
// blocks go to the transfer stacks, where any thread finds them.
//
// Invariant: every block in bin c is a block of class c (the page map's class, never a size a
// caller named) and carries the heap's free mark until it is handed out.
//
// Thread safety: the owning thread uses the bins; another thread may empty them only through the
// heap's drain handshake (`busy`, `drain`, a mark on the owner's slot 0: see Heap), and reads
// the bins' tops and bottoms for stats (held_bytes). The member functions below but held_bytes
// are for the owner, or for a drainer that holds the handshake.
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

struct ThreadCacheOwner;  // heap.cc: a thread's caches, slots and their lock

// The head (handshake words, byte room, bins) is the inline fast path's (pinpool/fast_path.h):
// its layout is part of the ABI.
struct ThreadCache : fast::CacheHead {
  // A stack of free blocks: [bottom, top) are held, top grows towards limit; the most recently
  // freed block is reused first. Storage comes from the heap's MetadataArena on the bin's first
  // push (a thread pays only for the classes it uses), bin c starting (c mod 64) cache lines
  // into it (MakeStorage: staggers the bins' tops against 4 KiB aliasing); until then top ==
  // bottom == limit == null (empty and full: the slow path).
  using Bin = fast::Bin;

  ThreadCache(std::uint64_t heap_id, std::size_t budget, MetadataArena* metadata);
  ~ThreadCache();
  ThreadCache(const ThreadCache&) = delete;
  // Where heads live: not in their heap's metadata, since a thread's slot may hold a head after
  // its heap is gone (Heap), but in metadata mappings of the process that are never unmapped,
  // 64-byte aligned, recycled through a free list; never malloc or operator new (an application
  // may route those to a pool). New returns null when the kernel refuses memory. The bins'
  // storage stays in the heap's metadata (`metadata`).
  static ThreadCache* New(std::uint64_t heap_id, std::size_t budget,
                          MetadataArena* metadata) noexcept;
  static void Delete(ThreadCache* c) noexcept;
  // Heads made and not deleted, in the process (tests).
  static std::size_t live_heads() noexcept;
  ThreadCache& operator=(const ThreadCache&) = delete;

  // busy, drain (the drain handshake, Heap) and room (bytes the bins may still take, at most:
  // see above; written by the owner, or a drainer under the handshake, with plain stores) are
  // the head's.
  const std::uint64_t heap_id;
  const std::intptr_t budget;
  // The heap's list of caches of exited threads, for reuse, or a thread's list of heads of
  // destroyed heaps (Heap).
  ThreadCache* next_free = nullptr;
  // The thread that uses the cache (set, under the heap's lock, when a thread takes the cache):
  // a drainer marks its slot 0 (Heap).
  ThreadCacheOwner* owner = nullptr;

  // Bytes of the blocks in the bins, counted bin by bin (room is only a bound). Any thread: from
  // another, while the owner pushes and pops, a snapshot that may be a few blocks off.
  std::size_t held_bytes() const noexcept;

  // --- slow paths (owner, or a drainer under the handshake) ----------------------------------
  // An empty bin refilled from the central layer; returns one block (taken out of the bin), or
  // null when the central layer had none (and could not grow, or `grow` is false).
  void* Refill(CentralCache& central, unsigned c, bool grow) noexcept;
  // Pushes a block when the fast path could not: makes storage, counts the bins again and, if
  // the block would still take the cache over budget, halves every bin, and flushes half of a
  // full bin. False when the bin's
  // storage cannot be made or the block is larger than the whole budget (then the caller returns
  // the block to the central layer itself). `room` never goes below zero, not even for a moment.
  bool Push(CentralCache& central, unsigned c, void* p) noexcept;
  // The `n` oldest blocks of bin c to the central layer.
  void FlushOldest(CentralCache& central, unsigned c, std::size_t n) noexcept;
  // Halves every bin, oldest blocks first.
  void Scavenge(CentralCache& central) noexcept;
  // Classes whose bins have storage (the ones this thread has used), for Scavenge and FlushAll.
  unsigned used_classes() const noexcept { return used_count_; }
  // Every block to the central layer; returns their bytes.
  std::size_t FlushAll(CentralCache& central) noexcept;

 private:
  bool MakeStorage(unsigned c) noexcept;
  // room = budget - held, exact (the inline pops since the last count gave nothing back).
  void Recount() noexcept;
  // True when room >= need, counting the bins first when that may help (see the .cc).
  bool RoomFor(std::intptr_t need) noexcept;
  void AddRoom(std::intptr_t bytes) noexcept {
    room.store(room.load(std::memory_order_relaxed) + bytes, std::memory_order_relaxed);
  }
  // Blocks the next refill of bin c asks for: Class(c).batch, doubled for each refill since the
  // bin last flushed (a thread that only allocates the class, from blocks other threads free),
  // up to a quarter of the bin and kMaxRefillBytes.
  std::size_t RefillBatch(unsigned c) const noexcept;
  static constexpr unsigned kMaxRefillStreak = 8;
  static constexpr std::size_t kMaxRefillBytes = std::size_t{256} << 10;

  MetadataArena* const metadata_;
  std::uint8_t refill_streak_[kNumClasses] = {};  // refills of bin c since its last flush
  std::uint8_t used_[kNumClasses] = {};
  unsigned used_count_ = 0;
  // Of them, classes that serve sizes up to fast::kMaxUncreditedSize (RoomFor).
  unsigned uncredited_used_ = 0;
  // Shortfalls RoomFor lets pass without counting, and how many the last fruitless count set.
  unsigned recount_wait_ = 0;
  unsigned recount_backoff_ = 0;
};

}  // namespace pinpool::internal

#endif  // PINPOOL_HEAP_THREAD_CACHE_H_
