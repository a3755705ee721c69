// Pool's reports: GetStats gathers what each part counts into the public PoolStats (the printers
// are report/'s), and ServeMetrics puts them on a socket (report/metrics_server.h).
// Thread safety: as Pool; GetStats takes each part's lock in turn, never two at once.
#include <chrono>
#include <string>
#include <vector>

#include "arena/arena.h"
#include "heap/heap.h"
#include "os/cgroup.h"
#include "os/os.h"
#include "pinpool/pool.h"
#include "pool/arrays.h"
#include "pool/classes.h"
#include "pool/grants/registry.h"
#include "pool/metrics.h"
#include "pool/sharing/lost_chunks.h"
#include "pool/sharing/sharing.h"
#include "report/stats_size.h"
#include "util/status_macros.h"

namespace pinpool {
PINPOOL_ABI_BEGIN
namespace {

// The arena's growth, trim and placement figures as the public GrowthStats (and each chunk's
// verified node): stats.chunks are filled already, in the arena's order. Start-up times are the
// pool's (-1: not yet, or none).
void FillGrowthStats(const internal::ArenaStats& a, double first_chunk, double initial_size,
                     PoolStats& stats) {
  stats.growth = a.growth;
  stats.growth.seconds_to_first_chunk = first_chunk;
  stats.growth.seconds_to_initial_size = initial_size;
  stats.growths = a.chunks.size() + a.growth.trims;
  for (std::size_t i = 0; i < stats.chunks.size() && i < a.placements.size(); ++i) {
    stats.chunks[i].numa_node = a.placements[i].node;
  }
}

}  // namespace

void Pool::FillStats(PoolStats& stats) const {
  CheckAlive("GetStats");
  internal::MoveKnownMembers(CollectStats(), stats, stats.struct_size);
}

PoolStats Pool::CollectStats() const {
  PoolStats stats;
  const internal::os::MemlockState memlock = internal::os::QueryMemlock();
  const internal::ArenaStats a = arena_->Stats();
  stats.reserved_bytes = a.reserved_bytes;
  stats.budget_bytes = a.max_chunks * a.chunk_size;
  stats.mapped_bytes = a.chunks.size() * a.chunk_size;
  stats.pinned_bytes = a.pinned_bytes;
  stats.locked_bytes = a.locked_bytes;
  stats.growth_failures = a.growth_failures;
  stats.memlock_limit = memlock.limit;
  stats.process_locked_bytes = memlock.locked;
  stats.process_pinned_bytes = memlock.pinned;
  stats.memlock_exempt = memlock.exempt;
  const internal::os::MemoryCgroupState cgroup = internal::os::ReadMemoryCgroup(arena_->cgroup());
  if (cgroup.limited) {
    stats.cgroup_limit_bytes = cgroup.limit;
    stats.cgroup_headroom_bytes = cgroup.Headroom().value_or(0);
  }
  for (std::size_t i = 0; i < a.chunks.size(); ++i) {
    const ChunkInfo& c = a.chunks[i];
    stats.chunks.push_back({.base = c.base,
                            .size = c.size,
                            .page_size = c.page_size,
                            .huge_bytes = c.huge_bytes,
                            .index = c.index,
                            .keys = std::vector<Keys>(c.keys, c.keys + c.domain_count),
                            .numa_node = -1,  // FillGrowthStats: from the placements
                            .backing = a.backings[i].description,
                            .sealed = a.backings[i].sealed});
  }
  FillGrowthStats(a, startup_first_chunk_, startup_initial_size_, stats);
  for (const internal::ArenaStats::DomainCounters& d : a.domains) {
    stats.domains.push_back({d.name, d.kind, d.pinning, d.registrations, d.registered_bytes,
                             d.seconds, d.max_seconds, d.register_latency, d.deregister_latency});
  }
  stats.grants = grants_->Stats();
  {
    internal::MutexLock lock(&take_back_->mu);
    stats.chunks_given_back = take_back_->chunks_given_back;
    stats.lost_blocks = take_back_->lost_blocks;
    stats.lost_bytes = take_back_->lost_bytes;
  }
  stats.lost_block_frees = take_back_->lost_block_frees.load(std::memory_order_relaxed);
  stats.growths += stats.chunks_given_back;  // added once, gone neither by growth nor by trim
  // Every class's heap: the default one and each named class's.
  internal::Heap::Counts counts = heap_->GetCounts();
  std::size_t thread_caches = heap_->ThreadCacheCount();
  for (std::uint32_t c = 1; c < head_.class_count; ++c) {
    const internal::Heap& heap = classes_->heap(c);
    const internal::Heap::Counts more = heap.GetCounts();
    counts.allocated += more.allocated;
    counts.active += more.active;
    counts.thread_cache_bytes += more.thread_cache_bytes;
    counts.transfer_bytes += more.transfer_bytes;
    counts.drains += more.drains;
    thread_caches += heap.ThreadCacheCount();
  }
  if (classes_ != nullptr) stats.classes = classes_->Stats();
  stats.sharing = sharing_->Stats();
  // The heap counts every block outside its free lists: live ones, cached ones, held ones. The
  // counts are read one after another while others allocate, so clamp rather than wrap.
  stats.cached_bytes = counts.thread_cache_bytes + counts.transfer_bytes;
  const std::size_t not_live = stats.cached_bytes + stats.grants.held_bytes;
  stats.live_bytes = counts.allocated > not_live ? counts.allocated - not_live : 0;
  stats.heap_active_bytes = counts.active;
  stats.thread_caches = thread_caches;
  stats.thread_cache_bytes = counts.thread_cache_bytes;
  stats.transfer_cache_bytes = counts.transfer_bytes;
  stats.thread_cache_limit_bytes = counts.thread_cache_limit;
  stats.transfer_cache_limit_bytes = counts.transfer_limit;
  stats.cache_drains = counts.drains;
  stats.arrays = arrays_->live();
  stats.array_bytes = arrays_->chunk_bytes();
  stats.allocate_slow_latency = metrics_->allocate_slow.Snapshot();
  for (std::size_t d = 0; d < stats.domains.size(); ++d) {
    stats.domains[d].figures = arena_->domains()[d]->figures();
  }
  return stats;
}

absl::Status Pool::ServeMetrics(const std::string& socket_path) {
  CheckAlive("ServeMetrics");
  if (metrics_->server != nullptr && metrics_->server->path() == socket_path) {
    return absl::OkStatus();  // served there already
  }
  // The new server first: a call that fails leaves the one serving as it was.
  PINPOOL_ASSIGN_OR_RETURN(std::unique_ptr<internal::MetricsServer> server,
                           internal::MetricsServer::Start(
                               socket_path, [this] { return CollectStats().ToOpenMetrics(); }));
  metrics_->server = std::move(server);
  return absl::OkStatus();
}

void Pool::StopServingMetrics() { metrics_->server.reset(); }

PINPOOL_ABI_END
}  // namespace pinpool
