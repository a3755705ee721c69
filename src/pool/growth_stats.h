// The arena's growth, trim and placement figures as the public GrowthStats (and each chunk's
// verified node), for Pool::GetStats. Pure; thread-safe.
#ifndef PINPOOL_POOL_GROWTH_STATS_H_
#define PINPOOL_POOL_GROWTH_STATS_H_

#include "arena/arena.h"
#include "pinpool/stats.h"

namespace pinpool::internal {

// How long Create took to map its first chunk and all of initial_size, in seconds; -1 when it
// mapped none (initial_size 0) or failed before.
struct StartupTimes {
  double first_chunk = -1;
  double initial_size = -1;
};

// Fills stats.growth, stats.growths and stats.chunks[i].numa_node (chunks already filled from
// `arena`, in the same order).
void FillGrowthStats(const ArenaStats& arena, const StartupTimes& startup, PoolStats& stats);

}  // namespace pinpool::internal

#endif  // PINPOOL_POOL_GROWTH_STATS_H_
