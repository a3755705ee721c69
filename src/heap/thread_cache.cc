#include "heap/thread_cache.h"

namespace pinpool::internal {

ThreadCache::ThreadCache(std::uint64_t id) : heap_id(id) {
  std::size_t total = 0;
  for (unsigned c = 0; c < kNumClasses; ++c) total += Capacity(c);
  storage.reset(new void*[total]);
  void** next = storage.get();
  for (unsigned c = 0; c < kNumClasses; ++c) {
    bins[c].top = bins[c].bottom = next;
    next += Capacity(c);
    bins[c].limit = next;
  }
}

}  // namespace pinpool::internal
