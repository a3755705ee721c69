// The benchmarks' one way to make a pool: created on first use from `options`, never destroyed
// (benchmark threads may run until exit), and the benchmark aborts with the Status if the pool
// cannot be created (a benchmark of nothing would be worse than no benchmark).
#ifndef PINPOOL_BENCH_BENCH_POOL_H_
#define PINPOOL_BENCH_BENCH_POOL_H_

#include <cstdio>
#include <cstdlib>

#include "pinpool/pool.h"

namespace pinpool::bench {

inline Pool& LeakedPool(PoolOptions options) {
  auto pool = Pool::Create(std::move(options));
  if (!pool.ok()) {
    std::fprintf(stderr, "pool: %s\n", pool.status().ToString().c_str());
    std::abort();
  }
  return *pool->release();
}

}  // namespace pinpool::bench

#endif  // PINPOOL_BENCH_BENCH_POOL_H_
