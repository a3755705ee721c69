// GrantRegistry: which of a pool's blocks a peer may still reach through a remote grant, and
// which of those the application has freed already. A freed block that a grant can still reach
// is HELD (quarantined): it goes back to the heap only when its last grant has ended, i.e. its
// revocation completed (a memory window's invalidation was confirmed, a range region was
// deregistered) or the peer invalidated it. So no block a peer can still reach is ever handed
// out again. The grant mechanics (windows, regions, queue pairs) live in VerbsRemoteAccess; this is
// only the bookkeeping, free of verbs.
//
// While a page holds the start of any granted or held block, its page map entry carries the
// grant tag (heap/page_map.h), which sends the inline free of every block starting there to the
// pool's slow path, where OnFreeLocked decides; and while a chunk holds any, the arena tags its
// chunk table entry (the slow paths' test, and what keeps Trim away).
//
// Thread safety: one mutex (mu()) guards the registry and, by convention, every grant holder of
// the pool: grant, revoke, completion and free of a granted block are serialized per pool. The
// public face of that mutex is pinpool::GrantLock (pinpool/grant_lock.h), through which holders
// use the registry; the *Locked methods require it. Blocks released by an ended grant are
// collected (TakeReleasedLocked) and freed by the GrantLock after unlocking.
#ifndef PINPOOL_POOL_GRANTS_REGISTRY_H_
#define PINPOOL_POOL_GRANTS_REGISTRY_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "arena/arena.h"
#include "pinpool/grant_lock.h"
#include "pinpool/stats.h"
#include "util/mutex.h"

namespace pinpool::internal {

class GrantRegistry {
 public:
  // `tag_page(block, on)` sets or clears the grant tag of the page where `block` starts, in the
  // page map of the heap that owns it.
  GrantRegistry(Arena* arena, std::function<void(const void* block, bool on)> tag_page)
      : arena_(arena), tag_page_(std::move(tag_page)) {}
  GrantRegistry(const GrantRegistry&) = delete;
  GrantRegistry& operator=(const GrantRegistry&) = delete;

  Mutex& mu() ABSL_LOCK_RETURNED(mu_) { return mu_; }

  // Grant `id` of `holder` on the live block at `block` (`size` bytes as allocated) begins.
  void AddLocked(void* block, std::size_t size, GrantHolder* holder, std::uint64_t id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // That grant has ended (no peer can use it any more). If the block was freed meanwhile and
  // this was its last grant, the block is queued for release.
  void EndLocked(void* block, GrantHolder* holder, std::uint64_t id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  enum class FreeOutcome {
    kNotGranted,   // no grant reaches the block: free it as usual
    kHeld,         // held until its grants end; their revocation has been started
    kAlreadyHeld,  // freed before and still held: a double free
  };
  // The application frees `block` (`size` as it named it, 0 when unknown); `lock` holds mu().
  FreeOutcome OnFreeLocked(void* block, std::size_t size, GrantLock& lock)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True when a grant reaches the block starting at `block`, or it is held.
  bool ReachableLocked(const void* block) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True when the block starting at `block` was freed and is held.
  bool HeldLocked(const void* block) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Giving chunk `index` back (pool/take_back.cc): starts revoking every grant on its blocks
  // through their holders' RevokeForFree (again for a grant whose revocation is under way: holders
  // ignore that), and returns its held blocks (freed by the application already: not lost to it).
  std::vector<void*> RevokeChunkLocked(std::uint32_t index, GrantLock& lock)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Blocks of chunk `index` that a grant still reaches: 0 once every revocation is confirmed.
  std::size_t ChunkEntriesLocked(std::uint32_t index) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = chunk_entries_.find(index);
    return it == chunk_entries_.end() ? 0 : it->second;
  }

  struct Released {
    void* block;
    std::size_t size;  // as freed (0: unknown)
  };
  // Held blocks whose last grant has ended since the last call: the caller frees them.
  std::vector<Released> TakeReleasedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Grant holders of the pool (VerbsRemoteAccess, FabricRemoteAccess): a pool must not be destroyed
  // while one lives.
  void AddHolderLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { ++holders_; }
  void RemoveHolderLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { --holders_; }
  std::size_t holders() {
    MutexLock lock(&mu_);
    return holders_;
  }

  // The grant counters, kept by VerbsRemoteAccess under the lock; GrantStats as the pool reports
  // it.
  GrantStats& countersLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return counters_; }
  // The counters, with the held blocks by age (a walk over the granted blocks: not for a hot
  // path).
  GrantStats Stats();

 private:
  struct Entry {
    std::size_t size = 0;                              // as allocated
    bool freed = false;                                // the application freed it: held
    std::size_t freed_size = 0;                        // the size the free named
    std::chrono::steady_clock::time_point freed_at{};  // when it was freed (held since)
    std::vector<std::pair<GrantHolder*, std::uint64_t>> grants;
  };

  // Counts blocks with an entry per chunk and per page, tagging the chunk table entry and the
  // page's entry while their count is non-zero.
  void EntriesChanged(const void* block, int delta) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Arena* const arena_;
  const std::function<void(const void*, bool)> tag_page_;
  Mutex mu_;
  std::unordered_map<std::uintptr_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<std::uint32_t, std::size_t> chunk_entries_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<std::uintptr_t, std::size_t> page_entries_ ABSL_GUARDED_BY(mu_);  // by page
  std::vector<Released> released_ ABSL_GUARDED_BY(mu_);
  std::size_t holders_ ABSL_GUARDED_BY(mu_) = 0;
  GrantStats counters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pinpool::internal

#endif  // PINPOOL_POOL_GRANTS_REGISTRY_H_
