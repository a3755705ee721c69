// ThreadCache's slow paths (thread_cache.h has the contract; the fast path's pop and push are in
// pinpool/fast_path.h): a bin's storage made on first use, capacity given within the budget,
// refills from the central layer, flushes of the oldest blocks, halving every bin when blocks
// hold the budget. Run by the owning thread, or by a drainer holding the handshake.
#include "heap/thread_cache.h"

#include <algorithm>
#include <cstring>

namespace pinpool::internal {

namespace {
constexpr auto kRelaxed = std::memory_order_relaxed;
constexpr bool BatchesFitBins() {
  for (unsigned c = 0; c < kNumClasses; ++c) {
    if (Class(c).batch > Class(c).bin_cap) return false;
  }
  return true;
}
static_assert(BatchesFitBins(), "a refill writes a batch into an empty bin's storage");
}  // namespace

ThreadCache::ThreadCache(std::uint64_t id, std::size_t budget_bytes, MetadataArena* metadata)
    : heap_id(id), budget(budget_bytes), metadata_(metadata) {}

ThreadCache::~ThreadCache() = default;

std::size_t ThreadCache::held_bytes() const noexcept {
  std::size_t bytes = 0;
  for (unsigned c = 0; c < kNumClasses; ++c) {
    // Read from another thread while the owner makes a bin's storage, the two words may come from
    // either side of it: a count that cannot be is skipped.
    void** const bottom = bins[c].bottom.load(kRelaxed);
    void** const top = bins[c].top.load(kRelaxed);
    if (bottom == nullptr || top < bottom || top - bottom > Class(c).bin_cap) continue;
    bytes += static_cast<std::size_t>(top - bottom) * ClassSize(c);
  }
  return bytes;
}

bool ThreadCache::MakeStorage(unsigned c) noexcept {
  Bin& bin = bins[c];
  if (bin.bottom.load(kRelaxed) != nullptr) return true;
  void** storage = metadata_->AllocateArray<void*>(Class(c).bin_cap);
  if (storage == nullptr) return false;
  bin.top.store(storage, kRelaxed);  // no capacity yet: the first push gives it some
  bin.limit.store(storage, kRelaxed);
  bin.bottom.store(storage, kRelaxed);
  used_[used_count_++] = static_cast<std::uint8_t>(c);
  return true;
}

void ThreadCache::SetCapacity(unsigned c, std::size_t n) noexcept {
  committed_ = committed_ - capacity(c) * ClassSize(c) + n * ClassSize(c);
  bins[c].limit.store(bins[c].bottom.load(kRelaxed) + n, kRelaxed);
}

std::size_t ThreadCache::Grow(unsigned c, std::size_t want) noexcept {
  const std::size_t size = ClassSize(c);
  const std::size_t have = capacity(c);
  want = std::min<std::size_t>(want, Class(c).bin_cap);
  if (want <= have) return have;
  // Spare capacity of other bins first, as much as the budget left lacks.
  for (unsigned i = 0; i < used_count_ && committed_ + (want - have) * size > budget; ++i) {
    if (used_[i] != c) SetCapacity(used_[i], count(used_[i]));
  }
  const std::size_t fits = (budget - std::min(committed_, budget)) / size;
  SetCapacity(c, have + std::min(want - have, fits));
  return capacity(c);
}

void* ThreadCache::Refill(CentralCache& central, unsigned c, bool grow) noexcept {
  Bin& bin = bins[c];
  void** top = bin.top.load(kRelaxed);
  if (top != bin.bottom.load(kRelaxed)) {  // not empty after all (the fast path was not taken)
    bin.top.store(--top, kRelaxed);
    return *top;
  }
  if (!MakeStorage(c)) {
    void* p = nullptr;
    return central.Take(c, &p, 1, grow) == 1 ? p : nullptr;
  }
  // A batch, as far as the bin's capacity can grow (the block handed out is not held). A batch
  // never exceeds bin_cap (size_class.h), so the storage holds it.
  const std::size_t want = Class(c).batch;
  const std::size_t keep = Grow(c, want - 1);
  top = bin.top.load(kRelaxed);
  const std::size_t got = central.Take(c, top, std::min(want, keep + 1), grow);
  if (got == 0) return nullptr;
  bin.top.store(top + got - 1, kRelaxed);  // all but the one handed out
  return top[got - 1];
}

void ThreadCache::FlushOldest(CentralCache& central, unsigned c, std::size_t n) noexcept {
  Bin& bin = bins[c];
  n = std::min(n, count(c));
  if (n == 0) return;
  void** const bottom = bin.bottom.load(kRelaxed);
  central.Put(c, bottom, n);
  std::memmove(bottom, bottom + n, (count(c) - n) * sizeof(void*));
  bin.top.store(bin.top.load(kRelaxed) - n, kRelaxed);
}

void ThreadCache::Scavenge(CentralCache& central) noexcept {
  for (unsigned i = 0; i < used_count_; ++i) {
    const unsigned c = used_[i];
    FlushOldest(central, c, (count(c) + 1) / 2);
    SetCapacity(c, count(c));
  }
}

bool ThreadCache::Push(CentralCache& central, unsigned c, void* p) noexcept {
  if (!MakeStorage(c)) return false;
  const ClassInfo& k = Class(c);
  if (count(c) == capacity(c) && capacity(c) < k.bin_cap) {
    const std::size_t want = std::max<std::size_t>(2 * capacity(c), k.batch);
    // Blocks hold the budget: every bin gives back its older half (then the cache holds at most
    // half its budget). Halving every bin, not only this one, drains the classes the thread
    // stopped using.
    if (Grow(c, want) == count(c)) {
      Scavenge(central);
      Grow(c, want);
    }
  }
  if (count(c) == capacity(c)) {
    if (capacity(c) == 0) {  // larger than the whole budget
      central.Put(c, &p, 1);
      return true;
    }
    FlushOldest(central, c, (capacity(c) + 1) / 2);
  }
  void** const top = bins[c].top.load(kRelaxed);
  *top = p;
  bins[c].top.store(top + 1, kRelaxed);
  return true;
}

std::size_t ThreadCache::FlushAll(CentralCache& central) noexcept {
  const std::size_t bytes = held_bytes();
  for (unsigned i = 0; i < used_count_; ++i) FlushOldest(central, used_[i], count(used_[i]));
  return bytes;
}

}  // namespace pinpool::internal
