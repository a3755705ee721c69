// Little-endian integers in byte buffers, whatever the host's byte order: the one encoding of
// pinpool's wire formats (the sharing frame and description, the compact descriptors).
// Thread-safe: pure functions.
#ifndef PINPOOL_UTIL_LITTLE_ENDIAN_H_
#define PINPOOL_UTIL_LITTLE_ENDIAN_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace pinpool::internal {

// Writes the low `bytes` (1..8) bytes of `v` at `at`, least significant first.
inline void StoreLittleEndian(std::byte* at, std::uint64_t v, int bytes) noexcept {
  for (int i = 0; i < bytes; ++i) at[i] = static_cast<std::byte>(v >> (8 * i));
}
// Appends them to `out`.
inline void AppendLittleEndian(std::vector<std::byte>& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<std::byte>(v >> (8 * i)));
}
// Reads `bytes` (1..8) bytes at `at` as an unsigned integer; the caller checked they are there.
inline std::uint64_t LoadLittleEndian(const std::byte* at, int bytes) noexcept {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v |= std::uint64_t{std::to_integer<std::uint8_t>(at[i])} << (8 * i);
  return v;
}

}  // namespace pinpool::internal

#endif  // PINPOOL_UTIL_LITTLE_ENDIAN_H_
