// PoolOptions: everything a pool is created from. Validated by Pool::Create, which says which
// field is wrong and why.
#ifndef PINPOOL_OPTIONS_H_
#define PINPOOL_OPTIONS_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "pinpool/domain.h"
#include "pinpool/keys.h"

namespace pinpool {

inline constexpr std::size_t kKiB = std::size_t{1} << 10;
inline constexpr std::size_t kMiB = std::size_t{1} << 20;
inline constexpr std::size_t kGiB = std::size_t{1} << 30;

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

  // Where chunks are registered, in this order (Block::keys(d) is domains[d]). Empty means one
  // long-term pin domain (MakeLongTermPinDomain: physical addresses fixed, no keys), or
  // Pool::Create fails saying why it cannot pin here. At most kMaxDomains.
  std::vector<std::shared_ptr<Domain>> domains;
};

}  // namespace pinpool

#endif  // PINPOOL_OPTIONS_H_
