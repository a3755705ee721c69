// Messages with descriptors over a Unix stream socket (fd_passing.h has the contract).
#include "os/fd_passing.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "os/os.h"
#include "wire/bytes.h"

namespace pinpool::internal::os {
namespace {

constexpr std::size_t kFrameBytes = 8;

absl::Status SocketError(const char* call, int err) {
  const std::string msg = absl::StrFormat("%s on the sharing socket: %s", call, std::strerror(err));
  if (err == EPIPE || err == ECONNRESET) return absl::UnavailableError(msg + " (the peer is gone)");
  if (err == ENOTSOCK || err == EBADF || err == EINVAL) return absl::InvalidArgumentError(msg);
  if (err == ENOBUFS || err == ENOMEM) return absl::ResourceExhaustedError(msg);
  return absl::InternalError(msg);
}

// Whether a call that returned `n` should be made again: interrupted (EINTR), or a non-blocking
// socket not ready (EAGAIN: the application's socket may be non-blocking; wait until it is, as a
// blocking one would have).
bool Again(ssize_t n, int socket, short events) {
  if (n >= 0) return false;
  if (errno == EINTR) return true;
  if (errno != EAGAIN && errno != EWOULDBLOCK) return false;
  pollfd p{socket, events, 0};
  while (::poll(&p, 1, -1) < 0 && errno == EINTR) {
  }
  return true;
}

// A fault point's errno as the call's result: -1 with errno set, or the call itself.
template <typename F>
ssize_t Faulting(Call call, std::size_t length, F real) {
  if (const int injected = InjectedFault(call, length); injected != 0) {
    errno = injected;
    return -1;
  }
  return real();
}

// Sends or receives exactly `length` bytes (after the first call's ancillary data).
absl::Status SendAll(int socket, const std::byte* data, std::size_t length) {
  while (length != 0) {
    const ssize_t n = Faulting(Call::kSendMessage, length,
                               [&] { return ::send(socket, data, length, MSG_NOSIGNAL); });
    if (Again(n, socket, POLLOUT)) continue;
    if (n < 0) return SocketError("send", errno);
    data += n;
    length -= static_cast<std::size_t>(n);
  }
  return absl::OkStatus();
}
absl::Status ReceiveAll(int socket, std::byte* data, std::size_t length) {
  while (length != 0) {
    const ssize_t n =
        Faulting(Call::kReceiveMessage, length, [&] { return ::recv(socket, data, length, 0); });
    if (Again(n, socket, POLLIN)) continue;
    if (n < 0) return SocketError("recv", errno);
    if (n == 0) return absl::UnavailableError("the peer closed the sharing socket mid-message");
    data += n;
    length -= static_cast<std::size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = o.release();
  }
  return *this;
}

void UniqueFd::reset() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

absl::Status SendMessage(int socket, std::span<const std::byte> payload, std::span<const int> fds) {
  if (fds.size() > kMaxFdsPerMessage || payload.size() > UINT32_MAX) {
    return absl::InvalidArgumentError(
        absl::StrFormat("a sharing message of %d bytes with %d descriptors: at most %d descriptors",
                        payload.size(), fds.size(), kMaxFdsPerMessage));
  }
  std::vector<std::byte> frame;
  ByteWriter w(frame);
  w.Put(payload.size(), 4);
  w.Put(fds.size(), 4);
  iovec iov{frame.data(), kFrameBytes};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)] = {};
  if (!fds.empty()) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  ssize_t n;
  do {
    n = Faulting(Call::kSendMessage, payload.size(),
                 [&] { return ::sendmsg(socket, &msg, MSG_NOSIGNAL); });
  } while (Again(n, socket, POLLOUT));
  if (n < 0) return SocketError("sendmsg", errno);
  // The descriptors went with the first byte; the rest of the frame and the payload follow.
  if (absl::Status s = SendAll(socket, frame.data() + n, kFrameBytes - static_cast<std::size_t>(n));
      !s.ok()) {
    return s;
  }
  return SendAll(socket, payload.data(), payload.size());
}

absl::StatusOr<Message> ReceiveMessage(int socket, std::size_t max_payload) {
  Message m;
  std::byte frame[kFrameBytes];
  iovec iov{frame, kFrameBytes};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = Faulting(Call::kReceiveMessage, max_payload,
                 [&] { return ::recvmsg(socket, &msg, MSG_CMSG_CLOEXEC); });
  } while (Again(n, socket, POLLIN));
  if (n < 0) return SocketError("recvmsg", errno);
  // Take ownership of whatever arrived before looking at anything else.
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      m.fds.emplace_back(fd);
    }
  }
  if (n == 0) return absl::UnavailableError("the peer closed the sharing socket");
  if ((msg.msg_flags & MSG_CTRUNC) != 0) {
    // Fewer than the buffer holds: the kernel stopped at this process's descriptor limit.
    if (m.fds.size() < kMaxFdsPerMessage) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "descriptors of a sharing message were cut short (MSG_CTRUNC) after %d: this process is "
          "at its descriptor limit (raise it: ulimit -n)",
          m.fds.size()));
    }
    return absl::InvalidArgumentError(absl::StrFormat(
        "a sharing message carried more than %d descriptors (MSG_CTRUNC)", kMaxFdsPerMessage));
  }
  if (absl::Status s = ReceiveAll(socket, frame + n, kFrameBytes - static_cast<std::size_t>(n));
      !s.ok()) {
    return s;
  }
  ByteReader r(std::span<const std::byte>(frame, kFrameBytes));
  const std::uint64_t length = r.Get(4);
  const std::uint64_t count = r.Get(4);
  if (length > max_payload || count != m.fds.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "not a pinpool sharing message: a frame of %d bytes with %d descriptors announced, %d "
        "arrived (at most %d bytes accepted)",
        length, count, m.fds.size(), max_payload));
  }
  m.payload.resize(length);
  if (absl::Status s = ReceiveAll(socket, m.payload.data(), length); !s.ok()) return s;
  return m;
}

}  // namespace pinpool::internal::os
