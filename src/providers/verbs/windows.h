// Memory windows of one protection domain, as per-block grants use them: what a device's type 2
// windows guarantee (WindowSupportOf: its capability flags plus pinpool's table of providers
// known not to enforce a window's bounds), and the pool of idle type 2 windows of one PD that
// grants draw from (WindowPool).
//
// WindowPool invariants: a window is idle (in the pool) only while it is not bound, i.e. never
// bound, or its last binding was invalidated and the invalidation completed; idle windows are
// handed out oldest first, and Take keeps at least `keep_idle` others idle, so that a window's
// rkey (whose low 8 bits are the only part that changes from one binding to the next) is not
// issued again until at least 256 x keep_idle other grants have been made on this PD.
// Windows are allocated (ibv_alloc_mw, a kernel command) only by Reserve and by a Take that
// finds the pool short, never otherwise; both are counted.
//
// Thread safety: WindowPool's methods may be called from any thread (one mutex).
#ifndef PINPOOL_PROVIDERS_VERBS_WINDOWS_H_
#define PINPOOL_PROVIDERS_VERBS_WINDOWS_H_

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pinpool/verbs.h"
#include "providers/verbs/device.h"
#include "util/mutex.h"

namespace pinpool::internal {

// What the device described by `caps` offers grants.
WindowSupport WindowSupportOf(const VerbsDeviceCaps& caps);

// The wc_flags bit that marks a receive completion carrying the peer's invalidation of an rkey
// (SEND_WITH_INV, wc.invalidated_rkey): IBV_WC_WITH_INV, except on providers known to pass the
// kernel's own value of that flag through unconverted (rxe sets 1 << 2, which libibverbs calls
// IBV_WC_IP_CSUM_OK).
unsigned WithInvalidateFlag(const VerbsDeviceCaps& caps);

class WindowPool {
 public:
  // Windows of `pd`, on a device allowing at most `max_mw` of them.
  WindowPool(ibv_pd* pd, std::uint32_t max_mw, std::string domain_name);
  // Deallocates the idle windows. Windows still out (bound) are the grant mechanism's to release
  // first; any left are reported on stderr.
  ~WindowPool();
  WindowPool(const WindowPool&) = delete;
  WindowPool& operator=(const WindowPool&) = delete;

  // Allocates windows until at least `idle` are idle. kResourceExhausted naming max_mw.
  absl::Status Reserve(std::size_t idle);
  // The idle window that has waited longest, leaving at least `keep_idle` others idle
  // (allocating first if fewer are: counted in growth_allocations).
  absl::StatusOr<ibv_mw*> Take(std::size_t keep_idle);
  // A window that Take handed out, now unbound again (its invalidation completed, or the bind
  // never happened): it joins the pool's tail.
  void Return(ibv_mw* mw);
  // A window that Take handed out, deallocated instead of returned: ibv_dealloc_mw invalidates
  // it synchronously, wherever it is bound (used when a binding's invalidation cannot be
  // confirmed through the queue pair, e.g. it is in the error state). False when the device
  // refused: the window may still be valid, so what it reached must never be reused.
  bool Discard(ibv_mw* mw);

  struct Counts {
    std::uint64_t windows = 0;             // allocated now (idle + out)
    std::uint64_t idle = 0;                // in the pool now
    std::uint64_t allocations = 0;         // ibv_alloc_mw calls, ever
    std::uint64_t growth_allocations = 0;  // of which made by Take (the pool was short)
    std::uint64_t discarded = 0;           // deallocated through Discard, ever
  };
  Counts counts() const;

 private:
  absl::Status AllocateLocked(std::size_t n) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  ibv_pd* const pd_;
  const std::uint32_t max_mw_;
  const std::string domain_name_;
  mutable Mutex mu_;
  std::deque<ibv_mw*> idle_ ABSL_GUARDED_BY(mu_);
  Counts counts_ ABSL_GUARDED_BY(mu_);
};

// The grant mechanism's way to a domain's window pool (null when the device has no type 2 windows).
struct VerbsDomainInternals {
  static WindowPool* Windows(const VerbsDomain& d) noexcept { return d.window_pool_.get(); }
};

}  // namespace pinpool::internal

#endif  // PINPOOL_PROVIDERS_VERBS_WINDOWS_H_
