#include "domain/memlock.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"
#include "util/bytes.h"

namespace pinpool::internal {
namespace {

constexpr const char* kFix =
    "raise the limit (`ulimit -l`, `memlock` in /etc/security/limits.conf, or LimitMEMLOCK= for "
    "a systemd service), run with CAP_IPC_LOCK, or lower PoolOptions::budget";

}  // namespace

absl::Status CheckMemlockHeadroom(std::size_t bytes, const os::MemlockState& s) {
  if (s.exempt || s.limit == SIZE_MAX) return absl::OkStatus();
  // mlock counts in VmLck, RDMA and io_uring pins in VmPin; the kernel checks each against the
  // limit, so the fuller one decides. (io_uring also counts per user, across processes: the
  // kernel may still refuse, and the domain then says so in the same words.)
  const std::size_t used = std::max(s.locked, s.pinned);
  if (used <= s.limit && bytes <= s.limit - used) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrFormat(
      "RLIMIT_MEMLOCK is %s and %s are already locked or pinned; pinning %s more would exceed it: "
      "%s",
      FormatBytes(s.limit), FormatBytes(used), FormatBytes(bytes), kFix));
}

absl::Status MemlockRefused(const char* what, int err, std::size_t bytes) {
  const os::MemlockState s = os::QueryMemlock();
  return absl::ResourceExhaustedError(
      absl::StrFormat("%s of %s failed (%s); RLIMIT_MEMLOCK is %s with %s locked and %s pinned: %s",
                      what, FormatBytes(bytes), std::strerror(err), FormatBytes(s.limit),
                      FormatBytes(s.locked), FormatBytes(s.pinned), kFix));
}

}  // namespace pinpool::internal
