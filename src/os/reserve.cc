// Address-space reservations: PROT_NONE, MAP_NORESERVE ranges that cost no memory and keep every
// other mapping of the process out, so that chunks can later be mapped MAP_FIXED inside them and
// `pointer -> chunk` is an index computation. Also owns the room's syscall counters, the fault
// hook, and the one way the library starts a thread (StartThread).
//
// Invariant: a Range returned by Reserve is aligned to the requested alignment and stays mapped
// (reserved or holding chunks) until Release. Thread-safe; the counters are relaxed atomics.
#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "os/os.h"
#include "util/bytes.h"
#include "util/check.h"

namespace pinpool::internal::os {
namespace {

std::atomic<FaultHook> fault_hook{nullptr};

}  // namespace

Counters& counters() noexcept {
  static Counters counters;
  return counters;
}

FaultHook SetFaultHook(FaultHook hook) noexcept { return fault_hook.exchange(hook); }

int InjectedFault(Call call, std::size_t length) noexcept {
  const FaultHook hook = fault_hook.load(std::memory_order_relaxed);
  return hook == nullptr ? 0 : hook(call, length);
}

const char* CallName(Call call) noexcept {
  switch (call) {
    case Call::kReserve:
      return "reserve";
    case Call::kMapHugetlb:
      return "mmap hugetlb";
    case Call::kMremap:
      return "mremap";
    case Call::kMapAnonymous:
      return "mmap";
    case Call::kPopulate:
      return "populate";
    case Call::kMlock:
      return "mlock";
    case Call::kPinBuffer:
      return "io_uring pin";
    case Call::kMapMetadata:
      return "metadata mmap";
    case Call::kBindNode:
      return "mbind";
    case Call::kCreateFile:
      return "create file";
    case Call::kPagemapScan:
      return "pagemap scan";
    case Call::kCloneBuffers:
      return "io_uring clone";
    case Call::kTruncateFile:
      return "ftruncate";
    case Call::kSealFile:
      return "seal";
    case Call::kLeaseFile:
      return "lease";
    case Call::kLockFile:
      return "flock";
    case Call::kReopenFile:
      return "reopen";
    case Call::kDupFd:
      return "dup";
    case Call::kSendMessage:
      return "sendmsg";
    case Call::kReceiveMessage:
      return "recvmsg";
    case Call::kDontFork:
      return "MADV_DONTFORK";
    case Call::kReadKernelFile:
      return "read /proc";
    case Call::kMembarrier:
      return "membarrier";
    case Call::kThread:
      return "thread";
    case Call::kSocket:
      return "socket";
    case Call::kBindSocket:
      return "bind";
    case Call::kRingSetup:
      return "io_uring setup";
    case Call::kRegisterTable:
      return "io_uring table";
    case Call::kVerbsRegister:
      return "ibv_reg_mr";
    case Call::kVerbsWindow:
      return "ibv_alloc_mw";
    case Call::kVerbsPost:
      return "ibv_post_send";
    case Call::kUcxMap:
      return "ucp_mem_map";
    case Call::kUcxPack:
      return "ucp_rkey_pack";
    case Call::kFabricRegister:
      return "fi_mr_regattr";
    case Call::kFabricBind:
      return "fi_mr_bind";
    case Call::kFabricPost:
      return "fi_post";
  }
  return "?";
}

absl::StatusOr<std::thread> StartThread(std::function<void()> body) {
  int err = InjectedFault(Call::kThread, 0);
  if (err == 0) {
    try {
      return std::thread(std::move(body));
    } catch (const std::system_error& e) {
      err = e.code().value();
    }
  }
  return absl::ResourceExhaustedError(absl::StrFormat(
      "cannot start a thread: %s (RLIMIT_NPROC, the cgroup's pids.max or kernel.threads-max)",
      std::strerror(err)));
}

absl::StatusOr<Range> Reserve(std::size_t length, std::size_t alignment) {
  if (length == 0) return absl::InvalidArgumentError("cannot reserve 0 bytes of address space");
  if (!IsPowerOfTwo(alignment)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("reservation alignment %d is not a power of two", alignment));
  }
  if (alignment < kBasePage) alignment = kBasePage;
  if (length > SIZE_MAX - alignment - kBasePage) {
    return absl::InvalidArgumentError(
        absl::StrFormat("cannot reserve %d bytes aligned to %s: larger than the address space",
                        length, FormatBytes(alignment)));
  }
  length = (length + kBasePage - 1) & ~(kBasePage - 1);

  // mmap only promises page alignment: over-reserve by one alignment and trim both ends.
  const std::size_t padded = alignment > kBasePage ? length + alignment : length;
  counters().mmap.fetch_add(1, std::memory_order_relaxed);
  const int injected = InjectedFault(Call::kReserve, padded);
  void* raw = injected != 0 ? MAP_FAILED
                            : ::mmap(nullptr, padded, PROT_NONE,
                                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) {
    const int err = injected != 0 ? injected : errno;
    return absl::ResourceExhaustedError(absl::StrFormat(
        "cannot reserve %s of address space aligned to %s: mmap: %s (check `ulimit -v` and "
        "vm.max_map_count, or use a smaller PoolOptions::budget)",
        FormatBytes(length), FormatBytes(alignment), std::strerror(err)));
  }
  const auto start = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t base = (start + alignment - 1) & ~(std::uintptr_t{alignment} - 1);
  const std::size_t head = base - start;
  const std::size_t tail = padded - head - length;
  if (head != 0) {
    counters().munmap.fetch_add(1, std::memory_order_relaxed);
    PINPOOL_CHECK(::munmap(raw, head) == 0, "munmap of reservation head: %s", std::strerror(errno));
  }
  if (tail != 0) {
    counters().munmap.fetch_add(1, std::memory_order_relaxed);
    PINPOOL_CHECK(::munmap(reinterpret_cast<void*>(base + length), tail) == 0,
                  "munmap of reservation tail: %s", std::strerror(errno));
  }
  counters().reserved_bytes.fetch_add(static_cast<std::int64_t>(length), std::memory_order_relaxed);
  return Range{reinterpret_cast<void*>(base), length};
}

void Release(Range range, std::size_t chunk_bytes) noexcept {
  if (range.base == nullptr || range.length == 0) return;
  counters().munmap.fetch_add(1, std::memory_order_relaxed);
  counters().chunk_bytes.fetch_sub(static_cast<std::int64_t>(chunk_bytes),
                                   std::memory_order_relaxed);
  counters().reserved_bytes.fetch_sub(static_cast<std::int64_t>(range.length),
                                      std::memory_order_relaxed);
  PINPOOL_CHECK(::munmap(range.base, range.length) == 0, "munmap of reservation %p + %zu: %s",
                range.base, range.length, std::strerror(errno));
}

}  // namespace pinpool::internal::os
