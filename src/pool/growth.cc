// The pool's face of growth off the allocation path, trim and placement: Replenish and
// NeedsReplenish for an application's event loop, Trim, starting the background work the
// options ask for (pool/background.h), and the growth figures of GetStats. The work itself is the
// arena's (arena/growth.cc, arena/trim.cc) and the heap's.
// Thread safety: as Pool (any thread; Trim and Replenish may race with allocation).
#include <chrono>

#include "arena/arena.h"
#include "heap/heap.h"
#include "pinpool/pool.h"
#include "pool/background.h"
#include "pool/growth_stats.h"

namespace pinpool {

bool Pool::NeedsReplenish() const noexcept { return arena_->BelowWatermark(); }

absl::Status Pool::Replenish(std::size_t max_chunks) {
  CheckAlive("Replenish");
  return arena_->Replenish(max_chunks);
}

std::size_t Pool::Trim(std::size_t floor_bytes) {
  CheckAlive("Trim");
  return internal::TrimIdleChunks(*heap_, *arena_, floor_bytes);
}

void Pool::StartBackgroundWork() {
  background_ = internal::BackgroundWork::Start(
      *heap_, *arena_,
      {// Without grow_in_background the application keeps the watermark (Replenish).
       .keep_watermark = options_.grow_in_background && options_.low_watermark != 0,
       .trim_every = std::chrono::milliseconds(options_.trim_interval_ms),
       .trim_floor = options_.trim_floor,
       .numa_node = arena_->Stats().numa_node});
}

namespace internal {

void FillGrowthStats(const ArenaStats& a, const StartupTimes& startup, PoolStats& stats) {
  GrowthStats& g = stats.growth;
  g.low_watermark = a.low_watermark;
  g.room_bytes = a.uncarved_bytes;
  g.chunks_growing = a.chunks_growing;
  g.background_growths = a.background_growths;
  g.allocation_growths = a.allocation_growths;
  g.growth_waits = a.growth_waits;
  g.trims = a.trims;
  g.trimmed_bytes = a.trimmed_bytes;
  g.seconds_to_first_chunk = startup.first_chunk;
  g.seconds_to_initial_size = startup.initial_size;
  g.numa_node = a.numa_node;
  g.growth_latency = a.growth_latency;
  g.trim_latency = a.trim_latency;
  stats.growths = a.chunks.size() + a.trims;
  for (std::size_t i = 0; i < stats.chunks.size() && i < a.placements.size(); ++i) {
    stats.chunks[i].numa_node = a.placements[i].node;
  }
}

}  // namespace internal
}  // namespace pinpool
