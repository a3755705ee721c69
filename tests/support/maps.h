// What /proc/self/maps says lies in an address range: the kernel's own account of what a pool
// has mapped, independent of pinpool's counters.
#ifndef PINPOOL_TESTS_SUPPORT_MAPS_H_
#define PINPOOL_TESTS_SUPPORT_MAPS_H_

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace pinpool::testing {

struct RangeMappings {
  std::uint64_t read_write = 0;  // bytes mapped rw (chunks)
  std::uint64_t none = 0;        // bytes mapped PROT_NONE (the reservation around them)
  std::uint64_t other = 0;       // bytes mapped with any other protection
  std::uint64_t holes = 0;       // bytes of the range with nothing mapped
};

inline RangeMappings MappingsIn(std::uintptr_t start, std::uintptr_t end) {
  RangeMappings m;
  FILE* f = std::fopen("/proc/self/maps", "r");
  if (f == nullptr) {
    m.holes = end - start;
    return m;
  }
  char line[512];
  std::uint64_t covered = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    unsigned long lo = 0, hi = 0;
    char perms[8] = {};
    if (std::sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3) continue;
    const std::uintptr_t a = std::max<std::uintptr_t>(lo, start);
    const std::uintptr_t b = std::min<std::uintptr_t>(hi, end);
    if (a >= b) continue;
    covered += b - a;
    if (std::strncmp(perms, "rw", 2) == 0) {
      m.read_write += b - a;
    } else if (std::strncmp(perms, "---", 3) == 0) {
      m.none += b - a;
    } else {
      m.other += b - a;
    }
  }
  std::fclose(f);
  m.holes = (end - start) - covered;
  return m;
}

}  // namespace pinpool::testing

#endif  // PINPOOL_TESTS_SUPPORT_MAPS_H_
