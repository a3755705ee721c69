// Reserving hugetlb pages for a test: HugePageGrant raises a page size's nr_hugepages by the pages
// a test needs (root only) and puts the old value back when it goes; and the sysfs figures it
// reads. For tests that need hugetlb chunks (os_test, io_uring_rings_test). Not thread-safe: one
// grant per page size at a time in a process.
#ifndef PINPOOL_TESTS_SUPPORT_HUGE_PAGES_H_
#define PINPOOL_TESTS_SUPPORT_HUGE_PAGES_H_

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <optional>
#include <string>

#include "support/compaction.h"

namespace pinpool::testing {

inline std::optional<std::uint64_t> ReadNumber(const std::string& path) {
  std::ifstream in(path);
  std::uint64_t v = 0;
  if (!(in >> v)) return std::nullopt;
  return v;
}

inline bool WriteNumber(const std::string& path, std::uint64_t v) {
  std::ofstream out(path);
  out << v << "\n";
  out.close();
  return !out.fail();
}

// The sysfs directory of one huge page size (`page` bytes).
inline std::string HugeDir(std::size_t page) {
  return "/sys/kernel/mm/hugepages/hugepages-" + std::to_string(page / 1024) + "kB";
}

// Free 2 MiB / 1 GiB pages nobody has a claim on yet.
inline std::uint64_t AvailableHugePages(std::size_t page) {
  const std::uint64_t free = ReadNumber(HugeDir(page) + "/free_hugepages").value_or(0);
  const std::uint64_t resv = ReadNumber(HugeDir(page) + "/resv_hugepages").value_or(0);
  return free > resv ? free - resv : 0;
}

// Adds `pages` huge pages to the pool for the test's lifetime (root only), restoring the old
// nr_hugepages afterwards.
class HugePageGrant {
 public:
  HugePageGrant(std::size_t page, std::uint64_t pages) : path_(HugeDir(page) + "/nr_hugepages") {
    if (geteuid() != 0) {
      why_not_ = "not root: cannot raise " + path_;
      return;
    }
    old_ = ReadNumber(path_);
    if (!old_) {
      why_not_ = path_ + " is not readable (page size not supported)";
      return;
    }
    const std::uint64_t before = AvailableHugePages(page);
    const auto granted = [&] {
      return WriteNumber(path_, *old_ + pages) && AvailableHugePages(page) >= before + pages;
    };
    // Short: the free memory is in pieces (the soft-RoCE guest, after a 1 GiB pool of 4 KiB pages,
    // once gave none of 512 pages). Drop clean caches, compact, and ask once more.
    if (!granted() &&
        !(WriteNumber("/proc/sys/vm/drop_caches", 3) && CompactMemory() && granted())) {
      why_not_ = "the kernel could not allocate " + std::to_string(pages) + " more pages for " +
                 path_ + ", even after dropping caches and compacting (memory fragmented?)";
    }
  }
  ~HugePageGrant() {
    if (old_) WriteNumber(path_, *old_);
  }
  HugePageGrant(const HugePageGrant&) = delete;
  HugePageGrant& operator=(const HugePageGrant&) = delete;
  bool ok() const { return why_not_.empty(); }
  const std::string& why_not() const { return why_not_; }

 private:
  std::string path_;
  std::optional<std::uint64_t> old_;
  std::string why_not_;
};

}  // namespace pinpool::testing

#endif  // PINPOOL_TESTS_SUPPORT_HUGE_PAGES_H_
