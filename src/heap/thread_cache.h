// ThreadCache: one thread's stacks of free blocks of one heap, one stack per size class, so the
// fast path is an array pop or push with no lock, no atomic and no call into jemalloc.
//
// Invariant: every block in bin c has usable size >= ClassSize(c), is 16-byte aligned, and
// carries the heap's free mark in its first word (Heap::FreeMark) until it is handed out. A
// block may sit in a bin smaller than its real size (a block freed with the size it was asked
// for, but allocated with a larger alignment); that only wastes space, and jemalloc gets the
// block back with an unsized free, which knows its real size.
//
// Thread safety: owned and used by one thread; the heap only walks it when that thread exits.
#ifndef PINPOOL_HEAP_THREAD_CACHE_H_
#define PINPOOL_HEAP_THREAD_CACHE_H_

#include <cstdint>
#include <memory>

#include "heap/size_class.h"

namespace pinpool::internal {

struct ThreadCache {
  // A stack of free blocks: [bottom, top) are held, top grows towards limit; the most recently
  // freed block is reused first.
  struct Bin {
    void** top = nullptr;
    void** bottom = nullptr;
    void** limit = nullptr;
    std::size_t count() const noexcept { return static_cast<std::size_t>(top - bottom); }
    std::size_t capacity() const noexcept { return static_cast<std::size_t>(limit - bottom); }
  };

  explicit ThreadCache(std::uint64_t heap_id);

  // Blocks a bin holds at most: 64 small ones, fewer large ones, so that a bin holds at most
  // 256 KiB or two blocks (a thread's caches of one pool hold at most ~20 MiB, in practice far
  // less: only what the thread freed and did not reuse).
  static constexpr std::uint32_t Capacity(unsigned c) noexcept {
    const std::size_t by_bytes = (std::size_t{256} << 10) / ClassSize(c);
    return static_cast<std::uint32_t>(by_bytes > 64 ? 64 : by_bytes < 2 ? 2 : by_bytes);
  }

  const std::uint64_t heap_id;
  Bin bins[kNumClasses];
  std::unique_ptr<void*[]> storage;
};

}  // namespace pinpool::internal

#endif  // PINPOOL_HEAP_THREAD_CACHE_H_
