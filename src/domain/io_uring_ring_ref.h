// RingRef: pinpool's own reference to an application's io_uring ring. It holds a duplicate of
// the ring's descriptor, so that pinpool's calls reach that ring and no other even after the
// application closed its descriptor and the number went to another file (another ring, say),
// and the ring's identity (device and inode of its file: every ring has an inode of its own, on
// Linux 6.1 as on 6.18), so that it can tell when the application has closed the ring.
//
// While a RingRef lives, the kernel keeps the ring (its tables, its completions) alive, whatever
// the application did with its own descriptor; the ring goes when the last reference does.
// Owns the duplicate. Not thread-safe: its owner serializes use.
#ifndef PINPOOL_DOMAIN_IO_URING_RING_REF_H_
#define PINPOOL_DOMAIN_IO_URING_RING_REF_H_

#include <sys/types.h>

#include "absl/status/statusor.h"
#include "os/fd_passing.h"

namespace pinpool::internal {

class RingRef {
 public:
  RingRef() = default;
  // A reference to the ring the application's descriptor `app_fd` names. kInvalidArgument when
  // it is no descriptor; kResourceExhausted when none is left to duplicate it.
  static absl::StatusOr<RingRef> Take(int app_fd);

  // pinpool's descriptor of the ring.
  int fd() const noexcept { return fd_.get(); }
  // The application's descriptor, as it was when the reference was taken.
  int app_fd() const noexcept { return app_fd_; }
  // True when the application's descriptor no longer names this ring: closed, or reused for
  // another file. One fstat.
  bool ClosedByApplication() const;
  // True when `fd` names this ring.
  bool Names(int fd) const;
  explicit operator bool() const noexcept { return fd_.get() >= 0; }

 private:
  os::UniqueFd fd_;
  int app_fd_ = -1;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
};

}  // namespace pinpool::internal

#endif  // PINPOOL_DOMAIN_IO_URING_RING_REF_H_
