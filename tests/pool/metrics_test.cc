// A running pool's metrics (docs/metrics.md): live and cached bytes a leak check can tell apart;
// latency histograms that move when registrations, growth, trim and slow-path allocations happen
// (and only then: fast-path allocations record nothing); the OpenMetrics text of a running pool,
// read back through Pool::ServeMetrics's socket as pinpool-info --metrics reads it. That the
// text parses with a real OpenMetrics parser is tests/report/'s job (Python's
// prometheus_client).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "pinpool/pool.h"
#include "support/counting_domain.h"
#include "support/make_pool.h"

namespace pinpool {
namespace {

using testing::CountingDomain;
using ::testing::HasSubstr;

constexpr std::size_t kChunk = 2 * kMiB;

std::unique_ptr<Pool> MakePool(std::shared_ptr<Domain> domain, std::size_t chunks = 8) {
  return testing::MakePool({.chunk_size = kChunk,
                            .budget = chunks * kChunk,
                            .populate = false,
                            .numa_node = kNoNumaNode,
                            .domains = {std::move(domain)}});
}

// The leak check a new user writes: allocate, free everything, expect nothing live. The freed
// blocks wait in the caches: cached, not live.
TEST(MetricsTest, AfterFreeingEverythingNothingIsLiveAndTheCachesHoldTheRest) {
  auto pool = MakePool(std::make_shared<CountingDomain>());
  ASSERT_NE(pool, nullptr);
  std::vector<Block> blocks;
  for (int i = 0; i < 100; ++i) blocks.push_back(pool->Allocate(4096));
  PoolStats s = pool->GetStats();
  EXPECT_EQ(s.live_bytes, 100 * 4096u);
  for (const Block& b : blocks) pool->Deallocate(b);
  s = pool->GetStats();
  EXPECT_EQ(s.live_bytes, 0u) << "freed blocks counted as live: a leak check would report them";
  EXPECT_GT(s.cached_bytes, 0u);
  EXPECT_EQ(s.cached_bytes, s.thread_cache_bytes + s.transfer_cache_bytes);
}

TEST(MetricsTest, RegistrationAndGrowthHistogramsMoveWithEachChunk) {
  auto domain = std::make_shared<CountingDomain>();
  domain->set_delay(std::chrono::microseconds(3000));  // 3 ms: in the <= 4.096 ms bucket
  auto pool = MakePool(domain);
  ASSERT_NE(pool, nullptr);
  PoolStats s = pool->GetStats();
  EXPECT_EQ(s.domains[0].register_latency.count, 0u);
  EXPECT_EQ(s.growth.growth_latency.count, 0u);
  ASSERT_TRUE(pool->Reserve(3 * kChunk).ok());
  s = pool->GetStats();
  const LatencyHistogram& reg = s.domains[0].register_latency;
  EXPECT_EQ(reg.count, 3u);
  EXPECT_GE(reg.sum_seconds, 3 * 0.003);
  std::uint64_t at_least_3ms = 0;
  for (std::size_t i = 0; i < LatencyHistogram::kBuckets; ++i) {
    if (LatencyHistogram::UpperBound(i) >= 0.003) at_least_3ms += reg.buckets[i];
  }
  EXPECT_EQ(at_least_3ms, 3u) << "each 3 ms registration lands at or above the 4.096 ms bound";
  EXPECT_EQ(s.growth.growth_latency.count, 3u);
  EXPECT_GE(s.growth.growth_latency.sum_seconds, reg.sum_seconds);
  EXPECT_EQ(s.domains[0].deregister_latency.count, 0u);
  EXPECT_EQ(s.growth.trim_latency.count, 0u);

  // Trim gives the idle chunks back: one trim and one deregistration per chunk.
  const std::size_t given = pool->Trim(0);
  ASSERT_EQ(given, 3 * kChunk);
  s = pool->GetStats();
  EXPECT_EQ(s.growth.trim_latency.count, 3u);
  EXPECT_EQ(s.domains[0].deregister_latency.count, 3u);
}

TEST(MetricsTest, OnlyTheSlowPathRecordsAllocations) {
  auto pool = MakePool(std::make_shared<CountingDomain>());
  ASSERT_NE(pool, nullptr);
  Block first = pool->Allocate(64);  // the thread's first allocation: the slow path
  ASSERT_TRUE(first);
  const std::uint64_t after_first = pool->GetStats().allocate_slow_latency.count;
  EXPECT_GE(after_first, 1u);
  pool->Deallocate(first);
  // Freed into this thread's cache: allocating that size again is the fast path, many times.
  for (int i = 0; i < 1000; ++i) {
    Block b = pool->Allocate(64);
    ASSERT_TRUE(b);
    pool->Deallocate(b);
  }
  EXPECT_EQ(pool->GetStats().allocate_slow_latency.count, after_first)
      << "fast-path allocations recorded in the slow path's histogram";
  // Blocks larger than the inline path's always take the slow path, which times one in 32 of
  // them per thread: exactly one of any 32 in a row.
  for (int i = 0; i < 32; ++i) {
    Block big = pool->Allocate(kChunk / 2);
    ASSERT_TRUE(big);
    pool->Deallocate(big);
  }
  EXPECT_EQ(pool->GetStats().allocate_slow_latency.count, after_first + 1);
}

// Reads everything the socket at `path` sends, as pinpool-info --metrics does.
std::string Scrape(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ADD_FAILURE() << "connect " << path << ": " << std::strerror(errno);
    close(fd);
    return "";
  }
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) out.append(buf, n);
  close(fd);
  return out;
}

// The value of the sample line starting with `prefix` ("name{labels} "), or -1.
double Sample(const std::string& text, const std::string& prefix) {
  const std::size_t at = text.find("\n" + prefix);
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + 1 + prefix.size()));
}

TEST(MetricsTest, TheMetricsSocketServesTheRunningPoolsScrape) {
  auto pool = MakePool(std::make_shared<CountingDomain>("fake"));
  ASSERT_NE(pool, nullptr);
  const std::string path = ::testing::TempDir() + "pinpool-metrics-" + std::to_string(getpid());
  ASSERT_TRUE(pool->ServeMetrics(path).ok());
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "the socket is for this user only";

  std::string text = Scrape(path);
  ASSERT_THAT(text, HasSubstr("# EOF\n"));
  EXPECT_EQ(Sample(text, "pinpool_growth_growth_latency_seconds_count "), 0);
  ASSERT_TRUE(pool->Reserve(2 * kChunk).ok());
  // On a thread of its own: the slow path times one in 32 large allocations per thread, the
  // thread's first included, and this process's other tests may have made this thread's.
  Block b;
  std::thread([&] { b = pool->Allocate(100 * kKiB); }).join();
  ASSERT_TRUE(b);
  text = Scrape(path);
  EXPECT_EQ(Sample(text, "pinpool_growth_growth_latency_seconds_count "), 2);
  EXPECT_EQ(Sample(text,
                   "pinpool_domain_register_latency_seconds_count{domain=\"fake\",kind=\"custom\","
                   "pinning=\"none\"} "),
            2);
  EXPECT_EQ(Sample(text, "pinpool_live_bytes "), pool->UsableSize(b.data()));
  EXPECT_GE(Sample(text, "pinpool_allocate_slow_latency_seconds_count "), 1);
  pool->Deallocate(b);
  pool->Trim(0);
  text = Scrape(path);
  EXPECT_EQ(Sample(text, "pinpool_growth_trim_latency_seconds_count "), 2);
  EXPECT_EQ(Sample(text, "pinpool_live_bytes "), 0);

  // A second pool cannot take a socket someone serves; stopping removes it.
  auto other = MakePool(std::make_shared<CountingDomain>());
  ASSERT_NE(other, nullptr);
  EXPECT_TRUE(absl::IsAlreadyExists(other->ServeMetrics(path)));
  pool->StopServingMetrics();
  EXPECT_NE(stat(path.c_str(), &st), 0) << "the socket file is removed when serving stops";
  EXPECT_TRUE(absl::IsInvalidArgument(pool->ServeMetrics(std::string(200, 'x'))));
}

// A call that fails leaves the socket already serving as it was (before: it stopped the first
// server before trying the second path); the same path again keeps serving.
TEST(MetricsTest, AFailedServeMetricsLeavesThePreviousServerServing) {
  auto pool = MakePool(std::make_shared<CountingDomain>("fake"));
  ASSERT_NE(pool, nullptr);
  const std::string path =
      ::testing::TempDir() + "pinpool-metrics-keep-" + std::to_string(getpid());
  ASSERT_TRUE(pool->ServeMetrics(path).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(pool->ServeMetrics(std::string(200, 'x'))));
  EXPECT_THAT(Scrape(path), HasSubstr("# EOF\n")) << "the first socket stopped serving";
  const std::string dir = ::testing::TempDir() + "no-such-directory-" + std::to_string(getpid());
  EXPECT_FALSE(pool->ServeMetrics(dir + "/metrics").ok());
  EXPECT_THAT(Scrape(path), HasSubstr("# EOF\n"));
  EXPECT_TRUE(pool->ServeMetrics(path).ok()) << "the path it serves already";
  EXPECT_THAT(Scrape(path), HasSubstr("# EOF\n"));
  // A good second path replaces the first.
  const std::string second = path + "-2";
  ASSERT_TRUE(pool->ServeMetrics(second).ok());
  EXPECT_THAT(Scrape(second), HasSubstr("# EOF\n"));
  struct stat st {};
  EXPECT_NE(stat(path.c_str(), &st), 0) << "the first socket is removed once replaced";
  pool->StopServingMetrics();
}

}  // namespace
}  // namespace pinpool
