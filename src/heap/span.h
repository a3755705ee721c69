// Span: a run of whole pages inside one chunk, and the heap's record of it. A span is free (in
// the page heap's free lists), a slab (cut into blocks of one slab class; its free blocks are a
// bitmap here, never anything written into the chunk), or one large block.
//
// SpanStore hands out Span records from blocks of the heap's MetadataArena and recycles them, so
// the allocation path maps nothing once the heap has seen its peak number of spans.
//
// Thread safety: `start`, `pages`, `state`, `cls` and `bucket` are the page heap's (written under
// its lock only: it reads them for the neighbours of any span it frees). A free span's links are
// the page heap's; a slab's links and free set are its class's in the central layer (the class's
// lock). SpanStore: the page heap's lock.
#ifndef PINPOOL_HEAP_SPAN_H_
#define PINPOOL_HEAP_SPAN_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <new>

#include "heap/metadata.h"
#include "heap/size_class.h"

namespace pinpool::internal {

struct Span {
  enum class State : std::uint8_t { kFree, kSlab, kLarge };

  std::uintptr_t start = 0;
  std::uint32_t pages = 0;
  State state = State::kFree;
  std::uint8_t cls = 0;           // kSlab, kLarge
  std::uint8_t bucket = 0;        // kFree: the page heap's free list it is on
  std::uint16_t free_blocks = 0;  // kSlab: blocks free in the slab (set bits below)
  Span* prev = nullptr;           // kFree: its free list; kSlab: its class's list of slabs
  Span* next = nullptr;           //   with free blocks
  std::uint64_t free_bits[kMaxSlabObjects / 64] = {};  // kSlab: bit i = block i is free here

  std::uintptr_t end() const noexcept { return start + (std::uintptr_t{pages} << kPageShift); }
  std::uintptr_t last_page() const noexcept { return end() - kPageSize; }

  // --- slab blocks (the caller holds the class's lock) -----------------------------------------
  // Every block free. `state`, `cls`, `start` and `pages` are the page heap's (set under its lock
  // when it made the span, and read by it for neighbouring spans): never written here.
  void InitSlab() noexcept {
    const unsigned n = Class(cls).objects;
    free_blocks = static_cast<std::uint16_t>(n);
    for (unsigned w = 0; w < kMaxSlabObjects / 64; ++w) {
      const unsigned lo = w * 64;
      free_bits[w] = n >= lo + 64 ? ~std::uint64_t{0}
                     : n > lo     ? (std::uint64_t{1} << (n - lo)) - 1
                                  : 0;
    }
  }
  // A free block of the slab (the lowest), taken out of its free set. Only when free_blocks > 0.
  std::uintptr_t TakeBlock() noexcept {
    for (unsigned w = 0;; ++w) {
      if (free_bits[w] != 0) {
        const unsigned bit = static_cast<unsigned>(std::countr_zero(free_bits[w]));
        free_bits[w] &= free_bits[w] - 1;
        --free_blocks;
        return start + (w * 64 + bit) * std::uintptr_t{ClassSize(cls)};
      }
    }
  }
  // Index of block p (a block start of this slab).
  unsigned BlockIndex(std::uintptr_t p) const noexcept {
    return static_cast<unsigned>((p - start) / ClassSize(cls));
  }
  bool IsFreeHere(std::uintptr_t p) const noexcept {
    const unsigned i = BlockIndex(p);
    return (free_bits[i / 64] >> (i % 64)) & 1;
  }
  void ReturnBlock(std::uintptr_t p) noexcept {
    const unsigned i = BlockIndex(p);
    free_bits[i / 64] |= std::uint64_t{1} << (i % 64);
    ++free_blocks;
  }
};

class SpanStore {
 public:
  explicit SpanStore(MetadataArena* metadata) : metadata_(metadata) {}

  // At least `n` records ready for New(); false when the metadata arena has no memory.
  bool Reserve(std::size_t n) noexcept {
    while (ready_ < n) {
      Span* block = metadata_->AllocateArray<Span>(kPerBlock);
      if (block == nullptr) return false;
      for (std::size_t i = 0; i < kPerBlock; ++i) Put(new (&block[i]) Span());
      blocks_ += 1;
    }
    return true;
  }
  // A fresh record; Reserve() must have made one ready.
  Span* New() noexcept {
    Span* s = free_;
    free_ = s->next;
    --ready_;
    *s = Span();
    return s;
  }
  void Put(Span* s) noexcept {
    s->next = free_;
    free_ = s;
    ++ready_;
  }
  std::size_t bytes() const noexcept { return blocks_ * kPerBlock * sizeof(Span); }

 private:
  static constexpr std::size_t kPerBlock = 256;
  MetadataArena* const metadata_;
  Span* free_ = nullptr;
  std::size_t ready_ = 0;
  std::size_t blocks_ = 0;
};

}  // namespace pinpool::internal

#endif  // PINPOOL_HEAP_SPAN_H_
