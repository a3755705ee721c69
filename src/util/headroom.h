// What may still be locked or pinned under RLIMIT_MEMLOCK: the one such computation in pinpool,
// for the os room's live state (os::MemlockState) and for reports made from a PoolStats.
// Thread-safe: a pure function.
#ifndef PINPOOL_UTIL_HEADROOM_H_
#define PINPOOL_UTIL_HEADROOM_H_

#include <cstddef>
#include <cstdint>
#include <optional>

namespace pinpool::internal {

// The limit minus `used` (VmLck or VmPin: the kernel checks each counter against the limit on
// its own), 0 when over it; nullopt when the limit does not apply (`exempt`: CAP_IPC_LOCK, or
// a limit of SIZE_MAX: unlimited).
inline std::optional<std::size_t> MemlockHeadroom(std::size_t limit, bool exempt,
                                                  std::size_t used) noexcept {
  if (exempt || limit == SIZE_MAX) return std::nullopt;
  return used >= limit ? 0 : limit - used;
}

}  // namespace pinpool::internal

#endif  // PINPOOL_UTIL_HEADROOM_H_
