// Arrays on a real device (pinpool/array.h, VerbsRemoteAccess::GrantArray, DescribeGrants): every
// element of a large array carries its chunk's rxe registration, no element straddles a chunk, a
// peer that knows only a descriptor READs and WRITEs exactly the elements at every chunk boundary,
// a 1% subrange is granted on its own and a peer is kept inside it, and a descriptor kept after
// the array was freed fails with a remote access error and changes nothing, for range regions and
// memory windows alike.
//
// Runs in the soft-RoCE guest (rc_pair.h loopback pairs on rxe0): side A is the server, whose
// pool grants; side B is the peer, with its own device context, PD and pool.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "pinpool/descriptor.h"
#include "pinpool/pool.h"
#include "pinpool/verbs.h"
#include "pinpool/verbs_remote_access.h"
#include "verbs_test_support.h"

namespace pinpool {
namespace {

using testing::Fill;
using testing::FirstMismatch;
using testing::MakePool;
using testing::RcPair;
using Side = RcPair::Side;

class ArrayRdmaTest : public testing::ServerAndPeerTest {
 protected:
  void SetUp() override { SetUpServerAndPeer(16 * kMiB); }
  void TearDown() override {
    access_.reset();  // before the QPs and the pool
    pair_.reset();
  }

  std::unique_ptr<VerbsRemoteAccess> MakeAccess(Pool& pool, GrantMechanism mechanism) {
    absl::StatusOr<std::unique_ptr<VerbsRemoteAccess>> a =
        VerbsRemoteAccess::Create(pool, pair_->qp(Side::kA), {.mechanism = mechanism});
    EXPECT_TRUE(a.ok()) << a.status();
    if (!a.ok()) return nullptr;
    VerbsRemoteAccess* raw = a->get();
    pair_->SetCompletionHook(Side::kA, [raw](const ibv_wc& wc) { return raw->OnCompletion(wc); });
    return *std::move(a);
  }

  // The peer's view: the descriptor decoded from the bytes it was sent.
  static Descriptor Decode(const std::vector<std::byte>& bytes) {
    absl::StatusOr<Descriptor> d = Descriptor::Decode(bytes);
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *std::move(d) : Descriptor();
  }
  static RemoteBuffer Remote(const Descriptor& d, std::uint64_t i, std::uint32_t length) {
    const std::optional<RemoteElement> e = d.Element(i);
    EXPECT_TRUE(e.has_value()) << i;
    return {.address = e ? e->address : 0,
            .rkey = RKey{static_cast<std::uint32_t>(e ? e->keys[0] : 0)},
            .length = length};
  }

  // The peer WRITEs pattern 100 + i into element i (through the descriptor), then READs it back
  // into a zeroed buffer; the server sees exactly those bytes and its neighbours keep theirs.
  void ExpectExactElement(const Array& a, const Descriptor& d, std::uint64_t i,
                          std::uint64_t array_index) {
    const std::size_t n = a.element_size();
    const Block e = a.Element(array_index);
    const Block before = a.Element(array_index - 1);
    const Block after = a.Element(array_index + 1);
    if (before) Fill(before.data(), n, 1);
    if (after) Fill(after.data(), n, 2);
    ASSERT_WC(IBV_WC_SUCCESS, pair_->Write(Side::kB, PeerBuffer(n, 100 + i),
                                           Remote(d, i, static_cast<std::uint32_t>(n))));
    EXPECT_EQ(FirstMismatch(e.data(), n, 100 + i), -1) << "element " << array_index;
    if (before) {
      EXPECT_EQ(FirstMismatch(before.data(), n, 1), -1) << "before " << array_index;
    }
    if (after) {
      EXPECT_EQ(FirstMismatch(after.data(), n, 2), -1) << "after " << array_index;
    }
    Fill(e.data(), n, 200 + i);
    const ibv_sge back = PeerBuffer(n, 0);
    std::memset(peer_buf_.data(), 0, n);
    ASSERT_WC(IBV_WC_SUCCESS,
              pair_->Read(Side::kB, back, Remote(d, i, static_cast<std::uint32_t>(n))));
    EXPECT_EQ(FirstMismatch(peer_buf_.data(), n, 200 + i), -1) << "read " << array_index;
  }

  std::unique_ptr<VerbsRemoteAccess> access_;
};

// 2 GiB of 4 KiB pages (524,288 of them) in 32 MiB chunks (64 registrations; this test's guest
// has 3 GiB: tests/providers/verbs/CMakeLists.txt): every element's keys are its chunk's rxe region
// (the ibv_mr the domain made), as Lookup says; a peer with one descriptor reaches the elements on
// both sides of every chunk boundary exactly.
TEST_F(ArrayRdmaTest, ALargeArraysElementsCarryTheirChunksRegionAndArePeerReachableAtBoundaries) {
  auto domain = OpenDomain({});
  ASSERT_NE(domain, nullptr);
  std::unique_ptr<Pool> pool = MakePool({domain}, 32 * kMiB, 2 * kGiB);
  ASSERT_NE(pool, nullptr);
  constexpr std::size_t kCount = 2 * kGiB / (4 * kKiB);
  absl::StatusOr<Array> a = pool->AllocateArray(kCount, 4 * kKiB, 4 * kKiB);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->runs().size(), 64u);
  const std::size_t per = a->elements_per_chunk();
  ASSERT_EQ(per, 8192u);
  for (std::size_t i = 0; i < kCount; ++i) {
    const Block e = a->Element(i);
    const std::optional<Location> first = pool->Lookup(e.data());
    const std::optional<Location> last = pool->Lookup(static_cast<char*>(e.data()) + e.size() - 1);
    ASSERT_TRUE(first && last) << i;
    ASSERT_EQ(&first->chunk(), &last->chunk()) << "element " << i << " straddles a chunk";
    const auto* mr = static_cast<const ibv_mr*>(e.keys().handle);
    ASSERT_NE(mr, nullptr) << i;
    ASSERT_EQ(ToUnderlying(e.lkey()), mr->lkey) << i;
    ASSERT_EQ(ToUnderlying(e.rkey()), mr->rkey) << i;
    ASSERT_EQ(ToUnderlying(e.lkey()), ToUnderlying(first->lkey())) << i;
    ASSERT_GE(reinterpret_cast<std::uintptr_t>(e.data()),
              reinterpret_cast<std::uintptr_t>(mr->addr));
    ASSERT_LE(reinterpret_cast<std::uintptr_t>(e.data()) + e.size(),
              reinterpret_cast<std::uintptr_t>(mr->addr) + mr->length)
        << i;
  }
  // A pair on this pool's own PD for the grants.
  pair_ = Connect(domain->pd(), peer_domain_->pd());
  ASSERT_NE(pair_, nullptr);
  access_ = MakeAccess(*pool, GrantMechanism::kAuto);
  ASSERT_NE(access_, nullptr);
  absl::StatusOr<std::vector<RemoteGrant>> grants =
      access_->GrantArray(*a, {.read = true, .write = true});
  ASSERT_TRUE(grants.ok()) << grants.status();
  EXPECT_EQ(grants->size(), 64u) << "one grant per chunk run, not per element";
  const std::vector<std::byte> bytes = DescribeGrants(*a, *grants).value();
  EXPECT_EQ(bytes.size(), kDescriptorHeaderBytes + 64 * DescriptorRunBytes(1));
  const Descriptor d = Decode(bytes);
  ASSERT_EQ(d.size(), kCount);
  for (std::size_t boundary = per; boundary < kCount; boundary += 5 * per) {
    ExpectExactElement(*a, d, boundary - 1, boundary - 1);
    ExpectExactElement(*a, d, boundary, boundary);
  }
  ExpectExactElement(*a, d, 0, 0);
  ExpectExactElement(*a, d, kCount - 1, kCount - 1);
  access_.reset();  // revokes every grant
  pool->Deallocate(std::move(*a));
}

// 1% of an array whose element (3000 bytes) does not divide the chunk, straddling a chunk
// boundary: two grants, a descriptor of 20 elements; the peer writes each of them exactly, and
// one element before the subrange is refused (a range region keeps the peer inside it).
TEST_F(ArrayRdmaTest, AOnePercentSubrangeIsGrantedOnItsOwnAndThePeerStaysInside) {
  absl::StatusOr<Array> a = server_->AllocateArray(2000, 3000, 8);
  ASSERT_TRUE(a.ok()) << a.status();
  const std::size_t per = a->elements_per_chunk();  // 699 in 2 MiB
  const std::size_t first = per - 10;
  access_ = MakeAccess(*server_, GrantMechanism::kAuto);
  ASSERT_NE(access_, nullptr);
  absl::StatusOr<std::vector<RemoteGrant>> grants =
      access_->GrantArray(*a, {.read = true, .write = true}, first, 20);
  ASSERT_TRUE(grants.ok()) << grants.status();
  ASSERT_EQ(grants->size(), 2u);
  EXPECT_TRUE((*grants)[0].range_enforced) << "kAuto picks an isolating mechanism";
  EXPECT_EQ((*grants)[0].length, 10u * 3000);
  const Descriptor d = Decode(DescribeGrants(*a, *grants).value());
  ASSERT_EQ(d.size(), 20u);
  for (std::uint64_t i = 0; i < 20; ++i) ExpectExactElement(*a, d, i, first + i);
  EXPECT_THAT(access_->GrantArray(*a, {.read = true}, 2000, 1).status().message(),
              ::testing::HasSubstr("elements [2000"));
  // The element before the subrange: its address with the first run's key.
  const Block outside = a->Element(first - 1);
  Fill(outside.data(), 3000, 7);
  RemoteBuffer stray = Remote(d, 0, 3000);
  stray.address -= 3000;
  ASSERT_WC(IBV_WC_REM_ACCESS_ERR, pair_->Write(Side::kB, PeerBuffer(3000, 8), stray));
  EXPECT_EQ(FirstMismatch(outside.data(), 3000, 7), -1);
  access_->RevokeAllNow();  // the QP is in error now
  server_->Deallocate(std::move(*a));
}

class StaleArrayDescriptorTest : public ArrayRdmaTest,
                                 public ::testing::WithParamInterface<GrantMechanism> {};

// The array is freed while granted: its runs are held until every revocation completed, then a
// new array takes the chunks; the peer's old descriptor fails with a remote access error and the
// new array's bytes are untouched.
TEST_P(StaleArrayDescriptorTest, AStaleDescriptorAfterFreeFailsAndChangesNothing) {
  access_ = MakeAccess(*server_, GetParam());
  ASSERT_NE(access_, nullptr);
  absl::StatusOr<Array> a = server_->AllocateArray(1024, 4096, 4096);  // 2 chunks of 2 MiB
  ASSERT_TRUE(a.ok()) << a.status();
  absl::StatusOr<std::vector<RemoteGrant>> grants = access_->GrantArray(*a, {.write = true});
  ASSERT_TRUE(grants.ok()) << grants.status();
  ASSERT_EQ(grants->size(), 2u);
  const Descriptor d = Decode(DescribeGrants(*a, *grants).value());
  ASSERT_WC(IBV_WC_SUCCESS, pair_->Write(Side::kB, PeerBuffer(4096, 1), Remote(d, 600, 4096)));
  const std::vector<const void*> old_runs = {a->runs()[0].base, a->runs()[1].base};
  server_->Deallocate(std::move(*a));
  const absl::Status ended = pair_->PollUntil(Side::kA, [&] {
    return std::all_of(grants->begin(), grants->end(),
                       [&](const RemoteGrant& g) { return access_->Ended(g); });
  });
  ASSERT_TRUE(ended.ok()) << ended;
  EXPECT_EQ(server_->GetStats().grants.held_blocks, 0u) << "every run released";
  // A new array: it reuses the freed chunks (nothing else is free in this pool's first chunks).
  absl::StatusOr<Array> b = server_->AllocateArray(1024, 4096, 4096);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(b->runs()[0].base == old_runs[0] || b->runs()[0].base == old_runs[1] ||
              b->runs()[1].base == old_runs[0] || b->runs()[1].base == old_runs[1])
      << "the new array should reuse a freed chunk for the test to mean something";
  for (const ArrayRun& run : b->runs()) Fill(run.base, run.count * 4096, 9);
  ASSERT_WC(IBV_WC_REM_ACCESS_ERR,
            pair_->Write(Side::kB, PeerBuffer(4096, 3), Remote(d, 600, 4096)));
  for (const ArrayRun& run : b->runs()) {
    EXPECT_EQ(FirstMismatch(run.base, run.count * 4096, 9), -1) << "a stale write landed";
  }
  access_->RevokeAllNow();  // the QP is in error now
  server_->Deallocate(std::move(*b));
}

INSTANTIATE_TEST_SUITE_P(Mechanisms, StaleArrayDescriptorTest,
                         ::testing::Values(GrantMechanism::kRegion, GrantMechanism::kWindow),
                         [](const ::testing::TestParamInfo<GrantMechanism>& info) {
                           return std::string(GrantMechanismName(info.param));
                         });

}  // namespace
}  // namespace pinpool
