// CountingDomain: a fake registration domain for tests. Hands out unique keys, remembers every
// live registration, and counts calls, so tests can prove when registration happens (never on
// the fast path) and that the keys a block reports are exactly its chunk's. It can be told to
// fail the Nth registration, to test that growth leaves nothing half-registered; to take its time
// (a registration's cost), to hold registrations at a gate until the test opens it, and to allow
// concurrent registration, counting how many ran at once.
#ifndef PINPOOL_TESTS_SUPPORT_COUNTING_DOMAIN_H_
#define PINPOOL_TESTS_SUPPORT_COUNTING_DOMAIN_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "pinpool/domain.h"

namespace pinpool::testing {

class CountingDomain final : public Domain {
 public:
  // `pinning`: what the fake claims to do to the pages (it does nothing to them); the pool's
  // memlock headroom check and stats go by it.
  explicit CountingDomain(std::string name = "counting", Pinning pinning = Pinning::kNone)
      : name_(std::move(name)), pinning_(pinning) {}

  DomainKind kind() const noexcept override { return DomainKind::kCustom; }
  std::string name() const override { return name_; }
  Pinning pinning() const noexcept override { return pinning_; }

  bool concurrent_registration() const noexcept override { return concurrent_; }

  absl::StatusOr<Keys> Register(void* base, std::size_t length) override {
    const int now = in_flight_.fetch_add(1) + 1;
    for (int seen = max_in_flight_.load();
         now > seen && !max_in_flight_.compare_exchange_weak(seen, now);) {
    }
    {
      std::unique_lock<std::mutex> lock(mu_);
      ++waiting_at_gate_;
      gate_cv_.notify_all();
      gate_cv_.wait(lock, [&] { return gate_open_; });
      --waiting_at_gate_;
    }
    if (delay_.count() != 0) std::this_thread::sleep_for(delay_);
    in_flight_.fetch_sub(1);
    std::lock_guard<std::mutex> lock(mu_);
    const std::uint64_t n = ++register_calls_;
    if (fail_at_ != 0 && n == fail_at_) {
      return absl::ResourceExhaustedError("injected registration failure");
    }
    static std::atomic<std::uint32_t> next_key{1};  // unique across all fake domains
    const std::uint32_t key = next_key.fetch_add(1);
    Keys keys;
    keys.base = reinterpret_cast<std::uintptr_t>(base);
    keys.length = length;
    keys.lkey = LKey{0x10000 + key};
    keys.rkey = RKey{0x80000 + key};
    keys.buffer_index = BufferIndex{key};
    live_[keys.base] = keys;
    return keys;
  }

  void Deregister(const Keys& keys) noexcept override {
    std::lock_guard<std::mutex> lock(mu_);
    ++deregister_calls_;
    auto it = live_.find(keys.base);
    if (it == live_.end() || ToUnderlying(it->second.lkey) != ToUnderlying(keys.lkey)) {
      ++bad_deregisters_;
      return;
    }
    live_.erase(it);
  }

  // Fail the n-th Register() call from now on (1 = the next one); 0 = never.
  void FailRegistration(std::uint64_t nth_from_now) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_at_ = nth_from_now == 0 ? 0 : register_calls_ + nth_from_now;
  }

  // Set before the domain is used.
  void set_concurrent(bool concurrent) { concurrent_ = concurrent; }
  void set_delay(std::chrono::microseconds delay) { delay_ = delay; }
  // Registrations ran at most this many at once.
  int max_in_flight() const { return max_in_flight_.load(); }
  // Closed, every Register waits at the gate until it opens.
  void SetGate(bool open) {
    std::lock_guard<std::mutex> lock(mu_);
    gate_open_ = open;
    gate_cv_.notify_all();
  }
  // Waits until `n` registrations wait at the closed gate.
  void AwaitAtGate(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    gate_cv_.wait(lock, [&] { return waiting_at_gate_ >= n; });
  }

  std::uint64_t register_calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return register_calls_;
  }
  std::uint64_t deregister_calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return deregister_calls_;
  }
  std::uint64_t bad_deregisters() const {
    std::lock_guard<std::mutex> lock(mu_);
    return bad_deregisters_;
  }
  std::size_t live_registrations() const {
    std::lock_guard<std::mutex> lock(mu_);
    return live_.size();
  }
  // The keys registered for the chunk starting at `base`, if it is registered.
  bool KeysFor(std::uintptr_t base, Keys* out) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(base);
    if (it == live_.end()) return false;
    *out = it->second;
    return true;
  }

 private:
  const std::string name_;
  const Pinning pinning_;
  mutable std::mutex mu_;
  std::condition_variable gate_cv_;
  bool gate_open_ = true;
  int waiting_at_gate_ = 0;
  bool concurrent_ = false;
  std::chrono::microseconds delay_{0};
  std::atomic<int> in_flight_{0};
  std::atomic<int> max_in_flight_{0};
  std::uint64_t register_calls_ = 0;
  std::uint64_t deregister_calls_ = 0;
  std::uint64_t bad_deregisters_ = 0;
  std::uint64_t fail_at_ = 0;
  std::map<std::uintptr_t, Keys> live_;
};

}  // namespace pinpool::testing

#endif  // PINPOOL_TESTS_SUPPORT_COUNTING_DOMAIN_H_
