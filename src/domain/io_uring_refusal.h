// Why io_uring cannot be used on this machine, in words a user can act on. One wording for the
// io_uring domain, the default long-term pin domain (built on it) and pinpool-info: from the
// errno of a failed io_uring_setup and the kernel.io_uring_disabled sysctl, or the errno of a
// refused sparse buffer table. Pure functions of their arguments, except ReadIoUringDisabled.
#ifndef PINPOOL_DOMAIN_IO_URING_REFUSAL_H_
#define PINPOOL_DOMAIN_IO_URING_REFUSAL_H_

#include <optional>
#include <string>

#include "absl/status/status.h"

namespace pinpool::internal {

struct IoUringRefusal {
  absl::StatusCode code = absl::StatusCode::kUnavailable;
  std::string cause;  // what failed and why, with this machine's values
  std::string fix;    // what to change
  // "<cause>: <fix>"
  std::string Message() const;
};

// kernel.io_uring_disabled (0: allowed, 1: CAP_SYS_ADMIN or kernel.io_uring_group only, 2: off
// for everyone), or nullopt when the kernel has no such sysctl (before 6.6).
std::optional<int> ReadIoUringDisabled();

// io_uring_setup (io_uring_queue_init) failed with `err`.
IoUringRefusal ExplainIoUringSetupFailure(int err, std::optional<int> io_uring_disabled);

// Registering a sparse fixed-buffer table of `slots` failed with `err` (not EBUSY, which is the
// caller's own business).
IoUringRefusal ExplainSparseTableFailure(int err, unsigned slots);

}  // namespace pinpool::internal

#endif  // PINPOOL_DOMAIN_IO_URING_REFUSAL_H_
