// CheckAccountedHere (see io_uring_accounting.h).
#include "domain/io_uring_accounting.h"

#include <liburing.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"
#include "domain/io_uring_calls.h"
#include "os/kernel_fields.h"

namespace pinpool::internal {
namespace {

constexpr std::size_t kPage = 4096;
constexpr int kTries = 3;

long long VmPin() { return static_cast<long long>(os::ProcStatusBytes("VmPin").value_or(0)); }

// Pins `bytes` of `pages` in the ring (in `slot`, or as a table of one) and undoes it: the
// registration's result (1 or 0 on success, -errno) and VmPin's change while it was there.
int PinAndMeasure(int fd, std::optional<std::uint32_t> slot, void* pages, std::size_t bytes,
                  long long& grew) {
  const long long before = VmPin();
  int ret;
  if (slot) {
    ret = UpdateSlot(fd, *slot, pages, bytes);
  } else {
    iovec iov{pages, bytes};
    ret = static_cast<int>(syscall(__NR_io_uring_register, fd, IORING_REGISTER_BUFFERS, &iov, 1));
    if (ret < 0) ret = -errno;
  }
  grew = VmPin() - before;
  if (ret >= 0) {
    if (slot) {
      UpdateSlot(fd, *slot, nullptr, 0);
    } else {
      UnregisterTable(fd);
    }
  }
  return ret;
}

}  // namespace

absl::Status CheckAccountedHere(int fd, std::optional<std::uint32_t> slot) {
  void* pages = mmap(nullptr, kTries * kPage, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (pages == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("mapping probe pages: %s", std::strerror(errno)));
  }
  absl::Status status = absl::FailedPreconditionError(
      "the ring's registrations are not charged to this process (its VmPin did not grow when "
      "pinpool registered a probe page in it): the ring belongs to another process's memory "
      "accounting, as a ring inherited across fork or taken with pidfd_getfd does, and every "
      "chunk registered in it would be charged to that process; create the ring in this "
      "process");
  for (int i = 1; i <= kTries; ++i) {
    long long grew = 0;
    const std::size_t bytes = static_cast<std::size_t>(i) * kPage;
    const int ret = PinAndMeasure(fd, slot, pages, bytes, grew);
    if (ret < 0) {
      status = absl::InternalError(
          absl::StrFormat("registering a probe page in the ring failed: %s", std::strerror(-ret)));
      break;
    }
    if (grew == static_cast<long long>(bytes)) {
      status = absl::OkStatus();
      break;
    }
  }
  munmap(pages, kTries * kPage);
  return status;
}

}  // namespace pinpool::internal
