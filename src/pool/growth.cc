// The pool's face of growth off the allocation path, trim and placement: Replenish and
// NeedsReplenish for an application's event loop, Trim, and the growth figures of GetStats. The
// work is the arena's (arena/growth.cc, arena/trim.cc); this file only forwards and translates.
// Thread safety: as Pool (any thread; Trim and Replenish may race with allocation).
#include <chrono>
#include <functional>
#include <utility>

#include "arena/arena.h"
#include "heap/heap.h"
#include "pinpool/pool.h"
#include "pool/growth_stats.h"

namespace pinpool {

bool Pool::NeedsReplenish() const noexcept { return arena_->BelowWatermark(); }

absl::Status Pool::Replenish(std::size_t max_chunks) {
  CheckAlive("Replenish");
  return arena_->Replenish(max_chunks);
}

namespace {

// The heap drains its caches and gives back every chunk holding no block (a granted block freed
// early is held by the grant registry, so its chunk is never among them); the arena then trims
// what the floor and the watermark allow. Chunks it keeps become room again. Trim and the trim
// policy's thread both do this.
std::size_t TrimIdleChunks(internal::Heap& heap, internal::Arena& arena, std::size_t floor_bytes) {
  heap.ReleaseIdleChunks();
  return arena.Trim(floor_bytes);
}

}  // namespace

std::size_t Pool::Trim(std::size_t floor_bytes) {
  CheckAlive("Trim");
  return TrimIdleChunks(*heap_, *arena_, floor_bytes);
}

void Pool::StartBackgroundWork() {
  const bool grow = options_.grow_in_background && options_.low_watermark != 0;
  const bool trim = options_.trim_interval_ms != 0;
  if (!grow && !trim) return;
  std::function<void()> periodic;
  if (trim) {
    periodic = [this, floor = options_.trim_floor] { TrimIdleChunks(*heap_, *arena_, floor); };
  }
  // Without grow_in_background the thread must not keep the watermark: Replenish does.
  arena_->StartGrower(std::move(periodic), std::chrono::milliseconds(options_.trim_interval_ms),
                      /*keep_watermark=*/grow);
}

namespace internal {

void FillGrowthStats(const ArenaStats& a, PoolStats& stats) {
  GrowthStats& g = stats.growth;
  g.low_watermark = a.low_watermark;
  g.room_bytes = a.uncarved_bytes;
  g.chunks_growing = a.chunks_growing;
  g.background_growths = a.background_growths;
  g.allocation_growths = a.allocation_growths;
  g.growth_waits = a.growth_waits;
  g.trims = a.trims;
  g.trimmed_bytes = a.trimmed_bytes;
  g.seconds_to_first_chunk = a.seconds_to_first_chunk;
  g.seconds_to_initial_size = a.seconds_to_startup_target;
  g.numa_node = a.numa_node;
  stats.growths = a.chunks.size() + a.trims;
  for (std::size_t i = 0; i < stats.chunks.size() && i < a.placements.size(); ++i) {
    stats.chunks[i].numa_node = a.placements[i].node;
  }
}

}  // namespace internal
}  // namespace pinpool
