// Mapping chunks inside a reservation with a page-size policy: 1 GiB hugetlb, 2 MiB hugetlb,
// transparent huge pages, 4 KiB, largest first, each verified afterwards: populated small pages
// from their own page tables where the kernel can say (smaps.cc), everything else from smaps.
//
// Invariant: whatever happens, [at, at + length) ends up a fully mapped chunk (success) or a
// PROT_NONE reservation again (error, UnmapChunk), never unmapped. Kernel facts (seen on 6.18): a
// failed MAP_FIXED hugetlb mmap has already unmapped what was there, leaving a hole that another
// thread's mmap could take before it is re-reserved; a failed MAP_FIXED anonymous mmap leaves the
// old mapping in place (old kernels do not). So hugetlb chunks, which fail routinely (no free huge
// pages), are mapped elsewhere first and moved in with mremap(MREMAP_FIXED), which replaces the
// reservation atomically (Linux >= 5.16; older kernels map in place), and every failure path
// re-reserves with MAP_FIXED PROT_NONE. A chunk bound to a NUMA node (numa.cc) is bound before
// its first touch, so populating it places every page there.
//
// Memfd- and file-backed chunks (BackingSpec) take the same paths with MAP_SHARED mappings of
// the chunk's own file (chunk_file.cc creates it): hugetlb ones mapped elsewhere and moved in,
// the others MAP_FIXED in place. The file is owned by a ChunkFile from its creation, so every
// failure path closes (and unlinks) it after re-reserving the range; on success it goes to the
// caller with the mapping. A hugetlbfs directory's mount fixes the page size; tmpfs and memfds
// get THP only as shmem's sysfs switch allows (shmem_enabled).
// Thread-safe: the kernel serializes the mm changes; chunks must not be mapped twice at once.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "os/chunk_file.h"
#include "os/os.h"
#include "util/bytes.h"
#include "util/check.h"
#include "util/status_macros.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

namespace pinpool::internal::os {
namespace {

constexpr int kMapHuge2M = 21 << MAP_HUGE_SHIFT;
constexpr int kMapHuge1G = 30 << MAP_HUGE_SHIFT;
constexpr const char* kAllowFallback = "allow fallback (PoolOptions::require_page_size = false)";

// madvise, counted; returns 0 or errno.
int Madvise(void* at, std::size_t length, int advice) noexcept {
  counters().madvise.fetch_add(1, std::memory_order_relaxed);
  if (advice == MADV_POPULATE_WRITE || advice == MADV_DONTFORK) {
    const Call call = advice == MADV_POPULATE_WRITE ? Call::kPopulate : Call::kDontFork;
    if (const int injected = InjectedFault(call, length); injected != 0) return injected;
  }
  return ::madvise(at, length, advice) == 0 ? 0 : errno;
}

// mmap, counted and open to fault injection as `call` (an injected failure sets errno).
void* Mmap(Call call, void* at, std::size_t length, int flags, int fd = -1) noexcept {
  counters().mmap.fetch_add(1, std::memory_order_relaxed);
  if (const int injected = InjectedFault(call, length); injected != 0) {
    errno = injected;
    return MAP_FAILED;
  }
  return ::mmap(at, length, PROT_READ | PROT_WRITE, flags, fd, 0);
}

bool FileBacked(const BackingSpec& backing) noexcept {
  return backing.kind != BackingSpec::Kind::kAnonymous;
}

// Makes [at, at + length) a PROT_NONE reservation again, whatever is there now (a chunk, a
// reservation, or a hole left by a failed MAP_FIXED). Failing here would leave the range open to
// other mmaps that the arena would later overwrite, so it is fatal.
void Rereserve(void* at, std::size_t length) noexcept {
  counters().mmap.fetch_add(1, std::memory_order_relaxed);
  void* p =
      ::mmap(at, length, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  PINPOOL_CHECK(p == at, "cannot turn %p + %zu back into a reservation: mmap: %s", at, length,
                std::strerror(errno));
}

std::optional<std::uint64_t> ReadCount(const std::string& path) {
  auto text = ReadKernelFile(path.c_str());
  if (!text.ok()) return std::nullopt;
  std::uint64_t v = 0;
  const char* end = text->data() + text->size();
  if (std::from_chars(text->data(), end, v).ec != std::errc()) return std::nullopt;
  return v;
}

absl::Status HugetlbMissing(PageSize size, std::size_t length, int err) {
  const std::size_t page = PageBytes(size);
  const std::string dir = absl::StrFormat("/sys/kernel/mm/hugepages/hugepages-%dkB", page >> 10);
  const std::optional<std::uint64_t> free = ReadCount(dir + "/free_hugepages");
  if (!free) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "this machine has no %s huge pages for a %s chunk (%s does not exist; mmap: %s): use a "
        "smaller PoolOptions::page_size, or %s",
        FormatBytes(page), FormatBytes(length), dir, std::strerror(err), kAllowFallback));
  }
  const std::uint64_t total = ReadCount(dir + "/nr_hugepages").value_or(0);
  const std::uint64_t promised = ReadCount(dir + "/resv_hugepages").value_or(0);
  const std::uint64_t needed = length / page;
  const std::uint64_t available = *free > promised ? *free - promised : 0;
  const std::uint64_t target = total + (needed > available ? needed - available : needed);
  std::string fix;
  if (size == PageSize::k2M) {
    fix = absl::StrFormat("`sysctl vm.nr_hugepages=%d` or `echo %d > %s/nr_hugepages`", target,
                          target, dir);
  } else {
    fix = absl::StrFormat(
        "`echo %d > %s/nr_hugepages` (or at boot, `hugepagesz=1G hugepages=%d`: 1 GiB pages are "
        "hard to find once memory is fragmented)",
        target, dir, target);
  }
  std::string also;
  if (available >= needed) {
    also = absl::StrFormat(
        " (enough are free, so check the cgroup's hugetlb.%s.max and the NUMA "
        "memory policy)",
        size == PageSize::k2M ? "2MB" : "1GB");
  }
  return absl::FailedPreconditionError(absl::StrFormat(
      "no %s huge pages available for a %s chunk (HugePages_Free is %d%s, %d needed; mmap: %s)%s: "
      "reserve them with %s, or %s",
      FormatBytes(page), FormatBytes(length), *free,
      promised != 0 ? absl::StrFormat(", %d of them promised to other mappings", promised) : "",
      needed, std::strerror(err), also, fix, kAllowFallback));
}

}  // namespace

absl::Status CheckHugePagesAvailable(PageSize size, std::size_t bytes, int node) {
  const std::size_t page = PageBytes(size);
  const std::uint64_t needed = (bytes + page - 1) / page;
  if (node >= 0) {
    const std::size_t free = NodeFreeHugePages(node, page);
    if (free >= needed) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrFormat(
        "NUMA node %d has %d free %s huge pages and %s needs %d: reserve them on that node with "
        "`echo N > /sys/devices/system/node/node%d/hugepages/hugepages-%dkB/nr_hugepages`, or %s",
        node, free, FormatBytes(page), FormatBytes(bytes), needed, node, page >> 10,
        kAllowFallback));
  }
  const std::string dir = absl::StrFormat("/sys/kernel/mm/hugepages/hugepages-%dkB", page >> 10);
  const std::uint64_t free = ReadCount(dir + "/free_hugepages").value_or(0);
  const std::uint64_t promised = ReadCount(dir + "/resv_hugepages").value_or(0);
  const std::uint64_t available = free > promised ? free - promised : 0;
  if (available >= needed) return absl::OkStatus();
  const std::uint64_t target = ReadCount(dir + "/nr_hugepages").value_or(0) + needed - available;
  return absl::FailedPreconditionError(absl::StrFormat(
      "%s needs %d free %s huge pages and %d are available (free_hugepages %d, %d of them promised "
      "to other mappings): reserve them with `echo %d > %s/nr_hugepages`%s, or %s",
      FormatBytes(bytes), needed, FormatBytes(page), available, free, promised, target, dir,
      size == PageSize::k2M ? " (or `sysctl vm.nr_hugepages`)" : " (or at boot, `hugepagesz=1G`)",
      kAllowFallback));
}

namespace {

absl::Status ThpMissing(std::size_t length, bool eligible, std::string_view detail) {
  const std::string enabled = ReadSysfsChoice("/sys/kernel/mm/transparent_hugepage/enabled");
  if (enabled != "always" && enabled != "madvise") {
    return absl::FailedPreconditionError(absl::StrFormat(
        "no transparent huge pages for a %s chunk: /sys/kernel/mm/transparent_hugepage/enabled is "
        "[%s]%s: enable them with `echo madvise > /sys/kernel/mm/transparent_hugepage/enabled`, "
        "use hugetlb pages (PoolOptions::page_size = PageSize::k2M), or %s",
        FormatBytes(length), enabled, detail, kAllowFallback));
  }
  if (!eligible) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "a %s chunk is not eligible for transparent huge pages (THPeligible is 0 although THP is "
        "[%s])%s: check whether this process disabled THP (prctl PR_SET_THP_DISABLE), use "
        "hugetlb pages (PoolOptions::page_size = PageSize::k2M), or %s",
        FormatBytes(length), enabled, detail, kAllowFallback));
  }
  return absl::FailedPreconditionError(absl::StrFormat(
      "the kernel gave no transparent huge pages to a %s chunk (THP [%s], defrag [%s])%s: free "
      "memory is probably fragmented; try `echo 1 > /proc/sys/vm/compact_memory`, use hugetlb "
      "pages (PoolOptions::page_size = PageSize::k2M with vm.nr_hugepages reserved), or %s",
      FormatBytes(length), enabled, ReadSysfsChoice("/sys/kernel/mm/transparent_hugepage/defrag"),
      detail, kAllowFallback));
}

// THP for a memfd or tmpfs chunk is shmem's: its own sysfs switch (and tmpfs's huge= mount option).
absl::Status ShmemThpMissing(std::size_t length, const std::string& backing) {
  const std::string enabled = ReadSysfsChoice("/sys/kernel/mm/transparent_hugepage/shmem_enabled");
  return absl::FailedPreconditionError(absl::StrFormat(
      "the kernel gave no transparent huge pages to a %s chunk backed by %s: shmem THP is [%s] "
      "(/sys/kernel/mm/transparent_hugepage/shmem_enabled; a tmpfs mount's huge= option decides "
      "for its files): `echo advise > /sys/kernel/mm/transparent_hugepage/shmem_enabled`, use "
      "hugetlb pages (PoolOptions::page_size = PageSize::k2M: MFD_HUGETLB or a hugetlbfs "
      "directory), or %s",
      FormatBytes(length), backing, enabled, kAllowFallback));
}

// Faults every page of a fresh anonymous mapping in, writable, in steps of kPopulateStep (os.h).

absl::Status Populate(void* at, std::size_t length) {
  for (std::size_t done = 0; done < length;) {
    const std::size_t step = std::min(kPopulateStep, length - done);
    const int err = Madvise(static_cast<char*>(at) + done, step, MADV_POPULATE_WRITE);
    if (err == 0) {
      done += step;
      continue;
    }
    if (err == EINTR) continue;
    if (err == EINVAL) {
      // Before Linux 5.14: touch one byte per page (the mapping is fresh, so it reads 0).
      volatile char* p = static_cast<volatile char*>(at);
      for (std::size_t off = 0; off < length; off += kBasePage) p[off] = 0;
      return absl::OkStatus();
    }
    const std::string msg =
        absl::StrFormat("cannot populate a %s chunk: madvise(MADV_POPULATE_WRITE): %s",
                        FormatBytes(length), std::strerror(err));
    if (err == ENOMEM) {
      return absl::ResourceExhaustedError(
          msg + " (out of memory: free memory or the cgroup's memory.max is short of it)");
    }
    return absl::InternalError(msg);
  }
  return absl::OkStatus();
}

// Marks a freshly mapped chunk MADV_DONTFORK (a child must never get copy-on-write copies of
// registered pages, which would leave the parent's DMA target behind) and reads back what backs
// it: from its own page tables when it is `populated_small` (small pages, every one in), else
// from smaps. Re-reserves the range on error.
absl::StatusOr<MappedChunk> Finish(void* at, std::size_t length, bool populated_small = false) {
  if (const int err = Madvise(at, length, MADV_DONTFORK); err != 0) {
    Rereserve(at, length);
    // ENOMEM, EAGAIN: no memory for the VMA the advice splits off, or vm.max_map_count reached.
    return absl::Status(err == ENOMEM || err == EAGAIN ? absl::StatusCode::kResourceExhausted
                                                       : absl::StatusCode::kInternal,
                        absl::StrFormat("madvise(MADV_DONTFORK) on a %s chunk: %s (free memory, "
                                        "or raise vm.max_map_count)",
                                        FormatBytes(length), std::strerror(err)));
  }
  absl::StatusOr<MappedChunk> got =
      populated_small ? QueryPopulatedPages(at, length) : QueryPages(at, length);
  if (!got.ok()) Rereserve(at, length);
  return got;
}

absl::Status BindFailed(std::size_t length, int node, int err) {
  return absl::InvalidArgumentError(absl::StrFormat(
      "cannot bind a %s chunk to NUMA node %d: mbind: %s (is the node online and does it have "
      "memory? see /sys/devices/system/node)",
      FormatBytes(length), node, std::strerror(err)));
}

absl::StatusOr<MappedChunk> MapHugetlb(void* at, std::size_t length, PageSize size, bool populate,
                                       int node, const BackingSpec& backing) {
  if (node >= 0 && NodeFreeHugePages(node, PageBytes(size)) < length / PageBytes(size)) {
    // The global count may have pages, but a bound mapping can fault only in its node's pool (and
    // gets SIGBUS, or EFAULT from a registration, when that is empty).
    return absl::FailedPreconditionError(absl::StrFormat(
        "NUMA node %d has %d free %s huge pages, a %s chunk needs %d: reserve them on that node "
        "with `echo N > /sys/devices/system/node/node%d/hugepages/hugepages-%dkB/nr_hugepages`, "
        "or %s",
        node, NodeFreeHugePages(node, PageBytes(size)), FormatBytes(PageBytes(size)),
        FormatBytes(length), length / PageBytes(size), node, PageBytes(size) >> 10,
        kAllowFallback));
  }
  // No MAP_NORESERVE: the pages are reserved now, so later faults cannot fail. Bound to a node,
  // the pages are faulted in only after the binding (and the move into place).
  const bool populate_now = populate && node < 0;
  // A memfd or hugetlbfs file: its own hugetlb pages, reserved at mmap time like anonymous ones.
  ChunkFile file;
  if (FileBacked(backing)) {
    PINPOOL_ASSIGN_OR_RETURN(file, CreateChunkFile(backing, length, PageBytes(size)));
  }
  const int flags = (file.fd() >= 0 ? MAP_SHARED
                                    : MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB |
                                          (size == PageSize::k1G ? kMapHuge1G : kMapHuge2M)) |
                    (populate_now ? MAP_POPULATE : 0);
  void* fresh = Mmap(Call::kMapHugetlb, nullptr, length, flags, file.fd());
  if (fresh == MAP_FAILED) return HugetlbMissing(size, length, errno);  // range untouched
  if (node >= 0) {
    if (const int err = BindToNode(fresh, length, node); err != 0) {
      counters().munmap.fetch_add(1, std::memory_order_relaxed);
      ::munmap(fresh, length);
      return BindFailed(length, node, err);
    }
  }
  if (fresh != at) {
    counters().mmap.fetch_add(1, std::memory_order_relaxed);  // mremap counts as an mmap
    const int injected = InjectedFault(Call::kMremap, length);
    void* moved = injected != 0
                      ? MAP_FAILED
                      : ::mremap(fresh, length, length, MREMAP_MAYMOVE | MREMAP_FIXED, at);
    if (moved == MAP_FAILED) {
      const int err = injected != 0 ? injected : errno;
      counters().munmap.fetch_add(1, std::memory_order_relaxed);
      ::munmap(fresh, length);
      Rereserve(at, length);  // a failed MREMAP_FIXED may have unmapped the target already
      if (err != EINVAL) {
        return absl::ResourceExhaustedError(
            absl::StrFormat("cannot move %s huge pages into a %s chunk: mremap: %s",
                            FormatBytes(PageBytes(size)), FormatBytes(length), std::strerror(err)));
      }
      // Before Linux 5.16 hugetlb mappings cannot be mremapped: map in place. A failure here
      // opens a hole for an instant (closed by Rereserve), which the path above avoids.
      if (Mmap(Call::kMapHugetlb, at, length, flags | MAP_FIXED, file.fd()) == MAP_FAILED) {
        const int map_err = errno;
        Rereserve(at, length);
        return HugetlbMissing(size, length, map_err);
      }
      if (node >= 0) {
        if (const int err = BindToNode(at, length, node); err != 0) {
          Rereserve(at, length);
          return BindFailed(length, node, err);
        }
      }
    }
  }
  if (populate && !populate_now) {
    if (absl::Status s = Populate(at, length); !s.ok()) {
      Rereserve(at, length);
      return s;
    }
  }
  absl::StatusOr<MappedChunk> got = Finish(at, length);
  if (got.ok() && got->page_size != size) {
    Rereserve(at, length);
    return absl::InternalError(absl::StrFormat(
        "asked for %s huge pages, smaps reports a different page size for the %s chunk at %p",
        FormatBytes(PageBytes(size)), FormatBytes(length), at));
  }
  if (got.ok()) got->file = std::move(file);
  return got;
}

// THP (`thp`) or 4 KiB pages, anonymous or of the chunk's own file (shmem: a memfd or tmpfs). A
// failure to get memory at all is final: a smaller page size would need the same mmap.
absl::StatusOr<MappedChunk> MapSmallPages(void* at, std::size_t length, bool thp, bool require,
                                          bool populate, int node, const BackingSpec& backing) {
  ChunkFile file;
  if (FileBacked(backing)) {
    PINPOOL_ASSIGN_OR_RETURN(file, CreateChunkFile(backing, length, 0));
  }
  const int flags =
      file.fd() >= 0 ? MAP_SHARED | MAP_FIXED : MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED;
  if (Mmap(Call::kMapAnonymous, at, length, flags, file.fd()) == MAP_FAILED) {
    const int err = errno;
    Rereserve(at, length);
    return absl::ResourceExhaustedError(absl::StrFormat(
        "cannot map a %s chunk: mmap: %s (the kernel would not commit the memory: check free "
        "memory, vm.overcommit_memory and the cgroup's memory.max)",
        FormatBytes(length), std::strerror(err)));
  }
  if (node >= 0) {
    if (const int err = BindToNode(at, length, node); err != 0) {
      Rereserve(at, length);
      return BindFailed(length, node, err);
    }
  }
  if (thp) {
    if (const int err = Madvise(at, length, MADV_HUGEPAGE); err != 0 && require) {
      Rereserve(at, length);  // EINVAL: a kernel built without THP
      if (file.fd() >= 0) return ShmemThpMissing(length, file.Describe());
      return ThpMissing(length, /*eligible=*/false,
                        absl::StrFormat("; madvise(MADV_HUGEPAGE): %s", std::strerror(err)));
    }
  } else {
    // Honour "at most 4 KiB" even when THP is in `always` mode (and so keep khugepaged away).
    Madvise(at, length, MADV_NOHUGEPAGE);  // EINVAL without THP support: nothing to prevent
  }
  if (populate) {
    if (absl::Status s = Populate(at, length); !s.ok()) {
      Rereserve(at, length);
      return s;
    }
  }
  absl::StatusOr<MappedChunk> got = Finish(at, length, /*populated_small=*/populate);
  if (!got.ok()) return got;
  // Populated, a THP-eligible chunk without a single huge page did not get THP. Unpopulated, the
  // most that can be verified is eligibility (huge_bytes is then 0 until first touch).
  if (populate && got->huge_bytes == 0) got->page_size = PageSize::k4K;
  if (thp && require && got->page_size != PageSize::kTransparent) {
    // Whether the kernel would have given it THP, for the message: smaps says, on this error path.
    const absl::StatusOr<MappedChunk> read = QueryPages(at, length);
    const bool eligible = read.ok() && read->page_size == PageSize::kTransparent;
    Rereserve(at, length);
    if (file.fd() >= 0) return ShmemThpMissing(length, file.Describe());
    return ThpMissing(length, eligible, "");
  }
  got->file = std::move(file);
  return got;
}

}  // namespace

namespace {

absl::StatusOr<MappedChunk> MapChunkImpl(void* at, std::size_t length, PageSize largest,
                                         bool require, bool populate, int node,
                                         const BackingSpec& backing) {
  const auto addr = reinterpret_cast<std::uintptr_t>(at);
  if (at == nullptr || length == 0 || addr % kBasePage != 0 || length % kBasePage != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "cannot map a chunk of %d bytes at %p: address and length must be non-zero multiples of "
        "4 KiB",
        length, at));
  }
  const auto fits = [&](PageSize s) {
    return addr % PageBytes(s) == 0 && length % PageBytes(s) == 0;
  };
  if (require && !fits(largest)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "cannot require %s pages for a %s chunk at %p: its address and length must be multiples "
        "of %s",
        FormatBytes(PageBytes(largest)), FormatBytes(length), at, FormatBytes(PageBytes(largest))));
  }
  // A directory's filesystem decides which page sizes its files can have.
  std::optional<PageSize> only;  // hugetlbfs: the mount's size and nothing else
  bool no_hugetlb = false;       // tmpfs: no hugetlb sizes
  if (backing.kind == BackingSpec::Kind::kFile) {
    PINPOOL_ASSIGN_OR_RETURN(Filesystem fs,
                             CheckBackingDirectory(backing.directory, largest, require, length));
    if (fs.kind == Filesystem::Kind::kHugetlbfs) {
      only = fs.hugetlb_page_bytes == PageBytes(PageSize::k1G) ? PageSize::k1G : PageSize::k2M;
    } else {
      no_hugetlb = true;
    }
  }
  for (PageSize s : PageSizesToTry(largest, require)) {
    if (!fits(s)) continue;
    const bool hugetlb = s == PageSize::k1G || s == PageSize::k2M;
    if ((only && s != *only) || (hugetlb && no_hugetlb)) continue;
    if (hugetlb) {
      absl::StatusOr<MappedChunk> got = MapHugetlb(at, length, s, populate, node, backing);
      // A hugetlbfs file has no smaller pages to fall back to.
      if (got.ok() || require || only) return got;
      continue;  // the range is a reservation again: try smaller pages
    }
    return MapSmallPages(at, length, s == PageSize::kTransparent, require, populate, node, backing);
  }
  return absl::InternalError("no page size to try");  // unreachable: 4 KiB always fits
}

}  // namespace

std::vector<PageSize> PageSizesToTry(PageSize largest, bool require) {
  if (require) return {largest};
  std::vector<PageSize> sizes;
  for (PageSize s : {PageSize::k1G, PageSize::k2M, PageSize::kTransparent, PageSize::k4K}) {
    if (s >= largest) sizes.push_back(s);  // PageSize is ordered largest first
  }
  return sizes;
}

absl::StatusOr<MappedChunk> MapChunk(void* at, std::size_t length, PageSize largest, bool require,
                                     bool populate, int node, const BackingSpec& backing) {
  absl::StatusOr<MappedChunk> got =
      MapChunkImpl(at, length, largest, require, populate, node, backing);
  if (got.ok()) {
    counters().chunk_bytes.fetch_add(static_cast<std::int64_t>(length), std::memory_order_relaxed);
  }
  return got;
}

absl::StatusOr<MappedChunk> MapChunkFile(void* at, std::size_t length, ChunkFile& file,
                                         bool populate) {
  if (Mmap(Call::kMapAnonymous, at, length, MAP_SHARED | MAP_FIXED, file.fd()) == MAP_FAILED) {
    const int err = errno;
    Rereserve(at, length);
    return absl::ResourceExhaustedError(
        absl::StrFormat("cannot map an adopted %s chunk (%s): mmap: %s", FormatBytes(length),
                        file.Describe(), std::strerror(err)));
  }
  // Its pages exist already (they hold the previous owner's data): populating only maps them.
  absl::Status populated = populate ? Populate(at, length) : absl::OkStatus();
  if (!populated.ok()) Rereserve(at, length);
  // A tmpfs file or memfd has small pages, read from its page tables; a hugetlbfs one is read
  // from smaps, which says its page size (AdoptChunkFile found which it is).
  const bool populated_small = populate && file.hugetlb_page_bytes() == 0;
  absl::StatusOr<MappedChunk> got =
      populated.ok() ? Finish(at, length, populated_small) : absl::StatusOr<MappedChunk>(populated);
  if (!got.ok()) return got;  // the range is a reservation again; `file` is the caller's still
  got->file = std::move(file);
  counters().chunk_bytes.fetch_add(static_cast<std::int64_t>(length), std::memory_order_relaxed);
  return got;
}

absl::Status MapFileView(void* at, std::size_t length, int fd) {
  if (Mmap(Call::kMapAnonymous, at, length, MAP_SHARED | MAP_FIXED, fd) == MAP_FAILED) {
    const int err = errno;
    Rereserve(at, length);
    return absl::ResourceExhaustedError(
        absl::StrFormat("cannot map a shared pool's %s chunk: mmap: %s (vm.max_map_count?)",
                        FormatBytes(length), std::strerror(err)));
  }
  return absl::OkStatus();
}

void UnmapView(void* at, std::size_t length) noexcept { Rereserve(at, length); }

void UnmapChunk(void* at, std::size_t length) noexcept {
  counters().chunk_bytes.fetch_sub(static_cast<std::int64_t>(length), std::memory_order_relaxed);
  Rereserve(at, length);
}

}  // namespace pinpool::internal::os
