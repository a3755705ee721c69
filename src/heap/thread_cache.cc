// ThreadCache's slow paths (thread_cache.h has the contract; the fast path's pop and push are
// inline, pinpool/fast_path.h): a bin's storage made on first use, its capacity grown within the
// byte budget, refills from the central layer, flushes of the oldest blocks, halving every bin
// when the budget is spent. Run by the owning thread, or by a drainer holding the handshake.
#include "heap/thread_cache.h"

#include <algorithm>
#include <cstring>

namespace pinpool::internal {

ThreadCache::ThreadCache(std::uint64_t id, std::size_t budget_bytes, MetadataArena* metadata)
    : heap_id(id), budget(budget_bytes), metadata_(metadata) {}

ThreadCache::~ThreadCache() = default;

std::size_t ThreadCache::held_bytes() const noexcept {
  std::size_t bytes = 0;
  const unsigned n = used_count_.load(std::memory_order_acquire);
  for (unsigned i = 0; i < n; ++i) {
    const unsigned c = used_[i];
    void** top =
        std::atomic_ref<void**>(const_cast<void**&>(bins[c].top)).load(std::memory_order_relaxed);
    bytes += static_cast<std::size_t>(top - bins[c].bottom) * ClassSize(c);
  }
  return bytes;
}

bool ThreadCache::MakeStorage(unsigned c) noexcept {
  Bin& bin = bins[c];
  if (bin.bottom != nullptr) return true;
  void** storage = metadata_->AllocateArray<void*>(Class(c).bin_cap);
  if (storage == nullptr) return false;
  bin.bottom = bin.limit = storage;  // no capacity yet
  fast_v2::SetTop(bin, storage);
  const unsigned n = used_count_.load(std::memory_order_relaxed);
  used_[n] = static_cast<std::uint8_t>(c);
  used_count_.store(n + 1, std::memory_order_release);
  return true;
}

void ThreadCache::SetCapacity(unsigned c, std::size_t blocks) noexcept {
  allotted_ = allotted_ - capacity(c) * ClassSize(c) + blocks * ClassSize(c);
  bins[c].limit = bins[c].bottom + blocks;
}

std::size_t ThreadCache::Grow(unsigned c, std::size_t want) noexcept {
  const std::size_t cap = capacity(c);
  want = std::min<std::size_t>(want, Class(c).bin_cap);
  if (want <= cap) return cap;
  const std::size_t spare = (budget - allotted_) / ClassSize(c);  // allotted_ <= budget
  const std::size_t next = cap + std::min(want - cap, spare);
  SetCapacity(c, next);
  return next;
}

void* ThreadCache::Refill(CentralCache& central, unsigned c, bool grow) noexcept {
  Bin& bin = bins[c];
  if (bin.top != bin.bottom) {  // not empty after all (the fast path was not taken)
    fast_v2::SetTop(bin, bin.top - 1);
    return *bin.top;
  }
  if (!MakeStorage(c)) {
    void* p = nullptr;
    return central.Take(c, &p, 1, grow) == 1 ? p : nullptr;
  }
  // A batch, as far as the capacity allows (the block handed out does not count, and leaves room
  // for its own free).
  const std::size_t want = std::min<std::size_t>(Grow(c, Class(c).batch) + 1, Class(c).batch);
  const std::size_t got = central.Take(c, bin.top, want, grow);
  if (got == 0) return nullptr;
  fast_v2::SetTop(bin, bin.top + (got - 1));  // all but the one handed out
  return *bin.top;
}

void ThreadCache::FlushOldest(CentralCache& central, unsigned c, std::size_t n) noexcept {
  Bin& bin = bins[c];
  n = std::min(n, bin.count());
  if (n == 0) return;
  central.Put(c, bin.bottom, n);
  std::memmove(bin.bottom, bin.bottom + n, (bin.count() - n) * sizeof(void*));
  fast_v2::SetTop(bin, bin.top - n);
}

void ThreadCache::Scavenge(CentralCache& central) noexcept {
  const unsigned n = used_count_.load(std::memory_order_relaxed);
  for (unsigned i = 0; i < n; ++i) {
    const unsigned c = used_[i];
    const std::size_t cap = capacity(c) / 2;
    if (bins[c].count() > cap) FlushOldest(central, c, bins[c].count() - cap);
    SetCapacity(c, cap);
  }
}

bool ThreadCache::Push(CentralCache& central, unsigned c, void* p) noexcept {
  if (!MakeStorage(c)) return false;
  Bin& bin = bins[c];
  if (bin.top == bin.limit) {
    const std::size_t cap = capacity(c);
    if (cap < Class(c).bin_cap) {
      const std::size_t want = std::max<std::size_t>(2 * cap, Class(c).batch);
      // No room in the budget: every bin gives up half (this one too), then this one grows.
      if (Grow(c, want) == cap) {
        Scavenge(central);
        Grow(c, want);
      }
    }
    if (bin.top == bin.limit) {
      if (capacity(c) == 0) {  // the budget holds not even this one block
        central.Put(c, &p, 1);
        return true;
      }
      FlushOldest(central, c, (capacity(c) + 1) / 2);
    }
  }
  *bin.top = p;
  fast_v2::SetTop(bin, bin.top + 1);
  return true;
}

std::size_t ThreadCache::FlushAll(CentralCache& central) noexcept {
  const std::size_t bytes = held_bytes();
  const unsigned n = used_count_.load(std::memory_order_relaxed);
  for (unsigned i = 0; i < n; ++i) FlushOldest(central, used_[i], bins[used_[i]].count());
  return bytes;
}

}  // namespace pinpool::internal
