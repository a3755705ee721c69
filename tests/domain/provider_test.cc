// pinpool/provider.h, as a domain writer uses it: a domain built on ChunkHandles registers with a
// real pool (its records are what blocks carry, its counters follow the pool's chunks, foreign
// and released keys are refused), PinRefusedError's wording, and the transfer checks every
// provider makes before posting (bounds, overflow, the block and its domain number).
//
// Host only, no device; one pool per test, single-threaded but for what Pool does itself.
#include "pinpool/provider.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>

#include "pinpool/pool.h"

namespace pinpool {
namespace {

using ::testing::HasSubstr;

struct TestChunk {
  static constexpr std::uint64_t kMagic = 0x746573742d63686b;  // "test-chk"
  std::uint64_t magic = 0;
  std::uintptr_t base = 0;
  std::size_t length = 0;
  int serial = 0;
};
static_assert(ChunkRecord<TestChunk>);

struct NotAChunk {  // no kMagic, wrong field types: ChunkHandles would not compile with it
  int magic = 0;
};
static_assert(!ChunkRecord<NotAChunk>);

// A Domain as a writer outside pinpool would write it with provider.h.
class RecordDomain final : public Domain {
 public:
  DomainKind kind() const noexcept override { return DomainKind::kCustom; }
  std::string name() const override { return "records0"; }
  Pinning pinning() const noexcept override { return Pinning::kNone; }
  absl::StatusOr<Keys> Register(void* base, std::size_t length) override {
    auto chunk = std::make_unique<TestChunk>();
    chunk->base = reinterpret_cast<std::uintptr_t>(base);
    chunk->length = length;
    chunk->serial = ++serial_;
    return chunks.Publish(std::move(chunk));
  }
  void Deregister(const Keys& keys) noexcept override {
    const std::unique_ptr<TestChunk> chunk = chunks.Take(keys, name());
    if (chunk == nullptr) return;
    if (fail_release) chunks.ReleaseFailed(name(), "test_release", *chunk, "refused on purpose");
  }

  ChunkHandles<TestChunk> chunks{"test record"};
  bool fail_release = false;

 private:
  int serial_ = 0;
};

PoolOptions Options(std::shared_ptr<Domain> domain) {
  PoolOptions o;
  o.chunk_size = 2 * kMiB;
  o.budget = 8 * kMiB;
  o.initial_size = 4 * kMiB;
  o.page_size = PageSize::k4K;
  o.domains.push_back(std::move(domain));
  return o;
}

TEST(ChunkHandlesTest, RecordsRideOnTheKeysAndTheCountersFollowThePoolsChunks) {
  auto domain = std::make_shared<RecordDomain>();
  {
    absl::StatusOr<std::unique_ptr<Pool>> pool = Pool::Create(Options(domain));
    ASSERT_TRUE(pool.ok()) << pool.status();
    EXPECT_EQ(domain->chunks.live(), 2u);
    EXPECT_EQ(domain->chunks.total(), 2u);
    Block block = (*pool)->Allocate(4096);
    ASSERT_TRUE(block);
    const auto* chunk = static_cast<const TestChunk*>(block.keys().handle);
    ASSERT_NE(chunk, nullptr);
    EXPECT_EQ(chunk->magic, TestChunk::kMagic);
    EXPECT_EQ(block.keys().base, chunk->base);
    EXPECT_EQ(block.keys().length, chunk->length);
    EXPECT_EQ(chunk->length, 2 * kMiB);
    const auto at = reinterpret_cast<std::uintptr_t>(block.data());
    EXPECT_TRUE(at >= chunk->base && at + block.size() <= chunk->base + chunk->length);
    (*pool)->Deallocate(block);
  }
  EXPECT_EQ(domain->chunks.live(), 0u);
  EXPECT_EQ(domain->chunks.total(), 2u);
  EXPECT_EQ(domain->chunks.failed(), 0u);
}

TEST(ChunkHandlesTest, ForeignOrReleasedKeysAreRefusedAndCounted) {
  RecordDomain domain;
  absl::StatusOr<Keys> keys = domain.Register(reinterpret_cast<void*>(0x200000), 4096);
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(domain.chunks.live(), 1u);

  // Keys of another domain: a handle that is no record of this kind, and none at all.
  std::uint64_t other_domains_object[4] = {0x1234, 0, 0, 0};
  Keys foreign;
  foreign.handle = other_domains_object;
  ::testing::internal::CaptureStderr();
  domain.Deregister(foreign);
  domain.Deregister(Keys{});
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(said, HasSubstr("pinpool: records0: Deregister of keys that are not a test record"));
  EXPECT_EQ(domain.chunks.failed(), 2u);
  EXPECT_EQ(domain.chunks.live(), 1u);
  EXPECT_EQ(other_domains_object[0], 0x1234u);  // untouched, not freed

  // A release the backend refuses: reported with the chunk's size, counted, and the record is
  // gone from the live count all the same.
  domain.fail_release = true;
  ::testing::internal::CaptureStderr();
  domain.Deregister(*keys);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(),
              HasSubstr("records0: test_release of the 4 KiB chunk test record at 0x200000 "
                        "failed: refused on purpose"));
  EXPECT_EQ(domain.chunks.failed(), 3u);
  EXPECT_EQ(domain.chunks.live(), 0u);
}

TEST(ProviderTest, PinRefusedErrorNamesTheCallTheLimitAndTheFix) {
  const absl::Status s = PinRefusedError("my_reg_mr", ENOMEM, 64 * kMiB);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("my_reg_mr of 64 MiB failed"));
  EXPECT_THAT(s.message(), HasSubstr("RLIMIT_MEMLOCK"));
  EXPECT_THAT(s.message(), HasSubstr("ulimit -l"));
}

TEST(ProviderTest, TransferChecksRefuseEveryRangeOutsideEitherSide) {
  auto domain = std::make_shared<RecordDomain>();
  absl::StatusOr<std::unique_ptr<Pool>> pool = Pool::Create(Options(domain));
  ASSERT_TRUE(pool.ok()) << pool.status();
  Block block = (*pool)->Allocate(4096);
  ASSERT_TRUE(block);
  const std::size_t size = block.size();
  const RemoteRange peer{.length = 1000, .key_kind = "key", .key = 0x77};
  constexpr std::size_t kHuge = std::numeric_limits<std::size_t>::max();

  EXPECT_TRUE(CheckTransferRanges("T", block, 0, 1000, peer, 0, 0).ok());
  EXPECT_TRUE(CheckTransferRanges("T", block, size - 10, 10, peer, 990, 0).ok());

  absl::Status s = CheckTransferRanges("T", Block{}, 0, 1, peer, 0, 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("T: empty Block"));
  s = CheckTransferRanges("T", block, 0, 1, peer, 0, 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("no domain number 1"));
  EXPECT_EQ(CheckTransferRanges("T", block, 0, 0, peer, 0, 0).code(),
            absl::StatusCode::kInvalidArgument);

  s = CheckTransferRanges("T", block, size - 10, 11, peer, 0, 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(s.message(), HasSubstr("byte block"));
  EXPECT_THAT(s.message(), HasSubstr("nothing posted"));
  s = CheckTransferRanges("T", block, 0, 10, peer, 991, 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(s.message(), HasSubstr("peer's 1000 bytes (key 0x77)"));
  // Offsets that wrap around are outside too.
  EXPECT_EQ(CheckTransferRanges("T", block, kHuge, 2, peer, 0, 0).code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(CheckTransferRanges("T", block, 0, 2, peer, kHuge, 0).code(),
            absl::StatusCode::kOutOfRange);

  EXPECT_TRUE(CheckBlockDomain("B", block, 0).ok());
  EXPECT_EQ(CheckBlockDomain("B", block, 1).code(), absl::StatusCode::kInvalidArgument);
  (*pool)->Deallocate(block);
}

}  // namespace
}  // namespace pinpool
