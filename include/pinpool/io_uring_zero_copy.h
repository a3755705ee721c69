// IoUringZeroCopy: zero-copy sends of pool blocks (IORING_OP_SEND_ZC from the block's fixed
// buffer) that never let a block be reused while the kernel may still read it.
//
// A zero-copy send completes twice. The first completion says how many bytes were sent; the
// kernel may still be reading the block then (on TCP until the data is acknowledged, on loopback
// until the receiver has read it, or sooner). The second, the notification (IORING_CQE_F_NOTIF),
// says it no longer does, and only it says so. A block freed after the first completion and handed
// to another owner is still on its way out: the bytes on the wire change under the sender. So
// pinpool holds it, as it holds a block a remote grant can reach (pinpool/grant_lock.h): from
// PrepareSend (or Track) until the notification, freeing the block does not give it back to the
// heap. The free is deferred, and the block returns when the notification arrives. Counted:
// PoolStats::grants.held_* while held, GrantStats::figures "io_uring_zc_deferred_frees", the
// notification latency histogram "io_uring_zc_notification_seconds" (docs/metrics.md).
//
//   auto domain = pinpool::IoUringDomain::Create(256).value();     // or Wrap, AddRing: any ring
//   auto pool = pinpool::Pool::Create({.domains = {domain}}).value();
//   auto zc = pinpool::IoUringZeroCopy::Create(*pool).value();      // once per pool
//   pinpool::Block b = pool->Allocate(64 * 1024);
//   io_uring_sqe* sqe = io_uring_get_sqe(ring);
//   zc->PrepareSend(ring, sqe, socket, b, 0, b.size(), 0, my_user_data);
//   io_uring_submit(ring);
//   ...  // every CQE of the ring goes through zc->OnCompletion(ring, *cqe) first
//   pool->Deallocate(b);  // any time: held until the notification if it has not come yet
//
// Completions: pass every CQE reaped from a ring pinpool sends on to OnCompletion (it knows the
// sends by ring and user_data, which must be unique among this object's sends in flight on that
// ring). An application that never reports completions gets held memory, never early reuse.
//
// Rings: any ring the pool's IoUringDomain serves (its own, or one that joined: AddRing), where a
// block's BufferIndex is valid. A ring's teardown with sends in flight:
//  - Drain(ring) first (the application has stopped using the ring): pinpool reaps the ring's
//    completions until its sends have all been notified;
//  - or close the ring (io_uring_queue_exit) with sends in flight: pinpool keeps its own
//    reference to every ring it sent on, so the kernel keeps the ring, and posts its
//    notifications, until pinpool has read them from its own mapping of the ring's completion
//    queue: Poll() (and the destructor) do that, and release the blocks as their notifications
//    arrive. Not for rings created with IORING_SETUP_NO_MMAP or IORING_SETUP_DEFER_TASKRUN, whose
//    completions pinpool cannot read once the application has closed them.
// In no case is a block reused before its notification. Sends whose notification never comes
// before the destructor gives up (IoUringZeroCopyOptions::teardown_wait) are abandoned: their
// blocks stay held, never reused, until the pool is destroyed (GrantStats::figures
// "io_uring_zc_abandoned").
//
// Lifetime: the pool must outlive this object (the pool refuses to be destroyed first, as with
// any grant holder). Thread safety: every method may be called from any thread; the state lives
// under the pool's grant lock (pinpool/grant_lock.h), with the grant mechanisms' own. None of it
// is on the allocation fast path: a free of a held block goes to the library through the grant
// tag the pool already has.
#ifndef PINPOOL_IO_URING_ZERO_COPY_H_
#define PINPOOL_IO_URING_ZERO_COPY_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pinpool/abi.h"
#include "pinpool/block.h"
#include "pinpool/export.h"

struct io_uring;
struct io_uring_sqe;
struct io_uring_cqe;

namespace pinpool {
PINPOOL_ABI_BEGIN

class Pool;

struct IoUringZeroCopyOptions {
  // The pool's IoUringDomain to send from: its position in PoolOptions::domains; SIZE_MAX for
  // the first io_uring domain.
  std::size_t domain = SIZE_MAX;
  // How long the destructor waits for the notifications of sends on rings the application has
  // closed (it reads them from pinpool's own reference to the ring) before it abandons them.
  std::chrono::milliseconds teardown_wait{5000};
};

// Names of what IoUringZeroCopy counts and times on the pool's grant figures
// (GrantStats::figures and ::histograms; docs/metrics.md).
struct IoUringZeroCopyFigures {
  static constexpr std::string_view kSends = "io_uring_zc_sends";  // sends tracked, ever
  // Notifications seen: the kernel let go of the block.
  static constexpr std::string_view kNotifications = "io_uring_zc_notifications";
  // Frees of a block with a send in flight: held until the notification.
  static constexpr std::string_view kDeferredFrees = "io_uring_zc_deferred_frees";
  // Sends given up on at destruction: their blocks stay held until the pool is destroyed.
  static constexpr std::string_view kAbandoned = "io_uring_zc_abandoned";
  // From PrepareSend/Track to the notification, per send.
  static constexpr std::string_view kNotificationSeconds = "io_uring_zc_notification_seconds";
};

// What a completion was, for the send it belongs to.
enum class ZeroCopyCompletion : std::uint8_t {
  kNotTracked,  // not a completion of a send of this object: the application's own
  kSent,        // the send's result (cqe.res: bytes sent, or -errno); its notification follows
  kDone,        // the send's result, and no notification follows (it failed before the kernel
                // took the block): the hold has ended
  kNotified,    // the notification: the kernel no longer reads the block; the hold has ended
};

class PINPOOL_EXPORT IoUringZeroCopy {
 public:
  // For sends of `pool`'s blocks from its IoUringDomain. Errors: kInvalidArgument (no
  // io_uring domain at options.domain, or none at all).
  static absl::StatusOr<std::unique_ptr<IoUringZeroCopy>> Create(
      Pool& pool, IoUringZeroCopyOptions options = {});
  // Reaps what it can of rings the application closed (up to options.teardown_wait), abandons
  // the sends still in flight (their blocks stay held until the pool is destroyed), and stops
  // using the pool.
  ~IoUringZeroCopy();
  IoUringZeroCopy(const IoUringZeroCopy&) = delete;
  IoUringZeroCopy& operator=(const IoUringZeroCopy&) = delete;

  // Prepares `sqe` (from io_uring_get_sqe(ring)) as a send of `length` bytes of `block` from
  // `offset`, on socket `sockfd` with `msg_flags` (MSG_WAITALL: the kernel completes a stream
  // send only when all of it is sent), from the block's fixed buffer, with `user_data`; the block
  // is held from now until the send's notification. Errors, with `sqe` untouched and nothing
  // held: kFailedPrecondition (the block was freed; `ring` is not served by the pool's domain),
  // kInvalidArgument (not a block of the pool; the range is outside it or empty),
  // kAlreadyExists (a send with that user_data is in flight on `ring`).
  absl::Status PrepareSend(io_uring* ring, io_uring_sqe* sqe, int sockfd, const Block& block,
                           std::size_t offset, std::size_t length, int msg_flags,
                           std::uint64_t user_data);
  // For a zero-copy send of `block` the application prepares itself (IORING_OP_SEND_ZC or
  // SENDMSG_ZC, with `user_data`) on `ring`: holds the block until that send's notification.
  // Call it before submitting. The same errors as PrepareSend.
  absl::Status Track(io_uring* ring, const Block& block, std::uint64_t user_data);
  // A tracked send that was never submitted (io_uring_submit failed, the SQE was dropped): the
  // hold ends. No-op for an unknown send.
  void Cancel(io_uring* ring, std::uint64_t user_data);

  // Every CQE reaped from `ring` (ring must be the one the send was submitted on).
  ZeroCopyCompletion OnCompletion(io_uring* ring, const io_uring_cqe& cqe);

  // For a ring the application has stopped submitting on and reaping (before it closes it):
  // reaps its completions until every send of this object on it has been notified, or `timeout`
  // passed. Completions of other requests are consumed and dropped. OK, or kDeadlineExceeded
  // naming the sends still in flight (they stay held; Drain again, or close the ring and let
  // Poll finish).
  absl::Status Drain(io_uring* ring, std::chrono::milliseconds timeout);
  // Reads the notifications of rings the application has closed, from pinpool's own reference
  // to them, releasing their blocks; lets go of such a ring when its last send is notified.
  // Returns the sends still in flight on closed rings. Cheap when there are none (one fstat per
  // ring sent on); call it now and then, from a housekeeping tick.
  std::size_t Poll();

  // Sends tracked and not yet notified, on every ring.
  std::size_t in_flight() const;

 private:
  struct PINPOOL_NO_EXPORT State;
  PINPOOL_NO_EXPORT explicit IoUringZeroCopy(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

PINPOOL_ABI_END
}  // namespace pinpool

#endif  // PINPOOL_IO_URING_ZERO_COPY_H_
