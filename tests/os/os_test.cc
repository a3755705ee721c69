// Tests of the os room against the real kernel: every claim MapChunk makes about page sizes is
// checked against /proc/self/smaps (parsed here independently), residency against mincore, and
// reservations against MAP_FIXED_NOREPLACE probes. Tests that need huge pages set
// /proc/sys/vm/nr_hugepages when root and restore it; they skip with a reason otherwise.
#include "os/os.h"

#include <linux/capability.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "support/huge_pages.h"
#include "support/sanitizers.h"
#include "support/scan_hook.h"

namespace pinpool::internal::os {
namespace {

using testing::AvailableHugePages;
using testing::HugeDir;
using testing::HugePageGrant;
using testing::ReadNumber;

constexpr std::size_t kKiB = std::size_t{1} << 10;
constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kGiB = std::size_t{1} << 30;

// --- independent readers of what the kernel says --------------------------------------------

struct SmapsVma {
  std::uintptr_t start = 0;
  std::uintptr_t end = 0;
  std::string perms;
  std::size_t kernel_page_kb = 0;
  std::size_t rss_kb = 0;
  std::size_t anon_huge_kb = 0;
  std::size_t private_hugetlb_kb = 0;
  std::string vmflags;  // " rd wr ... " with a space on each side, for find(" xx ")
};

std::vector<SmapsVma> SmapsOverlapping(const void* at, std::size_t length) {
  const auto lo = reinterpret_cast<std::uintptr_t>(at);
  const std::uintptr_t hi = lo + length;
  std::ifstream in("/proc/self/smaps");
  std::vector<SmapsVma> all;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string first;
    ls >> first;
    const std::size_t dash = first.find('-');
    if (dash != std::string::npos && first.back() != ':') {
      SmapsVma v;
      v.start = std::stoull(first.substr(0, dash), nullptr, 16);
      v.end = std::stoull(first.substr(dash + 1), nullptr, 16);
      ls >> v.perms;
      all.push_back(v);
      continue;
    }
    if (all.empty()) continue;
    SmapsVma& v = all.back();
    std::size_t kb = 0;
    if (first == "VmFlags:") {
      std::getline(ls, v.vmflags);
      v.vmflags += " ";
    } else if (ls >> kb) {
      if (first == "KernelPageSize:") v.kernel_page_kb = kb;
      if (first == "Rss:") v.rss_kb = kb;
      if (first == "AnonHugePages:") v.anon_huge_kb = kb;
      if (first == "Private_Hugetlb:") v.private_hugetlb_kb = kb;
    }
  }
  std::vector<SmapsVma> out;
  for (const SmapsVma& v : all) {
    if (v.end > lo && v.start < hi) out.push_back(v);
  }
  return out;
}

// 0 when nothing is mapped at `p` (the probe got the page and gave it back), else the errno of a
// MAP_FIXED_NOREPLACE mmap there: EEXIST means something (e.g. a reservation) holds the address.
int ProbeAddress(void* p) {
  void* got =
      mmap(p, 4 * kKiB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (got == MAP_FAILED) return errno;
  munmap(got, 4 * kKiB);
  return got == p ? 0 : -1;
}

std::string ThpMode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string word;
  while (in >> word) {
    if (word.front() == '[') return word.substr(1, word.size() - 2);
  }
  return "unavailable";
}

std::size_t StatusKb(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::string prefix = std::string(key) + ":";
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) == 0) return std::stoull(line.substr(prefix.size()));
  }
  return 0;
}

std::size_t ResidentPages(void* at, std::size_t length) {
  std::vector<unsigned char> vec(length / (4 * kKiB));
  if (mincore(at, length, vec.data()) != 0) return SIZE_MAX;
  std::size_t n = 0;
  for (unsigned char c : vec) n += c & 1;
  return n;
}

// A reservation released at scope exit.
class Reservation {
 public:
  Reservation(std::size_t length, std::size_t alignment) {
    auto r = Reserve(length, alignment);
    EXPECT_TRUE(r.ok()) << r.status();
    if (r.ok()) range_ = *r;
  }
  ~Reservation() { Release(range_); }
  char* at(std::size_t offset = 0) const { return static_cast<char*>(range_.base) + offset; }
  const Range& range() const { return range_; }

 private:
  Range range_;
};

struct CounterSnapshot {
  std::uint64_t mmap, munmap, madvise;
  static CounterSnapshot Now() {
    return {counters().mmap.load(), counters().munmap.load(), counters().madvise.load()};
  }
};

// --- Reserve / Release ------------------------------------------------------------------------

TEST(OsReserve, IsAlignedAndReservedAndReleased) {
  for (std::size_t alignment : {std::size_t{1}, 4 * kKiB, 64 * kKiB, 2 * kMiB, kGiB}) {
    SCOPED_TRACE(alignment);
    auto r = Reserve(3 * kMiB + 123, alignment);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(r->base) % alignment, 0u);
    EXPECT_EQ(r->length, 3 * kMiB + 4 * kKiB);  // rounded up to whole pages
    const std::vector<SmapsVma> vmas = SmapsOverlapping(r->base, r->length);
    ASSERT_FALSE(vmas.empty());
    for (const SmapsVma& v : vmas) {
      EXPECT_EQ(v.perms, "---p");
      EXPECT_EQ(v.rss_kb, 0u);
      EXPECT_NE(v.vmflags.find(" nr "), std::string::npos) << v.vmflags;  // MAP_NORESERVE
    }
    EXPECT_EQ(ProbeAddress(r->base), EEXIST);
    EXPECT_EQ(ProbeAddress(static_cast<char*>(r->base) + r->length - 4 * kKiB), EEXIST);
    Release(*r);
    EXPECT_TRUE(SmapsOverlapping(r->base, r->length).empty());
  }
}

TEST(OsReserve, RejectsBadArguments) {
  EXPECT_EQ(Reserve(0, 4 * kKiB).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Reserve(kMiB, 3 * kKiB).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Reserve(SIZE_MAX - kKiB, 2 * kMiB).status().code(), absl::StatusCode::kInvalidArgument);
  auto huge = Reserve(std::size_t{1} << 62, 2 * kMiB);  // more than the address space
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted) << huge.status();
}

// --- MapChunk: page sizes ---------------------------------------------------------------------

TEST(OsMapChunk, FourKReportsK4KAndSmapsAgrees) {
  Reservation res(16 * kMiB, 2 * kMiB);
  auto got = MapChunk(res.at(), 8 * kMiB, PageSize::k4K, /*require=*/true, /*populate=*/true);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->page_size, PageSize::k4K);
  EXPECT_EQ(got->huge_bytes, 0u);

  const std::vector<SmapsVma> vmas = SmapsOverlapping(res.at(), 8 * kMiB);
  ASSERT_EQ(vmas.size(), 1u);
  EXPECT_EQ(vmas[0].start, reinterpret_cast<std::uintptr_t>(res.at()));
  EXPECT_EQ(vmas[0].end, reinterpret_cast<std::uintptr_t>(res.at(8 * kMiB)));
  EXPECT_EQ(vmas[0].perms, "rw-p");
  EXPECT_EQ(vmas[0].kernel_page_kb, 4u);
  EXPECT_EQ(vmas[0].anon_huge_kb, 0u);
  EXPECT_EQ(vmas[0].rss_kb, 8 * kMiB / kKiB);
  EXPECT_NE(vmas[0].vmflags.find(" dc "), std::string::npos) << vmas[0].vmflags;  // DONTFORK
  EXPECT_NE(vmas[0].vmflags.find(" nh "), std::string::npos) << vmas[0].vmflags;  // NOHUGEPAGE

  auto again = QueryPages(res.at(), 8 * kMiB);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->page_size, PageSize::k4K);
  EXPECT_EQ(again->huge_bytes, 0u);
  // The rest of the reservation is untouched.
  EXPECT_EQ(ProbeAddress(res.at(8 * kMiB)), EEXIST);
  EXPECT_EQ(SmapsOverlapping(res.at(8 * kMiB), 8 * kMiB).at(0).perms, "---p");
}

TEST(OsMapChunk, SkipsPageSizesTheChunkIsNotAMultipleOf) {
  Reservation res(4 * kMiB, 2 * kMiB);
  // 1 MiB + 4 KiB fits no huge page size: without require, everything down to 4 KiB is skipped.
  auto got = MapChunk(res.at(), kMiB + 4 * kKiB, PageSize::k1G, false, true);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->page_size, PageSize::k4K);
  EXPECT_EQ(SmapsOverlapping(res.at(), kMiB + 4 * kKiB).at(0).kernel_page_kb, 4u);
  UnmapChunk(res.at(), kMiB + 4 * kKiB);
  // With require it is an argument error, and nothing is mapped.
  auto required = MapChunk(res.at(), kMiB + 4 * kKiB, PageSize::kTransparent, true, true);
  EXPECT_EQ(required.status().code(), absl::StatusCode::kInvalidArgument) << required.status();
  auto misaligned = MapChunk(res.at(4 * kKiB), 2 * kMiB, PageSize::k2M, true, true);
  EXPECT_EQ(misaligned.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MapChunk(res.at(100), 4 * kKiB, PageSize::k4K, false, false).status().code(),
            absl::StatusCode::kInvalidArgument);
  for (const SmapsVma& v : SmapsOverlapping(res.at(), 4 * kMiB)) EXPECT_EQ(v.perms, "---p");
}

TEST(OsMapChunk, TransparentHugePagesReportTransparentWithHugeBytes) {
  if (ThpMode() != "always" && ThpMode() != "madvise") {
    GTEST_SKIP() << "transparent huge pages are [" << ThpMode() << "] on this machine";
  }
  Reservation res(48 * kMiB, 2 * kMiB);
  auto got = MapChunk(res.at(), 16 * kMiB, PageSize::kTransparent, /*require=*/true, true);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->page_size, PageSize::kTransparent);
  EXPECT_GT(got->huge_bytes, 0u);

  const std::vector<SmapsVma> vmas = SmapsOverlapping(res.at(), 16 * kMiB);
  ASSERT_EQ(vmas.size(), 1u);
  EXPECT_EQ(vmas[0].end - vmas[0].start, 16 * kMiB);  // the VMA is the chunk: no merging
  EXPECT_EQ(got->huge_bytes, vmas[0].anon_huge_kb * kKiB);
  EXPECT_NE(vmas[0].vmflags.find(" hg "), std::string::npos) << vmas[0].vmflags;  // MADV_HUGEPAGE
  EXPECT_NE(vmas[0].vmflags.find(" dc "), std::string::npos) << vmas[0].vmflags;

  // Unpopulated, the chunk is reported by eligibility: transparent, nothing huge yet. (Mapped
  // apart from the first chunk: right next to it, it would merge into its VMA.)
  auto lazy = MapChunk(res.at(32 * kMiB), 16 * kMiB, PageSize::kTransparent, true, false);
  ASSERT_TRUE(lazy.ok()) << lazy.status();
  EXPECT_EQ(lazy->page_size, PageSize::kTransparent);
  EXPECT_EQ(lazy->huge_bytes, 0u);
}

// Two chunks mapped side by side without populate merge into one VMA, whose AnonHugePages then
// covers both: each chunk must still be credited only with its own huge pages.
TEST(OsMapChunk, AdjacentThpChunksInOneVmaEachReportTheirOwnHugePages) {
  if (ThpMode() != "always" && ThpMode() != "madvise") {
    GTEST_SKIP() << "transparent huge pages are [" << ThpMode() << "] on this machine";
  }
  if (access("/proc/kpageflags", R_OK) != 0 || geteuid() != 0) {
    GTEST_SKIP() << "exact attribution needs /proc/self/pagemap PFNs and /proc/kpageflags (root); "
                    "without them QueryPages approximates by design";
  }
  constexpr std::size_t kChunk = 8 * kMiB;
  Reservation res(3 * kChunk, 2 * kMiB);
  char* a = res.at();
  char* b = res.at(kChunk);
  ASSERT_TRUE(MapChunk(a, kChunk, PageSize::kTransparent, true, false).ok());
  ASSERT_TRUE(MapChunk(b, kChunk, PageSize::kTransparent, true, false).ok());
  std::vector<SmapsVma> vmas = SmapsOverlapping(a, 2 * kChunk);
  if (vmas.size() != 1) GTEST_SKIP() << "this kernel did not merge the two chunks' VMAs";

  ASSERT_EQ(madvise(a, kChunk, MADV_POPULATE_WRITE), 0) << strerror(errno);
  const std::size_t vma_huge = SmapsOverlapping(a, 2 * kChunk).at(0).anon_huge_kb * kKiB;
  if (vma_huge == 0) GTEST_SKIP() << "the kernel gave no THP at all (memory fragmented?)";
  auto qa = QueryPages(a, kChunk);
  auto qb = QueryPages(b, kChunk);
  ASSERT_TRUE(qa.ok() && qb.ok()) << qa.status() << " " << qb.status();
  EXPECT_EQ(qa->huge_bytes, vma_huge);  // all of the VMA's THP is in chunk a
  EXPECT_EQ(qa->page_size, PageSize::kTransparent);
  EXPECT_EQ(qb->huge_bytes, 0u);  // the naive min(length, AnonHugePages) would say 8 MiB

  ASSERT_EQ(madvise(b, kChunk / 2, MADV_POPULATE_WRITE), 0) << strerror(errno);
  vmas = SmapsOverlapping(a, 2 * kChunk);
  ASSERT_EQ(vmas.size(), 1u);
  qa = QueryPages(a, kChunk);
  qb = QueryPages(b, kChunk);
  ASSERT_TRUE(qa.ok() && qb.ok());
  EXPECT_EQ(qa->huge_bytes, vma_huge);
  EXPECT_GT(qb->huge_bytes, 0u);
  EXPECT_LE(qb->huge_bytes, kChunk / 2);
  EXPECT_EQ(qa->huge_bytes + qb->huge_bytes, vmas[0].anon_huge_kb * kKiB);
}

// --- huge pages counted in the chunk's own page tables (PAGEMAP_SCAN) ----------------------------

// Whether this kernel has PAGEMAP_SCAN (Linux 6.7), from its release; empty when it has, else why
// not.
std::string WhyNoPagemapScan() {
  utsname u{};
  if (uname(&u) != 0) return "uname failed";
  int major = 0;
  int minor = 0;
  if (std::sscanf(u.release, "%d.%d", &major, &minor) != 2) return "unparsable release";
  if (major > 6 || (major == 6 && minor >= 7)) return "";
  return std::string("PAGEMAP_SCAN needs Linux 6.7, this kernel is ") + u.release +
         " (MapChunk reads smaps there)";
}

using pinpool::testing::ScanHook;

TEST(OsScanHugeBytes, CountsTheHugePagesSmapsCountsInTheRangeAlone) {
  if (const std::string why = WhyNoPagemapScan(); !why.empty()) GTEST_SKIP() << why;
  if (ThpMode() != "always" && ThpMode() != "madvise") {
    GTEST_SKIP() << "transparent huge pages are [" << ThpMode() << "] on this machine";
  }
  Reservation res(48 * kMiB, 2 * kMiB);
  // A THP chunk populated whole, one populated by half (apart, so that their VMAs stay apart) and
  // a 4 KiB one.
  ASSERT_TRUE(MapChunk(res.at(), 8 * kMiB, PageSize::kTransparent, true, true).ok());
  ASSERT_TRUE(MapChunk(res.at(16 * kMiB), 8 * kMiB, PageSize::kTransparent, true, false).ok());
  ASSERT_EQ(madvise(res.at(16 * kMiB), 4 * kMiB, MADV_POPULATE_WRITE), 0) << strerror(errno);
  ASSERT_TRUE(MapChunk(res.at(32 * kMiB), 8 * kMiB, PageSize::k4K, true, true).ok());

  const std::optional<std::size_t> whole = ScanHugeBytes(res.at(), 8 * kMiB);
  const std::optional<std::size_t> half = ScanHugeBytes(res.at(16 * kMiB), 8 * kMiB);
  const std::optional<std::size_t> small = ScanHugeBytes(res.at(32 * kMiB), 8 * kMiB);
  ASSERT_TRUE(whole && half && small) << "this kernel has PAGEMAP_SCAN, yet the scan failed";
  const std::size_t smaps_whole = SmapsOverlapping(res.at(), 8 * kMiB).at(0).anon_huge_kb * kKiB;
  const std::size_t smaps_half =
      SmapsOverlapping(res.at(16 * kMiB), 8 * kMiB).at(0).anon_huge_kb * kKiB;
  if (smaps_whole == 0) GTEST_SKIP() << "the kernel gave no THP at all (memory fragmented?)";
  EXPECT_EQ(*whole, smaps_whole);
  EXPECT_EQ(*half, smaps_half);
  EXPECT_LE(*half, 4 * kMiB);
  EXPECT_EQ(*small, 0u);
  // Part of a chunk: only that part's huge pages.
  const std::optional<std::size_t> first = ScanHugeBytes(res.at(), 2 * kMiB);
  ASSERT_TRUE(first.has_value());
  EXPECT_LE(*first, 2 * kMiB);
  EXPECT_EQ(*ScanHugeBytes(res.at(8 * kMiB), 8 * kMiB), 0u);  // the reservation between them
}

// A populated chunk of small pages is read from its own page tables; where the kernel cannot say
// (before 6.7, here the injected ENOTTY), from smaps, with the same answer.
TEST(OsMapChunk, APopulatedChunkOfSmallPagesIsReadFromItsPageTablesOrElseFromSmaps) {
  if (const std::string why = WhyNoPagemapScan(); !why.empty()) GTEST_SKIP() << why;
  const bool thp = ThpMode() == "always" || ThpMode() == "madvise";
  Reservation res(64 * kMiB, 2 * kMiB);
  std::vector<MappedChunk> scanned;
  std::vector<MappedChunk> read;
  for (const bool fail_scan : {false, true}) {
    ScanHook hook(fail_scan);
    const std::size_t base = fail_scan ? 32 * kMiB : 0;
    auto small = MapChunk(res.at(base), 8 * kMiB, PageSize::k4K, true, true);
    ASSERT_TRUE(small.ok()) << small.status();
    EXPECT_EQ(hook.scans(), 1) << "a populated 4 KiB chunk is counted by one scan";
    (fail_scan ? read : scanned).push_back(*std::move(small));
    if (!thp) continue;
    auto huge = MapChunk(res.at(base + 16 * kMiB), 8 * kMiB, PageSize::kTransparent, true, true);
    ASSERT_TRUE(huge.ok()) << huge.status();
    EXPECT_EQ(hook.scans(), 2);
    (fail_scan ? read : scanned).push_back(*std::move(huge));
    // Unpopulated chunks are reported by eligibility, which only smaps says: no scan.
    auto lazy = MapChunk(res.at(base + 26 * kMiB), 4 * kMiB, PageSize::kTransparent, true, false);
    ASSERT_TRUE(lazy.ok()) << lazy.status();
    EXPECT_EQ(hook.scans(), 2);
    EXPECT_EQ(lazy->page_size, PageSize::kTransparent);
  }
  ASSERT_EQ(scanned.size(), read.size());
  for (std::size_t i = 0; i < scanned.size(); ++i) {
    EXPECT_EQ(scanned[i].page_size, read[i].page_size) << "chunk " << i;
    const std::uintptr_t at = reinterpret_cast<std::uintptr_t>(res.at(i * 16 * kMiB));
    const std::size_t smaps =
        SmapsOverlapping(reinterpret_cast<void*>(at), 8 * kMiB).at(0).anon_huge_kb;
    EXPECT_EQ(scanned[i].huge_bytes, smaps * kKiB) << "chunk " << i;
  }
  EXPECT_EQ(scanned.at(0).page_size, PageSize::k4K);
  EXPECT_EQ(scanned.at(0).huge_bytes, 0u);
  if (thp && scanned.at(1).huge_bytes > 0) {
    EXPECT_EQ(scanned.at(1).page_size, PageSize::kTransparent);
    EXPECT_GT(read.at(1).huge_bytes, 0u);
  }
}

TEST(OsMapChunk, Hugetlb2MIsMappedInPlaceAndVerified) {
  constexpr std::size_t kChunk = 8 * kMiB;
  HugePageGrant grant(2 * kMiB, kChunk / (2 * kMiB));
  if (!grant.ok()) GTEST_SKIP() << "no 2 MiB huge pages for the test: " << grant.why_not();
  const std::uint64_t free_before = ReadNumber(HugeDir(2 * kMiB) + "/free_hugepages").value();

  Reservation res(2 * kChunk, 2 * kMiB);
  const CounterSnapshot c0 = CounterSnapshot::Now();
  auto got = MapChunk(res.at(), kChunk, PageSize::k2M, /*require=*/true, /*populate=*/true);
  ASSERT_TRUE(got.ok()) << got.status();
  const CounterSnapshot c1 = CounterSnapshot::Now();
  EXPECT_EQ(got->page_size, PageSize::k2M);
  EXPECT_EQ(got->huge_bytes, kChunk);
  // Mapped elsewhere, moved in with mremap (counted as an mmap), then MADV_DONTFORK.
  EXPECT_EQ(c1.mmap - c0.mmap, 2u);
  EXPECT_EQ(c1.madvise - c0.madvise, 1u);

  const std::vector<SmapsVma> vmas = SmapsOverlapping(res.at(), kChunk);
  ASSERT_EQ(vmas.size(), 1u);
  EXPECT_EQ(vmas[0].start, reinterpret_cast<std::uintptr_t>(res.at()));
  EXPECT_EQ(vmas[0].end - vmas[0].start, kChunk);
  EXPECT_EQ(vmas[0].kernel_page_kb, 2048u);
  EXPECT_EQ(vmas[0].private_hugetlb_kb, kChunk / kKiB);  // populated
  EXPECT_NE(vmas[0].vmflags.find(" ht "), std::string::npos) << vmas[0].vmflags;
  EXPECT_NE(vmas[0].vmflags.find(" dc "), std::string::npos) << vmas[0].vmflags;
  EXPECT_EQ(ReadNumber(HugeDir(2 * kMiB) + "/free_hugepages").value(), free_before - 4);
  std::memset(res.at(), 0x5a, kChunk);
  EXPECT_EQ(res.at()[kChunk - 1], 0x5a);
  EXPECT_EQ(ProbeAddress(res.at(kChunk)), EEXIST);  // the rest is still reserved

  UnmapChunk(res.at(), kChunk);
  EXPECT_EQ(ReadNumber(HugeDir(2 * kMiB) + "/free_hugepages").value(), free_before);
  EXPECT_EQ(SmapsOverlapping(res.at(), kChunk).at(0).perms, "---p");
}

TEST(OsMapChunk, Hugetlb1G) {
  HugePageGrant grant(kGiB, 1);
  if (!grant.ok()) GTEST_SKIP() << "no 1 GiB huge page for the test: " << grant.why_not();
  Reservation res(kGiB, kGiB);
  auto got = MapChunk(res.at(), kGiB, PageSize::k1G, true, /*populate=*/false);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->page_size, PageSize::k1G);
  EXPECT_EQ(got->huge_bytes, kGiB);
  const std::vector<SmapsVma> vmas = SmapsOverlapping(res.at(), kGiB);
  ASSERT_EQ(vmas.size(), 1u);
  EXPECT_EQ(vmas[0].kernel_page_kb, kGiB / kKiB);
  UnmapChunk(res.at(), kGiB);
}

// How many 2 MiB pages to ask for so that hugetlb must fail: more than could be had, with a
// margin for tests running in parallel that grant themselves a few (it costs address space only).
std::uint64_t MoreThanAvailable2M() {
  const std::string dir = HugeDir(2 * kMiB);
  const std::uint64_t overcommit = ReadNumber(dir + "/nr_overcommit_hugepages").value_or(0);
  const std::uint64_t surplus = ReadNumber(dir + "/surplus_hugepages").value_or(0);
  return AvailableHugePages(2 * kMiB) + (overcommit > surplus ? overcommit - surplus : 0) + 256;
}

TEST(OsMapChunk, HugetlbFallsBackWhenNotEnoughHugePages) {
  // Not populated: the chunk is hundreds of MiB (populated fallback is the THP test's job).
  const std::size_t length = MoreThanAvailable2M() * 2 * kMiB;
  Reservation res(length, 2 * kMiB);
  auto got = MapChunk(res.at(), length, PageSize::k2M, /*require=*/false, /*populate=*/false);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_NE(got->page_size, PageSize::k2M);
  const std::vector<SmapsVma> vmas = SmapsOverlapping(res.at(), length);
  ASSERT_FALSE(vmas.empty());
  for (const SmapsVma& v : vmas) {
    EXPECT_EQ(v.kernel_page_kb, 4u);
    EXPECT_EQ(v.perms, "rw-p");
  }
  if (ThpMode() == "always" || ThpMode() == "madvise") {
    EXPECT_EQ(got->page_size, PageSize::kTransparent);  // the next size down
    EXPECT_NE(vmas[0].vmflags.find(" hg "), std::string::npos) << vmas[0].vmflags;
  }
  UnmapChunk(res.at(), length);
}

TEST(OsMapChunk, RequiredHugetlbMissingIsAFailedPreconditionAndKeepsReservation) {
  const std::uint64_t pages = MoreThanAvailable2M();
  const std::size_t length = pages * 2 * kMiB;
  // The fix names the nr_hugepages that would make this chunk fit.
  const std::uint64_t target = ReadNumber(HugeDir(2 * kMiB) + "/nr_hugepages").value_or(0) + pages -
                               AvailableHugePages(2 * kMiB);
  Reservation res(length + 4 * kMiB, 2 * kMiB);
  char* at = res.at(2 * kMiB);  // reserved on both sides
  const CounterSnapshot c0 = CounterSnapshot::Now();
  auto got = MapChunk(at, length, PageSize::k2M, /*require=*/true, /*populate=*/true);
  const CounterSnapshot c1 = CounterSnapshot::Now();
  ASSERT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition) << got.status();
  const std::string msg(got.status().message());
  EXPECT_NE(msg.find("`sysctl vm.nr_hugepages=" + std::to_string(target) + "`"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("HugePages_Free is"), std::string::npos) << msg;
  EXPECT_NE(msg.find("require_page_size = false"), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::to_string(pages) + " needed"), std::string::npos) << msg;
  // The failed attempt never touched the reservation (the hugetlb mmap goes elsewhere first).
  EXPECT_EQ(c1.mmap - c0.mmap, 1u);
  for (std::size_t off = 0; off < length; off += 2 * kMiB) {
    ASSERT_EQ(ProbeAddress(at + off), EEXIST) << "hole at offset " << off;
  }
  for (const SmapsVma& v : SmapsOverlapping(at, length)) EXPECT_EQ(v.perms, "---p");
  EXPECT_EQ(QueryPages(at, length).status().code(), absl::StatusCode::kFailedPrecondition);
  // ... and the range is still usable.
  auto fallback = MapChunk(at, length, PageSize::k4K, true, false);
  EXPECT_TRUE(fallback.ok()) << fallback.status();
}

// Runs `body` in a forked child; returns its wait status.
template <typename F>
int InChild(F body) {
  const pid_t pid = fork();
  if (pid == 0) {
    rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    body();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

// A process that disabled THP (prctl) cannot get it: without require the chunk falls back to
// 4 KiB and says so; with require it is kFailedPrecondition naming the cause, and the range stays
// reserved.
TEST(OsMapChunk, ThpDisabledForTheProcessFallsBackOrFails) {
  if (ThpMode() != "always" && ThpMode() != "madvise") {
    GTEST_SKIP() << "transparent huge pages are [" << ThpMode() << "] on this machine";
  }
  const int status = InChild([] {
    if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0) _exit(10);
    auto r = Reserve(8 * kMiB, 2 * kMiB);
    if (!r.ok()) _exit(11);
    char* at = static_cast<char*>(r->base);
    auto fell = MapChunk(at, 4 * kMiB, PageSize::kTransparent, /*require=*/false, true);
    if (!fell.ok()) _exit(12);
    if (fell->page_size != PageSize::k4K || fell->huge_bytes != 0) _exit(13);
    for (bool populate : {true, false}) {
      auto failed = MapChunk(at + 4 * kMiB, 4 * kMiB, PageSize::kTransparent, true, populate);
      if (failed.status().code() != absl::StatusCode::kFailedPrecondition) _exit(14);
      if (failed.status().message().find("PR_SET_THP_DISABLE") == std::string::npos) _exit(15);
      if (ProbeAddress(at + 4 * kMiB) != EEXIST) _exit(16);
      for (const SmapsVma& v : SmapsOverlapping(at + 4 * kMiB, 4 * kMiB)) {
        if (v.perms != "---p") _exit(17);
      }
    }
  });
  ASSERT_TRUE(WIFEXITED(status)) << "wait status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "10-11: setup; 12-13: no fallback to 4K; 14-15: wrong error; 16: reservation lost; "
         "17: chunk left mapped";
}

// --- populate, DONTFORK, unmap ------------------------------------------------------------

TEST(OsMapChunk, PopulateMakesEveryPageResident) {
  constexpr std::size_t kChunk = 8 * kMiB;
  Reservation res(4 * kChunk, 2 * kMiB);
  ASSERT_TRUE(MapChunk(res.at(), kChunk, PageSize::k4K, true, /*populate=*/false).ok());
  EXPECT_EQ(ResidentPages(res.at(), kChunk), 0u);
  ASSERT_TRUE(MapChunk(res.at(kChunk), kChunk, PageSize::k4K, true, /*populate=*/true).ok());
  EXPECT_EQ(ResidentPages(res.at(kChunk), kChunk), kChunk / (4 * kKiB));
  ASSERT_TRUE(MapChunk(res.at(2 * kChunk), kChunk, PageSize::kTransparent, false, true).ok());
  EXPECT_EQ(ResidentPages(res.at(2 * kChunk), kChunk), kChunk / (4 * kKiB));
}

TEST(OsMapChunk, DontForkChildCrashesOnTouch) {
  if (::pinpool::testing::kTsan) {
    // Observed with gcc 12's TSan: the forked child writes the chunk and exits 0. TSan's fork
    // interceptor, not pinpool's MADV_DONTFORK (the plain and ASan builds verify it here).
    GTEST_SKIP() << "under ThreadSanitizer a forked child can touch MADV_DONTFORK memory";
  }
  Reservation res(4 * kMiB, 2 * kMiB);
  ASSERT_TRUE(MapChunk(res.at(), 2 * kMiB, PageSize::k4K, false, true).ok());
  volatile char* chunk = res.at();
  chunk[0] = 1;
  const int status = InChild([chunk] {
    signal(SIGSEGV, SIG_DFL);  // sanitizers install their own handler
    chunk[4096] = 2;
  });
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV) << "wait status " << status;
  // Control: ordinary memory is there in the child, so the harness tells the two apart.
  void* plain = mmap(nullptr, 4 * kKiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(plain, MAP_FAILED);
  volatile char* p = static_cast<char*>(plain);
  const int control = InChild([p] { p[0] = 2; });
  EXPECT_TRUE(WIFEXITED(control) && WEXITSTATUS(control) == 0) << "wait status " << control;
  munmap(plain, 4 * kKiB);
  EXPECT_EQ(chunk[0], 1);
}

TEST(OsUnmapChunk, DropsRssAndKeepsTheReservation) {
  constexpr std::size_t kChunk = 64 * kMiB;
  Reservation res(kChunk, 2 * kMiB);
  ASSERT_TRUE(MapChunk(res.at(), kChunk, PageSize::k4K, true, true).ok());
  const std::size_t rss_mapped = StatusKb("VmRSS") * kKiB;
  const CounterSnapshot c0 = CounterSnapshot::Now();
  UnmapChunk(res.at(), kChunk);
  const CounterSnapshot c1 = CounterSnapshot::Now();
  const std::size_t rss_unmapped = StatusKb("VmRSS") * kKiB;
  EXPECT_GE(rss_mapped, rss_unmapped + kChunk - 4 * kMiB)
      << "VmRSS " << rss_mapped << " -> " << rss_unmapped;
  EXPECT_EQ(c1.mmap - c0.mmap, 1u);
  EXPECT_EQ(c1.munmap, c0.munmap);
  for (const SmapsVma& v : SmapsOverlapping(res.at(), kChunk)) {
    EXPECT_EQ(v.perms, "---p");
    EXPECT_EQ(v.rss_kb, 0u);
  }
  EXPECT_EQ(ProbeAddress(res.at()), EEXIST);
  EXPECT_EQ(ProbeAddress(res.at(kChunk - 4 * kKiB)), EEXIST);
  EXPECT_EQ(QueryPages(res.at(), kChunk).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(MapChunk(res.at(), kChunk, PageSize::k4K, true, false).ok());  // usable again
}

// --- counters, QueryPages, memlock --------------------------------------------------------

TEST(OsCounters, CountEveryCallIntoTheKernel) {
  const CounterSnapshot c0 = CounterSnapshot::Now();
  auto r = Reserve(8 * kMiB, 2 * kMiB);
  ASSERT_TRUE(r.ok());
  const CounterSnapshot c1 = CounterSnapshot::Now();
  EXPECT_EQ(c1.mmap - c0.mmap, 1u);
  EXPECT_GE(c1.munmap - c0.munmap, 1u);  // head and/or tail trimmed
  EXPECT_LE(c1.munmap - c0.munmap, 2u);
  EXPECT_EQ(c1.madvise, c0.madvise);

  ASSERT_TRUE(MapChunk(r->base, 2 * kMiB, PageSize::k4K, true, /*populate=*/true).ok());
  const CounterSnapshot c2 = CounterSnapshot::Now();
  EXPECT_EQ(c2.mmap - c1.mmap, 1u);
  // NOHUGEPAGE, POPULATE_WRITE per populate step, DONTFORK
  EXPECT_EQ(c2.madvise - c1.madvise, 2u + 2 * kMiB / internal::os::kPopulateStep);
  EXPECT_EQ(c2.munmap, c1.munmap);

  ASSERT_TRUE(QueryPages(r->base, 2 * kMiB).ok());
  (void)QueryMemlock();
  const CounterSnapshot c3 = CounterSnapshot::Now();
  EXPECT_EQ(c3.mmap, c2.mmap);
  EXPECT_EQ(c3.munmap, c2.munmap);
  EXPECT_EQ(c3.madvise, c2.madvise);

  UnmapChunk(r->base, 2 * kMiB);
  Release(*r);
  const CounterSnapshot c4 = CounterSnapshot::Now();
  EXPECT_EQ(c4.mmap - c3.mmap, 1u);
  EXPECT_EQ(c4.munmap - c3.munmap, 1u);
}

TEST(OsQueryPages, RejectsWhatIsNotAMappedChunk) {
  Reservation res(4 * kMiB, 2 * kMiB);
  EXPECT_EQ(QueryPages(res.at(), 2 * kMiB).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(MapChunk(res.at(), 2 * kMiB, PageSize::k4K, true, false).ok());
  EXPECT_TRUE(QueryPages(res.at(), 2 * kMiB).ok());
  // Running past the chunk into the reservation is an error, not a silent answer.
  EXPECT_EQ(QueryPages(res.at(), 4 * kMiB).status().code(), absl::StatusCode::kFailedPrecondition);
  const Range gone = res.range();
  auto after_end = QueryPages(static_cast<char*>(gone.base) + gone.length, 4 * kKiB);
  EXPECT_FALSE(after_end.ok());
  EXPECT_EQ(QueryPages(res.at(), 0).status().code(), absl::StatusCode::kInvalidArgument);
}

bool HasCapIpcLock() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capget, &header, data) != 0) return false;
  return (data[0].effective >> CAP_IPC_LOCK) & 1;
}

TEST(OsMemlock, MatchesGetrlimitVmLckAndCapabilities) {
  rlimit limit{};
  ASSERT_EQ(getrlimit(RLIMIT_MEMLOCK, &limit), 0);
  const MemlockState before = QueryMemlock();
  EXPECT_EQ(before.limit, limit.rlim_cur == RLIM_INFINITY ? SIZE_MAX : limit.rlim_cur);
  EXPECT_EQ(before.exempt, HasCapIpcLock());

  void* p = mmap(nullptr, kMiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  if (mlock(p, kMiB) != 0) {
    munmap(p, kMiB);
    GTEST_SKIP() << "mlock of 1 MiB failed (" << strerror(errno) << "): RLIMIT_MEMLOCK too low";
  }
  if (StatusKb("VmLck") * kKiB != before.locked + kMiB) {
    munmap(p, kMiB);
    GTEST_SKIP() << "mlock succeeded but VmLck did not grow (ASan makes mlock a no-op)";
  }
  EXPECT_EQ(QueryMemlock().locked, before.locked + kMiB);
  munlock(p, kMiB);
  EXPECT_EQ(QueryMemlock().locked, before.locked);
  munmap(p, kMiB);
}

TEST(OsMemlock, SeesALoweredLimitAndADroppedCapability) {
  const int status = InChild([] {
    rlimit one{kMiB, kMiB};
    if (setrlimit(RLIMIT_MEMLOCK, &one) != 0) _exit(10);
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2] = {};
    if (syscall(SYS_capget, &header, data) != 0) _exit(11);
    data[0].effective &= ~(1u << CAP_IPC_LOCK);
    if (syscall(SYS_capset, &header, data) != 0) _exit(12);
    const MemlockState s = QueryMemlock();
    if (s.limit != kMiB) _exit(13);
    if (s.exempt) _exit(14);
  });
  ASSERT_TRUE(WIFEXITED(status)) << "wait status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10-12: setup failed; 13: limit wrong; 14: still exempt";
}

}  // namespace
}  // namespace pinpool::internal::os
