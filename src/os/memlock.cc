// RLIMIT_MEMLOCK as it applies to this process: the soft limit, what is locked and pinned now
// (VmLck, VmPin: the kernel checks each against the limit on its own), and
// whether CAP_IPC_LOCK exempts the process from it. Read fresh on every call (limits and
// capabilities can change at run time); thread-safe. Also mlock itself, so that tests can make
// it fail.
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

#include "os/kernel_fields.h"
#include "os/os.h"

namespace pinpool::internal::os {
namespace {

constexpr int kCapIpcLock = 14;

}  // namespace

MemlockState QueryMemlock() noexcept {
  MemlockState state;
  rlimit limit{};
  if (::getrlimit(RLIMIT_MEMLOCK, &limit) == 0) {
    state.limit =
        limit.rlim_cur == RLIM_INFINITY ? SIZE_MAX : static_cast<std::size_t>(limit.rlim_cur);
  }
  if (auto status = ReadKernelFile("/proc/self/status"); status.ok()) {
    state.locked = KernelFieldBytes(*status, "VmLck").value_or(0);
    state.pinned = KernelFieldBytes(*status, "VmPin").value_or(0);
    state.exempt = (KernelFieldNumber(*status, "CapEff", 16).value_or(0) >> kCapIpcLock) & 1;
    const bool bounded = (KernelFieldNumber(*status, "CapBnd", 16).value_or(0) >> kCapIpcLock) & 1;
    state.bounded_not_effective = bounded && !state.exempt;
  }
  state.uid = ::getuid();
  return state;
}

int Mlock(void* at, std::size_t length) noexcept {
  counters().mlock.fetch_add(1, std::memory_order_relaxed);
  if (const int injected = InjectedFault(Call::kMlock, length); injected != 0) return injected;
  return ::mlock(at, length) == 0 ? 0 : errno;
}

void Munlock(void* at, std::size_t length) noexcept { ::munlock(at, length); }

}  // namespace pinpool::internal::os
