// The process's chunks in flight (growth_in_flight.h): three signed atomic totals, which a forked
// child sets back to zero (a parent's claim ended in the parent must not go negative in the
// child: the totals are read clamped at zero).
#include "arena/growth_in_flight.h"

#include <pthread.h>

#include <atomic>
#include <cstdint>

namespace pinpool::internal {
namespace {

struct Totals {
  std::atomic<std::int64_t> pin{0};
  std::atomic<std::int64_t> lock{0};
  std::atomic<std::int64_t> cgroup{0};
};

constinit Totals totals;  // constant-initialized: usable before any constructor runs

void ResetInChild() {
  totals.pin.store(0, std::memory_order_relaxed);
  totals.lock.store(0, std::memory_order_relaxed);
  totals.cgroup.store(0, std::memory_order_relaxed);
}

Totals& TheTotals() {
  [[maybe_unused]] static const int registered = ::pthread_atfork(nullptr, nullptr, ResetInChild);
  return totals;
}

std::size_t Clamped(std::int64_t v) { return v > 0 ? static_cast<std::size_t>(v) : 0; }

std::int64_t Signed(std::size_t v) { return static_cast<std::int64_t>(v); }

}  // namespace

absl::Status ClaimGrowth(const GrowthCharge& chunk,
                         absl::FunctionRef<absl::Status(const GrowthCharge& total)> check) {
  Totals& t = TheTotals();
  const GrowthCharge total{
      Clamped(t.pin.fetch_add(Signed(chunk.pin), std::memory_order_relaxed) + Signed(chunk.pin)),
      Clamped(t.lock.fetch_add(Signed(chunk.lock), std::memory_order_relaxed) + Signed(chunk.lock)),
      Clamped(t.cgroup.fetch_add(Signed(chunk.cgroup), std::memory_order_relaxed) +
              Signed(chunk.cgroup))};
  absl::Status s = check(total);
  if (!s.ok()) UnclaimGrowth(chunk);
  return s;
}

void UnclaimGrowth(const GrowthCharge& chunk) {
  Totals& t = TheTotals();
  t.pin.fetch_sub(Signed(chunk.pin), std::memory_order_relaxed);
  t.lock.fetch_sub(Signed(chunk.lock), std::memory_order_relaxed);
  t.cgroup.fetch_sub(Signed(chunk.cgroup), std::memory_order_relaxed);
}

GrowthCharge GrowthInFlight() {
  Totals& t = TheTotals();
  return {Clamped(t.pin.load(std::memory_order_relaxed)),
          Clamped(t.lock.load(std::memory_order_relaxed)),
          Clamped(t.cgroup.load(std::memory_order_relaxed))};
}

}  // namespace pinpool::internal
