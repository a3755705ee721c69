// The pool's face of growth off the allocation path, trim and placement: Replenish and
// NeedsReplenish for an application's event loop, Trim, and the growth figures of GetStats. The
// work is the arena's (arena/growth.cc, arena/trim.cc); this file only forwards and translates.
// Thread safety: as Pool (any thread; Trim and Replenish may race with allocation).
#include "arena/arena.h"
#include "pinpool/pool.h"
#include "pool/growth_stats.h"

namespace pinpool {

bool Pool::NeedsReplenish() const noexcept { return arena_->BelowWatermark(); }

absl::Status Pool::Replenish(std::size_t max_chunks) {
  CheckAlive("Replenish");
  return arena_->Replenish(max_chunks);
}

std::size_t Pool::Trim(std::size_t floor_bytes) {
  CheckAlive("Trim");
  return arena_->Trim(floor_bytes);
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
