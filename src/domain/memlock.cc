// The RLIMIT_MEMLOCK messages of memlock.h, and PinRefusedError (pinpool/provider.h): one
// wording for the check and for the kernel's refusal, whoever registers.
#include "domain/memlock.h"

#include <cstring>

#include "absl/strings/str_format.h"
#include "pinpool/provider.h"
#include "util/bytes.h"

namespace pinpool::internal {
namespace {

constexpr const char* kFix =
    "raise the limit (`ulimit -l`, `memlock` in /etc/security/limits.conf, or LimitMEMLOCK= for "
    "a systemd service), run with CAP_IPC_LOCK, or lower PoolOptions::budget";

// OK, or the error for `more` bytes on top of `used` (the counter named by `counter`).
absl::Status Check(std::size_t more, std::size_t used, const os::MemlockState& s,
                   const char* counter, const char* verb) {
  const std::optional<std::size_t> headroom = s.Headroom(used);
  if (more == 0 || !headroom || more <= *headroom) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrFormat(
      "RLIMIT_MEMLOCK is %s and %s are already %s; %s %s more would exceed it: %s",
      FormatBytes(s.limit), FormatBytes(used), counter, verb, FormatBytes(more), kFix));
}

}  // namespace

absl::Status CheckMemlockHeadroom(std::size_t pin, std::size_t lock, const os::MemlockState& s) {
  if (absl::Status st = Check(pin, s.pinned, s, "long-term pinned (VmPin)", "pinning"); !st.ok()) {
    return st;
  }
  return Check(lock, s.locked, s, "locked (VmLck)", "locking");
}

absl::Status MemlockRefused(const char* what, int err, std::size_t bytes,
                            MemlockAccounting accounting) {
  const os::MemlockState s = os::QueryMemlock();
  return absl::ResourceExhaustedError(absl::StrFormat(
      "%s of %s failed (%s); RLIMIT_MEMLOCK is %s with %s long-term pinned (VmPin) and %s locked "
      "(VmLck) by this process%s: %s",
      what, FormatBytes(bytes), std::strerror(err), FormatBytes(s.limit), FormatBytes(s.pinned),
      FormatBytes(s.locked),
      accounting == MemlockAccounting::kUser
          ? "; io_uring counts the pins of all of this user's processes, and its rings' own pages, "
            "against it"
          : "",
      kFix));
}

}  // namespace pinpool::internal

namespace pinpool {

absl::Status PinRefusedError(const char* what, int err, std::size_t bytes) {
  return internal::MemlockRefused(what, err, bytes);
}

}  // namespace pinpool
