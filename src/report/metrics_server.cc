// MetricsServer: the pool's optional metrics socket (see pool/metrics.h for the contract).
// Connections are served one at a time on the server's thread: a scrape is one snapshot
// (Pool::GetStats, milliseconds at most), and a client that does not read is cut off by a send
// timeout, so a stuck client delays the next scrape by a second at most and never the pool.
#include "report/metrics_server.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "os/os.h"

namespace pinpool::internal {
namespace {

// `real()`, unless the fault hook fails this call (os/os.h): then -1 with errno set.
template <typename F>
int Faulting(os::Call call, F real) {
  if (const int injected = os::InjectedFault(call, 0); injected != 0) {
    errno = injected;
    return -1;
  }
  return real();
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    std::string path, std::function<std::string()> text) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Pool::ServeMetrics: a socket path must have 1 to %d characters, not %d",
                        sizeof(addr.sun_path) - 1, path.size()));
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  const int fd =
      Faulting(os::Call::kSocket, [] { return socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0); });
  if (fd < 0) {
    const int err = errno;
    return absl::Status(err == EMFILE || err == ENFILE || err == ENOMEM || err == ENOBUFS
                            ? absl::StatusCode::kResourceExhausted
                            : absl::StatusCode::kInternal,
                        absl::StrFormat("Pool::ServeMetrics: socket(): %s", std::strerror(err)));
  }
  const auto fail = [&](std::string_view what) {
    const int err = errno;
    close(fd);
    return absl::Status(
        err == EACCES || err == EPERM ? absl::StatusCode::kPermissionDenied
        : err == EADDRINUSE           ? absl::StatusCode::kAlreadyExists
        : err == EMFILE || err == ENFILE || err == ENOMEM || err == ENOBUFS
            ? absl::StatusCode::kResourceExhausted
            : absl::StatusCode::kInternal,
        absl::StrFormat("Pool::ServeMetrics(%s): %s: %s", path, what, std::strerror(err)));
  };
  const auto bind_there = [&] {
    return Faulting(os::Call::kBindSocket,
                    [&] { return bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)); });
  };
  if (bind_there() != 0) {
    if (errno != EADDRINUSE) return fail("bind");
    // A socket file is there: take its place only if it is a leftover no one listens on.
    const int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const bool alive =
        probe >= 0 && connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    if (probe >= 0) close(probe);
    struct stat st {};
    if (alive || lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) {
      errno = EADDRINUSE;
      return fail("in use (another process serves there, or it is not a socket)");
    }
    unlink(path.c_str());
    if (bind_there() != 0) return fail("bind");
  }
  // Before listen: nobody can connect until the mode allows only this user.
  if (Faulting(os::Call::kBindSocket, [&] { return chmod(path.c_str(), 0600); }) != 0) {
    unlink(path.c_str());
    return fail("chmod 0600");
  }
  if (Faulting(os::Call::kBindSocket, [&] { return listen(fd, 8); }) != 0) {
    unlink(path.c_str());
    return fail("listen");
  }
  const int stop = Faulting(os::Call::kSocket, [] { return eventfd(0, EFD_CLOEXEC); });
  if (stop < 0) {
    unlink(path.c_str());
    return fail("eventfd");
  }
  std::unique_ptr<MetricsServer> server(
      new MetricsServer(std::move(path), fd, stop, std::move(text)));
  absl::StatusOr<std::thread> thread = os::StartThread([s = server.get()] { s->Run(); });
  if (!thread.ok()) {
    return absl::Status(thread.status().code(),
                        absl::StrFormat("Pool::ServeMetrics(%s): %s", server->path(),
                                        thread.status().message()));  // the server closes all
  }
  server->thread_ = *std::move(thread);
  return server;
}

MetricsServer::MetricsServer(std::string path, int listen_fd, int stop_fd,
                             std::function<std::string()> text)
    : path_(std::move(path)), listen_fd_(listen_fd), stop_fd_(stop_fd), text_(std::move(text)) {}

MetricsServer::~MetricsServer() {
  if (thread_.joinable()) {
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = write(stop_fd_, &one, sizeof(one));
    thread_.join();
  }
  unlink(path_.c_str());
  close(listen_fd_);
  close(stop_fd_);
}

void MetricsServer::Run() {
  for (;;) {
    pollfd fds[2] = {{.fd = stop_fd_, .events = POLLIN, .revents = 0},
                     {.fd = listen_fd_, .events = POLLIN, .revents = 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[0].revents != 0) return;
    if ((fds[1].revents & POLLIN) == 0) continue;
    const int client = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    const timeval timeout{.tv_sec = 1, .tv_usec = 0};
    setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
    const std::string text = text_();
    for (std::size_t sent = 0; sent < text.size();) {
      const ssize_t n = send(client, text.data() + sent, text.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      sent += static_cast<std::size_t>(n);
    }
    close(client);
  }
}

}  // namespace pinpool::internal
