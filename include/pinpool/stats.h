// PoolStats: a snapshot of what a pool holds, taken by Pool::GetStats() (takes the growth lock;
// not for the fast path). A plain value: copy it, print it (ToString for people, ToJson for
// tools), compare two of them.
//
// Described once: every member of these structs has one row in src/report/stats_fields.h (its
// stable snake_case name, unit, counter or gauge, one line of help), and ToString, ToJson and
// pinpool-info print by walking those rows. A member without a row does not compile (the rows
// are counted against the struct's members). So adding a figure is: the member here, its row
// there, and the code that counts it.
//
// Figures a domain or a grant mechanism reports about itself at run time (the stats cannot name
// them in advance) come as `Figure`s in DomainStats::figures and GrantStats::figures (and its
// latency histograms as `HistogramFigure`s in GrantStats::histograms); the printers print them
// after the described ones.
//
// Latency histograms (LatencyHistogram) are recorded only where slow work happens (registration,
// growth, trim, the allocation slow path, grant binds and invalidations), never on the allocation
// fast path; recording one is a few relaxed atomic adds. ToOpenMetrics writes everything in the
// text format Prometheus scrapes (docs/metrics.md).
#ifndef PINPOOL_STATS_H_
#define PINPOOL_STATS_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pinpool/abi.h"
#include "pinpool/export.h"
#include "pinpool/keys.h"

namespace pinpool {
PINPOOL_ABI_BEGIN

// A figure reported at run time by whoever owns it (a domain, a grant mechanism), printed as it
// comes. `name` is stable snake_case with its unit as a suffix where it has one ("_bytes",
// "_seconds"), unique within its list; `counter` is true when the value only grows (counted
// ever), false when it is a level now (a gauge).
struct Figure {
  std::string name;
  std::uint64_t value = 0;
  bool counter = false;
  std::string help;  // one line, for people and for exporters
};

// The value of the figure `name` in `figures`; nullopt when there is none by that name.
inline std::optional<std::uint64_t> FigureValue(const std::vector<Figure>& figures,
                                                std::string_view name) {
  for (const Figure& f : figures) {
    if (f.name == name) return f.value;
  }
  return std::nullopt;
}

// How long something took, in fixed buckets: bucket i holds the events that took at most
// UpperBound(i) seconds and more than UpperBound(i - 1); the bounds double from 1 us (1, 2, 4, ...
// 2^26 us, about 67 s), the last bucket is unbounded. A snapshot: `count` is the sum of `buckets`.
struct LatencyHistogram {
  static constexpr std::size_t kBuckets = 28;
  static constexpr double UpperBound(std::size_t i) noexcept {
    return i + 1 >= kBuckets ? std::numeric_limits<double>::infinity()
                             : 1e-6 * static_cast<double>(std::uint64_t{1} << i);
  }
  std::array<std::uint64_t, kBuckets> buckets{};  // events per bucket (not cumulative)
  std::uint64_t count = 0;                        // events, ever
  double sum_seconds = 0;                         // their total time
};

// A latency histogram reported at run time by a grant mechanism (GrantLock::Record). `name` is
// stable snake_case ending in "_seconds", unique within its list.
struct HistogramFigure {
  std::string name;
  std::string help;  // one line
  LatencyHistogram histogram{};
};

struct DomainStats {
  std::string name;
  DomainKind kind = DomainKind::kHost;
  Pinning pinning = Pinning::kNone;       // what registration does to the pages (Domain::pinning)
  std::uint64_t registrations = 0;        // successful Register() calls, ever
  std::uint64_t registered_bytes = 0;     // bytes currently registered
  double register_seconds = 0;            // total time spent in Register()
  double max_register_seconds = 0;        // slowest single Register()
  LatencyHistogram register_latency{};    // each successful Register() of a chunk
  LatencyHistogram deregister_latency{};  // each Deregister() of a chunk (trim, destruction)
  std::vector<Figure> figures{};          // what the domain reports about itself
};

struct ChunkStats {
  std::uintptr_t base = 0;
  std::size_t size = 0;
  PageSize page_size = PageSize::k4K;  // what the kernel gave, read back (docs/design.md)
  std::size_t huge_bytes = 0;          // bytes backed by huge pages
  std::uint32_t index = 0;             // position in the pool's reserved range
  // keys[d]: domain d's registration of this chunk (PoolStats::domains[d]); the fields its kind
  // does not use are zero. Keys::handle is the domain's own object, not for printing.
  std::vector<Keys> keys;
  // The NUMA node the kernel reports for every sampled page (move_pages), when the pool binds
  // chunks to a node; -1 when it does not, or no page is in memory yet.
  int numa_node = -1;
  // What the pages are (PoolOptions::backing): "anonymous", "memfd", "memfd hugetlb 2M",
  // "file /dev/shm/pinpool-..."; and whether truncation of its file is refused (a sealed memfd).
  // What can take the memory back, per backing: docs/backing.md.
  std::string backing = "anonymous";
  bool sealed = false;
};

// `bytes` as pinpool prints sizes ("64 MiB", "1.5 KiB", "17 B"), for messages and reports.
PINPOOL_EXPORT std::string FormatBytes(std::uint64_t bytes);

// Blocks held for remote grants (GrantStats::held_blocks) by how long ago the application freed
// them: blocks[i] and bytes[i] count those freed at most kUpperSeconds[i] ago and longer than
// kUpperSeconds[i - 1]; the last bucket is older than the last bound. A block held for long
// means a revocation that does not complete (completions not reported, a stuck peer).
struct HeldAges {
  static constexpr std::array<double, 7> kUpperSeconds = {0.001, 0.01, 0.1, 1, 10, 60, 600};
  static constexpr std::size_t kBuckets = kUpperSeconds.size() + 1;
  std::array<std::uint64_t, kBuckets> blocks{};
  std::array<std::uint64_t, kBuckets> bytes{};
  double sum_seconds = 0;  // the held blocks' ages, added up
};

// Remote grants of one pool (pinpool/verbs_remote_access.h, pinpool/fabric.h), over all its grant
// holders.
struct GrantStats {
  std::uint64_t connections = 0;  // grant holders alive (VerbsRemoteAccess, FabricRemoteAccess)
  std::uint64_t live = 0;         // grants a peer may use now
  std::uint64_t revoking = 0;  // revocations started, not yet confirmed (a peer may still use them)
  std::uint64_t grants = 0;    // grants made, ever
  std::uint64_t held_blocks = 0;  // freed while a grant reached them: held until it ends
  std::uint64_t held_bytes = 0;
  std::uint64_t held_ever = 0;  // blocks ever held
  HeldAges held_ages{};         // the held blocks by how long ago they were freed
  // What each mechanism counts of its own (GrantLock::Count): "verbs_window_binds",
  // "fabric_region_registrations", "verbs_remote_access_errors", ... (docs/remote-access.md and
  // docs/metrics.md list the verbs ones).
  std::vector<Figure> figures{};
  // What each mechanism times of its own (GrantLock::Record): "verbs_window_bind_seconds", ...
  std::vector<HistogramFigure> histograms{};
};

// Growth, start-up, trim and placement (PoolOptions::low_watermark, reserve_threads, numa_node;
// Pool::Replenish, Pool::Trim).
struct GrowthStats {
  std::size_t low_watermark = 0;
  std::size_t room_bytes = 0;            // in mapped chunks, not yet taken by any allocation
  std::size_t chunks_growing = 0;        // being mapped and registered now
  std::uint64_t background_growths = 0;  // chunks the background thread or Replenish added
  std::uint64_t allocation_growths = 0;  // chunks added because an allocation found no room
  std::uint64_t growth_waits = 0;        // allocations that waited for a chunk in flight
  std::uint64_t trims = 0;               // chunks given back (Trim)
  std::uint64_t trimmed_bytes = 0;
  // Seconds from Create to its first chunk, and to initial_size mapped (time to first block
  // vs time to full); -1 until it happens.
  double seconds_to_first_chunk = -1;
  double seconds_to_initial_size = -1;
  int numa_node = -1;                 // the node chunks are bound to; -1: none
  LatencyHistogram growth_latency{};  // each chunk added: mapped, populated, registered, published
  LatencyHistogram trim_latency{};    // each chunk given back: deregistered and unmapped
};

// One buffer class of the pool (PoolOptions::classes; docs/classes.md), the default class first.
// Classes hold whole chunks: held_bytes is what the class's chunks hold, used or not.
struct ClassStats {
  std::string name;                // "default" for Allocate without a class
  std::size_t reserved_bytes = 0;  // kept for it alone, in whole chunks
  std::size_t cap_bytes = 0;       // the most it may hold, in whole chunks
  std::size_t held_bytes = 0;      // its chunks now
  std::size_t live_bytes = 0;      // its blocks the application holds
  std::size_t cached_bytes = 0;    // its free blocks in its caches
  std::uint64_t refusals =
      0;              // chunks it asked for and was refused (its cap, others' reservations)
  std::string scrub;  // none, on_reuse or on_class_change
  std::uint64_t scrubbed_bytes = 0;  // bytes it zeroed (freed blocks, chunks changing class)
};

// Sharing with other processes and handover (pinpool/share.h; docs/sharing.md).
struct SharingStats {
  std::string pool_id;                    // 32 hex digits, kept across handovers
  std::size_t attached_processes = 0;     // processes whose sharing socket is open now
  std::uint64_t shares = 0;               // Pool::Share calls that sent the chunks
  bool quiesced = false;                  // Pool::Quiesce: no registration, no allocation
  std::uint64_t handovers = 0;            // 1 once the pool was handed over (Pool::HandOver)
  std::uint64_t adopted_chunks = 0;       // chunks this pool adopted from its predecessor
  std::uint64_t adopted_blocks = 0;       // blocks handed over to it
  std::size_t reclaimed_live_blocks = 0;  // of those, still live
  std::size_t reclaimed_live_bytes = 0;
};

// PoolStats grows within an ABI version (docs/abi.md): new members are added at its end, never
// between, and the sections it holds (ChunkStats, DomainStats, GrantStats...) keep their layout
// (their `figures` lists take what else a domain or mechanism reports). A program compiled
// against a smaller PoolStats gets the members it knows: the library writes and reads none past
// struct_size.
struct PINPOOL_EXPORT PoolStats {
  // This struct's size as the program that made it was compiled: set by the constructor, kept
  // by copies. Leave it alone.
  std::uint32_t struct_size = sizeof(PoolStats);
  std::size_t reserved_bytes = 0;  // virtual address range set aside (no memory behind it)
  std::size_t mapped_bytes = 0;    // chunks mapped
  // Chunks long-term pinned by at least one domain (Pinning::kLongTerm): physical addresses
  // fixed. Chunks locked by a resident (mlock) domain: in memory, but they may move.
  std::size_t pinned_bytes = 0;
  std::size_t locked_bytes = 0;
  std::size_t budget_bytes = 0;  // PoolOptions::budget, rounded down to chunks
  // Bytes in live blocks: allocated and not freed by the application (their size classes'
  // sizes). What tcmalloc calls current_allocated_bytes and jemalloc stats.allocated: 0 once
  // everything is freed, so a leak check reads this. Blocks freed while a grant reached them are
  // not live (grants.held_bytes counts them until their revocation completes).
  std::size_t live_bytes = 0;
  // Free blocks in the caches, ready to be handed out again: thread_cache_bytes +
  // transfer_cache_bytes. Not a leak: Trim or a failing allocation drains them.
  std::size_t cached_bytes = 0;
  std::size_t heap_active_bytes = 0;  // pages the heap has in use for blocks (>= live + cached)
  std::size_t thread_caches = 0;      // per-thread caches the heap holds (one per thread in use)
  // The caches (cached_bytes is their sum), and their bounds. A failing allocation drains them
  // all before it gives up (cache_drains counts).
  std::size_t thread_cache_bytes = 0;          // in all per-thread caches together
  std::size_t transfer_cache_bytes = 0;        // on the shared transfer stacks
  std::size_t thread_cache_limit_bytes = 0;    // the most one thread's cache holds (0: no caches)
  std::size_t transfer_cache_limit_bytes = 0;  // the most the transfer stacks hold together
  std::uint64_t cache_drains = 0;              // times every cache was drained for an allocation
  // Arrays (pinpool/array.h) alive, and the whole chunks they hold (unused tails included);
  // an array small enough to be one block is counted in live_bytes instead.
  std::size_t arrays = 0;
  std::size_t array_bytes = 0;
  std::uint64_t growths = 0;          // chunks added, ever (trimmed ones too)
  std::uint64_t growth_failures = 0;  // attempts to add a chunk that failed
  // Chunks given back because their backing had to go (Pool::GiveBack, a broken file lease:
  // docs/backing.md), the live blocks lost with them, and frees of lost blocks since (accepted,
  // ignored).
  std::uint64_t chunks_given_back = 0;
  std::uint64_t lost_blocks = 0;
  std::uint64_t lost_bytes = 0;
  std::uint64_t lost_block_frees = 0;
  std::size_t memlock_limit = 0;  // RLIMIT_MEMLOCK soft limit; SIZE_MAX when unlimited
  // The whole process's counters now, all pools and anything else in it: VmPin (long-term pins:
  // the default domain, io_uring buffers, RDMA regions) and VmLck (mlock).
  std::size_t process_pinned_bytes = 0;
  std::size_t process_locked_bytes = 0;
  bool memlock_exempt = false;  // CAP_IPC_LOCK: the limit does not apply
  // The memory cgroup (v1 or v2), at the level with the least headroom (this cgroup or an
  // ancestor): its limit, and what it can still be charged before the kernel's OOM killer acts
  // (limit - (usage - reclaimable page cache); docs/ceilings.md). SIZE_MAX: no limit found.
  std::size_t cgroup_limit_bytes = SIZE_MAX;
  std::size_t cgroup_headroom_bytes = SIZE_MAX;
  // Allocations that missed the per-thread cache (Allocate's slow path: a refill from the central
  // lists, a thread's first allocation, growth when the pool is full). Blocks above 64 KiB always
  // take that path, most in a few nanoseconds that two clock reads would double: one in 32 of
  // them per thread is timed.
  LatencyHistogram allocate_slow_latency{};
  // (Per size class occupancy goes in a section of its own here, described like `chunks`.)
  std::vector<ClassStats> classes;  // the default class, then PoolOptions::classes in order
  std::vector<ChunkStats> chunks;
  std::vector<DomainStats> domains;
  GrantStats grants;
  GrowthStats growth;
  SharingStats sharing;

  // Derived figures (computed from the fields above, nothing more is measured):
  // RLIMIT_MEMLOCK headroom, for each counter the kernel checks against it on its own: the limit
  // minus VmPin (what more can be long-term pinned; io_uring also counts the user's other
  // processes, which this process cannot see) and minus VmLck (what more can be mlocked); 0 when
  // over it. nullopt when the limit does not apply: CAP_IPC_LOCK, or unlimited.
  std::optional<std::size_t> pin_headroom() const noexcept;
  std::optional<std::size_t> lock_headroom() const noexcept;
  // Share of the heap's active pages that no block uses (size-class rounding, partly used runs):
  // 1 - (live + cached + held)/heap_active, in [0, 1]; 0 when nothing is active.
  double heap_fragmentation() const noexcept;
  // Bytes mapped (and registered) that are not in a block, a cache or an array's chunks, and
  // their share of what is mapped (0 when nothing is).
  std::size_t mapped_unused_bytes() const noexcept;
  double mapped_unused_fraction() const noexcept;

  // Multi-line, human-readable.
  std::string ToString() const;
  // Every figure in the OpenMetrics text format (what Prometheus scrapes; ends with "# EOF"),
  // for an application's own metrics endpoint: serve it with kOpenMetricsContentType. Metric
  // names are pinpool_<section>_<field>; docs/metrics.md lists them.
  std::string ToOpenMetrics() const;
  // One JSON object with every field above and the derived figures, for tools. Field names are
  // stable; docs/pinpool-info.md ("Pool stats") lists them.
  std::string ToJson() const;
};

// The Content-Type of PoolStats::ToOpenMetrics's text, for an HTTP endpoint.
inline constexpr std::string_view kOpenMetricsContentType =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

PINPOOL_ABI_END
}  // namespace pinpool

#endif  // PINPOOL_STATS_H_
