// BackgroundWork: the pool's background thread, and the policy it follows. (The pool's other
// threads: the metrics server's while Pool::ServeMetrics serves, and Reserve's workers while they
// build chunks, for Reserve and for this thread's growth.) First it finishes the start-up: the
// chunks Pool::Adopt queued (Arena::AdoptQueued), then the rest of initial_size when Create left
// it that (PoolOptions::initial_size_in_background: the arena's Reserve, on Reserve's parallel
// workers), then it keeps the low watermark (PoolOptions::low_watermark with
// grow_in_background: chunks are added whenever an allocation takes the room below it) and runs
// the trim policy (PoolOptions::trim_interval_ms: TrimIdleChunks every so often), and checks the
// leases on the chunks' files for the pool (the pool's own callback: Policy::on_lease_check). It
// uses the arena's and the heap's primitives only: the arena's Reserve, BelowWatermark, Replenish,
// WaitBelowWatermark, SetExtraRoom and carved_total, and the same TrimIdleChunks as Pool::Trim.
// Neither knows it exists, and nothing below calls back up.
//
// Growing ahead: one chunk at a time, behind a watermark that counts chunks in flight as room,
// falls behind any allocation rate above a chunk per build time (a 32 MiB chunk that takes 40 ms
// to populate and pin: 0.8 GB/s), and then allocations wait for the chunk in flight. So the
// keeper measures the rate allocations take room (carved_total between wake-ups, smoothed) and
// the time a chunk takes to build (its own Replenish calls, smoothed), asks the arena for that
// rate times twice the build time of room above low_watermark (SetExtraRoom: chunks in flight
// count as room, the factor keeps ready room for the chunks still building), and builds what is
// missing on up to `workers` threads at once.
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

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
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
    unsigned workers = 1;                     // chunks built at once for the watermark
    // Start-up left to this thread: Reserve(startup_bytes) first (0: nothing left), then
    // `*initial_size_seconds` is set to the seconds since `startup_begin`.
    std::size_t startup_bytes = 0;
    // Chunks queued for adoption (Arena::QueueAdoption: Pool::Adopt) are built first.
    bool adopt = false;
    std::chrono::steady_clock::time_point startup_begin{};
    std::atomic<double>* initial_size_seconds = nullptr;
    // Every `check_leases`, calls `on_lease_check` (0: never): how the pool learns that another
    // process opened or truncated a chunk's file (Pool::TakeBackBrokenLeases).
    std::chrono::milliseconds check_leases{0};
    std::function<void()> on_lease_check;
  };

  // Null when the policy asks for nothing (no thread then). kResourceExhausted when the thread
  // cannot be started (os::StartThread).
  static absl::StatusOr<std::unique_ptr<BackgroundWork>> Start(Heap& heap, Arena& arena,
                                                               const Policy& policy);
  // Stops the thread and waits for it (a growth or trim in progress finishes first).
  // Stops the thread and waits for it (a growth or trim in progress finishes first; a start-up
  // in progress stops after the chunks being built).
  ~BackgroundWork();
  BackgroundWork(const BackgroundWork&) = delete;
  BackgroundWork& operator=(const BackgroundWork&) = delete;

  // Whether the start-up left to this thread has mapped all of initial_size (true when none was).
  bool StartupDone() const;
  // Waits until the start-up ends or `timeout` passes: OK, its failure, or kDeadlineExceeded.
  absl::Status AwaitStartup(std::chrono::nanoseconds timeout) const;

 private:
  BackgroundWork(Heap& heap, Arena& arena, const Policy& policy);
  void Run();
  // The start-up left to this thread, then its outcome published for StartupDone/AwaitStartup.
  void FinishStartup();
  // Measures consumption and build time and sets the arena's extra room (the contract above).
  void UpdateGrowAhead(std::chrono::steady_clock::time_point now);
  // Sleeps until `until`, or until an allocation takes the room below the watermark when
  // `for_watermark`; a stop wakes either. False once stopping.
  bool Sleep(std::chrono::steady_clock::time_point until, bool for_watermark);

  Heap& heap_;
  Arena& arena_;
  const Policy policy_;
  mutable Mutex mu_;
  CondVar stop_wake_;
  mutable CondVar startup_done_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<bool> stopping_{false};  // stop_, for Reserve's workers to read without mu_
  // The start-up's outcome: unknown while it runs (or OK from the start when there is none).
  bool startup_over_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status startup_status_ ABSL_GUARDED_BY(mu_);
  // Grow-ahead's measures, the background thread's own.
  std::chrono::steady_clock::time_point rate_since_{};
  std::uint64_t carved_since_ = 0;
  double bytes_per_second_ = 0;
  double build_seconds_ = 0;
  std::thread thread_;  // started by Start once the object is whole
};

}  // namespace pinpool::internal

#endif  // PINPOOL_POOL_BACKGROUND_H_
