// Domain: something a chunk of memory is registered with (an RDMA protection domain, an io_uring
// buffer table, or host memory pinned or locked without a device). The arena is the only caller.
//
// Contract for implementations:
//  - Register() is given a mapped range (populated unless PoolOptions::populate is off) and either
//    registers all of it and returns its keys, or registers nothing and returns an error saying
//    what limit was hit and how to fix it.
//  - Deregister() undoes exactly one successful Register(); it cannot fail.
//  - Neither is ever called on the allocation fast path. A domain shared by several pools must
//    be safe to call from several threads. Calls for one pool are serialized unless
//    concurrent_registration() says they need not be: then a pool registers several chunks with
//    it at once (parallel Reserve, background growth).
//  - figures() reports the domain's own counters and levels for stats, by stable names.
//  - numa_node() names the NUMA node of the device behind the domain, when it has one: pools
//    place their chunks there by default (PoolOptions::numa_node).
//  - pinning() says truthfully what Register does to the pages (pinpool/keys.h: Pinning). The
//    pool checks RLIMIT_MEMLOCK headroom against the counter that kind grows (VmPin for
//    long-term pins, VmLck for mlock) and reports the pool's pinned and locked bytes by it.
// What an implementation needs beyond this interface (the memlock error wording, checked chunk
// records, transfer checks, grant bookkeeping) is in pinpool/provider.h.
#ifndef PINPOOL_DOMAIN_H_
#define PINPOOL_DOMAIN_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "pinpool/abi.h"
#include "pinpool/export.h"
#include "pinpool/keys.h"
#include "pinpool/stats.h"

namespace pinpool {
PINPOOL_ABI_BEGIN

class PINPOOL_EXPORT Domain {
 public:
  virtual ~Domain() = default;

  virtual DomainKind kind() const noexcept = 0;
  // Short human-readable name for stats and errors ("long-term pin", "rxe0/pd0", ...).
  virtual std::string name() const = 0;
  // What registration does to the pages: long-term pin, mlock, or nothing.
  virtual Pinning pinning() const noexcept = 0;

  virtual absl::StatusOr<Keys> Register(void* base, std::size_t length) = 0;
  virtual void Deregister(const Keys& keys) noexcept = 0;

  // True when Register and Deregister may run for several chunks of one pool at once.
  virtual bool concurrent_registration() const noexcept { return false; }
  // The NUMA node of the device this domain registers with; -1 when it has none or it is unknown.
  virtual int numa_node() const noexcept { return -1; }
  // What the domain reports about itself in PoolStats (DomainStats::figures), beyond what the
  // pool counts for every domain: a verbs domain's memory windows, say. Called by GetStats, from
  // any thread; never on the fast path. Default: nothing.
  virtual std::vector<Figure> figures() const { return {}; }
};

// Long-term pinned host memory: the default when a pool names no domain. Each chunk is pinned
// the way a device registration pins it (pin_user_pages with FOLL_LONGTERM), so the kernel may
// neither swap nor migrate its pages: their physical addresses stay fixed until the pool lets the
// chunk go, which is what a device doing DMA without an RDMA registration of its own needs. No
// RDMA hardware and no privilege beyond RLIMIT_MEMLOCK: each chunk is registered as a fixed
// buffer of an io_uring table private to the domain (a new ring's table when one is full). The
// pages count in VmPin and against RLIMIT_MEMLOCK, which io_uring applies per user, across all of
// the user's processes. Kind kHost (no keys), name "long-term pin".
// Errors (never a fallback to something weaker): kPermissionDenied when io_uring is forbidden
// here (kernel.io_uring_disabled, a seccomp filter), kUnimplemented when the kernel cannot (no
// io_uring, or older than 5.19); each message names the cause, the fix, and the alternatives.
PINPOOL_EXPORT absl::StatusOr<std::shared_ptr<Domain>> MakeLongTermPinDomain();

// Resident, NOT pinned: mlock(2) keeps each chunk in memory (never swapped out), but the kernel may
// still migrate its pages (compaction, NUMA balancing, memory hotplug): the physical address may
// change; not for DMA. Counts in VmLck. Only for memory that the CPU alone touches and that
// must not page out; chosen explicitly, never a default or a fallback. Kind kHost (no keys),
// name "mlock (resident, not pinned)".
PINPOOL_EXPORT std::shared_ptr<Domain> MakeResidentNotPinnedDomain();

PINPOOL_ABI_END
}  // namespace pinpool

#endif  // PINPOOL_DOMAIN_H_
