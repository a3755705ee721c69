// Standard containers in registered memory: a std::vector and a std::unordered_map whose storage
// comes from a pinpool Pool, and the keys a device would need to reach that storage.
//
// With the default (host) domain the keys are the chunk's registration only (no lkey/rkey); give
// PoolOptions::domains a verbs or io_uring domain and the same lookups return real device keys.
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "pinpool/pinpool.h"

namespace {

void PrintKeys(const char* what, const pinpool::Pool& pool, const void* address) {
  const std::optional<pinpool::Location> location = pool.Lookup(address);
  if (!location) {
    std::printf("%-28s %p: not in the pool\n", what, address);
    return;
  }
  for (std::size_t d = 0; d < location->domain_count(); ++d) {
    std::printf(
        "%-28s %p: domain %zu  registration base 0x%jx  offset %ju  lkey 0x%x  rkey 0x%x  "
        "buffer index %u\n",
        what, address, d, static_cast<std::uintmax_t>(location->keys(d).base),
        static_cast<std::uintmax_t>(location->offset(d)), pinpool::ToUnderlying(location->lkey(d)),
        pinpool::ToUnderlying(location->rkey(d)), pinpool::ToUnderlying(location->buffer_index(d)));
  }
}

}  // namespace

int main() {
  pinpool::PoolOptions options;
  options.chunk_size = 4 * pinpool::kMiB;
  options.budget = 64 * pinpool::kMiB;
  absl::StatusOr<std::unique_ptr<pinpool::Pool>> created = pinpool::Pool::Create(options);
  if (!created.ok()) {
    std::fprintf(stderr, "cannot create the pool: %s\n", created.status().ToString().c_str());
    return 1;
  }
  pinpool::Pool& pool = **created;
  const pinpool::Allocator<int> alloc(pool);

  // A vector: one contiguous block, so one lookup gives the keys for all of it.
  pinpool::vector<std::uint64_t> samples(alloc);
  for (std::uint64_t i = 0; i < 100000; ++i) samples.push_back(i * i);
  PrintKeys("vector data()", pool, samples.data());
  PrintKeys("vector back()", pool, &samples.back());

  // An unordered_map: every node (and the bucket array) comes from the pool; each node may lie
  // at a different offset (or in a different chunk), so look up the one you hand to a device.
  using Map = std::unordered_map<int, double, std::hash<int>, std::equal_to<int>,
                                 pinpool::Allocator<std::pair<const int, double>>>;
  Map table(alloc);
  for (int i = 0; i < 1000; ++i) table.emplace(i, i / 2.0);
  PrintKeys("unordered_map node of 7", pool, &*table.find(7));
  PrintKeys("unordered_map node of 999", pool, &*table.find(999));

  // Storage that is not the pool's has no keys.
  std::vector<int> ordinary(10);
  PrintKeys("std::vector on the heap", pool, ordinary.data());

  const pinpool::PoolStats stats = pool.GetStats();
  std::printf("\n%s", stats.ToString().c_str());
  return 0;
}
