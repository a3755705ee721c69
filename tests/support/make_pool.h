// The pool a test wants, in one line: MakePool({.chunk_size = ..., .domains = {d}}) creates it,
// or fails the test with Create's status and returns null. PoolSpec holds the options tests
// vary, with small defaults (2 MiB chunks of 4 KiB pages, a 16 MiB budget, nothing mapped up
// front); MakePoolWith takes whole PoolOptions for the rest.
#ifndef PINPOOL_TESTS_SUPPORT_MAKE_POOL_H_
#define PINPOOL_TESTS_SUPPORT_MAKE_POOL_H_

#include <gtest/gtest.h>

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "pinpool/pool.h"

namespace pinpool::testing {

struct PoolSpec {
  std::size_t chunk_size = 2 * kMiB;
  std::size_t budget = 16 * kMiB;
  std::size_t initial_size = 0;
  PageSize page_size = PageSize::k4K;
  bool populate = true;
  int numa_node = kDeviceNumaNode;
  std::vector<std::shared_ptr<Domain>> domains = {};  // none: the default long-term pin
  BackingKind backing = BackingKind::kAnonymous;
  std::string directory = {};  // kFiles
};

inline PoolOptions OptionsOf(const PoolSpec& spec) {
  PoolOptions o;
  o.chunk_size = spec.chunk_size;
  o.budget = spec.budget;
  o.initial_size = spec.initial_size;
  o.page_size = spec.page_size;
  o.populate = spec.populate;
  o.numa_node = spec.numa_node;
  o.domains = spec.domains;
  o.backing.kind = spec.backing;
  o.backing.directory = spec.directory;
  return o;
}

inline std::unique_ptr<Pool> MakePoolWith(PoolOptions options) {
  absl::StatusOr<std::unique_ptr<Pool>> pool = Pool::Create(std::move(options));
  EXPECT_TRUE(pool.ok()) << "Pool::Create: " << pool.status();
  return pool.ok() ? *std::move(pool) : nullptr;
}

inline std::unique_ptr<Pool> MakePool(const PoolSpec& spec = {}) {
  return MakePoolWith(OptionsOf(spec));
}

}  // namespace pinpool::testing

#endif  // PINPOOL_TESTS_SUPPORT_MAKE_POOL_H_
