// The RDMA benchmarks' device: a verbs domain with remote read and write on the first ACTIVE
// device. Without one the benchmark has nothing to measure: it says why and exits 0, or 1 when
// PINPOOL_REQUIRE_RDMA=1 (the test command and the guest), so a missing device never passes
// silently where one is expected.
#ifndef PINPOOL_BENCH_BENCH_VERBS_H_
#define PINPOOL_BENCH_BENCH_VERBS_H_

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "pinpool/verbs.h"

namespace pinpool::bench {

// The domain, or null with *exit_code set to what main should return.
inline std::shared_ptr<VerbsDomain> OpenVerbsOrExplain(const char* program, int* exit_code) {
  absl::StatusOr<std::shared_ptr<VerbsDomain>> domain =
      VerbsDomain::Open({.access = {.trusted_whole_chunk = {.read = true, .write = true}}});
  if (domain.ok()) return *std::move(domain);
  const char* required = std::getenv("PINPOOL_REQUIRE_RDMA");
  const bool must = required != nullptr && std::strcmp(required, "1") == 0;
  std::fprintf(stderr, "%s: no RDMA device, nothing to measure: %s\n%s\n", program,
               domain.status().ToString().c_str(),
               must ? "PINPOOL_REQUIRE_RDMA=1, so that is a failure"
                    : "run it through scripts/softroce/run-in-guest.sh");
  *exit_code = must ? 1 : 0;
  return nullptr;
}

}  // namespace pinpool::bench

#endif  // PINPOOL_BENCH_BENCH_VERBS_H_
