// Whether a ring's pins are charged to this process. io_uring charges a registration to the
// process (VmPin) and the user (RLIMIT_MEMLOCK) that created the ring, not to the one that
// registers: a ring inherited across fork, or taken from another process with pidfd_getfd,
// charges that process for pages of this one. Cloning into such a ring the kernel refuses
// (EINVAL, since Linux 6.13 and the 6.12 stable kernels); registering into it, it accepts, so the
// io_uring domain asks first, where it registers per ring (io_uring_domain.cc).
// Thread-safe (each call maps its own probe pages).
#ifndef PINPOOL_DOMAIN_IO_URING_ACCOUNTING_H_
#define PINPOOL_DOMAIN_IO_URING_ACCOUNTING_H_

#include <cstdint>
#include <optional>

#include "absl/status/status.h"

namespace pinpool::internal {

// Registers a few probe pages into the ring `fd` and watches this process's VmPin: OK when it
// grows by exactly their size (a try disturbed by another thread's pins or unpins is repeated,
// with another size, up to three times); kFailedPrecondition, naming the likely cause, when it
// never does. `slot`: an empty slot of the ring's table that the caller may use, or nullopt when
// the ring has no table (the probe registers a table of one and unregisters it). The probe pages
// are unregistered before it returns. Other errors: what the registration returned.
absl::Status CheckAccountedHere(int fd, std::optional<std::uint32_t> slot);

}  // namespace pinpool::internal

#endif  // PINPOOL_DOMAIN_IO_URING_ACCOUNTING_H_
