// RLIMIT_MEMLOCK as it applies to this process: the soft limit, what is locked and pinned now
// (VmLck, VmPin: the kernel checks each against the limit on its own), and
// whether CAP_IPC_LOCK exempts the process from it. Read fresh on every call (limits and
// capabilities can change at run time); thread-safe. Also mlock itself, so that tests can make
// it fail.
#include <sys/mman.h>
#include <sys/resource.h>

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

#include "os/os.h"

namespace pinpool::internal::os {
namespace {

constexpr int kCapIpcLock = 14;

// The value after "`key`:" in /proc/self/status, without leading blanks; empty if absent.
std::string_view StatusField(std::string_view status, std::string_view key) {
  for (std::size_t at = 0; at < status.size();) {
    const std::size_t nl = status.find('\n', at);
    std::string_view line = status.substr(at, nl == std::string_view::npos ? nl : nl - at);
    at = nl == std::string_view::npos ? status.size() : nl + 1;
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ':') {
      line.remove_prefix(key.size() + 1);
      while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
      return line;
    }
  }
  return {};
}

std::uint64_t ParseNumber(std::string_view text, int base) {
  std::uint64_t v = 0;
  std::from_chars(text.data(), text.data() + text.size(), v, base);
  return v;
}

}  // namespace

MemlockState QueryMemlock() noexcept {
  MemlockState state;
  rlimit limit{};
  if (::getrlimit(RLIMIT_MEMLOCK, &limit) == 0) {
    state.limit =
        limit.rlim_cur == RLIM_INFINITY ? SIZE_MAX : static_cast<std::size_t>(limit.rlim_cur);
  }
  if (auto status = ReadKernelFile("/proc/self/status"); status.ok()) {
    state.locked = ParseNumber(StatusField(*status, "VmLck"), 10) << 10;  // "123 kB"
    state.pinned = ParseNumber(StatusField(*status, "VmPin"), 10) << 10;
    state.exempt = (ParseNumber(StatusField(*status, "CapEff"), 16) >> kCapIpcLock) & 1;
  }
  return state;
}

int Mlock(void* at, std::size_t length) noexcept {
  counters().mlock.fetch_add(1, std::memory_order_relaxed);
  if (const int injected = InjectedFault(Call::kMlock, length); injected != 0) return injected;
  return ::mlock(at, length) == 0 ? 0 : errno;
}

void Munlock(void* at, std::size_t length) noexcept { ::munlock(at, length); }

}  // namespace pinpool::internal::os
