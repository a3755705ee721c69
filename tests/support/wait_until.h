// Polling a condition another thread or process makes true, with a deadline: for tests that
// wait for background work (a lease pass, a growth, a client's first write) instead of sleeping
// a fixed time that a loaded machine may not honour.
#ifndef PINPOOL_TESTS_SUPPORT_WAIT_UNTIL_H_
#define PINPOOL_TESTS_SUPPORT_WAIT_UNTIL_H_

#include <chrono>
#include <thread>

namespace pinpool::testing {

// Calls `done` until it returns true or `timeout` has passed, sleeping `step` between calls;
// returns its last answer.
template <typename Done>
bool WaitUntil(Done done, std::chrono::milliseconds timeout,
               std::chrono::milliseconds step = std::chrono::milliseconds(1)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return done();
    std::this_thread::sleep_for(step);
  }
  return true;
}

}  // namespace pinpool::testing

#endif  // PINPOOL_TESTS_SUPPORT_WAIT_UNTIL_H_
