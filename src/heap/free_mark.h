// The heap's free mark, as the library reads and writes it: a free block holds
// FreeMark(secret, address) in the word fast::MarkOf names for its class (the first word, or
// for a class that is a multiple of the page, a word of its first page chosen by the address),
// written when the block becomes free anywhere in the heap and cleared when it is handed out.
// The inline paths (pinpool/fast_path.h) find the same word from the class row's mark_hash
// (the free) or the bin's copy of it (the pop; ThreadCache::MakeStorage sets it).
//
// Pure functions of the secret, the address and the class; no state. The caller makes sure the
// block's first page is mapped.
#ifndef PINPOOL_HEAP_FREE_MARK_H_
#define PINPOOL_HEAP_FREE_MARK_H_

#include <cstdint>

#include "heap/size_class.h"
#include "pinpool/fast_path.h"

namespace pinpool::internal {

using fast::FreeMark;

// Class c's mark_hash (fast::MarkOf): blocks of a size that is a multiple of the page start on
// pages (slabs and spans start on pages), so the mark may lie anywhere in their first page.
constexpr std::uint64_t MarkHash(unsigned c) noexcept {
  return ClassSize(c) % kPageSize == 0 ? fast::kMarkHash : 0;
}

inline fast::MarkWord* MarkOf(const void* p, unsigned c) noexcept {
  return fast::MarkOf(const_cast<void*>(p), MarkHash(c));
}
// True when the block at p, of class c, carries the mark.
inline bool MarkedFree(std::uint64_t secret, const void* p, unsigned c) noexcept {
  return *MarkOf(p, c) == FreeMark(secret, p);
}
inline void MarkFree(std::uint64_t secret, void* p, unsigned c) noexcept {
  *MarkOf(p, c) = FreeMark(secret, p);
}
inline void MarkLive(void* p, unsigned c) noexcept { *MarkOf(p, c) = 0; }

// For a block whose class is no longer known (its span went back to the page heap): true when p
// carries the mark in either place a block starting at p may have kept it.
inline bool MaybeMarkedFree(std::uint64_t secret, const void* p) noexcept {
  const std::uint64_t mark = FreeMark(secret, p);
  void* const q = const_cast<void*>(p);
  if (*fast::MarkOf(q, 0) == mark) return true;
  return reinterpret_cast<std::uintptr_t>(p) % kPageSize == 0 &&
         *fast::MarkOf(q, fast::kMarkHash) == mark;
}

}  // namespace pinpool::internal

#endif  // PINPOOL_HEAP_FREE_MARK_H_
