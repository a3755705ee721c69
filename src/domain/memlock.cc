#include "domain/memlock.h"

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
  if (s.locked <= s.limit && bytes <= s.limit - s.locked) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrFormat(
      "RLIMIT_MEMLOCK is %s and %s are already locked; pinning %s more would exceed it: %s",
      FormatBytes(s.limit), FormatBytes(s.locked), FormatBytes(bytes), kFix));
}

absl::Status MemlockRefused(const char* what, int err, std::size_t bytes) {
  const os::MemlockState s = os::QueryMemlock();
  return absl::ResourceExhaustedError(absl::StrFormat(
      "%s of %s failed (%s); RLIMIT_MEMLOCK is %s with %s locked: %s", what, FormatBytes(bytes),
      std::strerror(err), FormatBytes(s.limit), FormatBytes(s.locked), kFix));
}

}  // namespace pinpool::internal
