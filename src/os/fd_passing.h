// Inside the os room: messages with file descriptors over a connected Unix stream socket
// (SCM_RIGHTS), for sharing a pool's chunks with other processes and handing a pool over
// (wire/share_message.h says what the bytes mean).
//
// A message is an 8-byte frame header (payload length, number of descriptors, both little-endian
// u32) carrying the descriptors as ancillary data, then the payload. The receiver bounds both
// before reading anything more, and owns every descriptor it received from the moment recvmsg
// returns: on any error they are closed, never leaked.
// Thread-safe: no state (one sender and one receiver per socket at a time, as for any stream).
#ifndef PINPOOL_OS_FD_PASSING_H_
#define PINPOOL_OS_FD_PASSING_H_

#include <cstddef>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "wire/share_message.h"

namespace pinpool::internal::os {

// The most descriptors one message carries (below the kernel's SCM_MAX_FD, 253).
inline constexpr std::size_t kMaxFdsPerMessage = kMaxChunksPerMessage;

// An open descriptor, closed when it goes.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }
  int get() const noexcept { return fd_; }
  int release() noexcept {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset() noexcept;

 private:
  int fd_ = -1;
};

// Sends `payload` with `fds` (at most kMaxFdsPerMessage; the caller keeps its own copies).
// Interrupted calls are made again, and a non-blocking socket is waited for as a blocking one
// would be. Errors: kInvalidArgument (too many descriptors, not a socket), kUnavailable (the peer
// is gone: EPIPE, ECONNRESET), kResourceExhausted (ENOBUFS, ENOMEM), kInternal.
absl::Status SendMessage(int socket, std::span<const std::byte> payload, std::span<const int> fds);

struct Message {
  std::vector<std::byte> payload;
  std::vector<UniqueFd> fds;  // close-on-exec
};
// Receives one message of at most `max_payload` bytes (waiting, as SendMessage, through EINTR and
// a non-blocking socket). Errors: kUnavailable (the peer closed the socket before a whole
// message), kResourceExhausted (ENOMEM, or descriptors cut short by the kernel (MSG_CTRUNC) at
// this process's descriptor limit), kInvalidArgument (a frame larger than `max_payload`, more
// descriptors than kMaxFdsPerMessage or than the frame says), kInternal. No descriptor outlives
// an error.
absl::StatusOr<Message> ReceiveMessage(int socket, std::size_t max_payload);

}  // namespace pinpool::internal::os

#endif  // PINPOOL_OS_FD_PASSING_H_
