// --metrics: the client of Pool::ServeMetrics. Connects to the Unix socket, reads until the pool
// closes it, and checks that the text is whole (it ends with OpenMetrics' "# EOF"), so a scrape
// cut short is an error rather than half a report. A separate process cannot read another's
// heap: the socket is the running pool's own answer. Stateless; thread-safe.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"
#include "info.h"

namespace pinpool::info {

std::optional<std::string> ReadMetrics(const std::string& socket_path, std::string& error) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof(addr.sun_path)) {
    error = absl::StrFormat("--metrics %s: the path is too long for a Unix socket", socket_path);
    return std::nullopt;
  }
  std::memcpy(addr.sun_path, socket_path.data(), socket_path.size());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int err = errno;
    if (fd >= 0) close(fd);
    error = absl::StrFormat(
        "--metrics %s: %s (is a pool serving there? the application calls "
        "Pool::ServeMetrics(\"%s\"); the socket is mode 0600: run as the application's user)",
        socket_path, std::strerror(err), socket_path);
    return std::nullopt;
  }
  const timeval timeout{.tv_sec = 10, .tv_usec = 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  std::string text;
  char buf[16384];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  close(fd);
  static constexpr std::string_view kEof = "# EOF\n";
  if (text.size() < kEof.size() ||
      text.compare(text.size() - kEof.size(), kEof.size(), kEof) != 0) {
    error = absl::StrFormat("--metrics %s: the pool's answer was cut short (%d bytes, no # EOF)",
                            socket_path, text.size());
    return std::nullopt;
  }
  return text;
}

}  // namespace pinpool::info
