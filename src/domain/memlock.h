// The one wording of "you hit RLIMIT_MEMLOCK", shared by every domain that pins or locks pages and
// by the arena's check before it maps a chunk, so the user always gets the same limit, numbers
// and fix.
//
// The kernel checks two counters against the limit, each on its own: long-term pins (RDMA
// registrations, io_uring buffers) grow VmPin, mlock grows VmLck. io_uring additionally counts
// its pins per user, across all of the user's processes, with its rings' own pages (8 KiB for a
// one-entry ring on Linux 6.18), so it may refuse a pin that this process's VmPin would allow.
#ifndef PINPOOL_DOMAIN_MEMLOCK_H_
#define PINPOOL_DOMAIN_MEMLOCK_H_

#include <cstddef>

#include "absl/status/status.h"
#include "os/os.h"

namespace pinpool::internal {

// OK when `pin` more bytes can be long-term pinned (VmPin) and `lock` more mlocked (VmLck) under
// the current RLIMIT_MEMLOCK (always OK with CAP_IPC_LOCK or no limit); otherwise
// kResourceExhausted naming the limit, the counter that would exceed it, and the fix.
absl::Status CheckMemlockHeadroom(std::size_t pin, std::size_t lock, const os::MemlockState& state);

// Who counts a refused pin against the limit, for the message.
enum class MemlockAccounting {
  kProcess,  // this process's VmPin or VmLck (mlock, ibv_reg_mr)
  kUser,     // the user's pinned memory across all its processes (io_uring)
};

// kResourceExhausted for a pin or lock that the kernel refused (`what` is the call, e.g.
// "mlock").
absl::Status MemlockRefused(const char* what, int err, std::size_t bytes,
                            MemlockAccounting accounting = MemlockAccounting::kProcess);

}  // namespace pinpool::internal

#endif  // PINPOOL_DOMAIN_MEMLOCK_H_
