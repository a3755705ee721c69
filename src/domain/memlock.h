// The one wording of "you hit RLIMIT_MEMLOCK", shared by every domain that pins pages and by the
// arena's check before it maps a chunk, so the user always gets the same limit, numbers and fix.
#ifndef PINPOOL_DOMAIN_MEMLOCK_H_
#define PINPOOL_DOMAIN_MEMLOCK_H_

#include <cstddef>

#include "absl/status/status.h"
#include "os/os.h"

namespace pinpool::internal {

// OK when `bytes` more can be pinned under the current RLIMIT_MEMLOCK (always OK with
// CAP_IPC_LOCK); otherwise kResourceExhausted naming the limit, what is locked, and the fix.
absl::Status CheckMemlockHeadroom(std::size_t bytes, const os::MemlockState& state);

// kResourceExhausted for a pin that the kernel refused (`what` is the call, e.g. "mlock").
absl::Status MemlockRefused(const char* what, int err, std::size_t bytes);

}  // namespace pinpool::internal

#endif  // PINPOOL_DOMAIN_MEMLOCK_H_
