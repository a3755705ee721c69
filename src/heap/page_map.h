// PageMap: for every 4 KiB page of a pool's chunks, what block (if any) may start there, readable
// without a lock. It is how a free by address alone learns a block's size class and checks that
// the pointer is a block's start, in a few instructions and with no call.
//
// One 32-bit entry per page, in one array over the pool's whole reserved range (from the heap's
// MetadataArena, never in the registered chunks, where a device or a peer could write; 1/1024 of
// the range in address space, of which the kernel backs only the pages of chunks the heap has
// used: the rest stays untouched zero pages). One array, not one per chunk, so that the inline
// free reads its entry with one load indexed by the page, with no per-chunk pointer, null test
// or mask. An entry is
//   0                            no block starts on this page: free space, or a page of a large
//                                block other than its first
//   ((class + 1) << 25) | (delta << 16) | lead
//                                the page lies `delta` (< 16) pages into a span of class `class`:
//                                a slab (every page carries its entry, at most 16 pages) or a
//                                large block (only its first page does, delta 0). `lead` is
//                                (rest - page's address) mod 2^16, with `rest` (delta pages) mod
//                                (class size), at most 15 pages: (p + entry) mod 2^16 is then
//                                (p mod page) + rest for any p on the page, below 2^16
//                                (PageOffset). entry >> 20 is the byte offset of the class's
//                                32-byte row, (class + 1) << 5, in the inline path's class
//                                table, whose row 0 (an entry of 0) fails every test
//                                (pinpool/fast_path.h); bits 20-23 are 0
//   | kGrantTag (1 << 24)        added to either while a block starting on the page may be
//                                reached by a remote grant, or is held until its grants end: the
//                                inline free then reads the second, zero half of the row and
//                                fails, and the pool's slow path decides. Ignored by every other
//                                reader of the entry
// so a pointer p with entry e != 0 is a block's start exactly when (p - span start) is a multiple
// of the class size (IsBlockOffset), that is when (p mod page) + rest is (PageOffset: the inline
// fast path's test, pinpool/fast_path.h: an addition and a zero extension). Beside
// the entries, each chunk the heap has taken has a Span* per page (an array made when it takes the
// chunk), set on the first and last page of every span (free or used), for the page heap's
// coalescing and for finding a block's slab.
//
// Thread safety: entries and span pointers are written by the page heap under its lock and read
// lock-free (relaxed atomics: a thread reading the entry of a block it owns is ordered after the
// write by the locks the block travelled through; a misused pointer reads a stale or racing
// value, which is still a valid entry of the pool). Entries of chunks the heap has not taken are
// 0 (or kGrantTag). The grant tag alone is written by others (the pool's grant bookkeeping,
// under its grant lock) with atomic read-modify-writes; the page heap's plain stores never meet
// it, because they rewrite only pages where no live block starts (a span being made, or freed
// whole), and a granted or held block is live until its tag is cleared. A chunk's span array is
// made and read under the page heap's lock and lives until the PageMap is destroyed.
#ifndef PINPOOL_HEAP_PAGE_MAP_H_
#define PINPOOL_HEAP_PAGE_MAP_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "heap/metadata.h"
#include "heap/size_class.h"

namespace pinpool::internal {

struct Span;

using PageEntry = std::atomic<std::uint32_t>;

class PageMap {
 public:
  // `delta` is below 16 for a slab's pages and 0 for a large block (its first page).
  static constexpr std::size_t kMaxDelta = 15;
  static constexpr unsigned kClassShift = 25;
  static constexpr unsigned kDeltaShift = 16;
  // The entry of the page at `page` (page-aligned), `delta` pages into a span of class `cls`.
  static constexpr std::uint32_t Encode(unsigned cls, std::size_t delta,
                                        std::uintptr_t page) noexcept {
    const std::size_t rest = (delta << kPageShift) % ClassSize(cls);
    const std::uint16_t lead = static_cast<std::uint16_t>(rest - page);
    return static_cast<std::uint32_t>((std::size_t{cls + 1} << kClassShift) |
                                      (delta << kDeltaShift) | lead);
  }
  // The class an entry names, or kNumClasses or more when the entry is 0 (no block starts here).
  static constexpr unsigned ClassOf(std::uint32_t entry) noexcept {
    return (entry >> kClassShift) - 1u;  // 0 wraps to a huge value
  }
  static constexpr std::size_t DeltaOf(std::uint32_t entry) noexcept {
    return (entry >> kDeltaShift) & kMaxDelta;
  }
  // The start of the span an entry (naming a class) describes, for any address on that page.
  static constexpr std::uintptr_t SpanStart(std::uint32_t entry, std::uintptr_t p) noexcept {
    return ((p >> kPageShift) - DeltaOf(entry)) << kPageShift;
  }
  // p's offset from the start of the span an entry (naming a class) describes.
  static constexpr std::uintptr_t SpanOffset(std::uint32_t entry, std::uintptr_t p) noexcept {
    return (p & (kPageSize - 1)) + (std::uintptr_t{DeltaOf(entry)} << kPageShift);
  }
  // An offset of p congruent to SpanOffset modulo the class size, below 2^16.
  static constexpr std::uintptr_t PageOffset(std::uint32_t entry, std::uintptr_t p) noexcept {
    return static_cast<std::uint16_t>(p + entry);
  }
  // True when p is the start of a block according to its page's entry; *cls is its class.
  static bool IsBlockStart(std::uint32_t entry, std::uintptr_t p, unsigned* cls) noexcept {
    const unsigned c = ClassOf(entry);
    if (c >= kNumClasses) return false;
    *cls = c;
    return IsBlockOffset(c, SpanOffset(entry, p));
  }

  // The entries for `max_chunks` chunks come from `metadata`; ok() is false when it had none.
  PageMap(std::uintptr_t base, unsigned chunk_shift, std::size_t max_chunks,
          MetadataArena* metadata);
  bool ok() const noexcept { return entries_ != nullptr && spans_ != nullptr; }
  PageMap(const PageMap&) = delete;
  PageMap& operator=(const PageMap&) = delete;

  std::uintptr_t base() const noexcept { return base_; }
  unsigned chunk_shift() const noexcept { return chunk_shift_; }
  std::size_t max_chunks() const noexcept { return max_chunks_; }
  std::size_t pages_per_chunk() const noexcept {
    return std::size_t{1} << (chunk_shift_ - kPageShift);
  }

  static constexpr std::uint32_t kGrantTag = std::uint32_t{1} << 24;
  // Sets or clears the grant tag of the page holding p, in the range (any thread; see above).
  void SetGrantTag(std::uintptr_t p, bool on) noexcept {
    if (on) {
      EntryOf(p)->fetch_or(kGrantTag, std::memory_order_relaxed);
    } else {
      EntryOf(p)->fetch_and(~kGrantTag, std::memory_order_relaxed);
    }
  }

  // The entries by page of the range (entries()[(p - base) >> kPageShift]), for callers that keep
  // a copy beside their hot data (the pool).
  const PageEntry* entries() const noexcept { return entries_; }

  // The entry of the page holding p, or 0 when p is outside the range or in a chunk the heap has
  // not taken.
  std::uint32_t EntryAt(std::uintptr_t p) const noexcept {
    const std::uintptr_t off = p - base_;
    if ((off >> chunk_shift_) >= max_chunks_) return 0;
    return entries_[off >> kPageShift].load(std::memory_order_relaxed);
  }

  // --- the page heap's side (under its lock) ---------------------------------------------------
  // Makes the span array of a chunk ahead of AddChunk (so that a chunk, once carved, can always
  // be taken); false when the metadata arena has no memory.
  bool Prepare() noexcept;
  // Gives chunk `index` the prepared span array (no spans; its entries are all 0). Prepare()
  // first.
  void AddChunk(std::size_t index) noexcept;
  bool HasChunk(std::size_t index) const noexcept { return spans_[index] != nullptr; }
  // Entries of `pages` pages from the page holding `start`: all set to Encode(cls, delta) with
  // delta counting from `start` (slab), or only the first (large, the rest 0), or all 0 (clear).
  void SetSlab(std::uintptr_t start, std::size_t pages, unsigned cls) noexcept;
  void SetLarge(std::uintptr_t start, unsigned cls) noexcept;
  void Clear(std::uintptr_t start, std::size_t pages) noexcept;
  // The span recorded at the page holding p (first or last page of a span), or null.
  Span* SpanAt(std::uintptr_t p) const noexcept {
    const std::uintptr_t off = p - base_;
    return spans_[off >> chunk_shift_][(off >> kPageShift) & (pages_per_chunk() - 1)].load(
        std::memory_order_relaxed);
  }
  void SetSpanAt(std::uintptr_t p, Span* s) noexcept {
    const std::uintptr_t off = p - base_;
    spans_[off >> chunk_shift_][(off >> kPageShift) & (pages_per_chunk() - 1)].store(
        s, std::memory_order_relaxed);
  }
  // Bytes of metadata the arrays take (for tests and stats): the entries over the whole range
  // (address space; the kernel backs what is written) and the span arrays of taken chunks.
  std::size_t metadata_bytes() const noexcept;

 private:
  PageEntry* EntryOf(std::uintptr_t p) const noexcept {
    return &entries_[(p - base_) >> kPageShift];
  }

  const std::uintptr_t base_;
  const unsigned chunk_shift_;
  const std::size_t max_chunks_;
  MetadataArena* const metadata_;
  PageEntry* const entries_;                   // by page of the range
  std::atomic<Span*>** const spans_;           // by chunk: null until the heap takes the chunk
  std::atomic<Span*>* spare_spans_ = nullptr;  // prepared for the next chunk
  std::size_t chunks_ = 0;
};

}  // namespace pinpool::internal

#endif  // PINPOOL_HEAP_PAGE_MAP_H_
