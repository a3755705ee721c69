// What the kernel says backs a chunk, read back from /proc/self/smaps rather than assumed (the
// kernel gives fewer huge pages than asked without an error). Also the room's reader for /proc
// and /sys files.
//
// The trap: the kernel merges adjacent VMAs with identical flags, so two chunks mapped side by
// side (typically when not populated, before either has an anon_vma) can show as one smaps entry
// whose AnonHugePages covers both. For a VMA that reaches outside the queried chunk, the chunk's
// share of THP is counted exactly from /proc/self/pagemap + /proc/kpageflags: a 2 MiB-aligned
// block counts when it is mapped by one whole 2 MiB THP folio (head at the block start,
// physically contiguous). That needs CAP_SYS_ADMIN (PFNs read as 0 without it); otherwise the
// chunk is credited min(its overlap, the VMA's AnonHugePages), which can over-count.
//
// Shared chunks (memfd, tmpfs files) report their THP as ShmemPmdMapped rather than
// AnonHugePages; both count. Page size reported for non-hugetlb memory: kTransparent when any byte
// is THP-backed or when the VMA is THP-eligible (smaps "THPeligible: 1"; its pages can still fault
// in huge), else k4K. Stateless and thread-safe; each query reads smaps afresh (a snapshot;
// concurrent mmaps elsewhere do not affect the chunk's own entries).
//
// The cost: the kernel builds every entry of smaps up to the chunk's, walking each mapping's page
// tables, the pool's earlier chunks included; in a pool of 4 KiB pages that walk grows with the
// pool, so building one chunk at a time costs quadratic time (a 4 GiB pool of 64 MiB chunks spent
// 2.5 s in it). QueryPopulatedPages asks for a populated chunk of small pages (the common case)
// with PAGEMAP_SCAN instead (Linux 6.7), which walks the chunk's own page tables only; eligibility
// does not matter there (populated without a huge page is k4K, as MapChunk decides anyway).
#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "os/os.h"

namespace pinpool::internal::os {
namespace {

constexpr std::size_t kPmdPage = std::size_t{2} << 20;
constexpr std::size_t kPagesPerPmd = kPmdPage / kBasePage;

// PAGEMAP_SCAN's argument and result (the kernel's ABI since Linux 6.7, ioctl_pagemap_scan(2);
// Debian 12's headers predate it): regions of [start, end) whose pages have every category of
// category_mask, each with the categories of return_mask it has.
struct ScanRegion {
  std::uint64_t start;
  std::uint64_t end;
  std::uint64_t categories;
};
struct ScanArg {
  std::uint64_t size;
  std::uint64_t flags;
  std::uint64_t start;
  std::uint64_t end;
  std::uint64_t walk_end;  // out: where the walk stopped (the vector was full), or end
  std::uint64_t vec;
  std::uint64_t vec_len;
  std::uint64_t max_pages;
  std::uint64_t category_inverted;
  std::uint64_t category_mask;
  std::uint64_t category_anyof_mask;
  std::uint64_t return_mask;
};
constexpr std::uint64_t kPageIsHuge = 1 << 6;  // a THP mapped by its PMD, or hugetlb
constexpr unsigned long kPagemapScan = _IOWR('f', 16, ScanArg);

// Closes a file descriptor on scope exit.
class Fd {
 public:
  explicit Fd(int fd) noexcept : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const noexcept { return fd_; }

 private:
  int fd_;
};

// One /proc/self/smaps entry, the fields this room uses.
struct Vma {
  std::uintptr_t start = 0;
  std::uintptr_t end = 0;
  bool accessible = false;  // any of r/w/x: PROT_NONE means "reserved", not a chunk
  bool hugetlb = false;     // VmFlags "ht"
  bool thp_eligible = false;
  std::size_t kernel_page_bytes = kBasePage;
  std::size_t anon_huge_bytes = 0;
};

std::uint64_t ParseKb(std::string_view value) {
  while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  std::uint64_t v = 0;
  std::from_chars(value.data(), value.data() + value.size(), v);
  return v;
}

// Whether the VmFlags value (two-letter codes separated by spaces) contains `flag`.
bool HasVmFlag(std::string_view flags, std::string_view flag) {
  while (!flags.empty()) {
    const std::size_t space = flags.find(' ');
    if (flags.substr(0, space) == flag) return true;
    if (space == std::string_view::npos) break;
    flags.remove_prefix(space + 1);
  }
  return false;
}

// The entries of `smaps` that overlap [lo, hi), in address order.
std::vector<Vma> OverlappingVmas(std::string_view smaps, std::uintptr_t lo, std::uintptr_t hi) {
  std::vector<Vma> out;
  Vma* cur = nullptr;
  while (!smaps.empty()) {
    const std::size_t nl = smaps.find('\n');
    const std::string_view line = smaps.substr(0, nl);
    smaps.remove_prefix(nl == std::string_view::npos ? smaps.size() : nl + 1);
    if (line.empty()) continue;
    const char c = line.front();
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) {
      // Header: "start-end perms offset dev inode [path]". Field names start upper-case.
      cur = nullptr;
      Vma v;
      const char* p = line.data();
      const char* e = p + line.size();
      auto r = std::from_chars(p, e, v.start, 16);
      if (r.ptr == e || *r.ptr != '-') continue;
      r = std::from_chars(r.ptr + 1, e, v.end, 16);
      if (r.ptr + 4 >= e) continue;
      const std::string_view perms(r.ptr + 1, 3);
      v.accessible = perms != "---";
      if (v.start >= hi) break;  // smaps is sorted
      if (v.end <= lo) continue;
      out.push_back(v);
      cur = &out.back();
      continue;
    }
    if (cur == nullptr) continue;
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view key = line.substr(0, colon);
    const std::string_view value = line.substr(colon + 1);
    if (key == "KernelPageSize") {
      cur->kernel_page_bytes = ParseKb(value) << 10;
    } else if (key == "AnonHugePages" || key == "ShmemPmdMapped" || key == "FilePmdMapped") {
      // THP of anonymous memory, of shmem (memfd, tmpfs chunks) and of other files.
      cur->anon_huge_bytes += ParseKb(value) << 10;
    } else if (key == "THPeligible") {
      cur->thp_eligible = ParseKb(value) == 1;
    } else if (key == "VmFlags") {
      cur->hugetlb = HasVmFlag(value, "ht");
    }
  }
  return out;
}

bool PreadAll(int fd, void* buf, std::size_t n, off_t offset) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t got = ::pread(fd, p, n, offset);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<std::size_t>(got);
    offset += got;
  }
  return true;
}

// Bytes of [lo, hi) mapped by whole, PMD-sized THP folios, from pagemap + kpageflags. nullopt
// when those cannot be read or PFNs are hidden (no CAP_SYS_ADMIN).
std::optional<std::size_t> CountThpBytes(std::uintptr_t lo, std::uintptr_t hi) {
  constexpr std::uint64_t kPresent = std::uint64_t{1} << 63;
  constexpr std::uint64_t kPfnMask = (std::uint64_t{1} << 55) - 1;
  constexpr std::uint64_t kKpfCompoundHead = std::uint64_t{1} << 15;
  constexpr std::uint64_t kKpfCompoundTail = std::uint64_t{1} << 16;
  constexpr std::uint64_t kKpfThp = std::uint64_t{1} << 22;

  Fd pagemap(::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC));
  Fd kpageflags(::open("/proc/kpageflags", O_RDONLY | O_CLOEXEC));
  if (pagemap.get() < 0 || kpageflags.get() < 0) return std::nullopt;

  std::uint64_t entries[kPagesPerPmd];
  std::uint64_t flags[kPagesPerPmd];
  std::size_t bytes = 0;
  for (std::uintptr_t block = (lo + kPmdPage - 1) & ~(kPmdPage - 1); block + kPmdPage <= hi;
       block += kPmdPage) {
    if (!PreadAll(pagemap.get(), entries, sizeof entries,
                  static_cast<off_t>(block / kBasePage * sizeof(std::uint64_t)))) {
      return std::nullopt;
    }
    if ((entries[0] & kPresent) == 0) continue;
    const std::uint64_t pfn0 = entries[0] & kPfnMask;
    if (pfn0 == 0) return std::nullopt;  // PFNs hidden from this process
    if (pfn0 % kPagesPerPmd != 0) continue;
    bool contiguous = true;
    for (std::size_t i = 1; i < kPagesPerPmd && contiguous; ++i) {
      contiguous = (entries[i] & kPresent) != 0 && (entries[i] & kPfnMask) == pfn0 + i;
    }
    if (!contiguous) continue;
    if (!PreadAll(kpageflags.get(), flags, sizeof flags,
                  static_cast<off_t>(pfn0 * sizeof(std::uint64_t)))) {
      return std::nullopt;
    }
    bool thp = (flags[0] & (kKpfThp | kKpfCompoundHead)) == (kKpfThp | kKpfCompoundHead);
    for (std::size_t i = 1; i < kPagesPerPmd && thp; ++i) {
      thp = (flags[i] & (kKpfThp | kKpfCompoundTail)) == (kKpfThp | kKpfCompoundTail);
    }
    if (thp) bytes += kPmdPage;
  }
  return bytes;
}

}  // namespace

std::string ReadSysfsChoice(const char* path) {
  auto text = ReadKernelFile(path);
  if (!text.ok()) return "unavailable";
  const std::size_t open = text->find('[');
  const std::size_t close = text->find(']', open);
  if (open == std::string::npos || close == std::string::npos) return "unknown";
  return text->substr(open + 1, close - open - 1);
}

absl::StatusOr<std::string> ReadKernelFile(const char* path) {
  const int injected = InjectedFault(Call::kReadKernelFile, 0);
  Fd fd(injected != 0 ? -1 : ::open(path, O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    const int err = injected != 0 ? injected : errno;
    const std::string msg = absl::StrFormat("cannot open %s: %s", path, std::strerror(err));
    if (err == ENOENT) return absl::NotFoundError(msg);
    if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(msg);
    if (err == EMFILE || err == ENFILE || err == ENOMEM) return absl::ResourceExhaustedError(msg);
    return absl::InternalError(msg);
  }
  std::string out;
  constexpr std::size_t kStep = 64 << 10;  // smaps is produced one read() at a time
  for (;;) {
    const std::size_t used = out.size();
    out.resize(used + kStep);
    const ssize_t got = ::read(fd.get(), out.data() + used, kStep);
    if (got < 0 && errno == EINTR) {
      out.resize(used);
      continue;
    }
    if (got < 0) {
      return absl::InternalError(absl::StrFormat("cannot read %s: %s", path, std::strerror(errno)));
    }
    out.resize(used + static_cast<std::size_t>(got));
    if (got == 0) return out;
  }
}

std::optional<std::size_t> ScanHugeBytes(const void* at, std::size_t length) {
  const auto lo = reinterpret_cast<std::uintptr_t>(at);
  if (InjectedFault(Call::kPagemapScan, length) != 0) return std::nullopt;
  Fd pagemap(::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC));
  if (pagemap.get() < 0) return std::nullopt;
  ScanRegion regions[64];
  ScanArg arg{};
  arg.size = sizeof arg;
  arg.start = lo;
  arg.end = lo + length;
  arg.vec = reinterpret_cast<std::uintptr_t>(regions);
  arg.vec_len = std::size(regions);
  arg.category_mask = kPageIsHuge;
  arg.return_mask = kPageIsHuge;
  std::size_t bytes = 0;
  while (arg.start < arg.end) {
    const int n = ::ioctl(pagemap.get(), kPagemapScan, &arg);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;  // ENOTTY or EINVAL: a kernel before 6.7
    for (int i = 0; i < n; ++i) bytes += regions[i].end - regions[i].start;
    if (arg.walk_end <= arg.start) return std::nullopt;  // no progress: do not spin
    arg.start = arg.walk_end;
  }
  return bytes;
}

absl::StatusOr<MappedChunk> QueryPopulatedPages(const void* at, std::size_t length) {
  const std::optional<std::size_t> huge = ScanHugeBytes(at, length);
  if (!huge) return QueryPages(at, length);
  MappedChunk out;
  out.huge_bytes = *huge;
  out.page_size = *huge > 0 ? PageSize::kTransparent : PageSize::k4K;
  return out;
}

absl::StatusOr<MappedChunk> QueryPages(const void* at, std::size_t length) {
  const auto lo = reinterpret_cast<std::uintptr_t>(at);
  const std::uintptr_t hi = lo + length;
  if (length == 0 || hi < lo) {
    return absl::InvalidArgumentError(absl::StrFormat("bad range %p + %d", at, length));
  }
  auto smaps = ReadKernelFile("/proc/self/smaps");
  if (!smaps.ok()) return smaps.status();
  const std::vector<Vma> vmas = OverlappingVmas(*smaps, lo, hi);

  // The range must be entirely mapped, accessible memory: a chunk, not (part of) a reservation.
  std::uintptr_t covered = lo;
  for (const Vma& v : vmas) {
    if (v.start > covered) break;
    if (!v.accessible) {
      return absl::FailedPreconditionError(
          absl::StrFormat("%p + %d is not a mapped chunk: [%#x, %#x) is only reserved (PROT_NONE)",
                          at, length, std::max(v.start, lo), std::min(v.end, hi)));
    }
    covered = v.end;
  }
  if (covered < hi) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%p + %d is not a mapped chunk: %#x is not mapped", at, length, covered));
  }

  if (vmas.front().hugetlb) {
    for (const Vma& v : vmas) {
      if (!v.hugetlb || v.kernel_page_bytes != vmas.front().kernel_page_bytes) {
        return absl::InternalError(
            absl::StrFormat("%p + %d mixes page sizes; it is not one chunk", at, length));
      }
    }
    MappedChunk out;
    out.huge_bytes = length;  // hugetlb pages are reserved at mmap time: all of it is huge
    switch (vmas.front().kernel_page_bytes) {
      case std::size_t{1} << 30:
        out.page_size = PageSize::k1G;
        return out;
      case std::size_t{2} << 20:
        out.page_size = PageSize::k2M;
        return out;
      default:
        return absl::UnimplementedError(
            absl::StrFormat("%p + %d uses %d kB hugetlb pages, which pinpool does not use", at,
                            length, vmas.front().kernel_page_bytes >> 10));
    }
  }

  MappedChunk out;
  bool eligible = true;
  for (const Vma& v : vmas) {
    if (v.hugetlb) {
      return absl::InternalError(
          absl::StrFormat("%p + %d mixes page sizes; it is not one chunk", at, length));
    }
    eligible = eligible && v.thp_eligible;
    if (v.anon_huge_bytes == 0) continue;
    const std::uintptr_t from = std::max(v.start, lo);
    const std::uintptr_t to = std::min(v.end, hi);
    if (v.start >= lo && v.end <= hi) {
      out.huge_bytes += v.anon_huge_bytes;  // the VMA is the chunk's alone
    } else if (auto exact = CountThpBytes(from, to)) {
      out.huge_bytes += *exact;
    } else {
      // Approximation (no pagemap PFNs): the merged VMA's THP may lie in a neighbour chunk.
      out.huge_bytes += std::min<std::size_t>(to - from, v.anon_huge_bytes);
    }
  }
  out.page_size = out.huge_bytes > 0 || eligible ? PageSize::kTransparent : PageSize::k4K;
  return out;
}

}  // namespace pinpool::internal::os
