// Data moved by a real RDMA device between pool blocks, using nothing but what a Block gives
// (ToSge for the local side, ToRemoteBuffer for the peer's): byte-exact RDMA WRITE and READ
// across block sizes and chunks; a pool registered local-only refusing a peer's WRITE and READ;
// one chunk registered on two PDs of two device contexts, each PD's keys working on its own QPs
// and refused on the other's; and fork: the child cannot touch pool memory, the parent's RDMA
// stays right. Runs in the soft-RoCE guest (two loopback RC QPs on rxe0, rc_pair.h); skips with
// the reason elsewhere unless PINPOOL_REQUIRE_RDMA=1.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <vector>

#include "pinpool/pool.h"
#include "pinpool/verbs.h"
#include "verbs_test_support.h"

namespace pinpool {
namespace {

using testing::Fill;
using testing::FirstMismatch;
using testing::MakePool;
using testing::RcPair;
using testing::StatusName;
using testing::VerbsTest;
using Side = RcPair::Side;

// `n` bytes from the start of a block, as a local scatter/gather entry.
ibv_sge Prefix(const Block& b, std::uint32_t n, std::size_t domain = 0) {
  ibv_sge sge = ToSge(b, domain);
  sge.length = n;
  return sge;
}

// Block sizes from 1 byte to 1.5 MiB in 2 MiB chunks: the large ones cannot share a chunk, so
// the blocks span several registrations. Each WRITE goes from block i to block i+1 (a different
// size, often a different chunk) and each READ brings it back into block i; the bytes beyond the
// transfer must stay untouched on both sides.
TEST_F(VerbsTest, WriteAndReadMoveExactBytesBetweenBlocksOfDifferentSizesAndChunks) {
  std::unique_ptr<Pool> pool = MakePool({domain_}, 2 * kMiB, 16 * kMiB);
  ASSERT_NE(pool, nullptr);
  std::unique_ptr<RcPair> pair = Connect(domain_->pd(), domain_->pd());
  ASSERT_NE(pair, nullptr);

  const std::vector<std::size_t> sizes = {1,       63,          4096,   65536 + 7,  1000,
                                          1200000, 1536 * 1024, 300000, 1536 * 1024};
  std::vector<Block> blocks;
  std::set<std::uint32_t> chunks;
  for (std::size_t size : sizes) {
    blocks.push_back(pool->Allocate(size));
    ASSERT_TRUE(blocks.back()) << size;
    chunks.insert(blocks.back().chunk().index);
  }
  ASSERT_GE(chunks.size(), 3u) << "the blocks should span several chunks";
  int cross_chunk = 0;

  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const Block& src = blocks[i];
    const Block& dst = blocks[(i + 1) % blocks.size()];
    const auto n = static_cast<std::uint32_t>(std::min(src.size(), dst.size()));
    SCOPED_TRACE(::testing::Message()
                 << "block " << i << " (" << src.size() << " B, chunk " << src.chunk().index
                 << ") <-> block " << (i + 1) % blocks.size() << " (" << dst.size() << " B, chunk "
                 << dst.chunk().index << "), " << n << " bytes");
    cross_chunk += src.chunk().index != dst.chunk().index ? 1 : 0;
    const std::uint64_t payload = 100 + i, background = 200 + i;
    Fill(src.data(), src.size(), payload);
    Fill(dst.data(), dst.size(), background);

    EXPECT_WC(IBV_WC_SUCCESS, pair->Write(Side::kA, Prefix(src, n), ToRemoteBuffer(dst)));
    EXPECT_EQ(FirstMismatch(dst.data(), n, payload), -1);
    // Past the transfer: still the background (byte n onwards of the background pattern).
    for (std::size_t k = n; k < dst.size(); ++k) {
      ASSERT_EQ(static_cast<std::uint8_t*>(dst.data())[k], testing::PatternByte(background, k))
          << "byte " << k << " beyond the WRITE changed";
    }

    // READ it back from the other QP into the source block, wiped first.
    Fill(src.data(), src.size(), background + 1000);
    EXPECT_WC(IBV_WC_SUCCESS, pair->Read(Side::kB, Prefix(src, n), ToRemoteBuffer(dst)));
    EXPECT_EQ(FirstMismatch(src.data(), n, payload), -1);
    for (std::size_t k = n; k < src.size(); ++k) {
      ASSERT_EQ(static_cast<std::uint8_t*>(src.data())[k],
                testing::PatternByte(background + 1000, k))
          << "byte " << k << " beyond the READ changed";
    }
  }

  EXPECT_GE(cross_chunk, 2) << "too few transfers between different chunks";

  // Any interior pointer works too: Lookup gives its keys, its address is the remote address.
  const Block& big = blocks[6];
  auto* interior = static_cast<std::uint8_t*>(big.data()) + 777777;
  const std::optional<Location> at = pool->Lookup(interior);
  ASSERT_TRUE(at);
  Fill(blocks[3].data(), 4096, 77);
  EXPECT_WC(IBV_WC_SUCCESS,
            pair->Write(Side::kB, Prefix(blocks[3], 4096),
                        RemoteBuffer{.address = reinterpret_cast<std::uintptr_t>(interior),
                                     .rkey = at->rkey(),
                                     .length = 4096}));
  EXPECT_EQ(FirstMismatch(interior, 4096, 77), -1);
  Fill(interior, 4096, 78);
  EXPECT_WC(IBV_WC_SUCCESS, pair->Read(Side::kA, ToSge(*at, 4096), ToRemoteBuffer(blocks[3])));
  EXPECT_EQ(FirstMismatch(interior, 4096, 77), -1);

  for (const Block& b : blocks) pool->Deallocate(b);
}

// Memfd- and tmpfs-file-backed pools (docs/backing.md) on a verbs domain: every chunk is
// registered (ibv_reg_mr pins shmem pages long-term for write), and an RDMA WRITE loopback from
// an anonymous pool's block into a file-backed block, and a READ back, move exactly the bytes.
TEST_F(VerbsTest, MemfdAndTmpfsFileBackedChunksRegisterAndRdmaWriteAndReadArrive) {
  std::unique_ptr<Pool> source = MakePool({domain_}, 2 * kMiB, 4 * kMiB);
  ASSERT_NE(source, nullptr);
  std::unique_ptr<RcPair> pair = Connect(domain_->pd(), domain_->pd());
  ASSERT_NE(pair, nullptr);
  for (Backing backing :
       {Backing{BackingKind::kMemfd, ""}, Backing{BackingKind::kFiles, "/dev/shm"}}) {
    PoolOptions o;
    o.chunk_size = 2 * kMiB;
    o.budget = 4 * kMiB;
    o.page_size = PageSize::k4K;
    o.domains = {domain_};
    o.backing = backing;
    absl::StatusOr<std::unique_ptr<Pool>> pool = Pool::Create(o);
    ASSERT_TRUE(pool.ok()) << pool.status();
    Block dst = (*pool)->Allocate(256 * 1024);
    Block src = source->Allocate(256 * 1024);
    ASSERT_TRUE(dst && src);
    const std::string what = (*pool)->GetStats().chunks.at(0).backing;
    SCOPED_TRACE(what);
    EXPECT_EQ(what.rfind(backing.kind == BackingKind::kMemfd ? "memfd" : "file /dev/shm/", 0), 0u);
    Fill(src.data(), src.size(), 31);
    Fill(dst.data(), dst.size(), 32);
    EXPECT_WC(IBV_WC_SUCCESS, pair->Write(Side::kA, ToSge(src), ToRemoteBuffer(dst)));
    EXPECT_EQ(FirstMismatch(dst.data(), dst.size(), 31), -1) << "RDMA WRITE into " << what;
    Fill(src.data(), src.size(), 33);
    EXPECT_WC(IBV_WC_SUCCESS, pair->Read(Side::kB, ToSge(src), ToRemoteBuffer(dst)));
    EXPECT_EQ(FirstMismatch(src.data(), src.size(), 31), -1) << "RDMA READ from " << what;
    (*pool)->Deallocate(dst);
    source->Deallocate(src);
  }
}

// A pool whose domain grants no remote access: a peer's RDMA WRITE into it completes with a
// remote access error and changes nothing, and so does a READ. The control is the same
// operation on the same PD and QPs into a pool whose domain allows it, which succeeds.
TEST_F(VerbsTest, ALocalOnlyPoolRefusesRemoteWritesAndReads) {
  absl::StatusOr<std::shared_ptr<VerbsDomain>> local_only = VerbsDomain::Wrap(domain_->pd());
  ASSERT_TRUE(local_only.ok()) << local_only.status();
  ASSERT_EQ((*local_only)->access().ibv_flags(), IBV_ACCESS_LOCAL_WRITE);
  std::unique_ptr<Pool> closed = MakePool({*local_only});
  std::unique_ptr<Pool> open = MakePool({domain_});
  ASSERT_NE(closed, nullptr);
  ASSERT_NE(open, nullptr);
  const Block target = closed->Allocate(8192);
  const Block allowed = open->Allocate(8192);
  const Block source = open->Allocate(8192);
  ASSERT_TRUE(target && allowed && source);
  Fill(target.data(), target.size(), 1);
  Fill(source.data(), source.size(), 2);

  {
    std::unique_ptr<RcPair> pair = Connect(domain_->pd(), domain_->pd());
    ASSERT_NE(pair, nullptr);
    EXPECT_WC(IBV_WC_SUCCESS, pair->Write(Side::kA, Prefix(source, 8192), ToRemoteBuffer(allowed)));
    EXPECT_EQ(FirstMismatch(allowed.data(), 8192, 2), -1) << "control WRITE did not land";
    EXPECT_WC(IBV_WC_REM_ACCESS_ERR,
              pair->Write(Side::kA, Prefix(source, 8192), ToRemoteBuffer(target)));
    EXPECT_EQ(FirstMismatch(target.data(), target.size(), 1), -1)
        << "a refused WRITE changed the target";
  }
  {
    // The error moved the QPs to the error state: a new pair for the READ.
    std::unique_ptr<RcPair> pair = Connect(domain_->pd(), domain_->pd());
    ASSERT_NE(pair, nullptr);
    EXPECT_WC(IBV_WC_REM_ACCESS_ERR,
              pair->Read(Side::kA, Prefix(source, 8192), ToRemoteBuffer(target)));
    EXPECT_EQ(FirstMismatch(source.data(), source.size(), 2), -1)
        << "a refused READ changed the local buffer";
  }
  closed->Deallocate(target);
  open->Deallocate(allowed);
  open->Deallocate(source);
}

// One pool, two verbs domains on two device contexts: every chunk is registered with both PDs,
// and a block carries both registrations' keys. Each PD's keys work on QPs of that PD; an lkey of
// one PD on a QP of the other is a local error, an rkey of the other PD a remote access error (the
// device checks the region's PD against the QP's). A pair across the two PDs moves data with each
// side using its own PD's keys.
TEST_F(VerbsTest, OneChunkOnTwoProtectionDomainsHasKeysThatWorkOnEachPdsQps) {
  std::shared_ptr<VerbsDomain> second =
      OpenDomain({.trusted_whole_chunk = {.read = true, .write = true}});
  ASSERT_NE(second, nullptr);
  ASSERT_NE(second->context(), domain_->context());
  std::unique_ptr<Pool> pool = MakePool({domain_, second});
  ASSERT_NE(pool, nullptr);
  const Block src = pool->Allocate(64 * kKiB);
  const Block dst = pool->Allocate(64 * kKiB);
  ASSERT_TRUE(src && dst);
  ASSERT_EQ(src.domain_count(), 2u);
  EXPECT_EQ(src.keys(0).base, src.keys(1).base) << "both PDs register the same chunk";
  EXPECT_EQ(src.keys(0).length, src.keys(1).length);
  EXPECT_EQ(static_cast<ibv_mr*>(src.keys(0).handle)->pd, domain_->pd());
  EXPECT_EQ(static_cast<ibv_mr*>(src.keys(1).handle)->pd, second->pd());
  const PoolStats stats = pool->GetStats();
  ASSERT_EQ(stats.domains.size(), 2u);
  EXPECT_EQ(stats.domains[0].registrations, stats.growths);
  EXPECT_EQ(stats.domains[1].registrations, stats.growths);

  ibv_pd* pds[2] = {domain_->pd(), second->pd()};
  for (std::size_t d = 0; d < 2; ++d) {
    SCOPED_TRACE(::testing::Message() << "domain " << d);
    std::unique_ptr<RcPair> pair = Connect(pds[d], pds[d]);
    ASSERT_NE(pair, nullptr);
    Fill(src.data(), src.size(), 10 + d);
    Fill(dst.data(), dst.size(), 20 + d);
    EXPECT_WC(IBV_WC_SUCCESS, pair->Write(Side::kA, ToSge(src, d), ToRemoteBuffer(dst, d)));
    EXPECT_EQ(FirstMismatch(dst.data(), dst.size(), 10 + d), -1);
    Fill(dst.data(), dst.size(), 30 + d);
    EXPECT_WC(IBV_WC_SUCCESS, pair->Read(Side::kB, ToSge(src, d), ToRemoteBuffer(dst, d)));
    EXPECT_EQ(FirstMismatch(src.data(), src.size(), 30 + d), -1);
  }

  // Keys of the wrong PD are refused (each on a fresh pair: an error ends a pair).
  {
    std::unique_ptr<RcPair> pair = Connect(pds[0], pds[0]);
    ASSERT_NE(pair, nullptr);
    Fill(dst.data(), dst.size(), 39);
    const absl::StatusOr<ibv_wc_status> wc =
        pair->Write(Side::kA, ToSge(src, 1), ToRemoteBuffer(dst, 0));
    ASSERT_TRUE(wc.ok()) << wc.status();
    // A local error: rxe reports it as a local QP operation error, other devices as a local
    // protection error.
    EXPECT_TRUE(*wc == IBV_WC_LOC_PROT_ERR || *wc == IBV_WC_LOC_QP_OP_ERR)
        << "an lkey of another PD gave: " << StatusName(*wc);
    EXPECT_EQ(FirstMismatch(dst.data(), dst.size(), 39), -1);
  }
  {
    std::unique_ptr<RcPair> pair = Connect(pds[0], pds[0]);
    ASSERT_NE(pair, nullptr);
    Fill(dst.data(), dst.size(), 40);
    EXPECT_WC(IBV_WC_REM_ACCESS_ERR, pair->Write(Side::kA, ToSge(src, 0), ToRemoteBuffer(dst, 1)));
    EXPECT_EQ(FirstMismatch(dst.data(), dst.size(), 40), -1);
  }
  {
    // QP A on the first PD, QP B on the second: A's lkey from domain 0, B's memory by domain 1.
    std::unique_ptr<RcPair> pair = Connect(pds[0], pds[1]);
    ASSERT_NE(pair, nullptr);
    Fill(src.data(), src.size(), 50);
    EXPECT_WC(IBV_WC_SUCCESS, pair->Write(Side::kA, ToSge(src, 0), ToRemoteBuffer(dst, 1)));
    EXPECT_EQ(FirstMismatch(dst.data(), dst.size(), 50), -1);
    Fill(src.data(), src.size(), 51);
    EXPECT_WC(IBV_WC_SUCCESS, pair->Write(Side::kB, ToSge(src, 1), ToRemoteBuffer(dst, 0)));
    EXPECT_EQ(FirstMismatch(dst.data(), dst.size(), 51), -1);
  }
  pool->Deallocate(src);
  pool->Deallocate(dst);
}

// pinpool marks chunks MADV_DONTFORK: a child has no mapping of pool memory, so touching it is
// SIGSEGV; and the parent's pages are never copied away from the device, so after the child is
// gone what the parent's CPU writes is what an RDMA READ sees, and an RDMA WRITE is what the
// parent's CPU reads.
TEST_F(VerbsTest, AForkedChildCannotTouchPoolMemoryAndTheParentsRdmaStaysCorrect) {
  RecordProperty("fork_mode", ForkModeName(QueryForkMode()));
  std::unique_ptr<Pool> pool = MakePool({domain_});
  ASSERT_NE(pool, nullptr);
  const Block shared = pool->Allocate(256 * kKiB);
  const Block other = pool->Allocate(256 * kKiB);
  ASSERT_TRUE(shared && other);
  Fill(shared.data(), shared.size(), 1);
  std::unique_ptr<RcPair> pair = Connect(domain_->pd(), domain_->pd());
  ASSERT_NE(pair, nullptr);
  // The region is in use by the device before the fork.
  EXPECT_WC(IBV_WC_SUCCESS, pair->Read(Side::kB, ToSge(other), ToRemoteBuffer(shared)));
  EXPECT_EQ(FirstMismatch(other.data(), other.size(), 1), -1);

  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    // Write, as a child that reused a buffer would: without MADV_DONTFORK this would succeed
    // on a copy-on-write page.
    static_cast<volatile std::uint8_t*>(shared.data())[100] = 0xEE;
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the child touched pool memory and exited with "
                                   << WEXITSTATUS(status) << ": its chunks are not MADV_DONTFORK";
  EXPECT_EQ(WTERMSIG(status), SIGSEGV);

  // The parent, after the child is gone: CPU writes, the device reads...
  Fill(shared.data(), shared.size(), 2);
  Fill(other.data(), other.size(), 9);
  EXPECT_WC(IBV_WC_SUCCESS, pair->Read(Side::kB, ToSge(other), ToRemoteBuffer(shared)));
  EXPECT_EQ(FirstMismatch(other.data(), other.size(), 2), -1);
  // ...the device writes, the CPU reads.
  Fill(other.data(), other.size(), 3);
  EXPECT_WC(IBV_WC_SUCCESS, pair->Write(Side::kB, ToSge(other), ToRemoteBuffer(shared)));
  EXPECT_EQ(FirstMismatch(shared.data(), shared.size(), 3), -1);
  pool->Deallocate(shared);
  pool->Deallocate(other);
}

}  // namespace
}  // namespace pinpool
