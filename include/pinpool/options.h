// PoolOptions: everything a pool is created from. Validated by Pool::Create, which says which
// field is wrong and why.
#ifndef PINPOOL_OPTIONS_H_
#define PINPOOL_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pinpool/abi.h"
#include "pinpool/domain.h"
#include "pinpool/keys.h"

namespace pinpool {
PINPOOL_ABI_BEGIN

inline constexpr std::size_t kKiB = std::size_t{1} << 10;
inline constexpr std::size_t kMiB = std::size_t{1} << 20;
inline constexpr std::size_t kGiB = std::size_t{1} << 30;

// PoolOptions::numa_node: the node of the pool's RDMA device (the first domain that reports one),
// or no placement when no domain does; or no placement at all.
inline constexpr int kDeviceNumaNode = -1;
inline constexpr int kNoNumaNode = -2;

// What backs a pool's chunks (docs/backing.md: what each is, and what can take its memory back).
enum class BackingKind : std::uint8_t {
  // Private anonymous memory: only this process can reach it (the default).
  kAnonymous,
  // One memfd per chunk (MFD_HUGETLB when page_size asks for hugetlb pages; shmem THP otherwise),
  // sealed against shrinking and growing. Only a holder of the descriptor can take pages back (a
  // hole punch), and pinpool hands it to no one.
  kMemfd,
  // One file per chunk in `directory` (created O_EXCL, mode 0600, named
  // pinpool-<pid>-<pool>-chunk-<index>, removed when the chunk is trimmed or the pool
  // destroyed), which must be on tmpfs or hugetlbfs: the kernel refuses long-term write pins of
  // other files. Any process that can open a file can truncate it or punch a hole in it.
  kFiles,
};
struct Backing {
  BackingKind kind = BackingKind::kAnonymous;
  std::string directory;  // kFiles only: an existing directory this process can write in
};

// When a class's blocks are zeroed (docs/classes.md). Zeroing happens on the free, or when a
// chunk is handed to a class, never on the allocation fast path.
enum class Scrub : std::uint8_t {
  // Never: a block may hold what its previous user of the class wrote (today's behaviour).
  kNone,
  // Every block is zeroed when it is freed, before anyone can have it again.
  kOnReuse,
  // Only when memory changes class: a chunk that last belonged to another class is zeroed whole
  // before this class carves it (a class is a tenant).
  kOnClassChange,
};
// "none", "on_reuse", "on_class_change" (stats and messages)
constexpr const char* ScrubName(Scrub s) noexcept {
  switch (s) {
    case Scrub::kNone:
      return "none";
    case Scrub::kOnReuse:
      return "on_reuse";
    case Scrub::kOnClassChange:
      return "on_class_change";
  }
  return "?";
}

// A named class of buffers inside one pool (docs/classes.md): a receive ring, a send path, a
// tenant. The pool accounts in whole chunks: `reserved` rounds up to chunks that no other class
// can ever take; `cap` rounds down to the most chunks this class may hold.
struct BufferClass {
  std::string name;          // unique, not empty, not "default"
  std::size_t reserved = 0;  // bytes kept for this class alone (rounded up to chunks)
  std::size_t cap = 0;       // most bytes it may hold (rounded down to chunks); 0: the budget
  Scrub scrub = Scrub::kNone;
};

struct PoolOptions {
  // Largest page size to try. Chunks fall back 1G -> 2M -> transparent -> 4K (skipping sizes
  // larger than a chunk) unless require_page_size is set, in which case anything less fails.
  PageSize page_size = PageSize::k1G;
  bool require_page_size = false;

  // Bytes mapped and registered at a time. A power of two from 2 MiB to 1 GiB. It also bounds
  // the largest block: one block never spans two registrations, and the heap's size classes
  // (four per doubling, plus one page of padding for large blocks) make the largest block 7/8
  // of a chunk (Pool::max_block_size()).
  std::size_t chunk_size = 64 * kMiB;

  // Most bytes the pool may map and pin, all chunks together. Rounded down to whole chunks. The
  // pool also refuses to pin (or mlock) past RLIMIT_MEMLOCK when the process lacks CAP_IPC_LOCK.
  std::size_t budget = 1 * kGiB;

  // Bytes mapped and registered by Create (rounded up to chunks), so the first allocations do
  // not pay for growth. Growth after that happens on demand, off the per-thread fast path.
  std::size_t initial_size = 0;
  // Cold start: Create maps and registers only the first chunk of initial_size and returns; the
  // pool's background thread builds the rest (on up to reserve_threads threads), so the time to
  // the first block does not grow with the pool. Allocations meanwhile work as usual (one that
  // finds no room waits for a chunk in flight: GrowthStats::growth_waits). Pool::Ready() and
  // Pool::AwaitInitialSize() say when all of it is there; a failure is kept in
  // last_growth_error() and the pool keeps serving from what it has. Ceilings are still checked
  // for all of initial_size before Create maps anything.
  bool initial_size_in_background = false;

  // Fault every page in when a chunk is mapped (strongly recommended: first touch costs more
  // than registration, and registration of unpopulated memory faults it in anyway).
  bool populate = true;

  // Debug-tier checks, for tests and for hunting a corruption. The pool keeps no per-thread
  // caches (every allocation and free goes to the shared layer: several times slower) and
  // records every live block, so every free is checked exactly, races between threads included:
  // a pointer that is not a live block's start (any interior pointer, any double free) and a
  // sized free naming more bytes than the block has abort naming the pointer; destroying the
  // pool with live blocks prints a warning that counts them. See docs/robustness.md.
  bool debug_checks = false;

  // Growth off the allocation path (docs/growth.md). When the room in mapped chunks that no
  // allocation has taken yet (counting chunks being added) falls below low_watermark bytes,
  // chunks are added in the background: by a pool-owned thread when grow_in_background is set,
  // and whenever the application calls Pool::Replenish (from its own event loop). An allocation
  // that outruns them waits for the chunk in flight, never for a lock held across another
  // chunk's registration. 0: off (a thread that finds no room grows the pool itself).
  std::size_t low_watermark = 0;
  bool grow_in_background = true;
  // Chunks the pool's thread builds at once to keep the watermark (0: as many as reserve_threads
  // means). It also grows ahead of consumption: it measures the rate allocations take chunks and
  // the time a chunk takes to build, and keeps that much more room than low_watermark, so a
  // steady allocation rate the machine can build at never waits for a chunk (docs/growth.md).
  unsigned background_workers = 0;

  // Trim policy: every trim_interval_ms milliseconds (0: never) the pool's thread calls
  // Pool::Trim(trim_floor): idle chunks above the floor are given back (deregistered, unmapped).
  std::size_t trim_floor = 0;
  unsigned trim_interval_ms = 0;

  // Threads Reserve (and Create, for initial_size) maps, populates and registers chunks on, each
  // domain's registrations in parallel when it allows (Domain::concurrent_registration). 0: one
  // per CPU of the NUMA node (of the machine without one), at most one per chunk.
  unsigned reserve_threads = 0;

  // NUMA node every chunk is bound to before its first touch (and populated from, by the
  // pool's threads: Reserve's workers and the grower run on that node's CPUs); placement is
  // verified from the kernel (move_pages) and reported per chunk in stats. kDeviceNumaNode: the
  // node of the RDMA device the pool registers with (sysfs), none when unknown; kNoNumaNode:
  // wherever the kernel puts pages. A node that is not online fails Create (kInvalidArgument);
  // hugetlb pages must be reserved on that node (the message says how).
  int numa_node = kDeviceNumaNode;

  // Where chunks are registered, in this order (Block::keys(d) is domains[d]). Empty means one
  // long-term pin domain (MakeLongTermPinDomain: physical addresses fixed, no keys), or
  // Pool::Create fails saying why it cannot pin here. At most kMaxDomains.
  std::vector<std::shared_ptr<Domain>> domains;

  // What the chunks' pages are: anonymous memory, memfds, or files in a directory. Every domain
  // and every guarantee (pinned means pinned, grants, trim) holds on each.
  Backing backing;

  // Named classes of buffers besides the default one (Pool::ClassOf, Allocate(ClassId, ...)).
  // Their reservations together must fit the budget (Create: kInvalidArgument otherwise); the
  // default class (Allocate without a class) holds no reservation and may use what the others
  // have not reserved. At most 254.
  std::vector<BufferClass> classes;
};

PINPOOL_ABI_END
}  // namespace pinpool

#endif  // PINPOOL_OPTIONS_H_
