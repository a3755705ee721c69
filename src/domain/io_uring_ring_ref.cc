// RingRef (see io_uring_ring_ref.h).
#include "domain/io_uring_ring_ref.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"

namespace pinpool::internal {

absl::StatusOr<RingRef> RingRef::Take(int app_fd) {
  struct stat st;
  if (app_fd < 0 || fstat(app_fd, &st) != 0) {
    return absl::InvalidArgumentError(absl::StrFormat("ring descriptor %d: %s", app_fd,
                                                      std::strerror(app_fd < 0 ? EBADF : errno)));
  }
  const int fd = fcntl(app_fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "duplicating ring descriptor %d: %s: raise the descriptor limit (`ulimit -n`)", app_fd,
        std::strerror(errno)));
  }
  RingRef ref;
  ref.fd_ = os::UniqueFd(fd);
  ref.app_fd_ = app_fd;
  ref.dev_ = st.st_dev;
  ref.ino_ = st.st_ino;
  return ref;
}

bool RingRef::Names(int fd) const {
  struct stat st;
  return fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_;
}

bool RingRef::ClosedByApplication() const { return !Names(app_fd_); }

}  // namespace pinpool::internal
