// Probing the host: kernel and CPUs, memory, huge page pools (/sys/kernel/mm/hugepages), THP
// mode, RLIMIT_MEMLOCK and what counts against it (the os room's QueryMemlock, so the numbers
// are the ones a pool would see), fork mode; and io_uring: can a ring be set up, does it take a
// sparse fixed-buffer table (what pinpool's io_uring domain registers), kernel.io_uring_disabled,
// what the kernel can clone between rings (the library's own probe: a few slots and one page);
// and the default domain's long-term pin, tried on one page. Every ring opened, page pinned and
// page mapped here is given back before returning.
#include <dirent.h>
#include <liburing.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <string>
#include <string_view>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "domain/io_uring_refusal.h"
#include "info.h"
#include "os/kernel_fields.h"
#include "os/os.h"
#include "pinpool/domain.h"
#include "pinpool/verbs.h"

namespace pinpool::info {
namespace {

using internal::os::ReadKernelFile;

std::optional<std::uint64_t> ReadCount(const std::string& path) {
  auto text = ReadKernelFile(path.c_str());
  std::uint64_t v = 0;
  if (!text.ok() || !absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &v)) return std::nullopt;
  return v;
}

}  // namespace

const HugePagePool* MemoryFacts::Pool(std::uint64_t page_bytes) const {
  for (const HugePagePool& p : hugepages) {
    if (p.page_bytes == page_bytes) return &p;
  }
  return nullptr;
}

namespace {

std::optional<std::uint64_t> Headroom(const MemlockFacts& m, std::uint64_t used) {
  const internal::os::MemlockState state{.limit = m.soft.value_or(SIZE_MAX),
                                         .exempt = m.cap_ipc_lock};
  return state.Headroom(used);
}

}  // namespace

std::optional<std::uint64_t> MemlockFacts::PinHeadroom() const { return Headroom(*this, pinned); }
std::optional<std::uint64_t> MemlockFacts::LockHeadroom() const { return Headroom(*this, locked); }

SystemFacts ProbeSystem() {
  SystemFacts s;
  utsname u{};
  if (uname(&u) == 0) {
    s.kernel = u.release;
    s.machine = u.machine;
  }
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  s.cpus = cpus > 0 ? static_cast<unsigned>(cpus) : 0;
  s.uid = static_cast<std::uint32_t>(getuid());
  return s;
}

MemoryFacts ProbeMemory() {
  MemoryFacts m;
  const char* kDir = "/sys/kernel/mm/hugepages";
  if (DIR* dir = opendir(kDir)) {
    while (dirent* e = readdir(dir)) {
      absl::string_view name = e->d_name;  // "hugepages-2048kB"
      std::uint64_t kb = 0;
      if (!absl::ConsumePrefix(&name, "hugepages-") || !absl::ConsumeSuffix(&name, "kB") ||
          !absl::SimpleAtoi(name, &kb)) {
        continue;
      }
      const std::string path = absl::StrFormat("%s/%s/", kDir, e->d_name);
      HugePagePool p;
      p.page_bytes = kb << 10;
      p.total = ReadCount(path + "nr_hugepages").value_or(0);
      p.free = ReadCount(path + "free_hugepages").value_or(0);
      p.reserved = ReadCount(path + "resv_hugepages").value_or(0);
      p.surplus = ReadCount(path + "surplus_hugepages").value_or(0);
      p.overcommit = ReadCount(path + "nr_overcommit_hugepages").value_or(0);
      m.hugepages.push_back(p);
    }
    closedir(dir);
  }
  std::sort(
      m.hugepages.begin(), m.hugepages.end(),
      [](const HugePagePool& a, const HugePagePool& b) { return a.page_bytes < b.page_bytes; });
  m.thp_enabled = internal::os::ReadSysfsChoice("/sys/kernel/mm/transparent_hugepage/enabled");
  m.thp_defrag = internal::os::ReadSysfsChoice("/sys/kernel/mm/transparent_hugepage/defrag");
  if (auto meminfo = ReadKernelFile("/proc/meminfo"); meminfo.ok()) {
    m.total = internal::os::KernelFieldBytes(*meminfo, "MemTotal").value_or(0);
    m.available = internal::os::KernelFieldBytes(*meminfo, "MemAvailable").value_or(0);
  }
  return m;
}

MemlockFacts ProbeMemlock() {
  MemlockFacts f;
  rlimit limit{};
  if (getrlimit(RLIMIT_MEMLOCK, &limit) == 0) {
    if (limit.rlim_cur != RLIM_INFINITY) f.soft = limit.rlim_cur;
    if (limit.rlim_max != RLIM_INFINITY) f.hard = limit.rlim_max;
  }
  const internal::os::MemlockState state = internal::os::QueryMemlock();
  f.locked = state.locked;
  f.pinned = state.pinned;
  f.cap_ipc_lock = state.exempt;
  f.cap_ipc_lock_bounding_only = state.bounded_not_effective;
  return f;
}

CgroupFacts ProbeCgroup() {
  CgroupFacts f;
  f.state = internal::os::QueryMemoryCgroup();
  const internal::os::MemoryCgroupState& s = f.state;
  f.version = s.where.version;
  f.path = s.where.path;
  f.note = s.where.note;
  f.error = s.error;
  if (s.limited) {
    f.limit_path = s.limit_path;
    f.limit = s.limit;
    f.usage = s.usage;
    f.reclaimable = s.reclaimable;
    f.headroom = s.Headroom();
  }
  return f;
}

IoUringFacts ProbeIoUring() {
  IoUringFacts f;
  f.disabled_sysctl = internal::ReadIoUringDisabled();
  io_uring ring{};
  if (const int ret = io_uring_queue_init(4, &ring, 0); ret < 0) {
    f.error_errno = -ret;
    return f;
  }
  f.available = true;
  // pinpool's io_uring domain registers one sparse table and fills a slot per chunk.
  if (const int ret = io_uring_register_buffers_sparse(&ring, 1); ret < 0) {
    f.sparse_buffers = false;
    f.sparse_errno = -ret;
  } else {
    f.sparse_buffers = true;
    io_uring_unregister_buffers(&ring);
  }
  io_uring_queue_exit(&ring);
  f.clone = IoUringDomain::KernelCanClone();
  return f;
}

LongTermPinFacts ProbeLongTermPin() {
  LongTermPinFacts f;
  absl::StatusOr<std::shared_ptr<Domain>> domain = MakeLongTermPinDomain();
  if (!domain.ok()) {
    f.error = std::string(domain.status().message());
    return f;
  }
  const std::size_t page = internal::os::kBasePage;
  void* p = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                 -1, 0);
  if (p == MAP_FAILED) {
    f.error = "cannot map one page to pin";
    return f;
  }
  absl::StatusOr<Keys> keys = (*domain)->Register(p, page);
  if (keys.ok()) {
    (*domain)->Deregister(*keys);
    f.available = true;
  } else {
    f.error = absl::StrFormat("pinning one page failed: %s", keys.status().message());
  }
  munmap(p, page);
  return f;
}

Facts ProbeAll() {
  Facts f;
  f.system = ProbeSystem();
  f.rdma = ProbeRdma();
  f.memory = ProbeMemory();
  f.memlock = ProbeMemlock();
  f.cgroup = ProbeCgroup();
  f.fork_mode = ForkModeName(QueryForkMode());
  f.io_uring = ProbeIoUring();
  f.long_term_pin = ProbeLongTermPin();
  return f;
}

}  // namespace pinpool::info
