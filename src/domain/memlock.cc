// The RLIMIT_MEMLOCK and memory cgroup messages of memlock.h, and PinRefusedError
// (pinpool/provider.h): one wording for the checks and for the kernel's refusal, whoever
// registers.
#include "domain/memlock.h"

#include <cstring>

#include "absl/strings/str_format.h"
#include "pinpool/provider.h"
#include "util/bytes.h"

namespace pinpool::internal {
namespace {

// Where the limit is raised, by where the process is started from.
constexpr const char* kRaiseMemlock =
    "raise the limit where the process starts: a shell `ulimit -l unlimited` (above the hard "
    "limit: `memlock` in /etc/security/limits.conf), a systemd unit LimitMEMLOCK=infinity, docker "
    "or podman `--ulimit memlock=-1`, Kubernetes: the node's container runtime passes its own "
    "limit to every container (LimitMEMLOCK=infinity in a drop-in for containerd.service or "
    "crio.service, then restart it; containerd's default is 8 MiB); or run with CAP_IPC_LOCK "
    "effective (root in the container with `--cap-add IPC_LOCK`, or securityContext.capabilities"
    ".add: [\"IPC_LOCK\"] with runAsUser: 0: for a non-root user the capability is inert)";

// OK, or the error for `more` bytes on top of `used` (the counter named by `counter`).
absl::Status Check(std::size_t more, std::size_t used, const os::MemlockState& s,
                   const char* counter, const char* verb, const char* lower) {
  const std::optional<std::size_t> headroom = s.Headroom(used);
  if (more == 0 || !headroom || more <= *headroom) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrFormat("RLIMIT_MEMLOCK is %s and %s are already %s; %s %s more would exceed it: %s",
                      FormatBytes(s.limit), FormatBytes(used), counter, verb, FormatBytes(more),
                      MemlockFix(s, lower)));
}

}  // namespace

std::string MemlockFix(const os::MemlockState& s, const char* lower) {
  std::string fix = kRaiseMemlock;
  if (s.bounded_not_effective) {
    fix += absl::StrFormat(
        " (this process has CAP_IPC_LOCK in its bounding set but not in its effective set: uid %d "
        "%s, so the capability granted to it does not lift the limit)",
        s.uid, s.uid == 0 ? "dropped it" : "is not root");
  }
  return fix + absl::StrFormat("; or lower %s", lower);
}

absl::Status CheckMemlockHeadroom(std::size_t pin, std::size_t lock, const os::MemlockState& s,
                                  const char* lower) {
  if (absl::Status st = Check(pin, s.pinned, s, "long-term pinned (VmPin)", "pinning", lower);
      !st.ok()) {
    return st;
  }
  return Check(lock, s.locked, s, "locked (VmLck)", "locking", lower);
}

std::string CgroupFix(const os::MemoryCgroupState& c, std::size_t needed_limit, const char* lower) {
  const bool v1 = c.where.version == 1;
  const char* unit_key = v1 ? "MemoryLimit" : "MemoryMax";
  const std::size_t mib = (needed_limit + (std::size_t{1} << 20) - 1) >> 20;  // as systemd, docker
  return absl::StrFormat(
      "raise the memory limit to at least %s where it is set: for a shell or script, start it in "
      "a scope with room (`systemd-run --scope -p %s=%dM ...`) or write the cgroup's %s; a "
      "systemd unit %s=%dM; docker or podman `--memory %dm`; a Kubernetes pod's "
      "resources.limits.memory: %dMi (pinned memory is charged like any other and cannot be "
      "reclaimed; set requests.memory to it too, so the pod lands on a node with the room); or "
      "lower %s",
      FormatBytes(needed_limit), unit_key, mib, v1 ? "memory.limit_in_bytes" : "memory.max",
      unit_key, mib, mib, mib, lower);
}

absl::Status CheckCgroupHeadroom(std::size_t charge, const os::MemoryCgroupState& c,
                                 const char* lower) {
  const std::optional<std::size_t> headroom = c.Headroom();
  if (charge == 0 || !headroom || charge <= *headroom) return absl::OkStatus();
  const std::size_t working = c.usage > c.reclaimable ? c.usage - c.reclaimable : 0;
  const bool own = c.limit_path == c.where.path || (c.where.path.empty() && c.limit_path == "/");
  return absl::ResourceExhaustedError(absl::StrFormat(
      "the memory cgroup %s%s (cgroup v%d, %s) is limited to %s and holds %s (%s of it "
      "reclaimable page cache): %s more pinned memory would pass the limit, and the kernel's OOM "
      "killer, not an error, would end the process (pinned pages are charged as they are faulted "
      "in and cannot be reclaimed); %s",
      c.limit_path, own ? "" : absl::StrFormat(" (an ancestor of this process's %s)", c.where.path),
      c.where.version, c.where.version == 1 ? "memory.limit_in_bytes" : "memory.max",
      FormatBytes(c.limit), FormatBytes(c.usage), FormatBytes(c.reclaimable), FormatBytes(charge),
      CgroupFix(c, working + charge, lower)));
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
      MemlockFix(s, "PoolOptions::budget")));
}

}  // namespace pinpool::internal

namespace pinpool {
PINPOOL_ABI_BEGIN

absl::Status PinRefusedError(const char* what, int err, std::size_t bytes) {
  return internal::MemlockRefused(what, err, bytes);
}

PINPOOL_ABI_END
}  // namespace pinpool
