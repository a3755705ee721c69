// LatencyRecorder (util/latency.h) and its LatencyHistogram snapshot (pinpool/stats.h): the
// bucket edges (an event of exactly a bound lands in that bound's bucket, one nanosecond more in
// the next), the unbounded last bucket, and recording from many threads at once losing nothing
// (count == the sum of the buckets == events recorded, and the sum of their times).
#include "util/latency.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

namespace pinpool::internal {
namespace {

using std::chrono::nanoseconds;

TEST(LatencyTest, BoundsDoubleFromOneMicrosecondAndTheLastIsUnbounded) {
  EXPECT_DOUBLE_EQ(LatencyHistogram::UpperBound(0), 1e-6);
  EXPECT_DOUBLE_EQ(LatencyHistogram::UpperBound(1), 2e-6);
  EXPECT_DOUBLE_EQ(LatencyHistogram::UpperBound(10), 1024e-6);
  EXPECT_NEAR(LatencyHistogram::UpperBound(LatencyHistogram::kBuckets - 2), 67.108864, 1e-9);
  EXPECT_TRUE(std::isinf(LatencyHistogram::UpperBound(LatencyHistogram::kBuckets - 1)));
}

TEST(LatencyTest, AnEventAtABoundLandsInItsBucketAndOneNanosecondMoreInTheNext) {
  EXPECT_EQ(LatencyBucket(0), 0u);
  EXPECT_EQ(LatencyBucket(1), 0u);
  EXPECT_EQ(LatencyBucket(1000), 0u);
  EXPECT_EQ(LatencyBucket(1001), 1u);
  EXPECT_EQ(LatencyBucket(2000), 1u);
  EXPECT_EQ(LatencyBucket(2001), 2u);
  for (std::size_t i = 0; i + 1 < LatencyHistogram::kBuckets; ++i) {
    const auto bound =
        static_cast<std::uint64_t>(std::llround(LatencyHistogram::UpperBound(i) * 1e9));
    EXPECT_EQ(LatencyBucket(bound), i) << "at the bound of bucket " << i;
    EXPECT_EQ(LatencyBucket(bound + 1), i + 1) << "just past the bound of bucket " << i;
  }
  EXPECT_EQ(LatencyBucket(UINT64_MAX), LatencyHistogram::kBuckets - 1);
  EXPECT_EQ(LatencyBucket(std::uint64_t{3600} * 1'000'000'000), LatencyHistogram::kBuckets - 1);
}

TEST(LatencyTest, ASnapshotCountsSumsAndBuckets) {
  LatencyRecorder r;
  EXPECT_EQ(r.Snapshot().count, 0u);
  r.Record(nanoseconds(500));    // bucket 0
  r.Record(nanoseconds(3'000));  // bucket 2 (<= 4 us)
  r.RecordSeconds(0.5);          // <= 524288 us: bucket 19
  r.Record(nanoseconds(-5));     // a clock step back counts as 0
  const LatencyHistogram h = r.Snapshot();
  EXPECT_EQ(h.count, 4u);
  EXPECT_EQ(h.buckets[0], 2u);
  EXPECT_EQ(h.buckets[2], 1u);
  EXPECT_EQ(h.buckets[19], 1u);
  EXPECT_NEAR(h.sum_seconds, 0.5 + 3.5e-6, 1e-9);
  LatencyHistogram twice = h;
  Accumulate(twice, h);
  EXPECT_EQ(twice.count, 8u);
  EXPECT_EQ(twice.buckets[19], 2u);
}

TEST(LatencyTest, ManyThreadsRecordingAtOnceLoseNothing) {
  LatencyRecorder r;
  constexpr int kThreads = 4;
  constexpr int kEach = 100'000;
  std::vector<std::thread> threads;
  std::atomic<bool> stop{false};
  // A reader taking snapshots meanwhile always sees count == the sum of its buckets.
  std::thread reader([&] {
    while (!stop.load()) {
      const LatencyHistogram h = r.Snapshot();
      std::uint64_t sum = 0;
      for (std::uint64_t b : h.buckets) sum += b;
      ASSERT_EQ(sum, h.count);
    }
  });
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&r, t] {
      for (int i = 0; i < kEach; ++i) r.Record(nanoseconds(1000 * (t + 1)));
    });
  }
  for (std::thread& t : threads) t.join();
  stop = true;
  reader.join();
  const LatencyHistogram h = r.Snapshot();
  EXPECT_EQ(h.count, std::uint64_t{kThreads} * kEach);
  EXPECT_EQ(h.buckets[0], std::uint64_t{kEach});      // 1 us
  EXPECT_EQ(h.buckets[1], std::uint64_t{kEach});      // 2 us
  EXPECT_EQ(h.buckets[2], std::uint64_t{2 * kEach});  // 3 and 4 us
  EXPECT_NEAR(h.sum_seconds, kEach * (1 + 2 + 3 + 4) * 1e-6, 1e-9);
}

}  // namespace
}  // namespace pinpool::internal
