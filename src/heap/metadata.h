// MetadataArena: where a heap keeps its own bookkeeping (page map arrays, span records, transfer
// stacks, thread caches' bins; not the caches' heads: ThreadCache::New): bump allocation from
// regions the os room maps (os::MapMetadata), never malloc or operator new, all given back at once
// when the heap goes. Nothing is freed one by one: callers recycle what they can (spans)
// themselves.
//
// Thread safety: Allocate from any thread (its own lock, taken last: after any other lock).
#ifndef PINPOOL_HEAP_METADATA_H_
#define PINPOOL_HEAP_METADATA_H_

#include <cstddef>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "util/mutex.h"

namespace pinpool::internal {

class MetadataArena {
 public:
  MetadataArena() = default;
  ~MetadataArena();
  MetadataArena(const MetadataArena&) = delete;
  MetadataArena& operator=(const MetadataArena&) = delete;

  // `bytes` of zeroed memory aligned to 64; null when the kernel refuses more.
  void* Allocate(std::size_t bytes) noexcept;
  template <typename T>
  T* AllocateArray(std::size_t n) noexcept {
    return static_cast<T*>(Allocate(n * sizeof(T)));
  }
  // Bytes mapped for metadata so far.
  std::size_t mapped_bytes() const noexcept;

 private:
  // Regions are chained through a header at their start.
  struct Region {
    Region* next;
    std::size_t length;
  };
  static constexpr std::size_t kRegion = std::size_t{1} << 20;

  mutable Mutex mu_;
  Region* regions_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::uintptr_t next_ ABSL_GUARDED_BY(mu_) = 0;  // bump pointer in regions_
  std::uintptr_t end_ ABSL_GUARDED_BY(mu_) = 0;
  std::size_t mapped_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pinpool::internal

#endif  // PINPOOL_HEAP_METADATA_H_
