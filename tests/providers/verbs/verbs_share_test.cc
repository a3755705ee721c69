// Sharing and warm restart on a real RDMA device (soft-RoCE in the guest; docs/sharing.md):
//  - a client process with no verbs attaches a memfd pool, fills the blocks it is handed, and the
//    owner sends them to a peer with RDMA WRITE, every byte checked; the client is killed mid-run
//    and the owner's pool, its registrations and its other blocks go on;
//  - a pool of 1 GiB of blocks, some granted to a peer, is quiesced (the peer's access through the
//    old grant fails), handed over on a Unix socket and its owner destroyed; the successor adopts
//    it with its own verbs domain, re-claims the live blocks, and the peer READs the same bytes
//    through new grants. (Adopt against a cold Create, timed: bench/handover_benchmark.cc.)
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "os/fd_passing.h"
#include "pinpool/pool.h"
#include "pinpool/share.h"
#include "pinpool/verbs.h"
#include "pinpool/verbs_remote_access.h"
#include "support/child_process.h"
#include "support/socket_pair.h"
#include "verbs_test_support.h"

namespace pinpool {
namespace {

using internal::os::UniqueFd;
using testing::Fill;
using testing::FirstMismatch;
using testing::MakePool;
using testing::RcPair;
using testing::SocketPair;
using testing::StatusName;
using testing::VerbsTest;
using Side = RcPair::Side;
using Clock = std::chrono::steady_clock;

PoolOptions MemfdOptions(std::vector<std::shared_ptr<Domain>> domains, std::size_t chunk,
                         std::size_t budget, std::size_t initial) {
  PoolOptions o;
  o.chunk_size = chunk;
  o.budget = budget;
  o.initial_size = initial;
  o.page_size = PageSize::kTransparent;
  o.backing.kind = BackingKind::kMemfd;
  o.domains = std::move(domains);
  return o;
}

bool SendAll(int fd, const void* p, std::size_t n) {
  return ::send(fd, p, n, MSG_NOSIGNAL) == static_cast<ssize_t>(n);
}
bool ReceiveAll(int fd, void* p, std::size_t n) {
  return ::recv(fd, p, n, MSG_WAITALL) == static_cast<ssize_t>(n);
}

TEST_F(VerbsTest, AClientWithoutVerbsFillsBlocksTheOwnerWritesToAPeerAndMayDieMidRun) {
  auto owner = Pool::Create(MemfdOptions({domain_}, 2 * kMiB, 16 * kMiB, 4 * kMiB));
  ASSERT_TRUE(owner.ok()) << owner.status();
  std::unique_ptr<Pool> peer = MakePool({domain_}, 2 * kMiB, 16 * kMiB);
  ASSERT_NE(peer, nullptr);
  std::unique_ptr<RcPair> pair = Connect(domain_->pd(), domain_->pd());
  ASSERT_NE(pair, nullptr);
  constexpr std::size_t kBlocks = 6;
  const std::size_t sizes[kBlocks] = {64, 4096, 65536, 300000, 1 << 20, 12345};
  std::vector<Block> blocks;
  std::vector<BlockHandle> handles;
  for (std::size_t size : sizes) {
    blocks.push_back((*owner)->Allocate(size));
    ASSERT_TRUE(blocks.back());
    handles.push_back(*(*owner)->HandleOf(blocks.back()));
  }
  Block scratch = (*owner)->Allocate(65536);  // the one the client writes until it dies
  Block kept = (*owner)->Allocate(65536);     // the owner's own, never handed out
  ASSERT_TRUE(scratch && kept);
  Fill(kept.data(), kept.size(), 99);
  const BlockHandle scratch_handle = *(*owner)->HandleOf(scratch);

  SocketPair s;
  // The client: no verbs, no pool. Maps the chunks, fills what it is handed, says so, then
  // writes the scratch block until it is killed.
  testing::ChildProcess child = testing::AttachedChild(s, [&](Attachment& att, int socket) {
    BlockHandle got[kBlocks];
    if (!ReceiveAll(socket, got, sizeof got)) return 3;
    for (std::size_t i = 0; i < kBlocks; ++i) {
      absl::StatusOr<std::span<std::byte>> v = att.Map(got[i]);
      if (!v.ok()) return 4;
      Fill(v->data(), v->size(), 10 + i);
    }
    const char done = 'd';
    if (!SendAll(socket, &done, 1)) return 5;
    std::span<std::byte> v = *att.Map(scratch_handle);
    for (std::uint64_t round = 0;; ++round) Fill(v.data(), v.size(), round);
    return 0;
  });
  s.b.reset();
  ASSERT_TRUE((*owner)->Share(s.a.get()).ok());
  ASSERT_TRUE(SendAll(s.a.get(), handles.data(), handles.size() * sizeof(BlockHandle)));
  char done = 0;
  ASSERT_TRUE(ReceiveAll(s.a.get(), &done, 1));
  EXPECT_EQ((*owner)->GetStats().sharing.attached_processes, 1u);
  for (std::size_t i = 0; i < kBlocks; ++i) {
    Block dst = peer->Allocate(blocks[i].size());
    ASSERT_TRUE(dst);
    std::memset(dst.data(), 0, dst.size());
    EXPECT_WC(IBV_WC_SUCCESS, pair->Write(Side::kA, ToSge(blocks[i]), ToRemoteBuffer(dst)));
    EXPECT_EQ(FirstMismatch(dst.data(), dst.size(), 10 + i), -1) << "block " << i;
    peer->Deallocate(dst);
  }
  const int status = child.Kill();  // mid-write of the scratch block
  ASSERT_TRUE(WIFSIGNALED(status)) << "the client ended on its own: " << status;
  // The owner's pool goes on: its own block, its registrations (a WRITE from it arrives), growth.
  EXPECT_EQ(FirstMismatch(kept.data(), kept.size(), 99), -1);
  Block dst = peer->Allocate(kept.size());
  EXPECT_WC(IBV_WC_SUCCESS, pair->Write(Side::kA, ToSge(kept), ToRemoteBuffer(dst)));
  EXPECT_EQ(FirstMismatch(dst.data(), dst.size(), 99), -1);
  EXPECT_EQ((*owner)->GetStats().sharing.attached_processes, 0u);
  ASSERT_TRUE((*owner)->Reserve(8 * kMiB).ok());
  peer->Deallocate(dst);
  for (const Block& b : blocks) (*owner)->Deallocate(b);
  (*owner)->Deallocate(scratch);
  (*owner)->Deallocate(kept);
}

// A pool of `total` bytes of 1 MiB blocks, each page stamped; some fully patterned.
struct FilledPool {
  std::unique_ptr<Pool> pool;
  std::vector<Block> blocks;
  std::vector<BlockHandle> live;
};
void Stamp(const Block& b, std::size_t i) {
  for (std::size_t off = 0; off < b.size(); off += 4096) {
    std::uint64_t v = i * 1000003 + off;
    std::memcpy(static_cast<char*>(b.data()) + off, &v, sizeof v);
  }
}
long long FirstBadStamp(const void* p, std::size_t size, std::size_t i) {
  for (std::size_t off = 0; off < size; off += 4096) {
    std::uint64_t v;
    std::memcpy(&v, static_cast<const char*>(p) + off, sizeof v);
    if (v != i * 1000003 + off) return static_cast<long long>(off);
  }
  return -1;
}

class VerbsWarmRestart : public VerbsTest {
 protected:
  static constexpr std::size_t kChunk = 32 * kMiB;
  PoolOptions Options(std::shared_ptr<Domain> d, std::size_t total) {
    return MemfdOptions({std::move(d)}, kChunk, total + kChunk, total);
  }

  // The peer's connection to a pool (A on the pool's PD, B on the peer's) and the pool's grant
  // mechanism on it.
  struct PeerLink {
    std::unique_ptr<RcPair> pair;
    std::unique_ptr<VerbsRemoteAccess> access;
  };
  PeerLink Link(Pool& pool, VerbsDomain& pool_domain, VerbsDomain& peer_domain) {
    PeerLink link;
    link.pair = Connect(pool_domain.pd(), peer_domain.pd());
    if (link.pair == nullptr) return link;
    auto access = VerbsRemoteAccess::Create(pool, link.pair->qp(Side::kA), {});
    EXPECT_TRUE(access.ok()) << access.status();
    if (!access.ok()) return link;
    link.access = *std::move(access);
    VerbsRemoteAccess* raw = link.access.get();
    link.pair->SetCompletionHook(Side::kA,
                                 [raw](const ibv_wc& wc) { return raw->OnCompletion(wc); });
    return link;
  }
  // Grants `block` to the peer for reading and READs it into `into` (zeroed first): the grant,
  // or why there is none or the READ did not complete.
  absl::StatusOr<RemoteGrant> GrantAndRead(PeerLink& link, const Block& block, const Block& into) {
    absl::StatusOr<RemoteGrant> grant = link.access->Grant(block, {.read = true});
    if (!grant.ok()) return grant.status();
    std::memset(into.data(), 0, into.size());
    absl::StatusOr<ibv_wc_status> wc = link.pair->Read(Side::kB, ToSge(into), grant->remote());
    if (!wc.ok()) return wc.status();
    if (*wc != IBV_WC_SUCCESS) return absl::InternalError(StatusName(*wc));
    return grant;
  }
};

TEST_F(VerbsWarmRestart, ThePeerReadsTheSameBytesThroughNewGrantsAfterAHandover) {
  constexpr std::size_t kTotal = 1 * kGiB;
  constexpr std::size_t kBlock = 1 * kMiB;
  std::shared_ptr<VerbsDomain> a_domain = OpenDomain({});
  std::shared_ptr<VerbsDomain> peer_domain = OpenDomain({});
  ASSERT_TRUE(a_domain && peer_domain);
  std::unique_ptr<Pool> peer = MakePool({peer_domain}, 2 * kMiB, 16 * kMiB, 2 * kMiB);
  auto a = Pool::Create(Options(a_domain, kTotal));
  ASSERT_TRUE(a.ok()) << a.status();
  std::vector<Block> blocks;
  std::vector<BlockHandle> live;
  for (Block b; blocks.size() * kBlock < kTotal * 3 / 4 && (b = (*a)->Allocate(kBlock));) {
    Stamp(b, blocks.size());
    blocks.push_back(b);
    live.push_back(*(*a)->HandleOf(b));
  }
  ASSERT_GE(blocks.size(), 700u);
  const std::size_t granted[] = {0, 1, blocks.size() / 2, blocks.size() - 1};
  for (std::size_t g : granted) Fill(blocks[g].data(), kBlock, g);

  SocketPair s;
  std::vector<RemoteGrant> old_grants;
  {
    PeerLink link = Link(**a, *a_domain, *peer_domain);
    ASSERT_TRUE(link.access != nullptr);
    Block into = peer->Allocate(kBlock);
    for (std::size_t g : granted) {
      absl::StatusOr<RemoteGrant> grant = GrantAndRead(link, blocks[g], into);
      ASSERT_TRUE(grant.ok()) << grant.status();
      old_grants.push_back(*grant);
      EXPECT_EQ(FirstMismatch(into.data(), kBlock, g), -1) << "before: block " << g;
    }
    EXPECT_EQ((*a)->Quiesce().code(), absl::StatusCode::kFailedPrecondition);  // grants live
    link.access.reset();                                                       // ends every grant
    ASSERT_TRUE((*a)->Quiesce().ok());
    // The peer's next access through an old grant fails.
    EXPECT_WC(IBV_WC_REM_ACCESS_ERR,
              link.pair->Read(Side::kB, ToSge(into), old_grants[0].remote()));
    peer->Deallocate(into);
  }
  const auto handover_start = Clock::now();
  ASSERT_TRUE((*a)->HandOver(s.a.get(), live).ok());
  a->reset();  // the predecessor is gone: its pool, then its device context
  a_domain.reset();

  std::shared_ptr<VerbsDomain> b_domain = OpenDomain({});
  ASSERT_NE(b_domain, nullptr);
  const auto adopt_start = Clock::now();
  auto b = Pool::Adopt(Options(b_domain, kTotal), s.b.get());
  ASSERT_TRUE(b.ok()) << b.status();
  absl::StatusOr<Block> first = (*b)->Claim(live[0]);
  const auto first_block = Clock::now();
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE((*b)->AwaitInitialSize(std::chrono::minutes(5)).ok());
  const auto all_registered = Clock::now();
  const auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  std::printf(
      "warm restart of %zu MiB (%zu blocks): handover %.1f ms, adopt to first block "
      "%.1f ms, to all registered %.1f ms\n",
      kTotal >> 20, live.size(), ms(adopt_start - handover_start), ms(first_block - adopt_start),
      ms(all_registered - adopt_start));

  std::vector<Block> claimed;
  for (std::size_t i = 0; i < live.size(); ++i) {
    absl::StatusOr<Block> c = (*b)->Claim(live[i]);
    ASSERT_TRUE(c.ok()) << c.status();
    const bool patterned =
        std::find(std::begin(granted), std::end(granted), i) != std::end(granted);
    if (!patterned) {
      ASSERT_EQ(FirstBadStamp(c->data(), kBlock, i), -1) << "block " << i;
    }
    claimed.push_back(*c);
  }
  PeerLink link = Link(**b, *b_domain, *peer_domain);
  ASSERT_TRUE(link.access != nullptr);
  Block into = peer->Allocate(kBlock);
  for (std::size_t g : granted) {
    ASSERT_TRUE(GrantAndRead(link, claimed[g], into).ok());
    EXPECT_EQ(FirstMismatch(into.data(), kBlock, g), -1) << "after: block " << g;
  }
  peer->Deallocate(into);
  link = {};
  for (const Block& c : claimed) (*b)->Deallocate(c);
  EXPECT_EQ((*b)->GetStats().sharing.reclaimed_live_blocks, 0u);
}

// The same across a process boundary: process A (a child with its own device context) fills a
// pool, quiesces it, hands it over and exits; only then does this process adopt it with its own
// verbs domain and the peer READ the handed-over bytes through new grants.
TEST_F(VerbsWarmRestart, APoolHandedOverByAProcessThatExitedIsReadByThePeerThroughNewGrants) {
  constexpr std::size_t kTotal = 128 * kMiB;
  constexpr std::size_t kBlock = 1 * kMiB;
  constexpr std::size_t kBlocks = 64;
  SocketPair s;
  testing::ChildProcess predecessor([&] {
    s.b.reset();
    absl::StatusOr<std::shared_ptr<VerbsDomain>> d = VerbsDomain::Open({});
    if (!d.ok()) return 2;
    auto a = Pool::Create(Options(*d, kTotal));
    if (!a.ok()) return 3;
    std::vector<BlockHandle> live;
    for (std::size_t i = 0; i < kBlocks; ++i) {
      Block b = (*a)->Allocate(kBlock);
      if (!b) return 4;
      Fill(b.data(), b.size(), 100 + i);
      live.push_back(*(*a)->HandleOf(b));
    }
    if (!(*a)->Quiesce().ok() || !(*a)->HandOver(s.a.get(), live).ok()) return 5;
    _exit(0);  // without destroying anything: the kernel closes the descriptors and the context
  });
  s.a.reset();
  ASSERT_TRUE(predecessor.ExitsWith(0)) << "process A: " << predecessor.Wait();

  std::shared_ptr<VerbsDomain> b_domain = OpenDomain({});
  std::shared_ptr<VerbsDomain> peer_domain = OpenDomain({});
  ASSERT_TRUE(b_domain && peer_domain);
  std::unique_ptr<Pool> peer = MakePool({peer_domain}, 2 * kMiB, 16 * kMiB, 2 * kMiB);
  auto b = Pool::Adopt(Options(b_domain, kTotal), s.b.get());
  ASSERT_TRUE(b.ok()) << b.status();
  const std::vector<BlockHandle> live = (*b)->AdoptedBlocks();
  ASSERT_EQ(live.size(), kBlocks);
  PeerLink link = Link(**b, *b_domain, *peer_domain);
  ASSERT_TRUE(link.access != nullptr);
  Block into = peer->Allocate(kBlock);
  std::vector<Block> claimed;
  for (std::size_t i = 0; i < kBlocks; ++i) {
    absl::StatusOr<Block> c = (*b)->Claim(live[i]);
    ASSERT_TRUE(c.ok()) << c.status();
    claimed.push_back(*c);
    ASSERT_TRUE(GrantAndRead(link, *c, into).ok());
    EXPECT_EQ(FirstMismatch(into.data(), kBlock, 100 + i), -1) << "block " << i;
  }
  peer->Deallocate(into);
  link = {};
  for (const Block& c : claimed) (*b)->Deallocate(c);
}

}  // namespace
}  // namespace pinpool
