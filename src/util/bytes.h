// Byte counts for people: "8 MiB", "1.5 GiB", "4096 B". Used in every error message that names
// a limit, so that the numbers read the same everywhere.
#ifndef PINPOOL_UTIL_BYTES_H_
#define PINPOOL_UTIL_BYTES_H_

#include <cstddef>
#include <string>

namespace pinpool::internal {

std::string FormatBytes(std::size_t bytes);

constexpr bool IsPowerOfTwo(std::size_t x) noexcept { return x != 0 && (x & (x - 1)) == 0; }

}  // namespace pinpool::internal

#endif  // PINPOOL_UTIL_BYTES_H_
