// The UCX domain (pinpool/ucx.h) on the host, where UCX has only tcp and shared-memory
// transports (no RDMA device), with the whole context of a real application: a ucp_context, two
// workers (initiator and target), an endpoint between them.
//
// - each chunk is mapped once (the memory handle is per chunk, the same for every block of it,
//   and ucp_mem_query gives back exactly the chunk), its rkey packed once, and only when asked
//   (trusted_whole_chunk); destroying the pool unmaps every chunk;
// - put and get between pool blocks of two pools move every byte (the target's worker is
//   progressed by its own thread: on the host UCX emulates RMA with messages the target handles);
// - the helpers refuse ranges outside the local block or the peer's bytes before posting, keep
//   the caller's request parameters (a completion callback is called) and add the memory handle.
// The same domain on rxe0 (where puts are one-sided RDMA and must register nothing per
// operation) is tested in the guest: ucx_rdma_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "pinpool/pinpool.h"
#include "pinpool/ucx.h"
#include "support/fault_sweep.h"

namespace pinpool {
namespace {

class UcxDomainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_RMA;
    ASSERT_EQ(ucp_init(&params, nullptr, &context_), UCS_OK);
  }
  void TearDown() override {
    if (context_ != nullptr) ucp_cleanup(context_);
  }

  std::unique_ptr<Pool> MakePool(const UcxDomainOptions& o, std::size_t chunks = 2) {
    auto domain = UcxDomain::Wrap(context_, o);
    EXPECT_TRUE(domain.ok()) << domain.status();
    domain_ = *domain;
    PoolOptions options;
    options.chunk_size = 2 * kMiB;
    options.budget = 16 * kMiB;
    options.initial_size = chunks * 2 * kMiB;
    options.page_size = PageSize::kTransparent;
    options.domains = {domain_};
    auto pool = Pool::Create(options);
    EXPECT_TRUE(pool.ok()) << pool.status();
    return pool.ok() ? *std::move(pool) : nullptr;
  }

  ucp_context_h context_ = nullptr;
  std::shared_ptr<UcxDomain> domain_;
};

TEST_F(UcxDomainTest, WrapRefusesANullContext) {
  auto domain = UcxDomain::Wrap(nullptr);
  EXPECT_EQ(domain.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(UcxDomainTest, EachChunkIsMappedOnceAtItsAddressWithOneRkey) {
  std::unique_ptr<Pool> pool = MakePool({.trusted_whole_chunk = true});
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(domain_->total_registrations(), 2u);
  EXPECT_EQ(domain_->kind(), DomainKind::kCustom);
  std::set<const UcxChunk*> chunks;
  for (int i = 0; i < 200; ++i) {
    Block b = pool->Allocate(1 + (i * 997) % 20000);
    ASSERT_TRUE(b);
    const UcxChunk& c = UcxChunkOf(b);
    EXPECT_EQ(c.base, b.chunk().base);
    EXPECT_EQ(c.length, b.chunk().size);
    ASSERT_NE(c.memh, nullptr);
    ASSERT_FALSE(c.rkey().empty());
    chunks.insert(&c);
    ucp_mem_attr_t attr{};
    attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
    ASSERT_EQ(ucp_mem_query(c.memh, &attr), UCS_OK);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(attr.address), c.base);
    EXPECT_EQ(attr.length, c.length);
    auto peer = ToUcxPeerBlock(b);
    ASSERT_TRUE(peer.ok()) << peer.status();
    EXPECT_EQ(peer->address, reinterpret_cast<std::uintptr_t>(b.data()));
    EXPECT_EQ(peer->length, b.size());
    // The chunk's blob, packed once: the same bytes at the same place for every block.
    EXPECT_EQ(peer->packed_rkey.data(), c.packed_rkey);
  }
  // Growth maps the new chunk, once.
  Block big = pool->Allocate(pool->max_block_size());
  Block big2 = pool->Allocate(pool->max_block_size());
  Block big3 = pool->Allocate(pool->max_block_size());
  ASSERT_TRUE(big && big2 && big3);
  EXPECT_EQ(domain_->total_registrations(), pool->GetStats().chunks.size());
  EXPECT_GE(domain_->total_registrations(), 3u);
  EXPECT_LE(chunks.size(), 2u);
  pool.reset();
  EXPECT_EQ(domain_->live_registrations(), 0u);
  EXPECT_EQ(domain_->failed_deregistrations(), 0u);
}

TEST_F(UcxDomainTest, NoRkeyIsPackedUnlessTrustedPeersAreAskedFor) {
  std::unique_ptr<Pool> pool = MakePool({});
  ASSERT_NE(pool, nullptr);
  Block b = pool->Allocate(4096);
  ASSERT_TRUE(b);
  EXPECT_NE(UcxChunkOf(b).memh, nullptr);
  EXPECT_TRUE(UcxChunkOf(b).rkey().empty());
  auto peer = ToUcxPeerBlock(b);
  EXPECT_EQ(peer.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(peer.status().message().find("whole chunk"), std::string::npos) << peer.status();
}

// Why UCX cannot grant one block: a mapping of a range inside a mapped chunk comes back (through
// UCX's registration cache) as the chunk's own handle, with the chunk's rkey. The day this fails,
// UCX maps ranges on their own, and pinpool/ucx.h and docs/providers.md should be revisited.
TEST_F(UcxDomainTest, ARangeInsideAMappedChunkGetsTheChunksOwnMapping) {
  std::unique_ptr<Pool> pool = MakePool({.trusted_whole_chunk = true});
  ASSERT_NE(pool, nullptr);
  Block b = pool->Allocate(4096);
  ASSERT_TRUE(b);
  ucp_mem_map_params_t p{};
  p.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  p.address = b.data();
  p.length = b.size();
  ucp_mem_h inner = nullptr;
  ASSERT_EQ(ucp_mem_map(context_, &p, &inner), UCS_OK);
  ucp_mem_attr_t attr{};
  attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
  ASSERT_EQ(ucp_mem_query(inner, &attr), UCS_OK);
  EXPECT_EQ(inner, UcxChunkOf(b).memh);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(attr.address), b.chunk().base);
  EXPECT_EQ(attr.length, b.chunk().size) << "UCX mapped the block on its own";
  ucp_mem_unmap(context_, inner);
}

// Two workers of one context, the target progressed by its own thread, as a separate process
// would be (on the host, UCX's put and get are messages the target's worker must handle).
class UcxPairTest : public UcxDomainTest {
 protected:
  void SetUp() override {
    UcxDomainTest::SetUp();
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    ASSERT_EQ(ucp_worker_create(context_, &wp, &initiator_), UCS_OK);
    ASSERT_EQ(ucp_worker_create(context_, &wp, &target_), UCS_OK);
    ucp_address_t* address = nullptr;
    std::size_t length = 0;
    ASSERT_EQ(ucp_worker_get_address(target_, &address, &length), UCS_OK);
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep.address = address;
    ASSERT_EQ(ucp_ep_create(initiator_, &ep, &ep_), UCS_OK);
    ucp_worker_release_address(target_, address);
    progress_ = std::thread([this] {
      while (!stop_.load(std::memory_order_relaxed)) ucp_worker_progress(target_);
    });
    // Two pools on one domain: the target's blocks exposed (trusted), the initiator's local.
    auto target_domain = UcxDomain::Wrap(context_, {.trusted_whole_chunk = true});
    auto local_domain = UcxDomain::Wrap(context_, {});
    ASSERT_TRUE(target_domain.ok() && local_domain.ok());
    target_pool_ = MakePoolOn(*target_domain);
    local_pool_ = MakePoolOn(*local_domain);
    ASSERT_TRUE(target_pool_ && local_pool_);
  }

  void TearDown() override {
    rkeys_.clear();
    if (ep_ != nullptr) {
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      p.flags = UCP_EP_CLOSE_FLAG_FORCE;
      UcxWait(initiator_, ucp_ep_close_nbx(ep_, &p)).IgnoreError();
    }
    stop_ = true;
    if (progress_.joinable()) progress_.join();
    target_pool_.reset();
    local_pool_.reset();
    if (initiator_ != nullptr) ucp_worker_destroy(initiator_);
    if (target_ != nullptr) ucp_worker_destroy(target_);
    UcxDomainTest::TearDown();
  }

  std::unique_ptr<Pool> MakePoolOn(std::shared_ptr<UcxDomain> domain) {
    PoolOptions options;
    options.chunk_size = 4 * kMiB;
    options.budget = 16 * kMiB;
    options.initial_size = 4 * kMiB;
    options.page_size = PageSize::kTransparent;
    options.domains = {std::move(domain)};
    auto pool = Pool::Create(options);
    EXPECT_TRUE(pool.ok()) << pool.status();
    return pool.ok() ? *std::move(pool) : nullptr;
  }

  // The target block as the initiator reaches it (its chunk's rkey unpacked once per chunk).
  UcxRemote Remote(const Block& target_block) {
    auto peer = ToUcxPeerBlock(target_block);
    EXPECT_TRUE(peer.ok()) << peer.status();
    auto& rkey = rkeys_[target_block.chunk().base];
    if (rkey.get() == nullptr) {
      auto unpacked = UcxRkey::Unpack(ep_, peer->packed_rkey);
      EXPECT_TRUE(unpacked.ok()) << unpacked.status();
      rkey = *std::move(unpacked);
    }
    return {.address = peer->address, .length = peer->length, .rkey = rkey.get()};
  }

  ucp_worker_h initiator_ = nullptr;
  ucp_worker_h target_ = nullptr;
  ucp_ep_h ep_ = nullptr;
  std::thread progress_;
  std::atomic<bool> stop_{false};
  std::unique_ptr<Pool> target_pool_;
  std::unique_ptr<Pool> local_pool_;
  std::map<std::uintptr_t, UcxRkey> rkeys_;
};

std::uint8_t Pattern(std::size_t seed, std::size_t i) {
  return static_cast<std::uint8_t>(seed * 131 + i * 7 + (i >> 8) + 1);
}

TEST_F(UcxPairTest, PutAndGetBetweenPoolBlocksMoveEveryByte) {
  std::mt19937_64 rng(15);
  std::size_t bytes = 0;
  for (int op = 0; op < 60; ++op) {
    const std::size_t size = std::size_t{1} << (rng() % 20);  // 1 B .. 512 KiB
    const std::size_t length = 1 + rng() % size;
    Block src = local_pool_->Allocate(length);
    Block dst = target_pool_->Allocate(length);
    Block back = local_pool_->Allocate(length);
    ASSERT_TRUE(src && dst && back);
    auto* s = static_cast<std::uint8_t*>(src.data());
    for (std::size_t i = 0; i < length; ++i) s[i] = Pattern(op, i);
    std::memset(dst.data(), 0, dst.size());
    std::memset(back.data(), 0xee, back.size());
    const UcxRemote remote = Remote(dst);
    auto put = UcxPut(ep_, src, 0, length, remote, 0);
    ASSERT_TRUE(put.ok()) << put.status();
    ASSERT_TRUE(UcxWait(initiator_, *put).ok());
    ASSERT_TRUE(UcxFlush(initiator_, ep_).ok());
    auto get = UcxGet(ep_, back, 0, length, remote, 0);
    ASSERT_TRUE(get.ok()) << get.status();
    ASSERT_TRUE(UcxWait(initiator_, *get).ok());
    const auto* d = static_cast<const std::uint8_t*>(dst.data());
    const auto* r = static_cast<const std::uint8_t*>(back.data());
    for (std::size_t i = 0; i < length; ++i) {
      ASSERT_EQ(d[i], Pattern(op, i)) << "put: op " << op << " byte " << i << " of " << length;
      ASSERT_EQ(r[i], Pattern(op, i)) << "get: op " << op << " byte " << i << " of " << length;
    }
    bytes += length;
    local_pool_->Deallocate(src);
    local_pool_->Deallocate(back);
    target_pool_->Deallocate(dst);
  }
  EXPECT_GT(bytes, 0u);
}

TEST_F(UcxPairTest, RangesOutsideTheBlockOrThePeersBytesAreRefusedBeforePosting) {
  Block src = local_pool_->Allocate(1000);
  Block dst = target_pool_->Allocate(4096);
  ASSERT_TRUE(src && dst);
  std::memset(src.data(), 0x5a, src.size());
  std::memset(dst.data(), 0, dst.size());
  UcxRemote remote = Remote(dst);
  remote.length = 100;  // the peer offered 100 bytes only
  EXPECT_EQ(UcxPut(ep_, src, 0, src.size() + 1, remote, 0).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(UcxPut(ep_, src, src.size(), 1, remote, 0).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(UcxPut(ep_, src, 0, 101, remote, 0).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(UcxPut(ep_, src, 0, 10, remote, 91).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(UcxGet(ep_, src, 0, 10, remote, SIZE_MAX - 5).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(UcxPut(ep_, src, 0, 0, remote, 0).status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(UcxFlush(initiator_, ep_).ok());
  const auto* d = static_cast<const std::uint8_t*>(dst.data());
  for (std::size_t i = 0; i < dst.size(); ++i) ASSERT_EQ(d[i], 0) << "byte " << i << " written";
  // The edge itself is fine.
  auto put = UcxPut(ep_, src, 900, 100, remote, 0);
  ASSERT_TRUE(put.ok()) << put.status();
  ASSERT_TRUE(UcxWait(initiator_, *put).ok());
  ASSERT_TRUE(UcxFlush(initiator_, ep_).ok());
  EXPECT_EQ(d[99], 0x5a);
  EXPECT_EQ(d[100], 0);
}

TEST_F(UcxPairTest, TheCallersRequestParametersAreKept) {
  Block src = local_pool_->Allocate(256 * kKiB);  // large enough for a request, not UCS_OK
  Block dst = target_pool_->Allocate(256 * kKiB);
  ASSERT_TRUE(src && dst);
  struct Done {
    std::atomic<int> calls{0};
    ucs_status_t status = UCS_INPROGRESS;
  } done;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = [](void*, ucs_status_t status, void* user) {
    auto* d = static_cast<Done*>(user);
    d->status = status;
    d->calls.fetch_add(1);
  };
  param.user_data = &done;
  auto put = UcxPut(ep_, src, 0, src.size(), Remote(dst), 0, 0, param);
  ASSERT_TRUE(put.ok()) << put.status();
  if (*put != nullptr) {
    ASSERT_TRUE(UcxWait(initiator_, *put).ok());
    EXPECT_EQ(done.calls.load(), 1);
    EXPECT_EQ(done.status, UCS_OK);
  }
  ASSERT_TRUE(UcxFlush(initiator_, ep_).ok());
}

// Every failure point of a UCX pool's growth, in turn (tests/support/fault_sweep.h): ucp_mem_map
// and ucp_rkey_pack of each chunk (through pinpool/provider.h's InjectedProviderFault, the
// provider library's only way to the hook) and the os layer's calls. Every run ends in OK or
// Reserve's documented error, with the earlier blocks intact, no mapping of the domain left
// behind, and growth working once the fault is gone.
TEST_F(UcxDomainTest, FaultSweepOfGrowth) {
  const testing::SweepReport report = testing::Sweep(
      "UCX registration (growth)",
      [&] {
        testing::Outcome o;
        std::unique_ptr<Pool> pool;
        std::vector<std::pair<Block, unsigned>> blocks;
        {
          testing::FaultPlan::Pause pause;
          auto domain = UcxDomain::Wrap(context_, {.trusted_whole_chunk = true});
          domain_ = *domain;
          PoolOptions options;
          options.chunk_size = 2 * kMiB;
          options.budget = 16 * kMiB;
          options.initial_size = 2 * kMiB;
          options.page_size = PageSize::k4K;
          options.numa_node = kNoNumaNode;
          options.reserve_threads = 1;  // no worker threads: the same calls in the same order
          options.domains = {domain_};
          pool = Pool::Create(options).value();
          for (unsigned i = 0; i < 4; ++i) {
            Block b = pool->Allocate(200 * kKiB);
            std::memset(b.data(), static_cast<int>(i + 1), b.size());
            blocks.emplace_back(b, i + 1);
          }
        }
        o.status = pool->Reserve(4 * 2 * kMiB);
        testing::FaultPlan::Pause pause;
        for (const auto& [b, v] : blocks) {
          ++o.blocks;
          const auto* p = static_cast<const unsigned char*>(b.data());
          if (p[0] != v || p[b.size() - 1] != v) ++o.changed;
          pool->Deallocate(b);
        }
        EXPECT_TRUE(pool->Reserve(4 * 2 * kMiB).ok()) << "growth after the fault";
        EXPECT_EQ(domain_->live_registrations(), pool->GetStats().chunks.size());
        pool.reset();
        if (domain_->live_registrations() != 0) {
          o.status = absl::InternalError("a UCX mapping outlived its pool");
        }
        return o;
      },
      {absl::StatusCode::kResourceExhausted, absl::StatusCode::kInternal,
       absl::StatusCode::kFailedPrecondition});
  const auto ucx_points = std::count_if(report.points.begin(), report.points.end(), [](auto c) {
    return c == testing::Call::kUcxMap || c == testing::Call::kUcxPack;
  });
  EXPECT_EQ(ucx_points, 6) << "ucp_mem_map and ucp_rkey_pack of three chunks reach the hook";
}

}  // namespace
}  // namespace pinpool
