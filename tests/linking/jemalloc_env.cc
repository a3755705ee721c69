// Creates a pool and uses it, then exits 0. Run by ctest with hostile jemalloc settings in the
// environment: MALLOC_CONF (the application's jemalloc's) must not reach pinpool, whose heap is
// its own code and links no allocator.
#include <cstdio>

#include "pinpool/pool.h"

int main() {
  pinpool::PoolOptions o;
  o.chunk_size = 2 * pinpool::kMiB;
  o.budget = 4 * pinpool::kMiB;
  auto pool = pinpool::Pool::Create(o);
  if (!pool.ok()) {
    std::fprintf(stderr, "%s\n", pool.status().ToString().c_str());
    return 1;
  }
  pinpool::Block b = (*pool)->Allocate(100);
  if (!b) return 1;
  (*pool)->Deallocate(b);
  std::puts("jemalloc_env: pool works");
  return 0;
}
