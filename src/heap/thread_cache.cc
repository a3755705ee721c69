// ThreadCache's slow paths (thread_cache.h has the contract; the fast path's pop and push are in
// heap.h): a bin's storage made on first use, refills from the central layer, flushes of the
// oldest blocks, halving every bin when over budget. Run by the owning thread, or by a drainer
// holding the handshake.
#include "heap/thread_cache.h"

#include <algorithm>
#include <cstring>

namespace pinpool::internal {

ThreadCache::ThreadCache(std::uint64_t id, std::size_t budget_bytes, MetadataArena* metadata)
    : heap_id(id), budget(static_cast<std::intptr_t>(budget_bytes)), metadata_(metadata) {
  room.store(budget, std::memory_order_relaxed);
}

ThreadCache::~ThreadCache() = default;

bool ThreadCache::MakeStorage(unsigned c) noexcept {
  Bin& bin = bins[c];
  if (bin.bottom != nullptr) return true;
  void** storage = metadata_->AllocateArray<void*>(Class(c).bin_cap);
  if (storage == nullptr) return false;
  bin.bottom = bin.top = storage;
  bin.limit = bin.bottom + Class(c).bin_cap;
  used_[used_count_++] = static_cast<std::uint8_t>(c);
  return true;
}

void* ThreadCache::Refill(CentralCache& central, unsigned c, bool grow) noexcept {
  Bin& bin = bins[c];
  if (bin.top != bin.bottom) {  // not empty after all (the fast path was not taken)
    AddRoom(static_cast<std::intptr_t>(ClassSize(c)));
    return *--bin.top;
  }
  if (!MakeStorage(c)) {
    void* p = nullptr;
    return central.Take(c, &p, 1, grow) == 1 ? p : nullptr;
  }
  // A batch, as far as the byte budget allows (the block handed out does not count).
  const std::intptr_t fit =
      room.load(std::memory_order_relaxed) / static_cast<std::intptr_t>(ClassSize(c));
  const std::size_t want = std::clamp<std::intptr_t>(fit + 1, 1, Class(c).batch);
  const std::size_t got = central.Take(c, bin.top, want, grow);
  if (got == 0) return nullptr;
  bin.top += got - 1;  // all but the one handed out
  AddRoom(-static_cast<std::intptr_t>((got - 1) * ClassSize(c)));
  return *bin.top;
}

void ThreadCache::FlushOldest(CentralCache& central, unsigned c, std::size_t n) noexcept {
  Bin& bin = bins[c];
  n = std::min(n, bin.count());
  if (n == 0) return;
  central.Put(c, bin.bottom, n);
  std::memmove(bin.bottom, bin.bottom + n, (bin.count() - n) * sizeof(void*));
  bin.top -= n;
  AddRoom(static_cast<std::intptr_t>(n * ClassSize(c)));
}

void ThreadCache::Scavenge(CentralCache& central) noexcept {
  for (unsigned i = 0; i < used_count_; ++i) {
    const unsigned c = used_[i];
    FlushOldest(central, c, (bins[c].count() + 1) / 2);
  }
}

bool ThreadCache::Push(CentralCache& central, unsigned c, void* p) noexcept {
  if (!MakeStorage(c)) return false;
  const auto size = static_cast<std::intptr_t>(ClassSize(c));
  // Over budget with this block: every bin gives back its older half first (then the cache
  // holds at most half its budget). Halving every bin, not only the one that grew, drains the
  // classes the thread stopped using. Made room first, never pushed and then drained: `room` is
  // read by stats at any time and is never stored below zero.
  if (room.load(std::memory_order_relaxed) < size) Scavenge(central);
  if (room.load(std::memory_order_relaxed) < size) return false;  // larger than the budget
  Bin& bin = bins[c];
  if (bin.top == bin.limit) FlushOldest(central, c, (Class(c).bin_cap + 1) / 2);
  *bin.top++ = p;
  AddRoom(-size);
  return true;
}

std::size_t ThreadCache::FlushAll(CentralCache& central) noexcept {
  const std::size_t bytes = held_bytes();
  for (unsigned i = 0; i < used_count_; ++i) FlushOldest(central, used_[i], bins[used_[i]].count());
  return bytes;
}

}  // namespace pinpool::internal
