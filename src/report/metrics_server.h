// MetricsServer: one thread serving a Unix stream socket at a path the application chose. Each
// connection gets the pool's stats as OpenMetrics text (PoolStats::ToOpenMetrics), then the
// server closes it; it reads nothing from the client. The socket is created mode 0600 (before it
// listens, so no one connects before the mode is set) and removed when serving stops. Off unless
// the application calls Pool::ServeMetrics. `pinpool-info --metrics PATH` is its client.
//
// Thread safety: Start and the destructor are called by the pool's owner (ServeMetrics, the
// destructor), not concurrently; the server thread only calls the function it was given, which
// must stay valid until the destructor returns.
#ifndef PINPOOL_REPORT_METRICS_SERVER_H_
#define PINPOOL_REPORT_METRICS_SERVER_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pinpool::internal {

class MetricsServer {
 public:
  // Binds and listens at `path` (an existing socket file there is replaced only when no one is
  // listening on it) and starts the thread, which answers each connection with `text()`.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(std::string path,
                                                              std::function<std::string()> text);
  ~MetricsServer();  // stops the thread, closes and removes the socket
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  const std::string& path() const noexcept { return path_; }

 private:
  MetricsServer(std::string path, int listen_fd, int stop_fd, std::function<std::string()> text);
  void Run();

  const std::string path_;
  const int listen_fd_;
  const int stop_fd_;  // an eventfd: written once to stop the thread
  const std::function<std::string()> text_;
  std::thread thread_;
};

}  // namespace pinpool::internal

#endif  // PINPOOL_REPORT_METRICS_SERVER_H_
