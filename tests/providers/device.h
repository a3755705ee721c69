// The device tests' one way to say "no RDMA device here": skipped with the reason and how to get
// one, or failed when PINPOOL_REQUIRE_RDMA=1 (the guest, CI), so that no suite passes by not
// running. Test support for the providers' device tests.
#ifndef PINPOOL_TESTS_PROVIDERS_DEVICE_H_
#define PINPOOL_TESTS_PROVIDERS_DEVICE_H_

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "pinpool/verbs.h"

namespace pinpool::testing {

inline bool ProviderRdmaRequired() {
  const char* v = std::getenv("PINPOOL_REQUIRE_RDMA");
  return v != nullptr && std::string(v) == "1";
}

// Empty when an RDMA device with an ACTIVE port exists; else why not.
inline std::string NoDeviceReason() {
  absl::StatusOr<std::shared_ptr<VerbsDomain>> d = VerbsDomain::Open();
  return d.ok() ? std::string() : d.status().ToString();
}

}  // namespace pinpool::testing

// In SetUp (or a test body): returns from it, skipped or failed, when there is no device.
#define PINPOOL_NEED_RDMA_DEVICE()                                                       \
  do {                                                                                   \
    const std::string pinpool_why = ::pinpool::testing::NoDeviceReason();                \
    if (!pinpool_why.empty()) {                                                          \
      if (!::pinpool::testing::ProviderRdmaRequired()) {                                 \
        GTEST_SKIP() << pinpool_why << ": run through scripts/softroce/run-in-guest.sh"; \
      }                                                                                  \
      FAIL() << "no usable RDMA device and PINPOOL_REQUIRE_RDMA=1: " << pinpool_why;     \
    }                                                                                    \
  } while (false)

#endif  // PINPOOL_TESTS_PROVIDERS_DEVICE_H_
