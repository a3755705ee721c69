// ControlChannel: the TCP connection two example programs use to exchange what RDMA providers
// cannot exchange for themselves before they are connected (a UCX worker address, a libfabric
// endpoint name, keys and addresses of pool blocks) and short "go" / "done" messages. Not part of
// the library: copy and adapt it, or use your application's own control plane.
//
// Messages are length-prefixed byte strings. A side that must keep its RDMA provider progressing
// while it waits (on the host, UCX and libfabric's tcp provider only move data when the TARGET
// calls into them) passes a `progress` function, called between short polls of the socket.
//
// Thread safety: none; one thread uses a channel. Errors: a std::string describing the failure
// (empty on success), since the examples print and exit on any of them.
#ifndef PINPOOL_EXAMPLES_CONTROL_CHANNEL_H_
#define PINPOOL_EXAMPLES_CONTROL_CHANNEL_H_

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace pinpool::examples {

class ControlChannel {
 public:
  using Progress = std::function<void()>;

  ControlChannel() = default;
  ~ControlChannel() {
    if (fd_ >= 0) close(fd_);
  }
  ControlChannel(ControlChannel&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  ControlChannel& operator=(ControlChannel&&) = delete;

  // Listens on address:port and accepts one connection (waiting at most `seconds`).
  std::string Accept(const std::string& address, std::uint16_t port, int seconds) {
    const int listener = socket(AF_INET, SOCK_STREAM, 0);
    if (listener < 0) return Errno("socket");
    const int one = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in sin = Address(address, port);
    if (bind(listener, reinterpret_cast<sockaddr*>(&sin), sizeof(sin)) != 0 ||
        listen(listener, 1) != 0) {
      std::string e = Errno("bind/listen on " + address + ":" + std::to_string(port));
      close(listener);
      return e;
    }
    pollfd p{listener, POLLIN, 0};
    if (poll(&p, 1, seconds * 1000) != 1) {
      close(listener);
      return "nobody connected to " + address + ":" + std::to_string(port) + " within " +
             std::to_string(seconds) + " s";
    }
    fd_ = accept(listener, nullptr, nullptr);
    close(listener);
    if (fd_ < 0) return Errno("accept");
    NoDelay();
    return {};
  }

  // Connects to address:port, retrying for up to `seconds` (the other side may not listen yet).
  std::string Connect(const std::string& address, std::uint16_t port, int seconds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    for (;;) {
      fd_ = socket(AF_INET, SOCK_STREAM, 0);
      if (fd_ < 0) return Errno("socket");
      sockaddr_in sin = Address(address, port);
      if (connect(fd_, reinterpret_cast<sockaddr*>(&sin), sizeof(sin)) == 0) break;
      std::string e = Errno("connect to " + address + ":" + std::to_string(port));
      close(fd_);
      fd_ = -1;
      if (std::chrono::steady_clock::now() > deadline) return e;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    NoDelay();
    return {};
  }

  std::string Send(const void* data, std::uint32_t size) {
    std::uint32_t n = htonl(size);
    if (std::string e = WriteAll(&n, sizeof(n)); !e.empty()) return e;
    return WriteAll(data, size);
  }
  std::string Send(const std::vector<std::uint8_t>& bytes) {
    return Send(bytes.data(), static_cast<std::uint32_t>(bytes.size()));
  }
  template <typename T>
  std::string SendValue(const T& value) {
    return Send(&value, sizeof(T));
  }

  // Receives one message, calling `progress` (if any) while nothing has arrived.
  std::string Receive(std::vector<std::uint8_t>& out, const Progress& progress = {}) {
    std::uint32_t n = 0;
    if (std::string e = ReadAll(&n, sizeof(n), progress); !e.empty()) return e;
    out.resize(ntohl(n));
    return ReadAll(out.data(), out.size(), progress);
  }
  template <typename T>
  std::string ReceiveValue(T& value, const Progress& progress = {}) {
    std::vector<std::uint8_t> bytes;
    if (std::string e = Receive(bytes, progress); !e.empty()) return e;
    if (bytes.size() != sizeof(T)) return "unexpected message size " + std::to_string(bytes.size());
    std::memcpy(&value, bytes.data(), sizeof(T));
    return {};
  }

 private:
  static sockaddr_in Address(const std::string& address, std::uint16_t port) {
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_port = htons(port);
    if (inet_pton(AF_INET, address.c_str(), &sin.sin_addr) != 1) {
      // A host name: resolve it (IPv4).
      addrinfo hints{}, *res = nullptr;
      hints.ai_family = AF_INET;
      if (getaddrinfo(address.c_str(), nullptr, &hints, &res) == 0 && res != nullptr) {
        sin.sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
        freeaddrinfo(res);
      }
    }
    return sin;
  }
  static std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }
  void NoDelay() {
    const int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  std::string WriteAll(const void* data, std::size_t size) {
    const auto* p = static_cast<const std::uint8_t*>(data);
    while (size > 0) {
      const ssize_t n = send(fd_, p, size, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Errno("send");
      p += n;
      size -= static_cast<std::size_t>(n);
    }
    return {};
  }
  std::string ReadAll(void* data, std::size_t size, const Progress& progress) {
    auto* p = static_cast<std::uint8_t*>(data);
    while (size > 0) {
      if (progress) {
        pollfd pfd{fd_, POLLIN, 0};
        if (poll(&pfd, 1, 0) == 0) {
          progress();
          continue;
        }
      }
      const ssize_t n = recv(fd_, p, size, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n == 0) return "the peer closed the control channel";
      if (n < 0) return Errno("recv");
      p += n;
      size -= static_cast<std::size_t>(n);
    }
    return {};
  }

  int fd_ = -1;
};

}  // namespace pinpool::examples

#endif  // PINPOOL_EXAMPLES_CONTROL_CHANNEL_H_
