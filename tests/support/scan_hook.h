// A fault hook (os::SetFaultHook) that counts the calls to ioctl(PAGEMAP_SCAN) the os room makes
// while it is installed and, when asked, fails every one with ENOTTY (as a kernel before Linux 6.7
// would), so that a test sees which way a chunk's pages were read back. The count is atomic: a
// pool's workers map chunks on threads of their own. One hook at a time, process-wide.
#ifndef PINPOOL_TESTS_SUPPORT_SCAN_HOOK_H_
#define PINPOOL_TESTS_SUPPORT_SCAN_HOOK_H_

#include <atomic>
#include <cerrno>
#include <cstddef>

#include "os/os.h"

namespace pinpool::testing {

class ScanHook {
 public:
  explicit ScanHook(bool fail_scan) {
    scans_ = 0;
    fail_ = fail_scan;
    internal::os::SetFaultHook(&Count);
  }
  ~ScanHook() { internal::os::SetFaultHook(nullptr); }
  ScanHook(const ScanHook&) = delete;
  ScanHook& operator=(const ScanHook&) = delete;

  // Scans seen since the hook was installed.
  int scans() const { return scans_.load(); }

 private:
  static int Count(internal::os::Call call, std::size_t) {
    if (call != internal::os::Call::kPagemapScan) return 0;
    ++scans_;
    return fail_ ? ENOTTY : 0;
  }
  static inline std::atomic<int> scans_{0};
  static inline std::atomic<bool> fail_{false};
};

}  // namespace pinpool::testing

#endif  // PINPOOL_TESTS_SUPPORT_SCAN_HOOK_H_
