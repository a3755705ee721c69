// BackgroundWork's loop (background.h has the contract).
#include "pool/background.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "os/os.h"

namespace pinpool::internal {

std::size_t TrimIdleChunks(Heap& heap, Arena& arena, std::size_t floor_bytes) {
  heap.ReleaseIdleChunks();
  return arena.Trim(floor_bytes);
}

absl::StatusOr<std::unique_ptr<BackgroundWork>> BackgroundWork::Start(Heap& heap, Arena& arena,
                                                                      const Policy& policy) {
  if (!policy.keep_watermark && policy.trim_every.count() == 0 && policy.startup_bytes == 0 &&
      !policy.adopt && policy.check_leases.count() == 0) {
    return nullptr;
  }
  std::unique_ptr<BackgroundWork> work(new BackgroundWork(heap, arena, policy));
  absl::StatusOr<std::thread> thread = os::StartThread([w = work.get()] { w->Run(); });
  if (!thread.ok()) {
    return absl::Status(thread.status().code(),
                        absl::StrCat("the pool's background work: ", thread.status().message()));
  }
  work->thread_ = *std::move(thread);
  return work;
}

BackgroundWork::BackgroundWork(Heap& heap, Arena& arena, const Policy& policy)
    : heap_(heap), arena_(arena), policy_(policy) {}

BackgroundWork::~BackgroundWork() {
  if (!thread_.joinable()) return;  // never started
  {
    MutexLock lock(&mu_);
    stop_ = true;
    stopping_.store(true, std::memory_order_relaxed);
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

bool BackgroundWork::StartupDone() const {
  MutexLock lock(&mu_);
  return startup_over_ && startup_status_.ok();
}

absl::Status BackgroundWork::AwaitStartup(std::chrono::nanoseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  MutexLock lock(&mu_);
  while (!startup_over_) {
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) {
      return absl::DeadlineExceededError("the pool's initial_size is still being mapped");
    }
    startup_done_.WaitFor(&mu_, std::min<std::chrono::nanoseconds>(left, std::chrono::hours(1)));
  }
  return startup_status_;
}

void BackgroundWork::FinishStartup() {
  absl::Status s;
  if (policy_.adopt) {
    s = arena_.AdoptQueued(&stopping_);
    // A chunk that failed is kept for another try (its blocks are the predecessor's): a few more,
    // 10 ms, 100 ms and 1 s apart, before the start-up reports the failure (Claim tries again).
    auto wait = std::chrono::milliseconds(10);
    for (int retry = 0; retry < 3 && !s.ok() && arena_.failed_adoptions() != 0; ++retry) {
      if (!Sleep(std::chrono::steady_clock::now() + wait, false)) break;
      s = arena_.RetryAdoptions();
      wait *= 10;
    }
  }
  if (s.ok() && policy_.startup_bytes != 0) {
    s = arena_.Reserve(policy_.startup_bytes, nullptr, &stopping_);
  }
  if (s.ok() && (policy_.adopt || policy_.startup_bytes != 0) &&
      policy_.initial_size_seconds != nullptr) {
    policy_.initial_size_seconds->store(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - policy_.startup_begin)
            .count());
  }
  MutexLock lock(&mu_);
  startup_over_ = true;
  startup_status_ = s;
  startup_done_.NotifyAll();
}

void BackgroundWork::UpdateGrowAhead(std::chrono::steady_clock::time_point now) {
  constexpr auto kMinWindow = std::chrono::milliseconds(1);
  const std::uint64_t carved = arena_.carved_total();
  const double window = std::chrono::duration<double>(now - rate_since_).count();
  if (now - rate_since_ < kMinWindow) return;
  // Half of each new window: a change of pace shows within a few chunks, a lull decays it.
  bytes_per_second_ =
      0.5 * bytes_per_second_ + 0.5 * static_cast<double>(carved - carved_since_) / window;
  rate_since_ = now;
  carved_since_ = carved;
  arena_.SetExtraRoom(static_cast<std::size_t>(bytes_per_second_ * 2 * build_seconds_));
}

void BackgroundWork::Run() {
  using Clock = std::chrono::steady_clock;
  constexpr auto kFirstBackoff = std::chrono::milliseconds(10);
  constexpr auto kMaxBackoff = std::chrono::seconds(2);
  if (policy_.numa_node >= 0) os::RunOnNodeCpus(policy_.numa_node);
  FinishStartup();
  rate_since_ = Clock::now();
  carved_since_ = arena_.carved_total();
  const bool trims = policy_.trim_every.count() > 0;
  std::chrono::nanoseconds backoff = kFirstBackoff;
  Clock::time_point next_trim =
      trims ? Clock::now() + policy_.trim_every : Clock::time_point::max();
  Clock::time_point retry_at = Clock::time_point::min();  // no growth before this (backing off)
  const bool leases = policy_.check_leases.count() > 0;
  Clock::time_point next_lease_check = leases ? Clock::now() : Clock::time_point::max();
  for (;;) {
    const Clock::time_point now = Clock::now();
    if (now >= next_lease_check) {
      policy_.on_lease_check();
      next_lease_check = Clock::now() + policy_.check_leases;
      continue;
    }
    if (now >= next_trim) {
      TrimIdleChunks(heap_, arena_, policy_.trim_floor);
      next_trim = Clock::now() + policy_.trim_every;
      continue;
    }
    const bool backing_off = now < retry_at;
    if (policy_.keep_watermark) UpdateGrowAhead(now);
    if (policy_.keep_watermark && !backing_off && arena_.BelowWatermark()) {
      const Clock::time_point begin = Clock::now();
      std::size_t added = 0;
      if (arena_.Replenish(SIZE_MAX, policy_.workers, &added).ok()) {
        // The chunks of one call are built side by side, `workers` at a time: a round's time is
        // one build's (not the call's: that would grow with the room asked for, and the room
        // asked for with it). A slow build raises it at once, fast ones lower it slowly: builds
        // come in bursts of slow ones (fresh memory to fault in, compaction), and room missing
        // then is a wait.
        if (added != 0) {
          const std::size_t rounds = (added + policy_.workers - 1) / std::max(policy_.workers, 1u);
          const double took = std::chrono::duration<double>(Clock::now() - begin).count() / rounds;
          build_seconds_ = std::max(took, 0.875 * build_seconds_);
        }
        backoff = kFirstBackoff;
      } else {
        retry_at = Clock::now() + backoff;
        backoff = std::min<std::chrono::nanoseconds>(backoff * 2, kMaxBackoff);
      }
      MutexLock lock(&mu_);
      if (stop_) return;
      continue;
    }
    const Clock::time_point until =
        std::min(backing_off ? std::min(next_trim, retry_at) : next_trim, next_lease_check);
    if (!Sleep(until, policy_.keep_watermark && !backing_off)) return;
  }
}

}  // namespace pinpool::internal
