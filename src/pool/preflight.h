// Pool::Create's preflight: before anything is pinned or mapped, what Create will pin up front
// (PoolOptions::initial_size, in whole chunks) is checked against every ceiling that applies to it:
// RLIMIT_MEMLOCK (VmPin for each long-term pinning domain, VmLck for mlock; unless CAP_IPC_LOCK is
// effective), the memory cgroup's headroom (past it the OOM killer ends the process: no error),
// and, when hugetlb pages are required, the free huge pages (of the pool's NUMA node when it binds
// one). Growth past initial_size is checked again per chunk by the arena, so the budget itself is
// not refused here (a budget is a ceiling the pool may never reach; the environment can change
// before it does): pinpool-info says when the budget cannot fit (docs/ceilings.md).
//
// io_uring (the default domain) also counts pins per user across all of the user's processes;
// that figure is not visible to a process, so only this process's VmPin is checked.
//
// Pure functions of their arguments (the caller reads the kernel state); thread-safe.
#ifndef PINPOOL_POOL_PREFLIGHT_H_
#define PINPOOL_POOL_PREFLIGHT_H_

#include <cstddef>

#include "absl/status/status.h"
#include "os/cgroup.h"
#include "os/os.h"
#include "pinpool/options.h"

namespace pinpool::internal {

// What a pool with these options pins and is charged for, for `bytes` of chunks.
struct PinDemand {
  std::size_t pin = 0;     // added to VmPin: bytes times the long-term pinning domains
  std::size_t lock = 0;    // added to VmLck: bytes when a domain mlocks
  std::size_t charge = 0;  // charged to the memory cgroup (0 for required hugetlb pages)
};
// With no domain named, the pool's default domain (one long-term pin) is counted.
PinDemand DemandFor(const PoolOptions& options, std::size_t bytes);

// initial_size rounded up to whole chunks: what Create maps and registers before it returns.
std::size_t InitialBytes(const PoolOptions& options);

// OK, or kResourceExhausted naming the ceiling (RLIMIT_MEMLOCK, or the memory cgroup with its
// path and version), initial_size, the numbers and the fix per place. The options must be valid.
absl::Status PreflightCeilings(const PoolOptions& options, const os::MemlockState& memlock,
                               const os::MemoryCgroupState& cgroup);

// OK, or kFailedPrecondition when initial_size requires hugetlb pages (require_page_size with
// 1G or 2M pages) that are not free now (in `node`'s pool when node >= 0).
absl::Status PreflightHugePages(const PoolOptions& options, int node);

}  // namespace pinpool::internal

#endif  // PINPOOL_POOL_PREFLIGHT_H_
