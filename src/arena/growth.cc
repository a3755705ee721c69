// The arena's primitives for growth off the allocation path: the low watermark of room no
// allocation has taken yet (the uncarved bytes of ready chunks, plus chunks in flight), tested
// lock-free (BelowWatermark), kept up by Replenish, and waited for by WaitBelowWatermark, which
// Carve wakes when an allocation takes the room below the watermark. Who keeps the watermark,
// when, and how it backs off after a failure is the pool's business (pool/background.cc, or the
// application calling Pool::Replenish), and so is how far above the watermark to aim
// (SetExtraRoom: the keeper's grow-ahead, measured with carved_total): the arena runs no thread of
// its own. Replenish claims what is missing and builds it (BuildClaimedLocked: on the calling
// thread, or on up to `workers` threads it starts and joins), holding no lock across a
// registration, so allocations meanwhile carve from the chunks already there, and one that finds
// no room waits for a chunk in flight only.
//
// Thread safety: as the arena (arena.h): any thread, any number at once.
#include <algorithm>
#include <chrono>
#include <vector>

#include "arena/arena.h"
#include "util/status_macros.h"

namespace pinpool::internal {

std::size_t Arena::RoomTarget() const noexcept {
  if (config_.low_watermark == 0) return 0;
  return config_.low_watermark + extra_room_.load(std::memory_order_relaxed);
}

bool Arena::BelowWatermark() const noexcept {
  if (config_.low_watermark == 0) return false;
  const std::size_t taken = slots_taken_now_.load(std::memory_order_relaxed);
  if (taken >= max_chunks_) return false;
  const std::size_t room = uncarved_now_.load(std::memory_order_relaxed) +
                           growing_now_.load(std::memory_order_relaxed) * config_.chunk_size;
  return room < RoomTarget();
}

bool Arena::BelowWatermarkLocked() const {
  if (config_.low_watermark == 0) return false;
  if (SlotsTakenLocked() >= max_chunks_) return false;
  return uncarved_ + growing_ * config_.chunk_size < RoomTarget();
}

absl::Status Arena::Replenish(std::size_t max_chunks, unsigned workers, std::size_t* added) {
  std::size_t unused = 0;
  if (added == nullptr) added = &unused;
  *added = 0;
  MutexLock lock(&mu_);
  // Claim all that is missing at once (each claim counts as room, so this stops at the target),
  // then build those chunks side by side (one after another on this thread when workers <= 1).
  std::vector<std::uint32_t> claimed;
  absl::Status claim_error;
  while (claimed.size() < max_chunks && BelowWatermarkLocked()) {
    absl::StatusOr<std::uint32_t> index = ClaimLocked();
    if (!index.ok()) {
      ++growth_failures_;
      last_growth_error_ = claim_error = index.status();
      break;
    }
    claimed.push_back(*index);
  }
  absl::Status error =
      BuildClaimedLocked(claimed, workers, Why::kBackground, nullptr, nullptr, added);
  return error.ok() ? claim_error : error;
}

bool Arena::WaitBelowWatermark(std::chrono::steady_clock::time_point deadline) {
  MutexLock lock(&mu_);
  while (!waiters_released_ && !BelowWatermarkLocked()) {
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) break;
    // In slices: a far deadline (time_point::max) must not overflow the clock arithmetic.
    below_watermark_.WaitFor(&mu_, std::min<std::chrono::nanoseconds>(left, std::chrono::hours(1)));
  }
  return BelowWatermarkLocked();
}

void Arena::ReleaseWaiters() {
  MutexLock lock(&mu_);
  waiters_released_ = true;
  below_watermark_.NotifyAll();
}

}  // namespace pinpool::internal
