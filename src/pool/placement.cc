// ResolveNumaNode and ReserveThreads (see placement.h).
#include "pool/placement.h"

#include <thread>

#include "os/os.h"
#include "util/status_macros.h"

namespace pinpool::internal {

absl::StatusOr<int> ResolveNumaNode(const PoolOptions& options) {
  if (options.numa_node >= 0) {
    PINPOOL_RETURN_IF_ERROR(os::CheckNode(options.numa_node));
    return options.numa_node;
  }
  if (options.numa_node == kNoNumaNode) return -1;
  for (const auto& d : options.domains) {
    // A device node the kernel no longer lists (offline) places nothing rather than failing.
    if (const int node = d->numa_node(); node >= 0 && os::CheckNode(node).ok()) return node;
  }
  return -1;
}

unsigned ReserveThreads(const PoolOptions& options, int node) {
  if (options.reserve_threads != 0) return options.reserve_threads;
  const std::size_t cpus =
      node >= 0 ? os::NodeCpus(node).size() : std::thread::hardware_concurrency();
  return cpus == 0 ? 1 : static_cast<unsigned>(cpus);
}

}  // namespace pinpool::internal
