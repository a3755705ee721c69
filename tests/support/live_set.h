// Live blocks by address, across threads: tells a test whether a block handed out overlaps one
// still held (a block handed out twice). Only touched outside allocator calls.
#ifndef PINPOOL_TESTS_SUPPORT_LIVE_SET_H_
#define PINPOOL_TESTS_SUPPORT_LIVE_SET_H_

#include <cstdint>
#include <iterator>
#include <map>
#include <mutex>

#include "pinpool/block.h"

namespace pinpool::testing {

class LiveSet {
 public:
  // Adds b; false (and b not added) if [data, data + size) overlaps a block in the set.
  bool Insert(const Block& b) {
    const auto start = reinterpret_cast<std::uintptr_t>(b.data());
    std::lock_guard<std::mutex> lock(mu_);
    auto next = spans_.lower_bound(start);
    if (next != spans_.end() && next->first < start + b.size()) return false;
    if (next != spans_.begin() && std::prev(next)->second > start) return false;
    spans_.emplace(start, start + b.size());
    return true;
  }
  void Erase(const Block& b) {
    std::lock_guard<std::mutex> lock(mu_);
    spans_.erase(reinterpret_cast<std::uintptr_t>(b.data()));
  }

 private:
  std::mutex mu_;
  std::map<std::uintptr_t, std::uintptr_t> spans_;  // start -> end
};

}  // namespace pinpool::testing

#endif  // PINPOOL_TESTS_SUPPORT_LIVE_SET_H_
