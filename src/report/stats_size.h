// PoolStats as the program that made it was compiled (pinpool/stats.h; docs/abi.md): within an
// ABI version PoolStats grows at its end, so a program built against an earlier release hands
// the library a smaller one, whose struct_size says where it ends. The library fills (Pool's
// FillStats) and reads (the printers) only the members that lie wholly inside it: the members'
// list below, in declaration order, is how it knows where each one lies.
//
// Invariant, checked at compile time: the list names every member but struct_size (a member
// added to pinpool/stats.h without its entry here fails the static_assert).
// Thread-safe: pure functions.
#ifndef PINPOOL_REPORT_STATS_SIZE_H_
#define PINPOOL_REPORT_STATS_SIZE_H_

#include <cstddef>
#include <tuple>

#include "pinpool/stats.h"
#include "report/stats_fields.h"

namespace pinpool::internal {

// Every member of PoolStats but struct_size, in declaration order.
inline constexpr auto kPoolStatsMembers = std::make_tuple(
    &PoolStats::reserved_bytes, &PoolStats::mapped_bytes, &PoolStats::pinned_bytes,
    &PoolStats::locked_bytes, &PoolStats::budget_bytes, &PoolStats::live_bytes,
    &PoolStats::cached_bytes, &PoolStats::heap_active_bytes, &PoolStats::thread_caches,
    &PoolStats::thread_cache_bytes, &PoolStats::transfer_cache_bytes,
    &PoolStats::thread_cache_limit_bytes, &PoolStats::transfer_cache_limit_bytes,
    &PoolStats::cache_drains, &PoolStats::arrays, &PoolStats::array_bytes, &PoolStats::growths,
    &PoolStats::growth_failures, &PoolStats::chunks_given_back, &PoolStats::lost_blocks,
    &PoolStats::lost_bytes, &PoolStats::lost_block_frees, &PoolStats::memlock_limit,
    &PoolStats::process_pinned_bytes, &PoolStats::process_locked_bytes, &PoolStats::memlock_exempt,
    &PoolStats::cgroup_limit_bytes, &PoolStats::cgroup_headroom_bytes,
    &PoolStats::allocate_slow_latency, &PoolStats::classes, &PoolStats::chunks, &PoolStats::domains,
    &PoolStats::grants, &PoolStats::growth, &PoolStats::sharing);
static_assert(std::tuple_size_v<decltype(kPoolStatsMembers)> + 1 == CountMembers<PoolStats>(),
              "PoolStats: every member but struct_size needs its entry in kPoolStatsMembers");

// Moves the members of `from` that lie wholly within the first `bytes` of a PoolStats into `to`
// (struct_size stays `to`'s own).
void MoveKnownMembers(PoolStats&& from, PoolStats& to, std::size_t bytes);

// `s` as this library's PoolStats: `s` itself when it is at least as large, else `storage`
// holding the members `s` has and the others at their defaults.
const PoolStats& Complete(const PoolStats& s, PoolStats& storage);

}  // namespace pinpool::internal

#endif  // PINPOOL_REPORT_STATS_SIZE_H_
