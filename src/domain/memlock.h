// The one wording of "you hit a ceiling on pinned memory": RLIMIT_MEMLOCK (shared by every domain
// that pins or locks pages, by the arena's check before it maps a chunk and by the pool's
// preflight) and the memory cgroup's limit (the arena's check per chunk, the pool's preflight), so
// the user always gets the same limit, numbers and fix, the fix said for each place a process is
// started from: a shell, a systemd unit, a container runtime, a Kubernetes pod (docs/ceilings.md).
//
// The kernel checks two counters against the limit, each on its own: long-term pins (RDMA
// registrations, io_uring buffers) grow VmPin, mlock grows VmLck. io_uring additionally counts
// its pins per user, across all of the user's processes, with its rings' own pages (8 KiB for a
// one-entry ring on Linux 6.18), so it may refuse a pin that this process's VmPin would allow.
#ifndef PINPOOL_DOMAIN_MEMLOCK_H_
#define PINPOOL_DOMAIN_MEMLOCK_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "os/cgroup.h"
#include "os/os.h"

namespace pinpool::internal {

// OK when `pin` more bytes can be long-term pinned (VmPin) and `lock` more mlocked (VmLck) under
// the current RLIMIT_MEMLOCK (always OK with CAP_IPC_LOCK or no limit); otherwise
// kResourceExhausted naming the limit, the counter that would exceed it, and the fix.
// `lower` names what the user may lower instead ("PoolOptions::budget" for growth,
// "PoolOptions::initial_size" for the pool's preflight).
absl::Status CheckMemlockHeadroom(std::size_t pin, std::size_t lock, const os::MemlockState& state,
                                  const char* lower = "PoolOptions::budget");

// The fix for RLIMIT_MEMLOCK, per place, ending with "or lower `lower`"; with CAP_IPC_LOCK bounded
// but not effective it says why the capability did not help. pinpool-info prints it too.
std::string MemlockFix(const os::MemlockState& state, const char* lower);

// OK when the memory cgroup can be charged `charge` more bytes (always OK when no limit applies
// or none could be found); otherwise kResourceExhausted naming the cgroup, its version, limit,
// usage and reclaimable cache, the bytes asked for, that the OOM killer would act, and the fix.
absl::Status CheckCgroupHeadroom(std::size_t charge, const os::MemoryCgroupState& cgroup,
                                 const char* lower = "PoolOptions::budget");

// The fix for the memory cgroup's limit, per place, for a cgroup that needs `needed_limit`.
std::string CgroupFix(const os::MemoryCgroupState& cgroup, std::size_t needed_limit,
                      const char* lower);

// Who counts a refused pin against the limit, for the message.
enum class MemlockAccounting {
  kProcess,  // this process's VmPin or VmLck (mlock, ibv_reg_mr)
  kUser,     // the user's pinned memory across all its processes (io_uring)
};

// kResourceExhausted for a pin or lock that the kernel refused (`what` is the call, e.g.
// "mlock").
absl::Status MemlockRefused(const char* what, int err, std::size_t bytes,
                            MemlockAccounting accounting = MemlockAccounting::kProcess);

}  // namespace pinpool::internal

#endif  // PINPOOL_DOMAIN_MEMLOCK_H_
