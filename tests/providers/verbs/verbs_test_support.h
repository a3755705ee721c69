// What every RDMA test needs: a device or a stated reason, pools on verbs domains, and byte
// patterns to prove data moved exactly.
//
// VerbsTest (fixture) opens a verbs domain on the first ACTIVE device in SetUp. Without one, the
// test is skipped with the reason and how to get a device (scripts/softroce/run-in-guest.sh),
// unless PINPOOL_REQUIRE_RDMA=1 (scripts/test.sh, CI, and every run inside the guest), which
// turns that skip into a failure: the suite may never pass by not running.
#ifndef PINPOOL_TESTS_RDMA_VERBS_TEST_SUPPORT_H_
#define PINPOOL_TESTS_RDMA_VERBS_TEST_SUPPORT_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "pinpool/pool.h"
#include "pinpool/verbs.h"
#include "rc_pair.h"
#include "support/make_pool.h"

namespace pinpool::testing {

inline constexpr const char* kHowToGetADevice = "run through scripts/softroce/run-in-guest.sh";

inline bool RdmaRequired() {
  const char* v = std::getenv("PINPOOL_REQUIRE_RDMA");
  return v != nullptr && std::string(v) == "1";
}

// Open's answers that mean "no usable device here", as opposed to a broken one.
inline bool IsNoDevice(const absl::Status& s) {
  return absl::IsNotFound(s) || absl::IsUnavailable(s) || absl::IsPermissionDenied(s);
}

class VerbsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::shared_ptr<VerbsDomain>> d =
        VerbsDomain::Open({.access = {.trusted_whole_chunk = {.read = true, .write = true}}});
    if (!d.ok()) {
      if (IsNoDevice(d.status()) && !RdmaRequired()) {
        GTEST_SKIP() << d.status().message() << ": " << kHowToGetADevice;
      }
      FAIL() << "no usable RDMA device" << (RdmaRequired() ? " and PINPOOL_REQUIRE_RDMA=1" : "")
             << ": " << d.status();
    }
    domain_ = *std::move(d);
  }

  // Another domain on the same device as domain_ (its own context and PD).
  std::shared_ptr<VerbsDomain> OpenDomain(const VerbsAccess& access) {
    absl::StatusOr<std::shared_ptr<VerbsDomain>> d =
        VerbsDomain::Open({.device = domain_->device_name(), .access = access});
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *std::move(d) : nullptr;
  }

  // A loopback pair of QPs, A on pd_a and B on pd_b.
  std::unique_ptr<RcPair> Connect(ibv_pd* pd_a, ibv_pd* pd_b) {
    absl::StatusOr<std::unique_ptr<RcPair>> pair = RcPair::Connect(pd_a, pd_b);
    EXPECT_TRUE(pair.ok()) << pair.status();
    return pair.ok() ? *std::move(pair) : nullptr;
  }

  std::shared_ptr<VerbsDomain> domain_;  // remote read and write allowed
};

// A small pool (chunks of `chunk_size`, emulated CPUs are slow) on the given domains.
inline std::unique_ptr<Pool> MakePool(std::vector<std::shared_ptr<Domain>> domains,
                                      std::size_t chunk_size = 2 * kMiB,
                                      std::size_t budget = 16 * kMiB,
                                      std::size_t initial_size = 0) {
  return testing::MakePool({.chunk_size = chunk_size,
                            .budget = budget,
                            .initial_size = initial_size,
                            .page_size = PageSize::kTransparent,
                            .domains = std::move(domains)});
}

// Byte i of the pattern `seed` (different for every offset and seed, never all-zero).
inline std::uint8_t PatternByte(std::uint64_t seed, std::size_t i) {
  std::uint64_t x = (seed + 1) * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return static_cast<std::uint8_t>(x ^ (x >> 8));
}
inline void Fill(void* p, std::size_t n, std::uint64_t seed) {
  auto* b = static_cast<std::uint8_t*>(p);
  for (std::size_t i = 0; i < n; ++i) b[i] = PatternByte(seed, i);
}
// Index of the first byte that differs from the pattern, or -1 if all match.
inline long long FirstMismatch(const void* p, std::size_t n, std::uint64_t seed) {
  const auto* b = static_cast<const std::uint8_t*>(p);
  for (std::size_t i = 0; i < n; ++i) {
    if (b[i] != PatternByte(seed, i)) return static_cast<long long>(i);
  }
  return -1;
}

// A server and a peer for remote-access tests: each its own local-only verbs domain (grants are
// the only way into the server's memory) and pool (2 MiB chunks; the server's budget as asked),
// and a loopback RC pair, A on the server's PD and B on the peer's. Fixtures set their own
// completion hooks and reset what uses the QPs before TearDown resets the pair.
class ServerAndPeerTest : public VerbsTest {
 protected:
  void SetUpServerAndPeer(std::size_t server_budget) {
    VerbsTest::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    server_domain_ = OpenDomain({});
    peer_domain_ = OpenDomain({});
    ASSERT_TRUE(server_domain_ && peer_domain_);
    server_ = MakePool({server_domain_}, 2 * kMiB, server_budget, 2 * kMiB);
    peer_ = MakePool({peer_domain_}, 2 * kMiB, 16 * kMiB, 2 * kMiB);
    ASSERT_TRUE(server_ && peer_);
    pair_ = Connect(server_domain_->pd(), peer_domain_->pd());
    ASSERT_NE(pair_, nullptr);
  }

  // A peer buffer of `n` bytes holding pattern `seed` (one block of the peer's pool, reused).
  ibv_sge PeerBuffer(std::size_t n, std::uint64_t seed) {
    if (!peer_buf_ || peer_buf_.size() < n) {
      if (peer_buf_) peer_->Deallocate(peer_buf_);
      peer_buf_ = peer_->Allocate(std::max<std::size_t>(n, 64 * kKiB));
    }
    Fill(peer_buf_.data(), n, seed);
    ibv_sge sge = ToSge(peer_buf_);
    sge.length = static_cast<std::uint32_t>(n);
    return sge;
  }

  std::shared_ptr<VerbsDomain> server_domain_, peer_domain_;
  std::unique_ptr<Pool> server_, peer_;
  std::unique_ptr<RcPair> pair_;
  Block peer_buf_;  // PeerBuffer's
};

}  // namespace pinpool::testing

// That an operation's StatusOr<ibv_wc_status> (RcPair) is OK and holds the expected completion
// status, naming the one it got.
#define PINPOOL_WC_(assertion, expected, got)                                            \
  do {                                                                                   \
    const absl::StatusOr<ibv_wc_status> wc_ = (got);                                     \
    ASSERT_TRUE(wc_.ok()) << wc_.status();                                               \
    assertion(*wc_, expected) << "completion: " << ::pinpool::testing::StatusName(*wc_); \
  } while (false)
#define EXPECT_WC(expected, got) PINPOOL_WC_(EXPECT_EQ, expected, got)
#define ASSERT_WC(expected, got) PINPOOL_WC_(ASSERT_EQ, expected, got)

#endif  // PINPOOL_TESTS_RDMA_VERBS_TEST_SUPPORT_H_
