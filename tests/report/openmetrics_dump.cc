// Prints OpenMetrics text for check.py to parse with a real parser: with `synthetic`, a made-up
// PoolStats with every kind of figure filled in (chunks, several domains and their run-time
// figures, grant figures and histograms, held blocks by age, escaping in labels and help); with
// `running`, the scrape of a live pool after registrations, growth, slow-path allocations and a
// trim; with `serve PATH`, that pool serving its metrics at PATH (Pool::ServeMetrics) until
// standard input closes, for pinpool-info --metrics to read. Not a test by itself:
// tests/report/openmetrics_check.py is.
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "pinpool/pool.h"
#include "support/counting_domain.h"

namespace pinpool {
namespace {

PoolStats Synthetic() {
  PoolStats s;
  s.reserved_bytes = 1 * kGiB;
  s.mapped_bytes = 8 * kMiB;
  s.live_bytes = 3 * kMiB;
  s.cached_bytes = 256 * kKiB;
  s.heap_active_bytes = 4 * kMiB;
  s.growths = 5;
  s.memlock_limit = SIZE_MAX;  // unlimited: no sample
  s.allocate_slow_latency.buckets = {3, 0, 1};
  s.allocate_slow_latency.buckets[LatencyHistogram::kBuckets - 1] = 1;  // one beyond every bound
  s.allocate_slow_latency.count = 5;
  s.allocate_slow_latency.sum_seconds = 100.5;
  s.chunks.push_back({0x7f0000000000, 2 * kMiB, PageSize::k2M, 2 * kMiB, 0, {}, -1});
  s.chunks.push_back({0x7f0000200000, 2 * kMiB, PageSize::k4K, 0, 1, {}, 1});
  DomainStats verbs{"rxe0/pd0", DomainKind::kVerbs, Pinning::kLongTerm, 4, 8 * kMiB, 0.2, 0.1};
  verbs.register_latency.buckets[16] = 4;
  verbs.register_latency.count = 4;
  verbs.register_latency.sum_seconds = 0.2;
  verbs.figures = {{"windows", 64, false, "memory windows allocated"},
                   {"window_allocations", 70, true, "ibv_alloc_mw calls"}};
  DomainStats odd{"a \"quoted\" \\ name\nwith a newline", DomainKind::kCustom, Pinning::kNone};
  odd.figures = {{"windows", 1, false, "memory windows allocated"}};
  s.domains = {verbs, odd};
  s.grants.connections = 2;
  s.grants.grants = 10;
  s.grants.held_blocks = 3;
  s.grants.held_bytes = 12 * kKiB;
  s.grants.held_ages.blocks = {1, 0, 0, 1, 0, 0, 0, 1};
  s.grants.held_ages.bytes = {4096, 0, 0, 4096, 0, 0, 0, 4096};
  s.grants.held_ages.sum_seconds = 700.5;
  s.grants.figures = {{"verbs_window_binds", 7, true, "memory windows bound for grants"},
                      {"verbs_remote_access_errors", 1, true, "help with \"quotes\" and \\"}};
  HistogramFigure bind{"verbs_window_bind_seconds", "post to completion of a bind", {}};
  bind.histogram.buckets[5] = 7;
  bind.histogram.count = 7;
  bind.histogram.sum_seconds = 0.0002;
  s.grants.histograms = {bind};
  s.growth.seconds_to_first_chunk = 0.01;
  s.growth.growth_latency.buckets[12] = 2;
  s.growth.growth_latency.count = 2;
  s.growth.growth_latency.sum_seconds = 0.006;
  return s;
}

int Running(const char* serve_at) {
  auto domain = std::make_shared<testing::CountingDomain>("fake");
  PoolOptions o;
  o.chunk_size = 2 * kMiB;
  o.budget = 16 * kMiB;
  o.page_size = PageSize::k4K;
  o.populate = false;
  o.numa_node = kNoNumaNode;
  o.domains = {domain};
  absl::StatusOr<std::unique_ptr<Pool>> pool = Pool::Create(o);
  if (!pool.ok()) {
    std::fprintf(stderr, "Pool::Create: %s\n", std::string(pool.status().message()).c_str());
    return 1;
  }
  if (!(*pool)->Reserve(4 * kMiB).ok()) return 1;
  Block a = (*pool)->Allocate(100 * kKiB);
  // Two large blocks: each fills a chunk of its own, the second one grown for it.
  Block b = (*pool)->Allocate(3 * kMiB / 2);
  Block c = (*pool)->Allocate(3 * kMiB / 2);
  if (!a || !b || !c) return 1;
  (*pool)->Deallocate(b);
  (*pool)->Deallocate(c);
  (*pool)->Trim(2 * kMiB);  // gives back the two chunks the large blocks had
  if (serve_at != nullptr) {
    if (absl::Status s = (*pool)->ServeMetrics(serve_at); !s.ok()) {
      std::fprintf(stderr, "ServeMetrics: %s\n", std::string(s.message()).c_str());
      return 1;
    }
    std::puts("serving");
    std::fflush(stdout);
    while (std::getchar() != EOF) {
    }
  } else {
    std::fputs((*pool)->GetStats().ToOpenMetrics().c_str(), stdout);
  }
  (*pool)->Deallocate(a);
  return 0;
}

}  // namespace
}  // namespace pinpool

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "synthetic") == 0) {
    std::fputs(pinpool::Synthetic().ToOpenMetrics().c_str(), stdout);
    return 0;
  }
  if (argc == 2 && std::strcmp(argv[1], "running") == 0) return pinpool::Running(nullptr);
  if (argc == 3 && std::strcmp(argv[1], "serve") == 0) return pinpool::Running(argv[2]);
  std::fprintf(stderr, "usage: %s synthetic|running|serve PATH\n", argv[0]);
  return 2;
}
