// RingView (see ring_view.h).
#include "providers/io_uring/ring_view.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"

namespace pinpool::internal {
namespace {

// Setup flags liburing 2.3's headers predate (Linux 6.1 to 6.6).
constexpr unsigned kDeferTaskrun = 1U << 13;
constexpr unsigned kNoMmap = 1U << 14;
constexpr unsigned kRegisteredFdOnly = 1U << 15;
constexpr unsigned kNoSqArray = 1U << 16;

std::uint32_t Offset(const void* field, const void* mapping) {
  return field == nullptr ? 0
                          : static_cast<std::uint32_t>(static_cast<const char*>(field) -
                                                       static_cast<const char*>(mapping));
}

}  // namespace

RingShape ShapeOf(const io_uring& r) {
  RingShape shape;
  io_uring_params& p = shape.params;
  p.sq_entries = r.sq.ring_entries;
  p.cq_entries = r.cq.ring_entries;
  p.flags = r.flags;
  p.features = r.features;
  p.sq_off.head = Offset(r.sq.khead, r.sq.ring_ptr);
  p.sq_off.tail = Offset(r.sq.ktail, r.sq.ring_ptr);
  p.sq_off.ring_mask = Offset(r.sq.kring_mask, r.sq.ring_ptr);
  p.sq_off.ring_entries = Offset(r.sq.kring_entries, r.sq.ring_ptr);
  p.sq_off.flags = Offset(r.sq.kflags, r.sq.ring_ptr);
  p.sq_off.dropped = Offset(r.sq.kdropped, r.sq.ring_ptr);
  p.sq_off.array = Offset(r.sq.array, r.sq.ring_ptr);
  p.cq_off.head = Offset(r.cq.khead, r.cq.ring_ptr);
  p.cq_off.tail = Offset(r.cq.ktail, r.cq.ring_ptr);
  p.cq_off.ring_mask = Offset(r.cq.kring_mask, r.cq.ring_ptr);
  p.cq_off.ring_entries = Offset(r.cq.kring_entries, r.cq.ring_ptr);
  p.cq_off.overflow = Offset(r.cq.koverflow, r.cq.ring_ptr);
  p.cq_off.cqes = Offset(r.cq.cqes, r.cq.ring_ptr);
  p.cq_off.flags = Offset(r.cq.kflags, r.cq.ring_ptr);
  shape.mappable = r.sq.ring_ptr != nullptr && r.cq.ring_ptr != nullptr &&
                   (r.flags & (kDeferTaskrun | kNoMmap | kRegisteredFdOnly | kNoSqArray)) == 0;
  return shape;
}

absl::StatusOr<std::unique_ptr<RingView>> RingView::Map(int fd, const RingShape& shape) {
  if (!shape.mappable) {
    return absl::FailedPreconditionError(
        "the ring's completions cannot be read once the application closed it (set up with "
        "NO_MMAP, DEFER_TASKRUN, NO_SQARRAY or REGISTERED_FD_ONLY)");
  }
  const int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (own < 0) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("duplicating a ring descriptor: %s", std::strerror(errno)));
  }
  std::unique_ptr<RingView> view(new RingView);
  io_uring_params params = shape.params;
  if (const int ret = io_uring_queue_mmap(own, &params, &view->ring_); ret < 0) {
    close(own);
    view->ring_.ring_fd = -1;
    return absl::InternalError(
        absl::StrFormat("mapping a closed ring's queues: %s", std::strerror(-ret)));
  }
  return view;
}

RingView::~RingView() {
  if (ring_.ring_fd >= 0) io_uring_queue_exit(&ring_);  // unmaps, and closes its descriptor
}

void RingView::Reap(absl::FunctionRef<void(const io_uring_cqe&)> each) {
  io_uring_get_events(&ring_);
  io_uring_cqe* cqe = nullptr;
  while (io_uring_peek_cqe(&ring_, &cqe) == 0 && cqe != nullptr) {
    each(*cqe);
    io_uring_cqe_seen(&ring_, cqe);
  }
}

}  // namespace pinpool::internal
