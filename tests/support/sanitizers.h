// Which sanitizer this test binary was built with, for tests whose subject a sanitizer changes.
// AddressSanitizer and ThreadSanitizer intercept mlock(2) and make it a no-op ("AddressSanitizer
// ignores mlock"), so VmLck never grows: tests that measure the resident (mlock) domain's locked
// bytes through VmLck skip under them, saying so (and RLIMIT_MEMLOCK never bites mlock there).
// Long-term pins (the default domain, io_uring, verbs: VmPin) are system calls no sanitizer
// intercepts, so their tests run everywhere.
#ifndef PINPOOL_TESTS_SUPPORT_SANITIZERS_H_
#define PINPOOL_TESTS_SUPPORT_SANITIZERS_H_

#if defined(__SANITIZE_ADDRESS__)
#define PINPOOL_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PINPOOL_TEST_ASAN 1
#endif
#endif
#ifndef PINPOOL_TEST_ASAN
#define PINPOOL_TEST_ASAN 0
#endif

#if defined(__SANITIZE_THREAD__)
#define PINPOOL_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PINPOOL_TEST_TSAN 1
#endif
#endif
#ifndef PINPOOL_TEST_TSAN
#define PINPOOL_TEST_TSAN 0
#endif

namespace pinpool::testing {

inline constexpr bool kAsan = PINPOOL_TEST_ASAN;
inline constexpr bool kTsan = PINPOOL_TEST_TSAN;
inline constexpr bool kMlockIsANoOp = PINPOOL_TEST_ASAN || PINPOOL_TEST_TSAN;
inline constexpr const char* kMlockNoOpReason =
    "the sanitizer (ASan/TSan) makes mlock a no-op, so VmLck cannot show what is locked";

// How far VmSize (or VmRSS) may move across an operation that must leave nothing mapped: a
// little for the C++ runtime; more under ASan and TSan, whose allocators map a new region the
// first time a size is asked for and keep freed memory in quarantine. Chunks are at least
// 2 MiB, and the tests that use this also check pinpool's own count of mapped chunk bytes
// exactly.
inline constexpr long long kVmSlackBytes = kMlockIsANoOp ? (4ll << 20) : (1ll << 20);

}  // namespace pinpool::testing

// Skips the current test when mlock does nothing in this build.
#define PINPOOL_SKIP_IF_MLOCK_IS_A_NOOP()                   \
  do {                                                      \
    if (::pinpool::testing::kMlockIsANoOp) {                \
      GTEST_SKIP() << ::pinpool::testing::kMlockNoOpReason; \
    }                                                       \
  } while (false)

#endif  // PINPOOL_TESTS_SUPPORT_SANITIZERS_H_
