// Mutex: std::mutex with Clang thread-safety annotations (-Wthread-safety), for pinpool's
// internal locks (the arena's growth lock, the heap's cache list, the live-heap registry).
//
// Why not absl::Mutex: Debian's Abseil is not built with ThreadSanitizer, so TSan cannot see
// absl::Mutex's lock and unlock and reports every access it protects as a race. std::mutex is a
// pthread mutex, which TSan intercepts in any build. None of these locks is on the allocation
// fast path, so absl::Mutex's extras (conditions, contention profiling) buy nothing here.
// Thread-safe by definition; not recursive.
#ifndef PINPOOL_UTIL_MUTEX_H_
#define PINPOOL_UTIL_MUTEX_H_

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
  std::mutex mu_;
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
