// Reads fields of /proc/self/status (VmLck, VmSize, ...) in bytes, for tests that check what a
// pool leaves behind.
#ifndef PINPOOL_TESTS_SUPPORT_PROC_STATUS_H_
#define PINPOOL_TESTS_SUPPORT_PROC_STATUS_H_

#include <cstdio>
#include <cstring>
#include <string>

namespace pinpool::testing {

// The value of `field` ("VmLck", "VmSize", "VmPin", "VmRSS") in bytes; -1 if absent.
inline long long ProcStatusBytes(const char* field) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return -1;
  char line[256];
  long long kb = -1;
  const std::size_t n = std::strlen(field);
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, field, n) == 0 && line[n] == ':') {
      std::sscanf(line + n + 1, "%lld", &kb);
      break;
    }
  }
  std::fclose(f);
  return kb < 0 ? -1 : kb * 1024;
}

}  // namespace pinpool::testing

#endif  // PINPOOL_TESTS_SUPPORT_PROC_STATUS_H_
