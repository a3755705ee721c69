// RingView: pinpool's own mapping of an application's ring, to read completions the application
// will never read: those of a ring it closed while zero-copy sends on it were still waiting for
// their notifications (io_uring_zero_copy.h). The kernel keeps such a ring while pinpool holds a
// descriptor of it (domain/io_uring_ring_ref.h), and keeps posting its completions; this maps the
// ring's queues a second time through that descriptor, with the layout the application's liburing
// learned when it set the ring up (RingShape, taken while the application's ring was open).
//
// Owns the mapping and a descriptor of its own. Not thread-safe: its owner serializes use.
#ifndef PINPOOL_PROVIDERS_IO_URING_RING_VIEW_H_
#define PINPOOL_PROVIDERS_IO_URING_RING_VIEW_H_

#include <liburing.h>

#include <memory>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"

namespace pinpool::internal {

// The layout of a ring, read from the application's `struct io_uring` (the offsets of its
// queues' fields within their mappings), as io_uring_setup reported it.
struct RingShape {
  io_uring_params params{};
  // False for rings whose completions cannot be read this way once the application closed them:
  // IORING_SETUP_NO_MMAP (no kernel mapping), DEFER_TASKRUN (their completions wait for the
  // submitter task), NO_SQARRAY and REGISTERED_FD_ONLY (layouts liburing 2.3 does not know).
  bool mappable = false;
};
RingShape ShapeOf(const io_uring& ring);

class RingView {
 public:
  // Maps the ring `fd` names (pinpool's descriptor: this takes one of its own) with `shape`.
  // kFailedPrecondition for a shape that is not mappable; kInternal when mmap fails.
  static absl::StatusOr<std::unique_ptr<RingView>> Map(int fd, const RingShape& shape);
  ~RingView();
  RingView(const RingView&) = delete;
  RingView& operator=(const RingView&) = delete;

  // Has the kernel post what it has pending (overflowed completions, this thread's task work),
  // then calls `each` for every completion in the queue, consuming it. Never waits.
  void Reap(absl::FunctionRef<void(const io_uring_cqe&)> each);

 private:
  RingView() { ring_.ring_fd = -1; }
  io_uring ring_{};
};

}  // namespace pinpool::internal

#endif  // PINPOOL_PROVIDERS_IO_URING_RING_VIEW_H_
