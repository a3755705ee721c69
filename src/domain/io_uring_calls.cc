// The io_uring_register calls of io_uring_calls.h, and the probe of what the kernel can clone.
#include "domain/io_uring_calls.h"

#include <liburing.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <mutex>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "os/os.h"

namespace pinpool::internal {
namespace {

// From Linux 6.12's and 6.13's uapi (liburing 2.3's headers predate both).
constexpr unsigned kRegisterCloneBuffers = 30;
constexpr std::uint32_t kCloneDstReplace = 1U << 1;
struct CloneBuffersArg {
  std::uint32_t src_fd;
  std::uint32_t flags;
  std::uint32_t src_off;  // 6.13; part of `pad` (which must be zero) in 6.12
  std::uint32_t dst_off;
  std::uint32_t nr;
  std::uint32_t pad[3];
};

int Register(int fd, unsigned opcode, const void* arg, unsigned nr_args) {
  const long ret = syscall(__NR_io_uring_register, fd, opcode, arg, nr_args);
  return ret < 0 ? -errno : static_cast<int>(ret);
}

int Clone(int dst_fd, int src_fd, std::uint32_t flags, std::uint32_t first, std::uint32_t count) {
  CloneBuffersArg arg{};
  arg.src_fd = static_cast<std::uint32_t>(src_fd);
  arg.flags = flags;
  arg.src_off = first;
  arg.dst_off = first;
  arg.nr = count;
  return Register(dst_fd, kRegisterCloneBuffers, &arg, 1);
}

// Whether slot `slot` of the ring `fd` holds a buffer, from the ring's fdinfo ("UserBufs:" then
// one line per slot, "    2: 0x7f.../4096" or "    2: <none>" since Linux 6.13).
bool SlotFilled(int fd, std::uint32_t slot) {
  const std::string path = "/proc/self/fdinfo/" + std::to_string(fd);
  absl::StatusOr<std::string> text = os::ReadKernelFile(path.c_str());
  if (!text.ok()) return false;
  const std::string prefix = std::to_string(slot) + ":";
  bool in_bufs = false;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (absl::ConsumePrefix(&line, "UserBufs:")) {
      in_bufs = true;
    } else if (in_bufs && absl::ConsumePrefix(&line, prefix)) {
      return absl::StrContains(line, "0x");
    }
  }
  return false;
}

IoUringCloneSupport Probe() {
  IoUringCloneSupport support;
  std::array<io_uring, 3> rings{};
  int made = 0;
  for (io_uring& r : rings) {
    if (io_uring_queue_init(1, &r, 0) < 0) break;
    ++made;
  }
  void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (made == 3 && page != MAP_FAILED) {
    io_uring& src = rings[0];
    io_uring& dst = rings[1];
    io_uring& empty = rings[2];  // no table: what a whole-table clone (6.12) needs
    if (RegisterSparseTable(src.ring_fd, 3) == 0 && RegisterSparseTable(dst.ring_fd, 3) == 0) {
      support.whole_table = Clone(empty.ring_fd, src.ring_fd, 0, 0, 0) == 0;
      // A page in the destination's last slot, then a clone of slot 0 only: does slot 2 stay?
      const bool filled = UpdateSlot(dst.ring_fd, 2, page, 4096) == 1;
      support.ranges = Clone(dst.ring_fd, src.ring_fd, kCloneDstReplace, 0, 1) == 0;
      support.keeps_later_entries = support.ranges && filled && SlotFilled(dst.ring_fd, 2);
    }
  }
  // Unregistering waits for the probe page's unpin; closing the rings would drop it later, from
  // the kernel's ring teardown, after a caller has measured VmPin.
  for (int i = 0; i < made; ++i) {
    UnregisterTable(rings[static_cast<std::size_t>(i)].ring_fd);
    io_uring_queue_exit(&rings[static_cast<std::size_t>(i)]);
  }
  if (page != MAP_FAILED) munmap(page, 4096);
  return support;
}

}  // namespace

int RegisterSparseTable(int fd, std::uint32_t slots) {
  io_uring_rsrc_register reg{};
  reg.nr = slots;
  reg.flags = IORING_RSRC_REGISTER_SPARSE;
  return Register(fd, IORING_REGISTER_BUFFERS2, &reg, sizeof(reg));
}

int UnregisterTable(int fd) { return Register(fd, IORING_UNREGISTER_BUFFERS, nullptr, 0); }

int UpdateSlot(int fd, std::uint32_t slot, void* base, std::size_t length) {
  if (base != nullptr) {
    if (const int injected = os::InjectedFault(os::Call::kPinBuffer, length); injected != 0) {
      return -injected;
    }
  }
  iovec iov{base, base == nullptr ? 0 : length};
  __u64 tag = 0;
  io_uring_rsrc_update2 update{};
  update.offset = slot;
  update.data = reinterpret_cast<std::uintptr_t>(&iov);
  update.tags = reinterpret_cast<std::uintptr_t>(&tag);
  update.nr = 1;
  return Register(fd, IORING_REGISTER_BUFFERS_UPDATE, &update, sizeof(update));
}

const IoUringCloneSupport& KernelCloneSupport() {
  static IoUringCloneSupport support;
  static std::once_flag once;
  std::call_once(once, [] { support = Probe(); });
  return support;
}

int CloneSlots(int dst_fd, int src_fd, std::uint32_t first, std::uint32_t count) {
  if (const int injected = os::InjectedFault(os::Call::kCloneBuffers, count); injected != 0) {
    return -injected;
  }
  return Clone(dst_fd, src_fd, kCloneDstReplace, first, count);
}

}  // namespace pinpool::internal
