// PoolStats as members of a JSON document being written, so that a tool can put a pool's stats
// inside its own output (pinpool-info --try) in the same form PoolStats::ToJson gives.
#ifndef PINPOOL_REPORT_STATS_JSON_H_
#define PINPOOL_REPORT_STATS_JSON_H_

#include "pinpool/stats.h"
#include "wire/json_writer.h"

namespace pinpool::internal {

// Writes `stats` as one JSON object (the value PoolStats::ToJson returns) at the writer's
// current position: top level, an array element, or after a Key.
void WriteStatsJson(const PoolStats& stats, JsonWriter& json);

}  // namespace pinpool::internal

#endif  // PINPOOL_REPORT_STATS_JSON_H_
