// A minimal application of pinpool's public API, built out of tree against an *installed* pinpool
// by tests/consumer/run.sh: once through find_package(pinpool CONFIG) and once through pkg-config.
// It proves that the installed headers, library and package metadata are complete and usable:
// creates a small pool, allocates and writes a block, checks that Lookup of its last byte gives
// the block's chunk and keys, and prints "OK". Exits non-zero with a reason on any failure.
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>

#include "pinpool/pinpool.h"

namespace {

int Fail(const char* what) {
  std::fprintf(stderr, "consumer: FAILED: %s\n", what);
  return 1;
}

}  // namespace

int main() {
  pinpool::PoolOptions options;
  options.chunk_size = 4 * pinpool::kMiB;
  options.budget = 16 * pinpool::kMiB;
  absl::StatusOr<std::unique_ptr<pinpool::Pool>> created =
      pinpool::Pool::Create(std::move(options));
  if (!created.ok()) {
    // absl::Status::ToString lives in libabsl_status: this also proves the Abseil link flags.
    std::fprintf(stderr, "consumer: Pool::Create: %s\n", created.status().ToString().c_str());
    return Fail("Pool::Create");
  }
  pinpool::Pool& pool = **created;

  constexpr std::size_t kSize = 1000;
  pinpool::Block block = pool.Allocate(kSize);
  if (!block) return Fail("Allocate(1000) returned an empty block");
  if (block.size() < kSize) return Fail("block smaller than asked");
  std::memset(block.data(), 0xA5, block.size());

  const auto* last = static_cast<const unsigned char*>(block.data()) + block.size() - 1;
  std::optional<pinpool::Location> location = pool.Lookup(last);
  if (!location) return Fail("Lookup of the block's last byte found nothing");
  if (&location->chunk() != &block.chunk() || location->chunk().base != block.chunk().base) {
    return Fail("Lookup gave a different chunk than Allocate");
  }
  if (location->keys().base != block.keys().base ||
      location->offset() != block.offset() + block.size() - 1) {
    return Fail("Lookup gave different keys or offset than Allocate");
  }
  if (*last != 0xA5) return Fail("the block does not hold what was written");
  pool.Deallocate(block);

  std::printf("pinpool %s consumer OK\n", PINPOOL_VERSION_STRING);
  return 0;
}
