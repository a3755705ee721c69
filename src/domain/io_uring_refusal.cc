// The explanations of io_uring_refusal.h. Each cause names the errno and the setting that
// produced it; each fix is a command or a setting, not advice.
#include "domain/io_uring_refusal.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "os/os.h"

namespace pinpool::internal {

std::string IoUringRefusal::Message() const { return absl::StrFormat("%s: %s", cause, fix); }

std::optional<int> ReadIoUringDisabled() {
  absl::StatusOr<std::string> text = os::ReadKernelFile("/proc/sys/kernel/io_uring_disabled");
  int value = 0;
  if (!text.ok() || !absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &value)) {
    return std::nullopt;
  }
  return value;
}

IoUringRefusal ExplainIoUringSetupFailure(int err, std::optional<int> disabled) {
  IoUringRefusal r;
  const std::string failed = absl::StrFormat("io_uring_setup failed (%s)", std::strerror(err));
  if ((err == EPERM || err == EACCES) && disabled == 2) {
    r.code = absl::StatusCode::kPermissionDenied;
    r.cause = failed + ": kernel.io_uring_disabled is 2, io_uring is off for every process";
    r.fix = "`sysctl kernel.io_uring_disabled=0` (and in /etc/sysctl.d/ to keep it)";
  } else if ((err == EPERM || err == EACCES) && disabled == 1) {
    r.code = absl::StatusCode::kPermissionDenied;
    r.cause = failed +
              ": kernel.io_uring_disabled is 1, only processes with CAP_SYS_ADMIN or in the "
              "group kernel.io_uring_group may use io_uring";
    r.fix =
        "`sysctl kernel.io_uring_disabled=0`, or add the user to the group that "
        "kernel.io_uring_group names";
  } else if (err == EPERM || err == EACCES) {
    r.code = absl::StatusCode::kPermissionDenied;
    r.cause = failed +
              (disabled ? std::string(" although kernel.io_uring_disabled is ") +
                              std::to_string(*disabled)
                        : std::string()) +
              ": a seccomp filter (container runtimes' default profiles forbid io_uring) or a "
              "security module forbids it";
    r.fix =
        "allow io_uring_setup, io_uring_enter and io_uring_register in the seccomp profile "
        "(docker, podman: --security-opt seccomp=<profile>)";
  } else if (err == ENOSYS) {
    r.code = absl::StatusCode::kUnimplemented;
    r.cause = failed +
              ": this kernel has no io_uring (CONFIG_IO_URING), or a seccomp filter "
              "hides it";
    r.fix =
        "use a kernel with io_uring, Linux 5.19 or later (sparse buffer tables), or allow the "
        "io_uring system calls in the seccomp profile";
  } else if (err == ENOMEM) {
    r.code = absl::StatusCode::kResourceExhausted;
    r.cause = failed +
              ": out of memory, or (before Linux 5.12) the ring's own memory counts "
              "against RLIMIT_MEMLOCK";
    r.fix = "raise RLIMIT_MEMLOCK (`ulimit -l`) or free memory";
  } else if (err == EMFILE || err == ENFILE) {
    r.code = absl::StatusCode::kResourceExhausted;
    r.cause = failed + ": a ring is a file descriptor and none is left";
    r.fix = "raise the descriptor limit (`ulimit -n`) or close descriptors";
  } else {
    r.code = absl::StatusCode::kUnavailable;
    r.cause = failed;
    r.fix = "check `dmesg` and the kernel's io_uring settings";
  }
  return r;
}

IoUringRefusal ExplainSparseTableFailure(int err, unsigned slots) {
  IoUringRefusal r;
  r.cause = absl::StrFormat("registering a sparse io_uring buffer table of %d slots failed (%s)",
                            slots, std::strerror(err));
  if (err == EINVAL || err == EOPNOTSUPP) {
    r.code = absl::StatusCode::kUnimplemented;
    r.cause += ": this kernel has no sparse buffer tables";
    r.fix = "use Linux 5.19 or later";
  } else if (err == ENOMEM) {
    r.code = absl::StatusCode::kResourceExhausted;
    r.fix = "free memory";
  } else {
    r.code = absl::StatusCode::kInternal;
    r.fix = "check `dmesg` and the kernel's io_uring settings";
  }
  return r;
}

}  // namespace pinpool::internal
