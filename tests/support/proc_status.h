// Fields of /proc/self/status (VmLck, VmPin, VmSize, ...) in bytes, for tests that check what a
// pool leaves behind: the os room's one parser of such files.
#ifndef PINPOOL_TESTS_SUPPORT_PROC_STATUS_H_
#define PINPOOL_TESTS_SUPPORT_PROC_STATUS_H_

#include "os/kernel_fields.h"

namespace pinpool::testing {

// The value of `field` ("VmLck", "VmSize", "VmPin", "VmRSS") in bytes; -1 if absent.
inline long long ProcStatusBytes(const char* field) {
  const auto bytes = internal::os::ProcStatusBytes(field);
  return bytes ? static_cast<long long>(*bytes) : -1;
}

}  // namespace pinpool::testing

#endif  // PINPOOL_TESTS_SUPPORT_PROC_STATUS_H_
