// BackgroundWork's loop (background.h has the contract).
#include "pool/background.h"

#include <algorithm>

#include "os/os.h"

namespace pinpool::internal {

std::size_t TrimIdleChunks(Heap& heap, Arena& arena, std::size_t floor_bytes) {
  heap.ReleaseIdleChunks();
  return arena.Trim(floor_bytes);
}

std::unique_ptr<BackgroundWork> BackgroundWork::Start(Heap& heap, Arena& arena,
                                                      const Policy& policy) {
  if (!policy.keep_watermark && policy.trim_every.count() == 0) return nullptr;
  return std::unique_ptr<BackgroundWork>(new BackgroundWork(heap, arena, policy));
}

BackgroundWork::BackgroundWork(Heap& heap, Arena& arena, const Policy& policy)
    : heap_(heap), arena_(arena), policy_(policy), thread_([this] { Run(); }) {}

BackgroundWork::~BackgroundWork() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
    stop_wake_.NotifyAll();
  }
  arena_.ReleaseWaiters();
  thread_.join();
}

bool BackgroundWork::Sleep(std::chrono::steady_clock::time_point until, bool for_watermark) {
  if (for_watermark) {
    arena_.WaitBelowWatermark(until);  // ReleaseWaiters (the destructor) ends it
  } else {
    MutexLock lock(&mu_);
    while (!stop_) {
      const auto left = until - std::chrono::steady_clock::now();
      if (left <= std::chrono::steady_clock::duration::zero()) break;
      stop_wake_.WaitFor(&mu_, std::min<std::chrono::nanoseconds>(left, std::chrono::hours(1)));
    }
  }
  MutexLock lock(&mu_);
  return !stop_;
}

void BackgroundWork::Run() {
  using Clock = std::chrono::steady_clock;
  constexpr auto kFirstBackoff = std::chrono::milliseconds(10);
  constexpr auto kMaxBackoff = std::chrono::seconds(2);
  if (policy_.numa_node >= 0) os::RunOnNodeCpus(policy_.numa_node);
  const bool trims = policy_.trim_every.count() > 0;
  std::chrono::nanoseconds backoff = kFirstBackoff;
  Clock::time_point next_trim =
      trims ? Clock::now() + policy_.trim_every : Clock::time_point::max();
  Clock::time_point retry_at = Clock::time_point::min();  // no growth before this (backing off)
  for (;;) {
    const Clock::time_point now = Clock::now();
    if (now >= next_trim) {
      TrimIdleChunks(heap_, arena_, policy_.trim_floor);
      next_trim = Clock::now() + policy_.trim_every;
      continue;
    }
    const bool backing_off = now < retry_at;
    if (policy_.keep_watermark && !backing_off && arena_.BelowWatermark()) {
      if (arena_.Replenish(1).ok()) {
        backoff = kFirstBackoff;
      } else {
        retry_at = Clock::now() + backoff;
        backoff = std::min<std::chrono::nanoseconds>(backoff * 2, kMaxBackoff);
      }
      MutexLock lock(&mu_);
      if (stop_) return;
      continue;
    }
    const Clock::time_point until = backing_off ? std::min(next_trim, retry_at) : next_trim;
    if (!Sleep(until, policy_.keep_watermark && !backing_off)) return;
  }
}

}  // namespace pinpool::internal
