// MetadataArena (src/heap/metadata.h): zeroed, 64-byte-aligned memory from regions the os room
// maps (counted there, never malloc), large requests in regions of their own, everything unmapped
// when the arena goes; and a refusal from the kernel is a null, not a crash.
#include "heap/metadata.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <set>

#include "os/os.h"

namespace pinpool::internal {
namespace {

bool AllZero(const void* p, std::size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < n; ++i) {
    if (b[i] != 0) return false;
  }
  return true;
}

TEST(MetadataArenaTest, HandsOutZeroedAlignedDisjointMemoryFromMappedRegions) {
  os::Counters& os = os::counters();
  const std::uint64_t mmaps = os.mmap.load(), munmaps = os.munmap.load();
  {
    MetadataArena arena;
    std::set<std::uintptr_t> seen;
    for (std::size_t n : {std::size_t{1}, std::size_t{64}, std::size_t{100}, std::size_t{4096},
                          std::size_t{3} << 20, std::size_t{200}, std::size_t{1} << 20}) {
      void* p = arena.Allocate(n);
      ASSERT_NE(p, nullptr) << n;
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 64, 0u) << n;
      EXPECT_TRUE(AllZero(p, n)) << n;
      std::memset(p, 0xab, n);  // writable, and nothing else handed out overlaps it
      EXPECT_TRUE(seen.insert(reinterpret_cast<std::uintptr_t>(p)).second);
    }
    EXPECT_GE(arena.mapped_bytes(), (std::size_t{4} << 20));
    EXPECT_GT(os.mmap.load(), mmaps) << "regions come from the os room";
  }
  EXPECT_EQ(os.munmap.load() - munmaps, os.mmap.load() - mmaps) << "every region unmapped";
}

int refuse_metadata(os::Call call, std::size_t) {
  return call == os::Call::kMapMetadata ? ENOMEM : 0;
}

TEST(MetadataArenaTest, ARefusedMappingIsANull) {
  MetadataArena arena;
  ASSERT_NE(arena.Allocate(64), nullptr);
  const os::FaultHook previous = os::SetFaultHook(&refuse_metadata);
  EXPECT_NE(arena.Allocate(64), nullptr) << "served from the region it has";
  EXPECT_EQ(arena.Allocate(std::size_t{2} << 20), nullptr);
  os::SetFaultHook(previous);
  EXPECT_NE(arena.Allocate(std::size_t{2} << 20), nullptr);
}

}  // namespace
}  // namespace pinpool::internal
