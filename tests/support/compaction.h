// Does memory keep its physical addresses? Reads the page frame numbers (PFNs) of ranges from
// /proc/self/pagemap, makes the kernel compact memory (/proc/sys/vm/compact_memory), and counts
// the pages of each range whose PFN changed. For the tests that prove "pinned means pinned":
// every range a domain claims to pin must keep all its PFNs, in the same run in which an
// mlocked control buffer shows that compaction did move pages (otherwise the run proves
// nothing, and says so as a failure).
//
// Needs root: pagemap shows PFNs only to CAP_SYS_ADMIN (zeros otherwise), and only root may write
// compact_memory. Compaction works on base pages: the ranges must be 4 KiB pages (a huge page is
// skipped by compaction, which would make a pass meaningless).
//
// CompactionRun is the whole check for gtest (tests/domain/pinning_test.cc on the host,
// tests/providers/verbs/verbs_pinning_test.cc in the soft-RoCE guest); the pieces below it are
// plain.
#ifndef PINPOOL_TESTS_SUPPORT_COMPACTION_H_
#define PINPOOL_TESTS_SUPPORT_COMPACTION_H_

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "pinpool/pool.h"

namespace pinpool::testing {

inline constexpr std::size_t kPage = 4096;

// The PFN of every 4 KiB page of [p, p + length); 0 for a page not present (or when PFNs are
// hidden from this process).
inline std::vector<std::uint64_t> ReadPfns(const void* p, std::size_t length) {
  std::vector<std::uint64_t> pfns(length / kPage, 0);
  const int fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return pfns;
  const off_t at = static_cast<off_t>(reinterpret_cast<std::uintptr_t>(p) / kPage * 8);
  const ssize_t want = static_cast<ssize_t>(pfns.size() * 8);
  const ssize_t got = ::pread(fd, pfns.data(), static_cast<std::size_t>(want), at);
  ::close(fd);
  if (got != want) std::fill(pfns.begin(), pfns.end(), 0);
  for (std::uint64_t& e : pfns) {
    const bool present = (e >> 63) & 1;
    e = present ? e & ((std::uint64_t{1} << 55) - 1) : 0;  // bits 0-54: the PFN
  }
  return pfns;
}

// Why this process cannot run a compaction test, or "" when it can.
inline std::string WhyCompactionCannotBeObserved() {
  if (::geteuid() != 0) return "needs root: /proc/self/pagemap hides PFNs from other users";
  if (::access("/proc/sys/vm/compact_memory", W_OK) != 0) {
    return "/proc/sys/vm/compact_memory is not writable here (no CONFIG_COMPACTION?)";
  }
  const long page = ::sysconf(_SC_PAGESIZE);
  if (page != static_cast<long>(kPage)) return "the base page is not 4 KiB";
  int probe = 1;
  if (ReadPfns(&probe, kPage)[0] == 0) return "/proc/self/pagemap shows no PFNs to this process";
  return "";
}

// Compacts all of memory once. False when the kernel refused.
inline bool CompactMemory() {
  const int fd = ::open("/proc/sys/vm/compact_memory", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, "1", 1) == 1;
  ::close(fd);
  return ok;
}

// One range under watch: its PFNs when watching began, and how many pages have moved since.
struct Watched {
  std::string name;
  const void* base = nullptr;
  std::size_t length = 0;
  std::vector<std::uint64_t> pfns;  // at Watch()
  std::size_t absent = 0;           // pages not present at Watch() (must be 0 to prove anything)
  std::size_t moved = 0;            // pages whose PFN differs from pfns at the last Recount()

  std::size_t pages() const { return length / kPage; }
};

inline Watched Watch(std::string name, const void* base, std::size_t length) {
  Watched w;
  w.name = std::move(name);
  w.base = base;
  w.length = length;
  w.pfns = ReadPfns(base, length);
  for (std::uint64_t pfn : w.pfns) w.absent += pfn == 0 ? 1 : 0;
  return w;
}

// Compares each page's PFN now with the one it had at Watch().
inline void Recount(Watched& w) {
  const std::vector<std::uint64_t> now = ReadPfns(w.base, w.length);
  w.moved = 0;
  for (std::size_t i = 0; i < now.size(); ++i) w.moved += now[i] != w.pfns[i] ? 1 : 0;
}

// The control: mlocked 4 KiB pages, what the resident domain gives, which compaction must be
// seen to move. It is built a piece at a time (Grow), between the pools' chunks, and each of
// its pages is faulted in next to a page of a second mapping that is then unmapped (Lock), so
// free holes lie among the control's pages and the pools' chunks: compaction then has pages to
// move and places to move them to, wherever the kernel put this memory. mlock is called through
// syscall(2), so that a sanitizer's interceptor (ASan makes mlock a no-op) cannot quietly turn
// the control into plain memory.
class InterleavedControl {
 public:
  explicit InterleavedControl(std::size_t length) : length_(length) {
    for (void*& p : {std::ref(control_), std::ref(holes_)}) {
      p = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) {
        p = nullptr;
        continue;
      }
      ::madvise(p, length, MADV_NOHUGEPAGE);
    }
  }
  ~InterleavedControl() {
    if (control_ != nullptr) ::munmap(control_, length_);  // unmapping unlocks
    if (holes_ != nullptr) ::munmap(holes_, length_);
  }
  InterleavedControl(const InterleavedControl&) = delete;
  InterleavedControl& operator=(const InterleavedControl&) = delete;

  // Faults the next `bytes` of the control in, each page followed by a page of holes.
  void Grow(std::size_t bytes) {
    if (control_ == nullptr || holes_ == nullptr) return;
    for (const std::size_t end = std::min(length_, grown_ + bytes); grown_ < end; grown_ += kPage) {
      static_cast<volatile char*>(control_)[grown_] = 0x5a;
      static_cast<volatile char*>(holes_)[grown_] = 0x33;
    }
  }
  // Gives the holes back and mlocks the control. False when something failed.
  bool Lock() {
    if (control_ == nullptr || holes_ == nullptr || grown_ != length_) return false;
    ::munmap(holes_, length_);
    holes_ = nullptr;
    return ::syscall(SYS_mlock, control_, length_) == 0;
  }

  const void* data() const { return control_; }
  std::size_t length() const { return length_; }

 private:
  const std::size_t length_;
  std::size_t grown_ = 0;
  void* control_ = nullptr;
  void* holes_ = nullptr;
};

// Bytes of each pool and of the control: enough 4 KiB pages that compaction, when it runs, moves
// some of the control's.
inline constexpr std::size_t kWatchedBytes = std::size_t{64} << 20;
inline constexpr std::size_t kWatchedChunk = std::size_t{2} << 20;

// A pool of up to kWatchedBytes in chunks of kWatchedChunk, of 4 KiB pages only; it starts
// empty, for GrowInterleaved.
inline PoolOptions FourKiBPoolOptions(std::vector<std::shared_ptr<Domain>> domains) {
  PoolOptions o;
  o.page_size = PageSize::k4K;
  o.require_page_size = true;
  o.chunk_size = kWatchedChunk;
  o.budget = kWatchedBytes;
  o.domains = std::move(domains);
  return o;
}

// Grows every pool to kWatchedBytes and the control with them, a chunk of each at a time, so that
// their pages lie side by side; then locks the control. Returns false (after a gtest failure)
// when a step failed.
inline bool GrowInterleaved(const std::vector<Pool*>& pools, InterleavedControl& control) {
  for (std::size_t bytes = kWatchedChunk; bytes <= kWatchedBytes; bytes += kWatchedChunk) {
    for (Pool* pool : pools) {
      const absl::Status s = pool->Reserve(bytes);
      EXPECT_TRUE(s.ok()) << s;
      if (!s.ok()) return false;
    }
    control.Grow(kWatchedChunk);
  }
  const bool locked = control.Lock();
  EXPECT_TRUE(locked) << "cannot map, fault in or mlock the control";
  return locked;
}

// What a watched range is said to be, and so what the check expects of it.
enum class Claim {
  kLongTermPinned,  // must not move
  kMlocked,         // mlocked: must be seen to move (with the control), or the run proves nothing
  kNothing,         // may move or not (a pool whose mlock a sanitizer turned into a no-op)
};

// Watches pools and a control, compacts, and checks: mlocked memory (the control, and pools the
// caller says are mlocked) moved, and no page of a pool whose domain claims a long-term pin did.
class CompactionRun {
 public:
  static constexpr int kMaxRounds = 6;
  static constexpr std::size_t kEnoughMoved = 64;

  // Every chunk of `pool`, which must be populated 4 KiB pages, under one name.
  void WatchPool(const std::string& name, const Pool& pool, Claim claim) {
    Entry e{name, claim, {}};
    for (const ChunkStats& c : pool.GetStats().chunks) {
      EXPECT_EQ(c.page_size, PageSize::k4K) << name << ": compaction skips huge pages";
      EXPECT_EQ(c.huge_bytes, 0u) << name;
      e.ranges.push_back(Watch(name, reinterpret_cast<const void*>(c.base), c.size));
    }
    EXPECT_FALSE(e.ranges.empty()) << name << ": the pool has no chunks to watch";
    entries_.push_back(std::move(e));
  }
  // The control, grown by GrowInterleaved with the pools.
  void WatchControl(const std::string& name, const InterleavedControl& control) {
    control_ = Entry{name, Claim::kMlocked, {Watch(name, control.data(), control.length())}};
  }

  // Compacts memory, up to kMaxRounds times, until kEnoughMoved mlocked pages (the control's and
  // mlocked pools') have moved (one is enough to pass; more make the run's evidence stronger).
  // After each round short of that, one more control is made (fresh pages, wherever the kernel
  // finds them now) for the next: the pools keep being watched through every round.
  void CompactUntilTheControlMoves() {
    for (rounds_ = 1; rounds_ <= kMaxRounds; ++rounds_) {
      ASSERT_TRUE(CompactMemory()) << "writing /proc/sys/vm/compact_memory failed";
      for (Entry& e : entries_) {
        for (Watched& w : e.ranges) Recount(w);
      }
      for (Watched& w : control_.ranges) Recount(w);
      if (MovedMlocked() >= kEnoughMoved) return;
      auto more = std::make_unique<InterleavedControl>(kWatchedBytes);
      more->Grow(kWatchedBytes);
      if (more->Lock()) {
        control_.ranges.push_back(Watch(control_.name, more->data(), more->length()));
        extra_controls_.push_back(std::move(more));
      }
    }
    rounds_ = kMaxRounds;
  }

  // The verdict, with a table of pages moved per range.
  void Verify() const {
    std::printf("compaction rounds: %d\n%-34s %8s %8s %6s\n", rounds_, "memory", "pages", "moved",
                "moved%");
    for (const Entry* e : All()) {
      std::printf("%-34s %8zu %8zu %5.1f%%  %s\n", e->name.c_str(), Pages(*e), Moved(*e),
                  100.0 * static_cast<double>(Moved(*e)) / static_cast<double>(Pages(*e)),
                  e->claim == Claim::kLongTermPinned ? "(claims a long-term pin: must not move)"
                  : e->claim == Claim::kMlocked      ? "(mlocked: some of these must move)"
                                                     : "(not pinned: may move)");
      EXPECT_EQ(Absent(*e), 0u) << e->name << ": pages not present before compaction";
    }
    std::fflush(stdout);
    EXPECT_GT(MovedMlocked(), 0u) << "compaction moved none of the mlocked pages (the "
                                  << control_.name << " and the pools said to be mlocked) in "
                                  << rounds_
                                  << " rounds: this run cannot show whether anything is pinned";
    for (const Entry& e : entries_) {
      if (e.claim == Claim::kLongTermPinned) {
        EXPECT_EQ(Moved(e), 0u) << e.name << " claims a long-term pin, yet " << Moved(e) << " of "
                                << Pages(e)
                                << " pages changed physical address (mlocked: " << MovedMlocked()
                                << " moved)";
      }
    }
  }

  const std::vector<Watched>& control() const { return control_.ranges; }

 private:
  struct Entry {
    std::string name;
    Claim claim = Claim::kNothing;
    std::vector<Watched> ranges;
  };

  std::size_t MovedMlocked() const {
    std::size_t n = 0;
    for (const Entry* e : All()) n += e->claim == Claim::kMlocked ? Moved(*e) : 0;
    return n;
  }

  static std::size_t Pages(const Entry& e) {
    std::size_t n = 0;
    for (const Watched& w : e.ranges) n += w.pages();
    return n;
  }
  static std::size_t Moved(const Entry& e) {
    std::size_t n = 0;
    for (const Watched& w : e.ranges) n += w.moved;
    return n;
  }
  static std::size_t Absent(const Entry& e) {
    std::size_t n = 0;
    for (const Watched& w : e.ranges) n += w.absent;
    return n;
  }
  std::vector<const Entry*> All() const {
    std::vector<const Entry*> all;
    for (const Entry& e : entries_) all.push_back(&e);
    all.push_back(&control_);
    return all;
  }

  std::vector<Entry> entries_;
  Entry control_;
  int rounds_ = 0;
  std::vector<std::unique_ptr<InterleavedControl>> extra_controls_;
};

}  // namespace pinpool::testing

#endif  // PINPOOL_TESTS_SUPPORT_COMPACTION_H_
