// Compact descriptors (pinpool/descriptor.h): the exact wire format (a golden encoding), round
// trips of arrays, subranges and block sets through the decoder (every element's address and
// keys), sizes that grow with runs not elements, every refusal of the writer and the decoder,
// and the C API's decoder.
#include "pinpool/descriptor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "pinpool/pinpool_c.h"
#include "pinpool/pool.h"
#include "support/counting_domain.h"
#include "support/make_pool.h"

namespace pinpool {
namespace {

using testing::CountingDomain;
using ::testing::HasSubstr;

constexpr std::size_t kChunk = 4 * kMiB;

std::unique_ptr<Pool> MakePool(std::vector<std::shared_ptr<Domain>> domains,
                               std::size_t budget = 64 * kMiB, std::size_t chunk = kChunk) {
  return testing::MakePool(
      {.chunk_size = chunk, .budget = budget, .populate = false, .domains = std::move(domains)});
}

std::uint64_t Addr(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

std::vector<std::byte> Bytes(std::initializer_list<int> v) {
  std::vector<std::byte> out;
  for (int b : v) out.push_back(static_cast<std::byte>(b));
  return out;
}

TEST(DescriptorTest, TheWireFormatIsLittleEndianAndFixed) {
  DescriptorWriter w(0x1000, 1);
  const std::uint64_t key[] = {0x11223344};
  ASSERT_TRUE(w.AddRun(0x0102030405060708, 0x1040, 3, key).ok());
  const std::vector<std::byte> golden = Bytes({
      'P',  'P',  'D',  'S',  1, 0, 40, 0,
      40,   0,    1,    0,    1, 0, 0,  0,  // magic version header run keys runs
      0,    0x10, 0,    0,    0, 0, 0,  0,  // element size
      3,    0,    0,    0,    0, 0, 0,  0,  // element count
      0,    0,    0,    0,    0, 0, 0,  0,  // flags
      8,    7,    6,    5,    4, 3, 2,  1,  // base
      0x40, 0x10, 0,    0,    0, 0, 0,  0,  // stride
      0,    0,    0,    0,    0, 0, 0,  0,  // first
      3,    0,    0,    0,    0, 0, 0,  0,  // count
      0x44, 0x33, 0x22, 0x11, 0, 0, 0,  0,  // key
  });
  EXPECT_EQ(w.Finish().value(), golden);
  const Descriptor d = Descriptor::Decode(golden).value();
  EXPECT_EQ(d.size(), 3u);
  EXPECT_EQ(d.element_size(), 0x1000u);
  EXPECT_EQ(d.Element(2)->address, 0x0102030405060708u + 2 * 0x1040);
  EXPECT_EQ(d.Element(2)->keys[0], 0x11223344u);
}

// Every element of `d` is element `first + i` of `a`, with the rkeys of `domains`.
void ExpectDescribes(const Descriptor& d, const Array& a, std::uint64_t first,
                     const std::vector<std::size_t>& domains) {
  for (std::uint64_t i = 0; i < d.size(); ++i) {
    const std::optional<RemoteElement> e = d.Element(i);
    ASSERT_TRUE(e) << i;
    const Block b = a.Element(first + i);
    ASSERT_EQ(e->address, Addr(b.data())) << i;
    ASSERT_EQ(e->length, a.element_size());
    for (std::size_t k = 0; k < domains.size(); ++k) {
      ASSERT_EQ(e->keys[k], ToUnderlying(b.rkey(domains[k]))) << i;
    }
  }
  EXPECT_FALSE(d.Element(d.size()));
  EXPECT_FALSE(d.Element(UINT64_MAX));
}

TEST(DescriptorTest, AnArrayRoundTripsWithTheKeysOfTheDomainsChosen) {
  auto d0 = std::make_shared<CountingDomain>("d0");
  auto d1 = std::make_shared<CountingDomain>("d1");
  auto pool = MakePool({d0, d1});
  Array a = pool->AllocateArray(3500, 4100, 4).value();  // 4100-byte stride: 1023 per chunk
  const std::vector<std::size_t> domains = {1, 0};
  const std::vector<std::byte> bytes = Describe(a, domains).value();
  EXPECT_EQ(bytes.size(), kDescriptorHeaderBytes + a.runs().size() * DescriptorRunBytes(2));
  const Descriptor d = Descriptor::Decode(bytes).value();
  EXPECT_EQ(d.size(), 3500u);
  EXPECT_EQ(d.key_count(), 2u);
  EXPECT_EQ(d.runs().size(), a.runs().size());
  ExpectDescribes(d, a, 0, domains);
  pool->Deallocate(std::move(a));
}

TEST(DescriptorTest, SizeGrowsWithChunksNotElements) {
  auto dom = std::make_shared<CountingDomain>();
  auto pool = MakePool({dom}, 512 * kMiB, 64 * kMiB);
  Array small = pool->AllocateArray(1000, 4096, 4096).value();     // one chunk
  Array large = pool->AllocateArray(100'000, 4096, 4096).value();  // seven chunks
  const std::size_t kOne[] = {0};
  EXPECT_EQ(Describe(small, kOne)->size(), 40u + 40);
  EXPECT_EQ(Describe(large, kOne)->size(), 40u + 7 * 40);
  pool->Deallocate(std::move(small));
  pool->Deallocate(std::move(large));
}

TEST(DescriptorTest, ASubrangeIsRenumberedFromZeroAndClippedToItsRuns) {
  auto dom = std::make_shared<CountingDomain>();
  auto pool = MakePool({dom});
  Array a = pool->AllocateArray(4000, 4096, 4096).value();  // 1024 per chunk
  const std::size_t kOne[] = {0};
  const Descriptor d = Descriptor::Decode(Describe(a, kOne, 1000, 1100).value()).value();
  EXPECT_EQ(d.size(), 1100u);
  ASSERT_EQ(d.runs().size(), 3u);  // 1000..1023, 1024..2047, 2048..2099
  EXPECT_EQ(d.runs()[0].count, 24u);
  EXPECT_EQ(d.runs()[2].count, 52u);
  ExpectDescribes(d, a, 1000, {0});
  const Descriptor tail = Descriptor::Decode(Describe(a, kOne, 3999).value()).value();
  EXPECT_EQ(tail.size(), 1u);
  ExpectDescribes(tail, a, 3999, {0});
  for (auto [first, count] :
       {std::pair<std::uint64_t, std::uint64_t>{0, 0}, {4000, 1}, {3999, 2}, {1, UINT64_MAX - 1}}) {
    auto bad = Describe(a, kOne, first, count);
    ASSERT_FALSE(bad.ok()) << first << " +" << count;
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  }
  const std::size_t kNoSuchDomain[] = {1};
  EXPECT_THAT(Describe(a, kNoSuchDomain).status().message(), HasSubstr("domain 1"));
  EXPECT_FALSE(Describe(a, {}).ok());
  EXPECT_FALSE(Describe(Array(), kOne).ok());
  pool->Deallocate(std::move(a));
}

// DescribeRanges: what any provider's grants of whole elements become (each DescribeGrants).
TEST(DescriptorTest, GrantedRangesAreARunEachWithTheirKeyAndWholeElementsOnly) {
  auto dom = std::make_shared<CountingDomain>();
  auto pool = MakePool({dom});
  Array a = pool->AllocateArray(100, 3000, 8).value();  // one block; stride 3000
  const GrantedRange ranges[] = {{.address = 0x10000, .key = 7, .length = 3 * 3000},
                                 {.address = 0, .key = 0xffffffff1, .length = 3000}};
  const Descriptor d = Descriptor::Decode(DescribeRanges(a, ranges).value()).value();
  EXPECT_EQ(d.size(), 4u);
  EXPECT_EQ(d.element_size(), 3000u);
  ASSERT_EQ(d.key_count(), 1u);
  EXPECT_EQ(d.Element(2)->address, 0x10000u + 2 * 3000);
  EXPECT_EQ(d.Element(2)->keys[0], 7u);
  EXPECT_EQ(d.Element(3)->address, 0u) << "an offset-addressed grant starts at 0";
  EXPECT_EQ(d.Element(3)->keys[0], 0xffffffff1u);
  const GrantedRange partial[] = {{.address = 0x10000, .key = 7, .length = 3001}};
  EXPECT_THAT(DescribeRanges(a, partial).status().message(), HasSubstr("not whole elements"));
  const GrantedRange empty[] = {{.address = 0x10000, .key = 7, .length = 0}};
  EXPECT_THAT(DescribeRanges(a, empty).status().message(), HasSubstr("not whole elements"));
  const GrantedRange overflow[] = {{.address = UINT64_MAX - 100, .key = 7, .length = 3000}};
  EXPECT_EQ(DescribeRanges(a, overflow).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(DescribeRanges(a, {}).status().message(), HasSubstr("no granted ranges"));
  EXPECT_THAT(DescribeRanges(Array(), ranges).status().message(), HasSubstr("an empty array"));
  for (const auto& bad : {DescribeRanges(a, partial), DescribeRanges(a, {})}) {
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  }
  pool->Deallocate(std::move(a));
}

TEST(DescriptorTest, BlocksOfOneSizeAreARunEach) {
  auto dom = std::make_shared<CountingDomain>();
  auto pool = MakePool({dom});
  std::vector<Block> blocks = {pool->Allocate(256), pool->Allocate(256), pool->Allocate(256)};
  const std::size_t kOne[] = {0};
  const Descriptor d = Descriptor::Decode(Describe(blocks, kOne).value()).value();
  ASSERT_EQ(d.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(d.Element(i)->address, Addr(blocks[i].data()));
    EXPECT_EQ(d.Element(i)->length, 256u);
    EXPECT_EQ(d.Element(i)->keys[0], ToUnderlying(blocks[i].rkey()));
  }
  blocks.push_back(pool->Allocate(512));
  EXPECT_THAT(Describe(blocks, kOne).status().message(), HasSubstr("one size"));
  blocks.back() = Block();
  EXPECT_THAT(Describe(blocks, kOne).status().message(), HasSubstr("empty block"));
  EXPECT_FALSE(Describe(std::span<const Block>(), kOne).ok());
  for (std::size_t i = 0; i < 3; ++i) pool->Deallocate(blocks[i]);
}

TEST(DescriptorTest, EveryElementIsFoundInUniformAndUnevenRunsAlike) {
  // Uniform middles (the one-division path) and uneven ones (the search), against a walk.
  const std::vector<std::vector<std::uint64_t>> shapes = {
      {5},          {3, 5},    {7, 2},    {3, 5, 5, 5, 2}, {5, 5, 5},   {1, 4, 4, 4},
      {3, 5, 2, 7}, {2, 2, 3}, {4, 4, 5}, {1, 1, 1, 1, 1}, {6, 5, 5, 5}};
  for (const auto& counts : shapes) {
    DescriptorWriter w(8, 1);
    for (std::size_t r = 0; r < counts.size(); ++r) {
      const std::uint64_t key = r;
      ASSERT_TRUE(w.AddRun(0x100000 * (r + 1), 16, counts[r], {&key, 1}).ok());
    }
    const Descriptor d = Descriptor::Decode(w.Finish().value()).value();
    std::uint64_t i = 0;
    for (std::size_t r = 0; r < counts.size(); ++r) {
      for (std::uint64_t k = 0; k < counts[r]; ++k, ++i) {
        const auto e = d.Element(i);
        ASSERT_TRUE(e) << i;
        ASSERT_EQ(e->address, 0x100000 * (r + 1) + 16 * k)
            << "runs " << counts.size() << " i " << i;
        ASSERT_EQ(e->keys[0], r);
      }
    }
    EXPECT_FALSE(d.Element(i));
  }
}

TEST(DescriptorTest, TheWriterRefusesWhatTheDecoderWould) {
  const std::uint64_t keys[kMaxDomains + 1] = {};
  EXPECT_FALSE(DescriptorWriter(0, 1).Finish().ok());
  EXPECT_FALSE(DescriptorWriter(1, 0).Finish().ok());
  EXPECT_FALSE(DescriptorWriter(1, kMaxDomains + 1).Finish().ok());
  EXPECT_EQ(DescriptorWriter(1, 1).Finish().status().code(), absl::StatusCode::kFailedPrecondition);
  DescriptorWriter w(16, 1);
  EXPECT_THAT(w.AddRun(0, 16, 0, std::span(keys, 1)).message(), HasSubstr("0 elements"));
  DescriptorWriter w2(16, 1);
  EXPECT_THAT(w2.AddRun(0, 8, 1, std::span(keys, 1)).message(), HasSubstr("stride"));
  DescriptorWriter w3(16, 1);
  EXPECT_THAT(w3.AddRun(0, 16, 1, std::span(keys, 2)).message(), HasSubstr("keys"));
  DescriptorWriter w4(16, 1);
  EXPECT_THAT(w4.AddRun(UINT64_MAX - 15, 16, 2, std::span(keys, 1)).message(),
              HasSubstr("end of the address space"));
  EXPECT_FALSE(w4.Finish().ok()) << "a failed run fails the descriptor";
  DescriptorWriter w5(16, 1);
  EXPECT_TRUE(w5.AddRun(UINT64_MAX - 15, 16, 1, std::span(keys, 1)).ok()) << "the last 16 bytes";
  EXPECT_TRUE(w5.Finish().ok());
}

// A valid two-run descriptor to break one field at a time.
std::vector<std::byte> Valid() {
  DescriptorWriter w(64, 2);
  const std::uint64_t keys[] = {7, 9};
  EXPECT_TRUE(w.AddRun(0x10000, 64, 4, keys).ok());
  EXPECT_TRUE(w.AddRun(0x20000, 128, 2, keys).ok());
  return w.Finish().value();
}

void PutLE(std::vector<std::byte>& b, std::size_t at, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) b[at + i] = static_cast<std::byte>(v >> (8 * i));
}

TEST(DescriptorTest, TheDecoderRefusesEveryBrokenField) {
  ASSERT_TRUE(Descriptor::Decode(Valid()).ok());
  const std::size_t run1 = 40 + 48;
  struct Case {
    std::size_t at;
    std::uint64_t value;
    int bytes;
    const char* says;
  };
  const Case cases[] = {
      {0, 'X', 1, "magic"},
      {6, 41, 2, "header of 41"},
      {8, 40, 2, "runs of 40 bytes"},
      {10, 0, 2, "0 keys"},
      {10, 9, 2, "9 keys"},
      {12, 3, 4, "for 3 runs"},
      {12, 0, 4, "no runs"},
      {16, 0, 8, "element size 0"},
      {16, 65, 8, "stride 64 below"},
      {24, 7, 8, "header says 7"},
      {32, 1, 8, "flags"},
      {40 + 24, 0, 8, "run 0 has no elements"},
      {run1 + 16, 5, 8, "run 1 starts at element 5, not 4"},
      {run1 + 0, UINT64_MAX - 64, 8, "run 1 passes the end"},
      {40 + 8, UINT64_MAX, 8, "run 0 passes the end"},
      {run1 + 24, UINT64_MAX - 2, 8, "run 1"},
  };
  for (const Case& c : cases) {
    std::vector<std::byte> b = Valid();
    PutLE(b, c.at, c.value, c.bytes);
    auto d = Descriptor::Decode(b);
    ASSERT_FALSE(d.ok()) << c.says;
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << d.status();
    EXPECT_THAT(d.status().message(), HasSubstr(c.says));
  }
  std::vector<std::byte> b = Valid();
  PutLE(b, 4, 2, 2);
  EXPECT_EQ(Descriptor::Decode(b).status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(Descriptor::Decode(b).status().message(), HasSubstr("version 2"));
  // Every truncation, and one byte too many.
  b = Valid();
  for (std::size_t n = 0; n < b.size(); ++n) {
    EXPECT_FALSE(Descriptor::Decode(std::span(b.data(), n)).ok()) << n;
  }
  b.push_back(std::byte{0});
  EXPECT_FALSE(Descriptor::Decode(b).ok());
}

TEST(DescriptorTest, TheCApiDecodesAndRefuses) {
  const std::vector<std::byte> b = Valid();
  pinpool_descriptor_t* d = nullptr;
  char err[256] = "unset";
  ASSERT_EQ(pinpool_descriptor_decode(b.data(), b.size(), &d, err, sizeof err), 0) << err;
  EXPECT_STREQ(err, "");
  EXPECT_EQ(pinpool_descriptor_size(d), 6u);
  EXPECT_EQ(pinpool_descriptor_element_size(d), 64u);
  EXPECT_EQ(pinpool_descriptor_key_count(d), 2u);
  std::uint64_t address = 0;
  std::uint64_t rkey = 0;
  ASSERT_EQ(pinpool_descriptor_element(d, 5, 1, &address, &rkey), 0);
  EXPECT_EQ(address, 0x20000u + 128);
  EXPECT_EQ(rkey, 9u);
  EXPECT_EQ(pinpool_descriptor_element(d, 6, 0, &address, &rkey), -EINVAL);
  EXPECT_EQ(pinpool_descriptor_element(d, 0, 2, &address, &rkey), -EINVAL);
  EXPECT_EQ(pinpool_descriptor_element(d, 0, 0, nullptr, &rkey), -EINVAL);
  pinpool_descriptor_free(d);
  pinpool_descriptor_free(nullptr);
  EXPECT_EQ(pinpool_descriptor_size(nullptr), 0u);
  d = reinterpret_cast<pinpool_descriptor_t*>(&address);
  EXPECT_EQ(pinpool_descriptor_decode(b.data(), b.size() - 1, &d, err, sizeof err), -EINVAL);
  EXPECT_EQ(d, nullptr);
  EXPECT_THAT(std::string(err), HasSubstr("descriptor"));
  std::vector<std::byte> v2 = b;
  v2[4] = std::byte{2};
  EXPECT_EQ(pinpool_descriptor_decode(v2.data(), v2.size(), &d, err, sizeof err), -ENOSYS);
  EXPECT_EQ(pinpool_descriptor_decode(nullptr, 10, &d, err, sizeof err), -EINVAL);
  EXPECT_EQ(pinpool_descriptor_decode(b.data(), b.size(), nullptr, err, sizeof err), -EINVAL);
}

TEST(DescriptorTest, TheFuzzCorpusSeedsAreValidDescriptors) {
  // tests/fuzz/descriptor_corpus: a 0 (decode as is), then a descriptor that must decode, so the
  // fuzzer's mutations start from real ones.
  const std::filesystem::path dir =
      std::filesystem::path(PINPOOL_SOURCE_DIR) / "tests" / "fuzz" / "descriptor_corpus";
  int seeds = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_GE(raw.size(), 1u) << entry.path();
    EXPECT_EQ(raw[0], 0) << entry.path();
    const auto d = Descriptor::Decode(
        std::span(reinterpret_cast<const std::byte*>(raw.data()) + 1, raw.size() - 1));
    EXPECT_TRUE(d.ok()) << entry.path() << ": " << d.status();
    ++seeds;
  }
  EXPECT_GE(seeds, 5);
}

}  // namespace
}  // namespace pinpool
