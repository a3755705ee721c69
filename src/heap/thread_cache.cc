#include "heap/thread_cache.h"

namespace pinpool::internal {

ThreadCache::ThreadCache(std::uint64_t id) : heap_id(id) {
  std::size_t total = 0;
  for (unsigned c = 0; c < kNumClasses; ++c) total += Capacity(c);
  storage.reset(new void*[total]);
  void** next = storage.get();
  for (unsigned c = 0; c < kNumClasses; ++c) {
    bins[c].items = next;
    bins[c].capacity = Capacity(c);
    next += bins[c].capacity;
  }
}

}  // namespace pinpool::internal
