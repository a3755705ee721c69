// GrantLock and GrantHolder: the pool's record of which blocks a remote-access mechanism has
// granted to peers, for the mechanisms themselves. pinpool::VerbsRemoteAccess (verbs windows and
// range regions) and libpinpool_fabric's FabricRemoteAccess are built on it; a transport of your
// own can be too, and then gets the same guarantee: a block a grant can still reach is never handed
// out again. Applications that only use those mechanisms never touch this header.
//
// The protocol:
//  - Every grant operation of a pool happens under its grant lock: construct a GrantLock.
//  - A mechanism (a GrantHolder) that lets a peer reach a live block calls Begin(block, *this,
//    id) with an id of its own; when no peer can use the grant any more (its revocation is
//    confirmed), End(block, *this, id).
//  - When the application frees a block some grant reaches, the pool does not free it: it holds
//    the block and calls RevokeForFree(lock, id) on each holder, under the lock. A holder that
//    revokes synchronously calls End at once; one that must wait for a confirmation calls End
//    when it arrives. The block goes back to the heap when its last grant ends.
//  - A pool may not be destroyed while a holder is registered (AddHolder / RemoveHolder).
//
// Thread safety: the lock is one mutex per pool, not recursive. Never free or allocate pool
// memory while holding it (a free of a granted block takes it); blocks released by End are
// freed when the GrantLock is destroyed, after unlocking.
#ifndef PINPOOL_GRANT_LOCK_H_
#define PINPOOL_GRANT_LOCK_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "pinpool/abi.h"
#include "pinpool/array.h"
#include "pinpool/block.h"
#include "pinpool/export.h"
#include "pinpool/stats.h"

namespace pinpool {

namespace internal {
class GrantRegistry;
}  // namespace internal

PINPOOL_ABI_BEGIN

class GrantLock;
class Pool;

// A remote-access mechanism holding grants on a pool's blocks.
class PINPOOL_EXPORT GrantHolder {
 public:
  // The block grant `id` reaches was freed: start revoking the grant. Called with the pool's
  // grant lock held (`lock`); end the grant with lock.End now, or later under another lock.
  virtual void RevokeForFree(GrantLock& lock, std::uint64_t id) = 0;

 protected:
  ~GrantHolder() = default;
};

// Holds a pool's grant lock for its scope.
class PINPOOL_EXPORT GrantLock {
 public:
  explicit GrantLock(Pool& pool);
  // Unlocks, then frees the held blocks whose last grant ended under this lock.
  ~GrantLock();
  GrantLock(const GrantLock&) = delete;
  GrantLock& operator=(const GrantLock&) = delete;

  // Grant `id` of `holder` on the live block `block` (from Pool::Allocate) begins.
  void Begin(const Block& block, GrantHolder& holder, std::uint64_t id);
  // That grant has ended: no peer can use it any more.
  void End(void* block, GrantHolder& holder, std::uint64_t id);
  // True when `block` (a block's start) was freed and is held until its grants end.
  bool Held(const void* block) const;
  // Whether `block` may be granted: OK for a live block of the pool (the start of a block from
  // Allocate that is not freed, or a run of a live array: Array::Run). kFailedPrecondition when it
  // was freed (held until its grants end, or back in the pool's heap); kInvalidArgument when it is
  // no block of this pool. Call it under the lock, before registering anything for the grant. What
  // it cannot tell: a block freed and allocated again (by anyone) is a live block again, and a free
  // racing with the grant on another thread is the application's race (as freeing a block another
  // thread uses).
  absl::Status CheckLive(const Block& block) const;
  // The pool's grant counters (PoolStats::grants), for the holder to keep: the ones every
  // mechanism has (grants, live, revoking).
  GrantStats& counters();
  // Adds `n` to a counter of the mechanism's own (GrantStats::figures: created with `help` at its
  // first count, then summed over every holder on the pool). Name it after the mechanism:
  // "verbs_window_binds", "fabric_region_registrations".
  void Count(std::string_view name, std::string_view help, std::uint64_t n = 1);
  // Records one event of the mechanism's own that took `seconds` in a latency histogram
  // (GrantStats::histograms: created with `help` at its first event, then shared by every
  // holder on the pool). Name it after the mechanism, ending in "_seconds":
  // "verbs_window_bind_seconds". Time only slow work (a kernel command, a completion awaited).
  void Record(std::string_view name, std::string_view help, double seconds);
  // A holder starts or stops using the pool.
  void AddHolder();
  void RemoveHolder();

  Pool& pool() const noexcept { return pool_; }

 private:
  friend class Pool;
  PINPOOL_NO_EXPORT internal::GrantRegistry& registry() const noexcept { return registry_; }

  Pool& pool_;
  internal::GrantRegistry& registry_;
};

// For a mechanism granting elements [first, first + count) of an array (count SIZE_MAX: to the
// end) one grant per chunk run (Array::Slices): calls grant(slice) for each slice in order, its
// grant being of array.Run(slice.run) at [slice.offset, slice.offset + slice.length); when one
// fails, calls undo() (which revokes every grant made so far) and returns that failure's code,
// with a message naming the run, its elements and how many were granted and revoked, prefixed
// by `who`. kInvalidArgument, calling nothing, for an empty or out-of-range subrange.
PINPOOL_EXPORT absl::Status GrantSlices(const Array& array, std::size_t first, std::size_t count,
                                        std::string_view who,
                                        absl::FunctionRef<absl::Status(const ArraySlice&)> grant,
                                        absl::FunctionRef<void()> undo);

PINPOOL_ABI_END
}  // namespace pinpool

#endif  // PINPOOL_GRANT_LOCK_H_
