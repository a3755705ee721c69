// PoolMetrics: what a pool keeps for its metrics beyond its parts' own figures: the allocation
// slow path's latency histogram, and the metrics socket when the application serves one
// (Pool::ServeMetrics; the server itself is report/metrics_server.h).
// Thread safety: the recorder is lock-free; `server` is the pool owner's (ServeMetrics,
// StopServingMetrics, the destructor).
#ifndef PINPOOL_POOL_METRICS_H_
#define PINPOOL_POOL_METRICS_H_

#include <memory>

#include "report/metrics_server.h"
#include "util/latency.h"

namespace pinpool::internal {

struct PoolMetrics {
  LatencyRecorder allocate_slow;
  std::unique_ptr<MetricsServer> server;  // null when not serving
};

}  // namespace pinpool::internal

#endif  // PINPOOL_POOL_METRICS_H_
