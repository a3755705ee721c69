// Mutex: std::mutex with Clang thread-safety annotations (-Wthread-safety), for pinpool's
// internal locks (the arena's growth lock, the heap's cache list, the live-heap registry).
//
// Why not absl::Mutex: Debian's Abseil is not built with ThreadSanitizer, so TSan cannot see
// absl::Mutex's lock and unlock and reports every access it protects as a race. std::mutex is a
// pthread mutex, which TSan intercepts in any build. None of these locks is on the allocation
// fast path, so absl::Mutex's extras (conditions, contention profiling) buy nothing here.
// CondVar is std::condition_variable over the same pthread mutex (the arena's growth waits).
// Thread-safe by definition; not recursive.
#ifndef PINPOOL_UTIL_MUTEX_H_
#define PINPOOL_UTIL_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"

namespace pinpool::internal {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Waits on a condition under a Mutex the caller holds (which is released while waiting and held
// again on return). Spurious wake-ups happen: wait in a loop on the condition.
class CondVar {
 public:
  void Wait(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // False on timeout.
  bool WaitFor(Mutex* mu, std::chrono::nanoseconds timeout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool woken = cv_.wait_for(lock, timeout) == std::cv_status::no_timeout;
    lock.release();
    return woken;
  }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

// Holds a Mutex for its scope.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

}  // namespace pinpool::internal

#endif  // PINPOOL_UTIL_MUTEX_H_
