// LatencyRecorder: the always-on latency histogram behind pinpool's LatencyHistogram snapshots
// (pinpool/stats.h has the bucket bounds: doubling from 1 us, the last unbounded).
//
// Recording is a bucket index from the duration (a division and a bit count) and three relaxed
// atomic adds: no lock, no allocation, safe from any number of threads at once. It is meant for
// the slow work (registration, growth, trim, the allocation slow path, grant binds), never the
// allocation fast path. A snapshot taken while others record may miss events recorded at that
// moment, but is consistent in itself: its `count` is the sum of its buckets; `sum_seconds` may
// be a few events behind or ahead of them.
#ifndef PINPOOL_UTIL_LATENCY_H_
#define PINPOOL_UTIL_LATENCY_H_

#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "pinpool/stats.h"

namespace pinpool::internal {

// The bucket of an event that took `ns` nanoseconds: the first whose upper bound (1 us << i) it
// does not exceed; the last for anything longer than the last bound.
constexpr std::size_t LatencyBucket(std::uint64_t ns) noexcept {
  const std::uint64_t us = ns / 1000 + (ns % 1000 != 0 ? 1 : 0);  // rounded up
  const std::size_t i = us <= 1 ? 0 : static_cast<std::size_t>(std::bit_width(us - 1));
  return i < LatencyHistogram::kBuckets ? i : LatencyHistogram::kBuckets - 1;
}

class LatencyRecorder {
 public:
  LatencyRecorder() = default;
  LatencyRecorder(const LatencyRecorder&) = delete;
  LatencyRecorder& operator=(const LatencyRecorder&) = delete;

  void Record(std::chrono::nanoseconds d) noexcept {
    const std::uint64_t ns = d.count() < 0 ? 0 : static_cast<std::uint64_t>(d.count());
    buckets_[LatencyBucket(ns)].fetch_add(1, std::memory_order_relaxed);
    sum_ns_.fetch_add(ns, std::memory_order_relaxed);
  }
  void RecordSeconds(double seconds) noexcept {
    Record(std::chrono::nanoseconds(static_cast<std::int64_t>(seconds * 1e9)));
  }
  // Records the time since `start`.
  void RecordSince(std::chrono::steady_clock::time_point start) noexcept {
    Record(std::chrono::steady_clock::now() - start);
  }

  LatencyHistogram Snapshot() const noexcept {
    LatencyHistogram h;
    for (std::size_t i = 0; i < h.buckets.size(); ++i) {
      h.buckets[i] = buckets_[i].load(std::memory_order_relaxed);
      h.count += h.buckets[i];
    }
    h.sum_seconds = static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) * 1e-9;
    return h;
  }

 private:
  std::array<std::atomic<std::uint64_t>, LatencyHistogram::kBuckets> buckets_{};
  std::atomic<std::uint64_t> sum_ns_{0};
};

// Adds one event of `seconds` to a plain histogram (one kept under a lock: GrantLock::Record).
inline void AddEvent(LatencyHistogram& into, double seconds) noexcept {
  const double ns = seconds * 1e9;
  into.buckets[LatencyBucket(ns <= 0 ? 0 : static_cast<std::uint64_t>(ns))] += 1;
  into.count += 1;
  into.sum_seconds += seconds > 0 ? seconds : 0;
}

// Adds `h` to `into` (summing one mechanism's histograms over its connections).
inline void Accumulate(LatencyHistogram& into, const LatencyHistogram& h) noexcept {
  for (std::size_t i = 0; i < into.buckets.size(); ++i) into.buckets[i] += h.buckets[i];
  into.count += h.count;
  into.sum_seconds += h.sum_seconds;
}

}  // namespace pinpool::internal

#endif  // PINPOOL_UTIL_LATENCY_H_
