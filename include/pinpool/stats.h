// PoolStats: a snapshot of what a pool holds, taken by Pool::GetStats() (takes the growth lock;
// not for the fast path). A plain value: copy it, print it (ToString for people, ToJson for
// tools), compare two of them.
#ifndef PINPOOL_STATS_H_
#define PINPOOL_STATS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pinpool/keys.h"

namespace pinpool {

struct DomainStats {
  std::string name;
  DomainKind kind = DomainKind::kHost;
  std::uint64_t registrations = 0;     // successful Register() calls, ever
  std::uint64_t registered_bytes = 0;  // bytes currently registered
  double register_seconds = 0;         // total time spent in Register()
  double max_register_seconds = 0;     // slowest single Register()
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
};

struct PoolStats {
  std::size_t reserved_bytes = 0;     // virtual address range set aside (no memory behind it)
  std::size_t mapped_bytes = 0;       // chunks mapped
  std::size_t pinned_bytes = 0;       // chunks registered with at least one pinning domain
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
  std::uint64_t growths = 0;                   // chunks added
  std::uint64_t growth_failures = 0;           // attempts to add a chunk that failed
  std::size_t memlock_limit = 0;               // RLIMIT_MEMLOCK soft limit; SIZE_MAX when unlimited
  std::size_t locked_bytes = 0;                // the process's VmLck now (mlock: the host domain)
  std::size_t device_pinned_bytes = 0;  // the process's VmPin now (RDMA regions, io_uring buffers)
  bool memlock_exempt = false;          // CAP_IPC_LOCK: the limit does not apply
  std::vector<ChunkStats> chunks;
  std::vector<DomainStats> domains;

  // Derived figures (computed from the fields above, nothing more is measured):
  // RLIMIT_MEMLOCK headroom: the limit minus what is locked or pinned already, whichever is more
  // (the kernel checks VmLck and VmPin against the limit separately); 0 when over it. nullopt
  // when the limit does not apply: CAP_IPC_LOCK, or unlimited.
  std::optional<std::size_t> memlock_headroom() const noexcept;
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
