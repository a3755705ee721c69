// BackgroundWork: the one thread a pool may run, and the policy it follows. It keeps the low
// watermark (PoolOptions::low_watermark with grow_in_background: a chunk is added whenever an
// allocation takes the room below it) and runs the trim policy (PoolOptions::trim_interval_ms:
// TrimIdleChunks every so often). It uses the lower layers' primitives only: the arena's
// BelowWatermark, Replenish and WaitBelowWatermark, and the same TrimIdleChunks as Pool::Trim.
// Neither layer below knows it exists, and nothing below calls back up.
//
// After a failed growth (RLIMIT_MEMLOCK, a domain refusing) it backs off, 10 ms doubling to
// 2 s, so that a lasting cause is counted a few times, not thousands (the arena counts it and
// keeps it in last_growth_error); it is never a reason to stop allocating. A spent budget is no
// failure: BelowWatermark is false then.
//
// Lifetime: the pool owns it and declares it after the heap and the arena, so it is destroyed,
// and its thread joined, before what it uses. Thread safety: constructed and destroyed by the
// pool's owner thread; its own thread is the only other user.
#ifndef PINPOOL_POOL_BACKGROUND_H_
#define PINPOOL_POOL_BACKGROUND_H_

#include <chrono>
#include <cstddef>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "arena/arena.h"
#include "heap/heap.h"
#include "util/mutex.h"

namespace pinpool::internal {

// The pool's trim, shared by Pool::Trim and the trim policy: the heap drains its caches and
// gives back every chunk holding no block (a granted block freed early is held by the grant
// registry, so its chunk is never among them); the arena then trims what the floor and the
// watermark allow. Returns the bytes given back.
std::size_t TrimIdleChunks(Heap& heap, Arena& arena, std::size_t floor_bytes);

class BackgroundWork {
 public:
  struct Policy {
    bool keep_watermark = false;              // add chunks when below the low watermark
    std::chrono::milliseconds trim_every{0};  // 0: no trim policy
    std::size_t trim_floor = 0;               // what the policy's trims keep mapped
    int numa_node = -1;                       // run on this node's CPUs; -1: anywhere
  };

  // Null when the policy asks for nothing (no thread then).
  static std::unique_ptr<BackgroundWork> Start(Heap& heap, Arena& arena, const Policy& policy);
  // Stops the thread and waits for it (a growth or trim in progress finishes first).
  ~BackgroundWork();
  BackgroundWork(const BackgroundWork&) = delete;
  BackgroundWork& operator=(const BackgroundWork&) = delete;

 private:
  BackgroundWork(Heap& heap, Arena& arena, const Policy& policy);
  void Run();
  // Sleeps until `until`, or until an allocation takes the room below the watermark when
  // `for_watermark`; a stop wakes either. False once stopping.
  bool Sleep(std::chrono::steady_clock::time_point until, bool for_watermark);

  Heap& heap_;
  Arena& arena_;
  const Policy policy_;
  Mutex mu_;
  CondVar stop_wake_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: started once the members it reads exist
};

}  // namespace pinpool::internal

#endif  // PINPOOL_POOL_BACKGROUND_H_
