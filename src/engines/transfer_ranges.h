// CheckTransferRanges: the checks every engine's one-sided transfer makes before it posts
// anything: a block, a domain number the block has, a length, the local range inside the block
// and the remote range inside what the peer granted, with no overflow. Errors name the call,
// both ranges and the peer's key, so a caller sees what to fix; nothing has been posted.
//
// Shared by the UCX and libfabric engines (src/engines/*/transfer.cc), each of which adds its
// own engine-specific checks after these. Header-only: each engine is its own library.
// Thread safety: pure function.
#ifndef PINPOOL_ENGINES_TRANSFER_RANGES_H_
#define PINPOOL_ENGINES_TRANSFER_RANGES_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "pinpool/pool.h"

namespace pinpool::internal {

// The peer's side of a transfer: how many bytes it granted, and how to name them in errors.
struct RemoteRange {
  std::uint64_t length = 0;
  const char* key_kind = "key";  // "key" (libfabric) or "address" (UCX)
  std::uint64_t key = 0;
};

// True when [offset, offset + length) lies in `size` bytes (no overflow).
inline bool RangeInside(std::uint64_t offset, std::uint64_t length, std::uint64_t size) {
  return offset <= size && length <= size - offset;
}

inline absl::Status CheckTransferRanges(const char* what, const Block& block, std::size_t offset,
                                        std::size_t length, const RemoteRange& remote,
                                        std::size_t remote_offset, std::size_t domain) {
  if (!block) return absl::InvalidArgumentError(absl::StrFormat("%s: empty Block", what));
  if (domain >= block.domain_count()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: the block's pool has no domain number %d", what, domain));
  }
  if (length == 0) return absl::InvalidArgumentError(absl::StrFormat("%s: length 0", what));
  if (!RangeInside(offset, length, block.size())) {
    return absl::OutOfRangeError(
        absl::StrFormat("%s: bytes [%d, %d) are outside the %d-byte block at %p; nothing posted",
                        what, offset, offset + length, block.size(), block.data()));
  }
  if (!RangeInside(remote_offset, length, remote.length)) {
    return absl::OutOfRangeError(absl::StrFormat(
        "%s: bytes [%d, %d) are outside the peer's %d bytes (%s %#x); nothing posted", what,
        remote_offset, remote_offset + length, remote.length, remote.key_kind, remote.key));
  }
  return absl::OkStatus();
}

}  // namespace pinpool::internal

#endif  // PINPOOL_ENGINES_TRANSFER_RANGES_H_
