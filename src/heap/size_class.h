// Size classes of the heap's front cache: the same classes jemalloc uses for 16 B .. 1 MiB
// (16-byte steps to 128 B, then four per doubling), so a refill asks jemalloc for exactly a
// class and a block's usable size is always >= its class. Pure functions, constexpr.
#ifndef PINPOOL_HEAP_SIZE_CLASS_H_
#define PINPOOL_HEAP_SIZE_CLASS_H_

#include <bit>
#include <cstddef>

namespace pinpool::internal {

inline constexpr std::size_t kMinCachedSize = 16;
inline constexpr std::size_t kMaxCachedSize = 1024 * 1024;
inline constexpr unsigned kNumClasses = 60;  // SizeClass(kMaxCachedSize) + 1

// The class index for `size` (1 .. kMaxCachedSize): the smallest class holding `size` bytes.
constexpr unsigned ComputeSizeClass(std::size_t size) noexcept {
  if (size <= 128) return size == 0 ? 0 : static_cast<unsigned>((size - 1) >> 4);
  const unsigned lg = static_cast<unsigned>(std::bit_width(size - 1)) - 1;  // floor(log2(size-1))
  return 8 + (lg - 7) * 4 + static_cast<unsigned>(((size - 1) >> (lg - 2)) - 4);
}

// Sizes up to 4 KiB, the common ones, by table: index (size + 15) / 16.
inline constexpr std::size_t kTableMax = 4096;
struct SizeClassTable {
  unsigned char cls[kTableMax / 16 + 1];
  constexpr SizeClassTable() : cls() {
    for (std::size_t i = 0; i <= kTableMax / 16; ++i) {
      cls[i] = static_cast<unsigned char>(ComputeSizeClass(i == 0 ? 1 : i * 16));
    }
  }
};
inline constexpr SizeClassTable kSizeClassTable;

constexpr unsigned SizeClass(std::size_t size) noexcept {
  if (size <= kTableMax) return kSizeClassTable.cls[(size + 15) >> 4];
  return ComputeSizeClass(size);
}

// Bytes in class `c`.
constexpr std::size_t ClassSize(unsigned c) noexcept {
  if (c < 8) return std::size_t{16} * (c + 1);
  const unsigned g = (c - 8) / 4, k = (c - 8) % 4;
  return std::size_t{5 + k} << (g + 5);
}

// The largest class whose size is <= `usable` (for a block whose usable size is known).
constexpr unsigned ClassAtMost(std::size_t usable) noexcept {
  const unsigned c = SizeClass(usable);
  return ClassSize(c) == usable ? c : c - 1;
}

static_assert(SizeClass(kMaxCachedSize) + 1 == kNumClasses);
static_assert(ClassSize(SizeClass(129)) == 160 && ClassSize(SizeClass(257)) == 320);
static_assert(ClassSize(kNumClasses - 1) == kMaxCachedSize);

}  // namespace pinpool::internal

#endif  // PINPOOL_HEAP_SIZE_CLASS_H_
