// The write lease on a chunk's file (lease.h has the contract and the kernel facts behind it).
#include "os/lease.h"

#include <fcntl.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"
#include "os/os.h"

namespace pinpool::internal::os {

absl::Status TakeWriteLease(int fd, const char* what) {
  const int injected = InjectedFault(Call::kLeaseFile, 0);
  if (injected != 0 || ::fcntl(fd, F_SETLEASE, F_WRLCK) != 0) {
    const int err = injected != 0 ? injected : errno;
    if (err == EAGAIN) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "cannot lease %s: another process has it open (pinpool must be its only opener to "
          "learn when someone wants its pages back)",
          what));
    }
    if (err == EACCES || err == EPERM) {
      return absl::PermissionDeniedError(
          absl::StrFormat("cannot lease %s: fcntl(F_SETLEASE): %s", what, std::strerror(err)));
    }
    return absl::FailedPreconditionError(absl::StrFormat(
        "cannot lease %s: fcntl(F_SETLEASE): %s (are leases enabled? /proc/sys/fs/leases-enable)",
        what, std::strerror(err)));
  }
  // Taking the lease made this process the file's owner for signals: a break would send SIGIO,
  // which ends a process that does not handle it. No owner: no signal; LeaseHeld polls instead.
  if (::fcntl(fd, F_SETOWN, 0) != 0) {
    const int err = errno;
    ::fcntl(fd, F_SETLEASE, F_UNLCK);
    return absl::InternalError(
        absl::StrFormat("cannot lease %s: fcntl(F_SETOWN, 0): %s", what, std::strerror(err)));
  }
  return absl::OkStatus();
}

bool LeaseHeld(int fd) noexcept { return ::fcntl(fd, F_GETLEASE) == F_WRLCK; }

void ReleaseLease(int fd) noexcept { ::fcntl(fd, F_SETLEASE, F_UNLCK); }

}  // namespace pinpool::internal::os
