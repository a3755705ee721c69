// A program built against this tree's headers and libpinpool.so, for abi_mismatch.sh: makes a
// pool, allocates and frees a block through the inline fast path, says "abi_probe OK".
#include <cstdio>

#include "pinpool/pinpool.h"

int main() {
  pinpool::PoolOptions options;
  options.chunk_size = 2 * pinpool::kMiB;
  options.budget = 4 * pinpool::kMiB;
  options.page_size = pinpool::PageSize::k4K;
  absl::StatusOr<std::unique_ptr<pinpool::Pool>> pool = pinpool::Pool::Create(options);
  if (!pool.ok()) {
    std::fprintf(stderr, "abi_probe: %s\n", pool.status().ToString().c_str());
    return 1;
  }
  const pinpool::Block block = (*pool)->Allocate(4096);
  if (!block) return 1;
  (*pool)->Deallocate(block);
  std::printf("abi_probe OK\n");
  return 0;
}
