// std::pmr over a pinpool Pool: a pinpool::MemoryResource makes every std::pmr container (and
// the strings inside them, through polymorphic_allocator's uses-allocator construction) allocate
// registered memory, and composes with the standard resources (here a monotonic buffer for
// short-lived message batches).
#include <cstdio>
#include <memory>
#include <memory_resource>
#include <new>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "pinpool/pinpool.h"

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
  pinpool::MemoryResource registered(pool);

  // A map of strings: nodes, buckets and (long) string contents all in the pool.
  std::pmr::unordered_map<int, std::pmr::string> names(&registered);
  for (int i = 0; i < 100; ++i) {
    names.emplace(i,
                  "a message long enough to live outside the string object #" + std::to_string(i));
  }
  const std::pmr::string& name = names.at(42);
  std::printf("names[42] at %p: in pool: %s\n", static_cast<const void*>(name.data()),
              pool.Contains(name.data()) ? "yes" : "no");

  // A batch of buffers carved from one pool block and released all at once.
  {
    std::pmr::monotonic_buffer_resource batch(64 * 1024, &registered);
    std::pmr::vector<std::pmr::vector<char>> buffers(&batch);
    for (int i = 0; i < 16; ++i) buffers.emplace_back(4096, static_cast<char>(i));
    const std::optional<pinpool::Location> where = pool.Lookup(buffers[3].data());
    std::printf("buffer 3 at %p: offset %llu in its registration\n",
                static_cast<const void*>(buffers[3].data()),
                where ? static_cast<unsigned long long>(where->offset()) : 0ULL);
  }

  try {
    // Bigger than a chunk: memory_resource reports failure by throwing.
    [[maybe_unused]] void* p = registered.allocate(options.chunk_size + 1);
  } catch (const std::bad_alloc&) {
    std::printf("a block larger than one chunk throws std::bad_alloc, as pmr requires\n");
  }
  return 0;
}
