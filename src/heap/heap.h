// Heap: sub-allocation of a pool's chunks, in four layers (docs/design.md, "heap"):
//
//   thread caches     per thread and pool: a stack of free blocks per size class, bounded by a
//   (ThreadCache)     count per class and a byte budget per thread. Allocate pops, free pushes.
//   central layer     shared: per class, a transfer stack of blocks flushed by any thread and
//   (CentralCache)    handed to any other, and the slabs with free blocks; its own lock per class.
//   page heap         whole pages in spans (a slab, or one large block), segregated free lists,
//   (PageHeap)        merging; takes chunks from the Arena one at a time, never gives pages back.
//   page map          per page: which class's block may start there. A free learns the block's
//   (PageMap)         class from it, never from a size the caller names.
//
// No layer gives registered pages back or moves them: there is no purge, decommit, madvise or
// unmap anywhere below a live chunk, so after any churn a block's pages are the pages the devices
// pinned. All metadata (page map, spans, slab bitmaps, stacks) is the heap's own memory; the only
// thing written into a chunk is a free block's mark.
//
// Misuse: a free block carries FreeMark(secret, address) in one word (heap/free_mark.h: its first,
// or for blocks of a page multiple one of its first page; written when it becomes free, cleared
// when it is handed out), so a second free aborts. The fast path of a free
// (sized or by address alike) checks, with the page map, that the pointer is exactly a block's
// start; what fails any check goes to the slow path (Free -> CheckBlock), which aborts naming the
// rule. With debug checks there are no thread caches and a table of live blocks makes every check
// exact. docs/robustness.md says exactly what is caught.
//
// Drained caches: when the page heap is full and the budget is spent, the allocating thread
// empties the transfer stacks and every thread cache of the heap before it gives up. Another
// thread's cache is emptied through a handshake: the drainer sets the cache's `drain` flag and,
// under its owner's slot lock, marks the owner's slot 0 if it holds the cache (the inline paths
// test slot 0's heap id anyway: marked, it matches no heap), issues membarrier(PRIVATE_EXPEDITED)
// (a memory barrier on every CPU running this process), then waits until the cache's `busy`
// flag (set by its owner around every touch of its bins, before it reads the slot's id or
// `drain`) is clear, and empties it; the owner, finding its slot marked, calls the library,
// which puts the cache back in slot 0 unmarked and then, finding `drain` set, waits for the
// drainer (Acquire) before the thread touches the bins again. Without membarrier (an old kernel,
// a seccomp sandbox) only the caller's own cache is emptied and the others are asked to empty
// themselves at their owner's next call into the heap.
//
// Thread safety: Allocate/Free/Reallocate/UsableSize/CheckBlock and the stats from any thread; a
// block may be freed by another thread (it joins the freeing thread's cache). Construction and
// destruction are single-threaded. Lock order: the live-heap registry, then mu_, then a class's
// lock, then the page heap's, then the arena's.
#ifndef PINPOOL_HEAP_HEAP_H_
#define PINPOOL_HEAP_HEAP_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "arena/arena.h"
#include "heap/central_cache.h"
#include "heap/free_mark.h"
#include "heap/metadata.h"
#include "heap/page_heap.h"
#include "heap/page_map.h"
#include "heap/size_class.h"
#include "heap/thread_cache.h"
#include "pinpool/fast_path.h"
#include "util/mutex.h"

namespace pinpool::internal {

// This thread's most recently used (heap, cache) pairs are fast::tls_slots
// (pinpool/fast_path.h): the inline fast path reads slot 0 only.
using ThreadCacheSlots = fast::Slots;
// Set when this thread's cache owner has been destroyed (thread exit): frees and allocations
// from destructors that run later (other thread_locals, statics) bypass the caches.
extern constinit thread_local bool tls_caches_gone __attribute__((tls_model("initial-exec")));
// What every slot without a cache holds (never null: the inline handshake sets slot 0's cache's
// `busy` before it tests the slot's heap id). Only its `busy` is ever written.
extern fast::CacheHead idle_cache;

class Heap {
 public:
  // A heap id no live heap has (ids count from 1; an empty TLS slot holds 0): a pool that has
  // been destroyed sets its copy of the id to this, so its fast path can never hit a cache.
  static constexpr std::uint64_t kDeadId = ~std::uint64_t{0};

  struct Options {
    // No thread caches, and every live block recorded, so every free is checked exactly (see
    // PoolOptions::debug_checks).
    bool debug_checks = false;
    // Where the heap takes whole chunks and gives them back (a pool's buffer class: the pool
    // decides which chunks a class may hold); must outlive the heap. Null: the arena's, freely.
    ChunkSource* source = nullptr;
    // Every slab and large block zeroed when its span is made (CentralCache): with zeroing on
    // free, what a scrubbing class hands out is all zero.
    bool zero_new_spans = false;
  };
  static absl::StatusOr<std::unique_ptr<Heap>> Create(Arena* arena, const Options& options);
  static absl::StatusOr<std::unique_ptr<Heap>> Create(Arena* arena, bool debug_checks = false) {
    return Create(arena, Options{.debug_checks = debug_checks});
  }
  ~Heap();
  Heap(const Heap&) = delete;
  Heap& operator=(const Heap&) = delete;

  // --- the fast paths are inline in the pool's callers (pinpool/fast_path.h) ------------------
  // The owner's side of the handshake in the library, for a cache of this thread in any slot
  // (the inline paths test slot 0's mark instead): false (and not busy) when a drain is pending.
  static bool Enter(ThreadCache* c) noexcept {
    return fast::EnterIf(c, [c] { return c->drain.load(std::memory_order_acquire) == 0; });
  }
  static void Leave(ThreadCache* c) noexcept { fast::Leave(c); }
  // The inline pop for any size up to the pool's max block (the inline path's table stops at
  // fast::kMaxFastSize): the pool's first step for larger blocks, which the caches hold too.
  static void* TryAllocateCached(std::uint64_t id, std::size_t size) noexcept {
    ThreadCacheSlots& t = fast::tls_slots;
    const unsigned cls = SizeClass(size);
    fast::CacheHead* c = t.cache[0];
    if (!fast::Enter(t, c, id)) return nullptr;
    fast::Bin& bin = c->bins[cls];
    void** top = bin.Top();
    if (__builtin_expect(top == bin.Bottom(), 0)) {
      fast::Leave(c);
      return nullptr;
    }
    bin.SetTop(--top);
    void* const p = *top;
    // Gives the bytes back for every size (the inline pop does only above kMaxUncreditedSize):
    // a call anyway, and mostly blocks above kMaxFastSize here.
    c->room.store(
        c->room.load(std::memory_order_relaxed) + static_cast<std::intptr_t>(ClassSize(cls)),
        std::memory_order_relaxed);
    fast::Leave(c);
    MarkLive(p, cls);
    return p;
  }

  std::uint64_t id() const noexcept { return id_; }
  std::uint64_t secret() const noexcept { return secret_; }
  bool debug_checks() const noexcept { return debug_; }
  // The page map's entries by page of the range (PageMap::entries), for the pool's inline free.
  const PageEntry* page_map() const noexcept { return pages_.page_map().entries(); }
  // Tags (or untags) the page where p, a block of this heap or any address of the pool's range,
  // lies, so that the inline free of any block starting there calls the library (PageMap).
  void SetGrantTag(const void* p, bool on) noexcept { pages_.SetGrantTag(p, on); }

  // --- the slow paths ---------------------------------------------------------------------------
  // Any size (1 .. the pool's max block size) and power-of-two alignment up to a chunk; null
  // when the pool is full even after draining every cache. Checked by the caller (the pool).
  void* Allocate(std::size_t size, std::size_t alignment) noexcept;
  // Frees a block. `size` is a size it was allocated with (>= 1), or 0 when unknown. Aborts on
  // what CheckBlock catches. `what` names the public call in messages.
  void Free(void* p, std::size_t size, const char* what) noexcept;
  // Aborts, naming `p` and the rule, unless `p` is the start of a block of this heap that is not
  // free and `size` (when not 0) fits it. `p` must lie in a mapped chunk. Returns the block's
  // usable size. Exact, but for the limits docs/robustness.md states (a race, ABA).
  std::size_t CheckBlock(const void* p, std::size_t size, const char* what) const noexcept;
  // What CheckBlock would find at `p`, without aborting, for callers that must answer with an
  // error instead (a grant of a freed block): kLive (the start of a block that is not free),
  // kFree (a free block: its free mark is there), kNotABlock (anything else). `p` must lie in a
  // mapped chunk. The same limits as CheckBlock: a block freed and allocated again is live.
  enum class BlockState : std::uint8_t { kLive, kFree, kNotABlock };
  BlockState Inspect(const void* p) const noexcept;
  // Resizes in place when the new size is of the block's own class, else moves; keeps 16-byte
  // alignment (not more). Null when it cannot (then `p` is untouched). `p` was checked.
  void* Reallocate(void* p, std::size_t size) noexcept;
  // The usable size of block `p` (checked): its class's size.
  std::size_t UsableSize(const void* p) const noexcept;

  struct Counts {
    std::size_t allocated = 0;           // bytes of blocks outside the page heap and slabs:
                                         // live, in thread caches, on the transfer stacks
    std::size_t active = 0;              // pages in slabs and large blocks
    std::size_t thread_cache_bytes = 0;  // in all thread caches of this heap
    std::size_t transfer_bytes = 0;      // on the transfer stacks
    std::size_t thread_cache_limit = 0;  // each thread cache's byte budget
    std::size_t transfer_limit = 0;      // the transfer stacks' byte budget
    std::uint64_t drains = 0;            // times the caches were drained for a failing allocation
    std::size_t metadata = 0;            // bytes of the page map and span records
  };
  Counts GetCounts() const;
  // Live per-thread caches of this heap.
  std::size_t ThreadCacheCount() const;
  // With debug checks: live blocks and their bytes (as allocated); {0, 0} otherwise.
  std::pair<std::size_t, std::size_t> LiveBlocks() const;
  // Empties every cache of the heap into the central layer and the transfer stacks into the page
  // heap (what a failing allocation does before it gives up). Returns the bytes given back.
  std::size_t DrainCaches();
  // For the pool's Trim: drains every cache (DrainCaches), then gives every chunk without a slab
  // or large block back to the arena (Arena::ReturnChunk), which may then trim it. Returns how
  // many chunks went back.
  std::size_t ReleaseIdleChunks();
  // Forgets the chunk at `chunk_base` for good, for giving it back (forget_chunk.cc): empties every
  // thread cache and the transfer stacks (the drain handshake), and, while every cache is held
  // drained and every class and the page heap are locked, takes the chunk's free spans, slabs
  // and large blocks out of the central layer and the page heap and clears its page map entries.
  // Returns the blocks of the chunk that were live (handed out and not freed; their usable
  // sizes), by address. Afterwards the heap never hands out, touches or accepts a block of the
  // chunk (the caller keeps frees of them away from the heap: Pool, Arena::Withdrawn) and the
  // chunk may be unmapped. Requires that the arena carve nothing more from the chunk. OK with
  // nothing to do when the heap never took the chunk. kFailedPrecondition, with nothing changed,
  // when other threads' caches cannot be emptied now (no membarrier: see DrainCaches).
  struct LostBlock {
    void* data;
    std::size_t size;
  };
  absl::StatusOr<std::vector<LostBlock>> ForgetChunk(std::uintptr_t chunk_base);
  // The page heap's structural self-check (tests).
  void Verify() const { pages_.Verify(); }

  // For the thread-exit hook in heap.cc: returns a cache's blocks and keeps it for reuse.
  void ReleaseCache(ThreadCache* cache) noexcept;

 private:
  class ArenaChunks : public ChunkSource {
   public:
    explicit ArenaChunks(Arena* arena) : arena_(arena) {}
    void* NewChunk() override { return arena_->Carve(arena_->chunk_size(), arena_->chunk_size()); }
    void ReturnChunk(void* chunk) override { arena_->ReturnChunk(chunk); }

   private:
    Arena* const arena_;
  };

  Heap(Arena* arena, std::uint64_t id, const Options& options);

  // This thread's cache of this heap (made on first use), or null with debug checks or after the
  // thread's caches are gone. Callers Acquire it before they touch it: a cache CacheSlow moves
  // into slot 0 is unmarked even while a drain of it is pending, and Acquire waits that out.
  ThreadCache* Cache() noexcept {
    if (debug_ || tls_caches_gone) return nullptr;
    ThreadCacheSlots& t = fast::tls_slots;
    if (__builtin_expect(t.heap_id[0].load(std::memory_order_relaxed) == id_, 1)) {
      return static_cast<ThreadCache*>(t.cache[0]);
    }
    return CacheSlow();
  }
  ThreadCache* CacheSlow() noexcept;
  // Enter(c), waiting out (or honouring) a drain.
  void Acquire(ThreadCache* c) noexcept;
  void HonourDrain(ThreadCache* c) noexcept;
  // A free block of class c for this thread (cache, central layer, page heap, growth, drains).
  void* AllocateClass(unsigned c) noexcept;
  // Tries `attempt(grow)`, then again after giving back this thread's cache and the transfer
  // stacks, then with growth, then after draining every cache.
  template <typename F>
  void* WithReclaim(F attempt) noexcept;
  // True when p starts a block according to its page map entry (PageMap::IsBlockStart), which
  // sets *cls to the entry's class when the entry names one (else leaves it).
  bool BlockStartAt(const void* p, unsigned* cls) const noexcept {
    const auto addr = reinterpret_cast<std::uintptr_t>(p);
    return PageMap::IsBlockStart(pages_.page_map().EntryAt(addr), addr, cls);
  }
  // CheckBlock, returning the block's class.
  unsigned CheckedClass(const void* p, std::size_t size, const char* what) const noexcept;
  // A block handed out: no longer free.
  void* HandOut(void* p, unsigned c, std::size_t size) noexcept;
  // A checked block of class c made free.
  void FreeBlock(void* p, unsigned c) noexcept;
  // This thread's cache of this heap, if it has one (without making one).
  ThreadCache* OwnCache() const noexcept;
  // Empties the caches (DrainCaches). `hold`: leaves every emptied cache's `drain` flag set, so
  // its owner waits on mu_ until the caller clears it (ForgetChunk). `every_cache`, when given,
  // is set to whether every cache was emptied (false without membarrier).
  std::size_t DrainLocked(ThreadCache* own, bool hold = false, bool* every_cache = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  MetadataArena metadata_;  // first: destroyed last, after everything that lives in it
  Arena* const arena_;
  const std::uint64_t id_;
  const std::uint64_t secret_;
  const bool debug_;
  const std::size_t thread_cache_budget_;
  ArenaChunks chunks_;
  PageHeap pages_;
  CentralCache central_;
  std::atomic<std::uint64_t> drains_{0};

  mutable Mutex mu_;
  // Caches in use (each by its thread; heads from ThreadCache::New, bins in metadata_), and
  // caches of exited threads for reuse.
  std::vector<ThreadCache*> caches_ ABSL_GUARDED_BY(mu_);
  ThreadCache* free_caches_ ABSL_GUARDED_BY(mu_) = nullptr;
  // Debug checks only: every live block and the size it was allocated with.
  std::unordered_map<std::uintptr_t, std::size_t> live_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pinpool::internal

#endif  // PINPOOL_HEAP_HEAP_H_
