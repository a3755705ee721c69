// PoolStats: a snapshot of what a pool holds, taken by Pool::GetStats() (takes the growth lock;
// not for the fast path). A plain value: copy it, print it (ToString for people, ToJson for
// tools), compare two of them.
//
// Described once: every member of these structs has one row in src/pool/stats_fields.h (its
// stable snake_case name, unit, counter or gauge, one line of help), and ToString, ToJson and
// pinpool-info print by walking those rows. A member without a row does not compile (the rows
// are counted against the struct's members). So adding a figure is: the member here, its row
// there, and the code that counts it.
//
// Figures a domain or a grant mechanism reports about itself at run time (the stats cannot name
// them in advance) come as `Figure`s in DomainStats::figures and GrantStats::figures; the
// printers print them after the described ones.
#ifndef PINPOOL_STATS_H_
#define PINPOOL_STATS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pinpool/export.h"
#include "pinpool/keys.h"

namespace pinpool {

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

struct DomainStats {
  std::string name;
  DomainKind kind = DomainKind::kHost;
  Pinning pinning = Pinning::kNone;    // what registration does to the pages (Domain::pinning)
  std::uint64_t registrations = 0;     // successful Register() calls, ever
  std::uint64_t registered_bytes = 0;  // bytes currently registered
  double register_seconds = 0;         // total time spent in Register()
  double max_register_seconds = 0;     // slowest single Register()
  std::vector<Figure> figures{};       // what the domain reports about itself
};

struct ChunkStats {
  std::uintptr_t base = 0;
  std::size_t size = 0;
  PageSize page_size = PageSize::k4K;  // what the kernel gave, read back from smaps
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
  // What each mechanism counts of its own (GrantLock::Count): "verbs_window_binds",
  // "fabric_region_registrations", ... (docs/remote-access.md lists the verbs ones).
  std::vector<Figure> figures{};
};

// Growth, start-up, trim and placement (PoolOptions::low_watermark, reserve_threads, numa_node;
// Pool::Replenish, Pool::Trim).
struct GrowthStats {
  std::size_t low_watermark = 0;
  std::size_t room_bytes = 0;            // in mapped chunks, not yet taken by any allocation
  std::size_t chunks_growing = 0;        // being mapped and registered now
  std::uint64_t background_growths = 0;  // chunks the grower thread or Replenish added
  std::uint64_t allocation_growths = 0;  // chunks added because an allocation found no room
  std::uint64_t growth_waits = 0;        // allocations that waited for a chunk in flight
  std::uint64_t trims = 0;               // chunks given back (Trim)
  std::uint64_t trimmed_bytes = 0;
  // Seconds from Create to its first chunk, and to initial_size mapped (time to first block
  // vs time to full); -1 until it happens.
  double seconds_to_first_chunk = -1;
  double seconds_to_initial_size = -1;
  int numa_node = -1;  // the node chunks are bound to; -1: none
};

struct PINPOOL_EXPORT PoolStats {
  std::size_t reserved_bytes = 0;  // virtual address range set aside (no memory behind it)
  std::size_t mapped_bytes = 0;    // chunks mapped
  // Chunks long-term pinned by at least one domain (Pinning::kLongTerm): physical addresses
  // fixed. Chunks locked by a resident (mlock) domain: in memory, but they may move.
  std::size_t pinned_bytes = 0;
  std::size_t locked_bytes = 0;
  std::size_t budget_bytes = 0;       // PoolOptions::budget, rounded down to chunks
  std::size_t allocated_bytes = 0;    // bytes in blocks handed out of the heap's slabs and spans
                                      // (size classes): live blocks and the caches' blocks below
  std::size_t heap_active_bytes = 0;  // pages the heap has in use for blocks (>= allocated)
  std::size_t thread_caches = 0;      // per-thread caches the heap holds (one per thread in use)
  // Free blocks held in caches (counted in allocated_bytes, ready to be handed out again), and
  // their bounds. A failing allocation drains them all before it gives up (cache_drains counts).
  std::size_t thread_cache_bytes = 0;          // in all per-thread caches together
  std::size_t transfer_cache_bytes = 0;        // on the shared transfer stacks
  std::size_t thread_cache_limit_bytes = 0;    // the most one thread's cache holds (0: no caches)
  std::size_t transfer_cache_limit_bytes = 0;  // the most the transfer stacks hold together
  std::uint64_t cache_drains = 0;              // times every cache was drained for an allocation
  std::uint64_t growths = 0;                   // chunks added, ever (trimmed ones too)
  std::uint64_t growth_failures = 0;           // attempts to add a chunk that failed
  std::size_t memlock_limit = 0;               // RLIMIT_MEMLOCK soft limit; SIZE_MAX when unlimited
  // The whole process's counters now, all pools and anything else in it: VmPin (long-term pins:
  // the default domain, io_uring buffers, RDMA regions) and VmLck (mlock).
  std::size_t process_pinned_bytes = 0;
  std::size_t process_locked_bytes = 0;
  bool memlock_exempt = false;  // CAP_IPC_LOCK: the limit does not apply
  std::vector<ChunkStats> chunks;
  std::vector<DomainStats> domains;
  GrantStats grants;
  GrowthStats growth;

  // Derived figures (computed from the fields above, nothing more is measured):
  // RLIMIT_MEMLOCK headroom, for each counter the kernel checks against it on its own: the limit
  // minus VmPin (what more can be long-term pinned; io_uring also counts the user's other
  // processes, which this process cannot see) and minus VmLck (what more can be mlocked); 0 when
  // over it. nullopt when the limit does not apply: CAP_IPC_LOCK, or unlimited.
  std::optional<std::size_t> pin_headroom() const noexcept;
  std::optional<std::size_t> lock_headroom() const noexcept;
  // Share of the heap's active pages that no block uses (size-class rounding, partly used runs):
  // 1 - allocated/heap_active, in [0, 1]; 0 when nothing is active.
  double heap_fragmentation() const noexcept;
  // Bytes mapped (and registered) that are not in a block or a cache, and their share of what is
  // mapped (0 when nothing is).
  std::size_t mapped_unused_bytes() const noexcept;
  double mapped_unused_fraction() const noexcept;

  // Multi-line, human-readable.
  std::string ToString() const;
  // One JSON object with every field above and the derived figures, for tools. Field names are
  // stable; docs/pinpool-info.md ("Pool stats") lists them.
  std::string ToJson() const;
};

}  // namespace pinpool

#endif  // PINPOOL_STATS_H_
