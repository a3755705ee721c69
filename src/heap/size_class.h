// Size classes of the heap, and everything fixed per class: how a class is laid out in pages,
// how many of its blocks a thread cache bin and the transfer layer hold, how many move at once.
//
// Classes: 16 B .. 128 B in steps of 16, then four per doubling (160, 192, 224, 256, 320, ...)
// up to 1 GiB. A block of class c has exactly ClassSize(c) usable bytes. Classes up to
// kMaxSlabSize are "slab" classes: a span of SlabPages(c) pages is cut into ClassSize(c) blocks
// from its start. Larger classes are multiples of the page and each block is a span of its own.
// Every block is 16-byte aligned and at least 16 bytes (the free mark needs 8).
//
// Pure functions and constexpr tables; no state.
#ifndef PINPOOL_HEAP_SIZE_CLASS_H_
#define PINPOOL_HEAP_SIZE_CLASS_H_

#include <bit>
#include <cstddef>
#include <cstdint>

namespace pinpool::internal {

inline constexpr unsigned kPageShift = 12;  // the heap's page: 4 KiB, whatever the chunk's pages
inline constexpr std::size_t kPageSize = std::size_t{1} << kPageShift;
inline constexpr std::size_t kMinBlock = 16;
inline constexpr unsigned kNumClasses = 100;  // ClassSize(99) = 1 GiB, above any block
inline constexpr std::size_t kMaxSlabSize = 14 << 10;
inline constexpr unsigned kMaxSlabObjects = 256;  // a slab's free set is a 256-bit bitmap

// The class for `size` bytes (1 .. 1 GiB): the smallest class holding `size`.
constexpr unsigned ComputeSizeClass(std::size_t size) noexcept {
  if (size <= 128) return size == 0 ? 0 : static_cast<unsigned>((size - 1) >> 4);
  const unsigned lg = static_cast<unsigned>(std::bit_width(size - 1)) - 1;  // floor(log2(size-1))
  return 8 + (lg - 7) * 4 + static_cast<unsigned>(((size - 1) >> (lg - 2)) - 4);
}

// Bytes in class `c`.
constexpr std::size_t ComputeClassSize(unsigned c) noexcept {
  if (c < 8) return std::size_t{16} * (c + 1);
  const unsigned g = (c - 8) / 4, k = (c - 8) % 4;
  return std::size_t{5 + k} << (g + 5);
}

// Pages of one slab of a slab class (1..16): the fewest that hold at least 8 blocks and waste at
// most 1/32 of the slab at its end; failing that, the most blocks such a slab can hold; failing
// that, the least wasteful share. Fewer, larger slabs would strand more free blocks in partly
// used slabs; smaller ones would send the transfer layer to the page heap more often.
constexpr unsigned ComputeSlabPages(std::size_t size) noexcept {
  unsigned tight_most = 0;  // a slab of at most 1/32 waste with the most blocks
  unsigned best = 1;
  double best_share = 1;
  for (unsigned p = 1; p <= 16; ++p) {
    const std::size_t bytes = p * kPageSize;
    if (bytes < size) continue;
    const std::size_t waste = bytes % size;
    if (waste * 32 <= bytes) {
      if (bytes / size >= 8) return p;
      if (tight_most == 0 || bytes / size > tight_most * kPageSize / size) tight_most = p;
    }
    const double share = static_cast<double>(waste) / static_cast<double>(bytes);
    if (share < best_share) {
      best_share = share;
      best = p;
    }
  }
  return tight_most != 0 ? tight_most : best;
}

struct ClassInfo {
  std::uint32_t size;          // bytes of a block
  std::uint32_t pages;         // pages of one span: a slab, or the block itself
  std::uint16_t objects;       // blocks per span (1 for non-slab classes)
  std::uint16_t batch;         // blocks moved at once between a thread cache and the transfer layer
  std::uint16_t bin_cap;       // most blocks one thread cache bin holds
  std::uint16_t transfer_cap;  // most blocks the transfer layer holds for the class
  // Divisibility by `size` for offsets below 2^32 (Lemire, Kaser and Kurz 2019): n is a multiple
  // of size exactly when n * magic <= magic - 1 in 64-bit arithmetic.
  std::uint64_t magic;
};

constexpr std::size_t Clamp(std::size_t v, std::size_t lo, std::size_t hi) noexcept {
  return v < lo ? lo : v > hi ? hi : v;
}

constexpr ClassInfo ComputeClassInfo(unsigned c) noexcept {
  ClassInfo info{};
  const std::size_t size = ComputeClassSize(c);
  info.size = static_cast<std::uint32_t>(size);
  if (size <= kMaxSlabSize) {
    info.pages = ComputeSlabPages(size);
    info.objects = static_cast<std::uint16_t>(info.pages * kPageSize / size);
  } else {
    info.pages = static_cast<std::uint32_t>(size / kPageSize);
    info.objects = 1;
  }
  // A window of outstanding blocks makes each bin a random walk, and a batch fills a bin and
  // empties it: bins as deep as 32 MiB of their class (at least 64 blocks, at most 2048: a burst
  // of a few thousand small blocks stays in the bin) keep both off the bottom and the top, and
  // the thread's byte budget bounds the total.
  info.bin_cap = static_cast<std::uint16_t>(Clamp((std::size_t{32} << 20) / size, 64, 2048));
  info.batch = static_cast<std::uint16_t>(Clamp((std::size_t{1} << 20) / size, 2, 32));
  // Deep enough for one thread freeing what another allocates to pass through it without
  // spilling back into slabs (at most 32768 blocks, 16 MiB of the class): a producer that
  // queues up to 100 batches of 4096 blocks of 64 B (xmalloc-test) overflowed 4096 blocks, and
  // its blocks went back to slab bitmaps and out again (ReturnLocked: 5.8% of its cpu-clock
  // samples; 2.0% at 32768).
  // The stack's storage is made on the class's first flush (8 bytes a block, 256 KiB at most).
  info.transfer_cap = static_cast<std::uint16_t>(
      Clamp((std::size_t{16} << 20) / size, 2 * std::size_t{info.batch}, 32768));
  info.magic = ~std::uint64_t{0} / size + 1;
  return info;
}

// What a free's fast path reads of a class, 16 bytes per class.
struct FastClass {
  std::uint64_t magic;  // ClassInfo::magic
  std::uint64_t size;
};

struct ClassTable {
  FastClass fast[kNumClasses];
  ClassInfo info[kNumClasses];
  unsigned char small[4096 / 16 + 1];  // SizeClass for sizes up to 4 KiB: index (size + 15) / 16
  constexpr ClassTable() : fast(), info(), small() {
    for (unsigned c = 0; c < kNumClasses; ++c) {
      info[c] = ComputeClassInfo(c);
      fast[c] = {info[c].magic, info[c].size};
    }
    for (std::size_t i = 0; i <= 4096 / 16; ++i) {
      small[i] = static_cast<unsigned char>(ComputeSizeClass(i == 0 ? 1 : i * 16));
    }
  }
};
// Hidden: the library reads it directly rather than through the GOT.
__attribute__((visibility("hidden"))) inline constexpr ClassTable kClasses;

constexpr unsigned SizeClass(std::size_t size) noexcept {
  if (size <= 4096) return kClasses.small[(size + 15) >> 4];
  return ComputeSizeClass(size);
}
constexpr std::size_t ClassSize(unsigned c) noexcept { return kClasses.fast[c].size; }
constexpr const ClassInfo& Class(unsigned c) noexcept { return kClasses.info[c]; }
constexpr bool IsSlabClass(unsigned c) noexcept { return ClassSize(c) <= kMaxSlabSize; }
// True when `offset` (< 2^32) is a multiple of class c's size: a block boundary in its span.
constexpr bool IsBlockOffset(unsigned c, std::uint64_t offset) noexcept {
  return offset * kClasses.fast[c].magic <= kClasses.fast[c].magic - 1;
}

// The class a block of `size` bytes aligned to `alignment` (a power of two, at most a page) comes
// from: blocks of a slab class start at multiples of its size from a page boundary, so the class
// size must be a multiple of the alignment; non-slab blocks are whole pages.
constexpr unsigned AlignedSizeClass(std::size_t size, std::size_t alignment) noexcept {
  unsigned c = SizeClass(size < alignment ? alignment : size);
  while (IsSlabClass(c) && ClassSize(c) % alignment != 0) ++c;
  return c;
}

inline constexpr unsigned kFirstLargeClass = ComputeSizeClass(kMaxSlabSize + 1);

static_assert(ComputeClassSize(kNumClasses - 1) == std::size_t{1} << 30);
static_assert(ClassSize(SizeClass(129)) == 160 && ClassSize(SizeClass(257)) == 320);
static_assert(ClassSize(kFirstLargeClass) == 16 << 10);
static_assert(ComputeClassSize(kFirstLargeClass - 1) == kMaxSlabSize);
constexpr bool SlabsFitTheirBitmaps() {
  for (unsigned c = 0; c < kFirstLargeClass; ++c) {
    if (Class(c).objects == 0 || Class(c).objects > kMaxSlabObjects) return false;
  }
  return true;
}
static_assert(SlabsFitTheirBitmaps());

}  // namespace pinpool::internal

#endif  // PINPOOL_HEAP_SIZE_CLASS_H_
