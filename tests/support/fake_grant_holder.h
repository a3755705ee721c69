// FakeGrantHolder: a remote-access mechanism without a device (pinpool/grant_lock.h), for tests of
// the pool's grant bookkeeping: it records the revocations it is asked for and ends a grant at
// once when `synchronous` (as a range region's deregistration does), else leaves the End to the
// test (as a window's invalidation waits for its completion).
#ifndef PINPOOL_TESTS_SUPPORT_FAKE_GRANT_HOLDER_H_
#define PINPOOL_TESTS_SUPPORT_FAKE_GRANT_HOLDER_H_

#include <cstdint>
#include <map>
#include <vector>

#include "pinpool/grant_lock.h"

namespace pinpool::testing {

class FakeGrantHolder final : public GrantHolder {
 public:
  explicit FakeGrantHolder(bool synchronous) : synchronous_(synchronous) {}
  void RevokeForFree(GrantLock& lock, std::uint64_t id) override {
    revoked.push_back(id);
    if (synchronous_) lock.End(blocks.at(id), *this, id);
  }
  std::vector<std::uint64_t> revoked;
  std::map<std::uint64_t, void*> blocks;  // id -> block, for synchronous ends

 private:
  const bool synchronous_;
};

}  // namespace pinpool::testing

#endif  // PINPOOL_TESTS_SUPPORT_FAKE_GRANT_HOLDER_H_
