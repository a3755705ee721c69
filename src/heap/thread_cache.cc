// ThreadCache's slow paths (thread_cache.h has the contract; the fast path's pop and push are in
// heap.h): a bin's storage made on first use, refills from the central layer, flushes of the
// oldest blocks, recounting the room and halving every bin when over budget. Run by the owning
// thread, or by a drainer holding the handshake. And where heads live (New, Delete).
#include "heap/thread_cache.h"

#include <sanitizer/asan_interface.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "heap/free_mark.h"
#include "heap/spin_lock.h"
#include "os/os.h"

namespace pinpool::internal {

ThreadCache::ThreadCache(std::uint64_t id, std::size_t budget_bytes, MetadataArena* metadata)
    : heap_id(id), budget(static_cast<std::intptr_t>(budget_bytes)), metadata_(metadata) {
  room.store(budget, std::memory_order_relaxed);
}

ThreadCache::~ThreadCache() = default;

namespace {
// Free heads (the storage of deleted ones), and the rest of the last mapping (bump allocation).
// The lock is taken after any other.
struct FreeHead {
  FreeHead* next;
};
constinit SpinLock heads_lock;
FreeHead* free_heads ABSL_GUARDED_BY(heads_lock) = nullptr;
std::uintptr_t heads_next ABSL_GUARDED_BY(heads_lock) = 0;
std::uintptr_t heads_end ABSL_GUARDED_BY(heads_lock) = 0;
std::size_t heads_live ABSL_GUARDED_BY(heads_lock) = 0;
constexpr std::size_t kHeadSize = (sizeof(ThreadCache) + 63) & ~std::size_t{63};
constexpr std::size_t kHeadsMapping = std::size_t{256} << 10;
}  // namespace

ThreadCache* ThreadCache::New(std::uint64_t heap_id, std::size_t budget,
                              MetadataArena* metadata) noexcept {
  void* at;
  {
    SpinLockHolder hold(&heads_lock);
    if (free_heads != nullptr) {
      at = free_heads;
      free_heads = free_heads->next;
    } else {
      if (heads_end - heads_next < kHeadSize) {
        void* more = os::MapMetadata(kHeadsMapping);  // page aligned
        if (more == nullptr) return nullptr;
        heads_next = reinterpret_cast<std::uintptr_t>(more);
        heads_end = heads_next + kHeadsMapping;
      }
      at = reinterpret_cast<void*>(heads_next);
      heads_next += kHeadSize;
    }
    ++heads_live;
  }
  ASAN_UNPOISON_MEMORY_REGION(at, kHeadSize);
  return new (at) ThreadCache(heap_id, budget, metadata);
}

void ThreadCache::Delete(ThreadCache* c) noexcept {
  c->~ThreadCache();
  auto* free = new (static_cast<void*>(c)) FreeHead{nullptr};
  SpinLockHolder hold(&heads_lock);
  free->next = free_heads;
  free_heads = free;
  --heads_live;
  // A use after Delete is a use after free to AddressSanitizer (but for the link word).
  ASAN_POISON_MEMORY_REGION(reinterpret_cast<char*>(c) + sizeof(FreeHead),
                            kHeadSize - sizeof(FreeHead));
}

std::size_t ThreadCache::live_heads() noexcept {
  SpinLockHolder hold(&heads_lock);
  return heads_live;
}

bool ThreadCache::MakeStorage(unsigned c) noexcept {
  Bin& bin = bins[c];
  if (bin.Bottom() != nullptr) return true;
  // Coloured: bin c starts (c mod 64) cache lines into its storage. The small classes' bins are
  // 16 KiB each, made one after another: uncoloured, the tops of two bins holding as many blocks
  // lie a multiple of 4 KiB apart, and a pop from one after a push onto the other (a window of
  // blocks of several sizes) waits on the push, which the CPU takes for a store to the same
  // address (4 KiB aliasing). 64 B-1 KiB windows 11.5-11.9 -> 10.2-11.2 ns. Costs up to 4 KiB of
  // metadata a bin (about 2 KiB on average).
  const std::size_t color = (c % 64) * (64 / sizeof(void*));
  void** storage = metadata_->AllocateArray<void*>(Class(c).bin_cap + color);
  if (storage == nullptr) return false;
  storage += color;
  bin.limit = storage + Class(c).bin_cap;
  bin.mark_hash = MarkHash(c);
  bin.bottom.store(storage, std::memory_order_relaxed);
  bin.SetTop(storage);
  used_[used_count_++] = static_cast<std::uint8_t>(c);
  // Allocations of up to kMaxUncreditedSize bytes that come from class c leave the room alone.
  if (c == 0 || ClassSize(c - 1) < fast::kMaxUncreditedSize) ++uncredited_used_;
  return true;
}

void* ThreadCache::Refill(CentralCache& central, unsigned c, bool grow) noexcept {
  Bin& bin = bins[c];
  if (void** top = bin.Top(); top != bin.Bottom()) {  // not empty after all (no fast path)
    AddRoom(static_cast<std::intptr_t>(ClassSize(c)));
    bin.SetTop(--top);
    return *top;
  }
  if (!MakeStorage(c)) {
    void* p = nullptr;
    return central.Take(c, &p, 1, grow) == 1 ? p : nullptr;
  }
  // A batch, as far as the byte budget allows (the block handed out does not count), counted
  // again first if the room looks short (a thread that only allocates small blocks never
  // credits it).
  const auto size = static_cast<std::intptr_t>(ClassSize(c));
  const std::intptr_t batch = RefillBatch(c);
  RoomFor(size * (batch - 1));
  const std::intptr_t fit = room.load(std::memory_order_relaxed) / size;
  const std::size_t want = std::clamp<std::intptr_t>(fit + 1, 1, batch);
  void** top = bin.Top();
  const std::size_t got = central.Take(c, top, want, grow);
  if (got == 0) return nullptr;
  if (refill_streak_[c] < kMaxRefillStreak) ++refill_streak_[c];
  top += got - 1;  // all but the one handed out
  bin.SetTop(top);
  AddRoom(-static_cast<std::intptr_t>(got - 1) * size);
  return *top;
}

std::size_t ThreadCache::RefillBatch(unsigned c) const noexcept {
  const ClassInfo& info = Class(c);
  const std::size_t most = std::max<std::size_t>(
      info.batch, std::min<std::size_t>(info.bin_cap / 4, kMaxRefillBytes / info.size));
  return std::min<std::size_t>(std::size_t{info.batch} << refill_streak_[c], most);
}

void ThreadCache::FlushOldest(CentralCache& central, unsigned c, std::size_t n) noexcept {
  Bin& bin = bins[c];
  void** const bottom = bin.Bottom();
  void** const top = bin.Top();
  n = std::min<std::size_t>(n, top - bottom);
  if (n == 0) return;
  central.Put(c, bottom, n);
  refill_streak_[c] = 0;
  std::memmove(bottom, bottom + n, (top - bottom - n) * sizeof(void*));
  bin.SetTop(top - n);
  AddRoom(static_cast<std::intptr_t>(n * ClassSize(c)));
}

void ThreadCache::Scavenge(CentralCache& central) noexcept {
  for (unsigned i = 0; i < used_count_; ++i) {
    const unsigned c = used_[i];
    // Most bins of a thread that used many classes are empty: no call for them.
    if (const std::size_t n = bins[c].count(); n != 0) FlushOldest(central, c, (n + 1) / 2);
  }
}

bool ThreadCache::Push(CentralCache& central, unsigned c, void* p) noexcept {
  if (!MakeStorage(c)) return false;
  const auto size = static_cast<std::intptr_t>(ClassSize(c));
  // Over budget with this block, once counted (the inline pops since the last count gave back
  // nothing): every bin gives back its older half first (then the cache holds at most half its
  // budget). Halving every bin, not only the one that grew, drains the classes the thread
  // stopped using. Made room first, never pushed and then drained: `room` is never stored below
  // zero.
  if (!RoomFor(size)) Scavenge(central);
  if (room.load(std::memory_order_relaxed) < size) return false;  // larger than the budget
  Bin& bin = bins[c];
  if (bin.Top() == bin.limit) FlushOldest(central, c, (Class(c).bin_cap + 1) / 2);
  void** const top = bin.Top();
  *top = p;
  bin.SetTop(top + 1);
  AddRoom(-size);
  return true;
}

bool ThreadCache::RoomFor(std::intptr_t need) noexcept {
  if (room.load(std::memory_order_relaxed) >= need) return true;
  // Only the inline pop of blocks up to kMaxUncreditedSize leaves the room short: a thread of
  // larger blocks alone does not count.
  if (uncredited_used_ == 0) return false;
  // A count that found too little makes the next shortfalls skip counting, twice as many each
  // time (up to 63), until one finds enough: a thread whose large frees overflow the budget
  // while its small classes sit idle would otherwise count every bin on every slow free and
  // refill (a window of 1-4 MiB blocks after small ones: 47.7 -> 52.3 ns). A skipped count
  // only costs a halving the count might have spared.
  if (recount_wait_ > 0) {
    --recount_wait_;
    return false;
  }
  Recount();
  if (room.load(std::memory_order_relaxed) >= need) {
    recount_backoff_ = 0;
    return true;
  }
  recount_backoff_ = std::min(2 * recount_backoff_ + 1, 63u);
  recount_wait_ = recount_backoff_;
  return false;
}

void ThreadCache::Recount() noexcept {
  room.store(budget - static_cast<std::intptr_t>(held_bytes()), std::memory_order_relaxed);
}

std::size_t ThreadCache::held_bytes() const noexcept {
  // Every bin, not used_ (the owner's). A bin without storage has null top and bottom; one
  // whose storage is being made may show one of them null: it holds nothing yet.
  std::size_t held = 0;
  for (unsigned c = 0; c < kNumClasses; ++c) {
    void** top = bins[c].Top();
    void** bottom = bins[c].Bottom();
    if (top > bottom && bottom != nullptr) held += (top - bottom) * ClassSize(c);
  }
  return held;
}

std::size_t ThreadCache::FlushAll(CentralCache& central) noexcept {
  const std::size_t bytes = held_bytes();
  for (unsigned i = 0; i < used_count_; ++i) FlushOldest(central, used_[i], bins[used_[i]].count());
  room.store(budget, std::memory_order_relaxed);  // exact again: nothing is held
  return bytes;
}

}  // namespace pinpool::internal
