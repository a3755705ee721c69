// Growth off the allocation path: the low watermark of room no allocation has taken yet (the
// uncarved bytes of ready chunks, plus chunks in flight), kept up by the pool-owned grower thread
// or by Replenish from the application's own event loop, or both. Either one adds a chunk with
// Arena::GrowOne, which holds no lock across the registration, so allocations meanwhile carve
// from the chunks already there, and one that finds no room waits for the chunk in flight only.
//
// The grower sleeps on grower_wake_ until Carve leaves the room below the watermark. After a
// failure (RLIMIT_MEMLOCK, a domain refusing) it backs off, 10 ms doubling to 2 s, so that a
// lasting cause is counted a few times, not thousands; it is never a reason to stop allocating.
// A spent budget is no failure here: there is nothing left to keep the watermark with. The same
// thread runs the pool's trim policy (PoolOptions::trim_interval_ms) between growths.
//
// Thread safety: as the arena (arena.h). StartGrower and StopGrower are called by the pool's
// owner thread (creation, destruction).
#include <algorithm>
#include <chrono>
#include <functional>
#include <utility>

#include "arena/arena.h"
#include "os/os.h"
#include "util/status_macros.h"

namespace pinpool::internal {

bool Arena::BelowWatermark() const noexcept {
  if (config_.low_watermark == 0) return false;
  const std::size_t taken = slots_taken_now_.load(std::memory_order_relaxed);
  if (taken >= max_chunks_) return false;
  const std::size_t room = uncarved_now_.load(std::memory_order_relaxed) +
                           growing_now_.load(std::memory_order_relaxed) * config_.chunk_size;
  return room < config_.low_watermark;
}

bool Arena::BelowWatermarkLocked() const {
  if (config_.low_watermark == 0) return false;
  if (ready_ + growing_ + trimming_ >= max_chunks_) return false;
  return uncarved_ + growing_ * config_.chunk_size < config_.low_watermark;
}

absl::Status Arena::Replenish(std::size_t max_chunks) {
  MutexLock lock(&mu_);
  for (std::size_t n = 0; n < max_chunks && BelowWatermarkLocked(); ++n) {
    PINPOOL_RETURN_IF_ERROR(GrowOne(Why::kBackground));
  }
  return absl::OkStatus();
}

void Arena::StartGrower(std::function<void()> periodic, std::chrono::milliseconds every,
                        bool keep_watermark) {
  if (grower_.joinable()) return;
  keep_watermark_ = keep_watermark && config_.low_watermark != 0;
  if (every.count() > 0 && periodic) {
    periodic_ = std::move(periodic);
    periodic_every_ = every;
  }
  if (!keep_watermark_ && !periodic_) return;
  grower_ = std::thread([this] { GrowerLoop(); });
}

void Arena::StopGrower() {
  if (!grower_.joinable()) return;
  {
    MutexLock lock(&mu_);
    grower_stop_ = true;
    grower_wake_.NotifyAll();
  }
  grower_.join();
}

void Arena::GrowerLoop() {
  if (config_.numa_node >= 0) os::RunOnNodeCpus(config_.numa_node);
  constexpr auto kFirstBackoff = std::chrono::milliseconds(10);
  constexpr auto kMaxBackoff = std::chrono::seconds(2);
  std::chrono::nanoseconds backoff = kFirstBackoff;
  auto next_periodic = std::chrono::steady_clock::now() + periodic_every_;
  MutexLock lock(&mu_);
  while (!grower_stop_) {
    if (periodic_ && std::chrono::steady_clock::now() >= next_periodic) {
      mu_.Unlock();
      periodic_();
      mu_.Lock();
      next_periodic = std::chrono::steady_clock::now() + periodic_every_;
      continue;
    }
    if (!keep_watermark_ || !BelowWatermarkLocked()) {
      if (periodic_) {
        grower_wake_.WaitFor(&mu_, next_periodic - std::chrono::steady_clock::now());
      } else {
        grower_wake_.Wait(&mu_);
      }
      continue;
    }
    if (GrowOne(Why::kBackground).ok()) {
      backoff = kFirstBackoff;
      continue;
    }
    grower_wake_.WaitFor(&mu_, backoff);  // a stop wakes it early
    backoff = std::min<std::chrono::nanoseconds>(backoff * 2, kMaxBackoff);
  }
}

}  // namespace pinpool::internal
