// What a failed or impossible verbs registration means, as a Status a user can act on. ibv_reg_mr
// reports a bare errno whose meaning depends on the situation (ENOMEM is RLIMIT_MEMLOCK for an
// unprivileged process but the device's own limits for a privileged one), so these functions
// take the situation as arguments and name the limit, the numbers and the fix.
// Pure functions of their arguments; thread-safe.
#ifndef PINPOOL_PROVIDERS_VERBS_ERRORS_H_
#define PINPOOL_PROVIDERS_VERBS_ERRORS_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "os/os.h"
#include "pinpool/verbs.h"

namespace pinpool::internal {

// OK when a region of `length` bytes fits the device's max_mr_size; else kInvalidArgument naming
// max_mr_size and PoolOptions::chunk_size (a pool's chunk is always one region per domain).
absl::Status CheckRegionSize(std::size_t length, std::uint64_t max_mr_size,
                             const std::string& domain);

// Everything RegMrFailed needs to explain an errno besides the errno itself.
struct RegMrContext {
  std::string domain;              // the domain's name ("rxe0/pd1")
  std::size_t length = 0;          // bytes asked for
  VerbsAccess access;              // rights asked for
  std::uint64_t live_regions = 0;  // regions this domain holds now
  std::uint32_t max_mr = 0;        // the device's limit on regions
  os::MemlockState memlock;        // RLIMIT_MEMLOCK, VmLck, VmPin, CAP_IPC_LOCK
};

// The Status for ibv_reg_mr failing with `err`: kResourceExhausted for ENOMEM/EAGAIN (naming
// RLIMIT_MEMLOCK and VmPin, or the device's limits when the process is exempt), kInvalidArgument
// for EINVAL/EFAULT, kPermissionDenied for EPERM/EACCES, kUnimplemented for EOPNOTSUPP,
// kInternal otherwise.
absl::Status RegMrFailed(int err, const RegMrContext& context);

}  // namespace pinpool::internal

#endif  // PINPOOL_PROVIDERS_VERBS_ERRORS_H_
