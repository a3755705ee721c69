// PageSize: the page sizes a pool's chunks can be mapped with, as a policy (the largest to try)
// and as a report (what the kernel gave). Plain vocabulary, all constexpr: the os room and the
// public options share it.
#ifndef PINPOOL_PAGE_SIZE_H_
#define PINPOOL_PAGE_SIZE_H_

#include <cstddef>
#include <cstdint>

#include "pinpool/abi.h"

namespace pinpool {
PINPOOL_ABI_BEGIN

// Page sizes, largest first. As a policy: the largest size to try. As a report: what was obtained.
enum class PageSize : std::uint8_t {
  k1G,           // hugetlb, 1 GiB pages
  k2M,           // hugetlb, 2 MiB pages
  kTransparent,  // transparent huge pages (2 MiB, best effort by the kernel)
  k4K,           // base pages
};

// Bytes in one page of that kind (transparent huge pages count as 2 MiB).
constexpr std::size_t PageBytes(PageSize p) noexcept {
  switch (p) {
    case PageSize::k1G:
      return std::size_t{1} << 30;
    case PageSize::k2M:
    case PageSize::kTransparent:
      return std::size_t{2} << 20;
    case PageSize::k4K:
      break;
  }
  return std::size_t{4} << 10;
}

constexpr const char* PageSizeName(PageSize p) noexcept {
  switch (p) {
    case PageSize::k1G:
      return "1G";
    case PageSize::k2M:
      return "2M";
    case PageSize::kTransparent:
      return "THP";
    case PageSize::k4K:
      return "4K";
  }
  return "?";
}

PINPOOL_ABI_END
}  // namespace pinpool

#endif  // PINPOOL_PAGE_SIZE_H_
