// SpinLock: the heap's short locks (a size class in the central layer, the page heap). Held for
// a few hundred instructions, taken once per batch of blocks: one atomic exchange to take, a
// release store to give back, where a pthread mutex costs two atomic read-modify-writes and two
// calls. A waiter spins briefly, then yields the CPU (the holder may be preempted, or growing the
// pool, which maps and registers a chunk). Not fair, not recursive. ThreadSanitizer sees it
// through the atomics; -Wthread-safety through the annotations.
#ifndef PINPOOL_HEAP_SPIN_LOCK_H_
#define PINPOOL_HEAP_SPIN_LOCK_H_

#include <sched.h>

#include <atomic>

#include "absl/base/thread_annotations.h"

namespace pinpool::internal {

class ABSL_LOCKABLE SpinLock {
 public:
  SpinLock() = default;
  SpinLock(const SpinLock&) = delete;
  SpinLock& operator=(const SpinLock&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    if (__builtin_expect(!locked_.exchange(true, std::memory_order_acquire), 1)) return;
    LockSlow();
  }
  void Unlock() ABSL_UNLOCK_FUNCTION() { locked_.store(false, std::memory_order_release); }

 private:
  static void Pause() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }
  void LockSlow() {
    for (int spins = 0;; ++spins) {
      while (locked_.load(std::memory_order_relaxed)) {
        if (spins++ < 64) {
          Pause();
        } else {
          sched_yield();
        }
      }
      if (!locked_.exchange(true, std::memory_order_acquire)) return;
    }
  }

  std::atomic<bool> locked_{false};
};

class ABSL_SCOPED_LOCKABLE SpinLockHolder {
 public:
  explicit SpinLockHolder(SpinLock* lock) ABSL_EXCLUSIVE_LOCK_FUNCTION(lock) : lock_(lock) {
    lock_->Lock();
  }
  ~SpinLockHolder() ABSL_UNLOCK_FUNCTION() { lock_->Unlock(); }
  SpinLockHolder(const SpinLockHolder&) = delete;
  SpinLockHolder& operator=(const SpinLockHolder&) = delete;

 private:
  SpinLock* const lock_;
};

}  // namespace pinpool::internal

#endif  // PINPOOL_HEAP_SPIN_LOCK_H_
