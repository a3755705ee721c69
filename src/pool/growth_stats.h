// The arena's growth, trim and placement figures as the public GrowthStats (and each chunk's
// verified node), for Pool::GetStats. Pure; thread-safe.
#ifndef PINPOOL_POOL_GROWTH_STATS_H_
#define PINPOOL_POOL_GROWTH_STATS_H_

#include "arena/arena.h"
#include "pinpool/stats.h"

namespace pinpool::internal {

// Fills stats.growth, stats.growths and stats.chunks[i].numa_node (chunks already filled from
// `arena`, in the same order).
void FillGrowthStats(const ArenaStats& arena, PoolStats& stats);

}  // namespace pinpool::internal

#endif  // PINPOOL_POOL_GROWTH_STATS_H_
