// Where and how fast a pool's chunks are made: the NUMA node PoolOptions::numa_node means for a
// given set of domains, and how many threads Reserve may use. Pure functions of the options and
// of what the kernel reports (sysfs); thread-safe.
#ifndef PINPOOL_POOL_PLACEMENT_H_
#define PINPOOL_POOL_PLACEMENT_H_

#include "absl/status/statusor.h"
#include "pinpool/options.h"

namespace pinpool::internal {

// The node to bind chunks to (-1: none): an explicit node if it is online (else kInvalidArgument
// naming the nodes there are), the first domain's device node for kDeviceNumaNode.
absl::StatusOr<int> ResolveNumaNode(const PoolOptions& options);
// Reserve's workers: options.reserve_threads, or when 0 the CPUs of `node` (of the machine when
// node < 0); at least 1.
unsigned ReserveThreads(const PoolOptions& options, int node);

}  // namespace pinpool::internal

#endif  // PINPOOL_POOL_PLACEMENT_H_
