// The sharing description's encoding (src/wire/share_message.h): what goes in comes out, and what
// does not add up is refused, naming what (the fuzzer, tests/fuzz/share_message_fuzzer.cc, looks
// for anything else).
#include "wire/share_message.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace pinpool::internal {
namespace {

WireMessage Sample() {
  WireMessage m;
  m.kind = WireMessage::Kind::kHandOver;
  m.last = true;
  for (std::uint8_t i = 0; i < 16; ++i) m.pool_id[i] = i;
  m.chunk_size = 4 << 20;
  m.max_chunks = 16;
  m.backing = WireMessage::Backing::kFiles;
  WireChunk a;
  a.index = 0;
  a.path = "/dev/shm/pinpool-1-0-chunk-0";
  WireChunk b;
  b.index = 5;
  b.hugetlb_page_bytes = 2 << 20;
  b.path = "/dev/hugepages/pinpool-1-0-chunk-5";
  b.generation = 7;
  m.chunks = {a, b};
  m.live = {{.chunk = 0, .generation = 1, .offset = 0, .size = 64},
            {.chunk = 5, .generation = 7, .offset = 4096, .size = 4 << 19}};
  return m;
}

void ExpectRefused(const std::vector<std::byte>& bytes, std::size_t fds, const std::string& says) {
  absl::StatusOr<WireMessage> m = Decode(bytes, fds);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find(says), std::string::npos) << m.status();
}

TEST(ShareWire, WhatIsEncodedDecodesToTheSame) {
  const WireMessage m = Sample();
  absl::StatusOr<WireMessage> back = Decode(Encode(m), 2);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->kind, m.kind);
  EXPECT_EQ(back->pool_id, m.pool_id);
  EXPECT_EQ(back->chunk_size, m.chunk_size);
  EXPECT_EQ(back->max_chunks, m.max_chunks);
  ASSERT_EQ(back->chunks.size(), 2u);
  EXPECT_EQ(back->chunks[1].index, 5u);
  EXPECT_EQ(back->chunks[0].generation, 1u);
  EXPECT_EQ(back->chunks[1].generation, 7u);
  EXPECT_EQ(back->chunks[1].hugetlb_page_bytes, 2u << 20);
  EXPECT_EQ(back->chunks[1].path, m.chunks[1].path);
  EXPECT_EQ(back->live, m.live);
  // Little-endian on the wire, whatever the host: the version's bytes are 02 00.
  const std::vector<std::byte> bytes = Encode(m);
  EXPECT_EQ(bytes[8], std::byte{2});
  EXPECT_EQ(bytes[9], std::byte{0});
}

TEST(ShareWire, EveryTruncationIsRefused) {
  const std::vector<std::byte> bytes = Encode(Sample());
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    std::vector<std::byte> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_FALSE(Decode(cut, 2).ok()) << n;
  }
}

TEST(ShareWire, EachFieldOutOfItsLimitsIsRefusedByName) {
  const std::vector<std::byte> good = Encode(Sample());
  const auto with = [&](std::size_t at, std::uint8_t value) {
    std::vector<std::byte> b = good;
    b[at] = std::byte{value};
    return b;
  };
  ExpectRefused(with(0, 'X'), 2, "magic");
  ExpectRefused(with(8, 7), 2, "version 7");
  ExpectRefused(with(8, 1), 2, "version 1");  // before chunks had generations
  ExpectRefused(with(10, 9), 2, "kind 9");
  ExpectRefused(with(12, 2), 2, "unknown flags");
  ExpectRefused(with(32, 1), 2, "chunk size");  // not a power of two
  ExpectRefused(with(48, 3), 2, "backing 3");
  ExpectRefused(good, 3, "2 chunks described, 3 descriptors");
  WireMessage m = Sample();
  m.chunks[1].index = 16;
  ExpectRefused(Encode(m), 2, "index 16 of 16");
  m = Sample();
  m.chunks[1].index = 0;
  ExpectRefused(Encode(m), 2, "described twice");
  m = Sample();
  m.chunks[1].generation = 0;
  ExpectRefused(Encode(m), 2, "generation 0");
  m = Sample();
  m.live[1].generation = 0;
  ExpectRefused(Encode(m), 2, "live block 1");
  m = Sample();
  m.chunks[0].path.clear();
  ExpectRefused(Encode(m), 2, "does not fit its backing");
  m = Sample();
  m.chunks[0].path = "relative/path";
  ExpectRefused(Encode(m), 2, "does not fit its backing");
  m = Sample();
  m.live[1].offset = (4 << 20) - 8;
  ExpectRefused(Encode(m), 2, "live block 1");
  m = Sample();
  m.live[0].size = 0;
  ExpectRefused(Encode(m), 2, "live block 0");
  m = Sample();
  m.live[0].offset = ~std::uint64_t{0} - 10;  // offset + size overflows
  ExpectRefused(Encode(m), 2, "live block 0");
  m = Sample();
  m.kind = WireMessage::Kind::kShare;
  ExpectRefused(Encode(m), 2, "a share naming live blocks");
  std::vector<std::byte> extra = good;
  extra.push_back(std::byte{0});
  ExpectRefused(extra, 2, "remaining bytes");
}

TEST(ShareWire, TheFuzzersSeedsAreValidMessagesOfThisVersion) {
  // tests/fuzz/share_message_seeds: the number of descriptors, then a message that must decode,
  // so the fuzzer's mutations start from real ones (a version bump must bring new seeds).
  const std::filesystem::path dir =
      std::filesystem::path(PINPOOL_SOURCE_DIR) / "tests" / "fuzz" / "share_message_seeds";
  int seeds = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_GE(raw.size(), 1u) << entry.path();
    const absl::StatusOr<WireMessage> m =
        Decode(std::span(reinterpret_cast<const std::byte*>(raw.data()) + 1, raw.size() - 1),
               static_cast<unsigned char>(raw[0]));
    EXPECT_TRUE(m.ok()) << entry.path() << ": " << m.status();
    ++seeds;
  }
  EXPECT_GE(seeds, 2);
}

}  // namespace
}  // namespace pinpool::internal
