// The bytes that describe a shared pool to another process (pinpool/share.h): what Pool::Share
// and Pool::HandOver send with the chunks' descriptors (pool/sharing/transfer.h cuts them into
// messages; os/fd_passing.h carries them), and what Attachment and Pool::Adopt accept. Versioned,
// little-endian, fixed layout (docs/sharing.md has the table):
//
//   header  64 bytes: magic "PPSHARE\0", version u16 (2), kind u16 (1 share, 2 handover),
//           flags u32 (bit 0: the last message of this share or handover), pool id [16],
//           chunk_size u64, max_chunks u64, backing u32 (1 memfd, 2 files), chunk count u32,
//           live count u64
//   chunks  per chunk, in the order of the descriptors: index u32, generation u32 (not 0),
//           flags u32 (bit 0: sealed), hugetlb page bytes u64, path length u32, path (files
//           only; no terminator)
//   live    per block (handover only): chunk u32, generation u32 (not 0), offset u64, size u64
//
// Version 2 added the generations (ChunkInfo::generation), so that a receiver tells a chunk from
// another one the owner put at the same index after a trim.
//
// A description comes from another process: Decode trusts nothing in it (sizes, counts, indexes,
// overflow, versions) and refuses anything that does not add up, naming what.
// Thread-safe: no state.
#ifndef PINPOOL_WIRE_SHARE_MESSAGE_H_
#define PINPOOL_WIRE_SHARE_MESSAGE_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "pinpool/share.h"

namespace pinpool::internal {

struct WireChunk {
  std::uint32_t index = 0;
  std::uint32_t generation = 1;
  bool sealed = false;
  std::uint64_t hugetlb_page_bytes = 0;
  std::string path;  // files: the chunk's file; memfd: empty
};

struct WireMessage {
  static constexpr std::uint16_t kVersion = 2;
  enum class Kind : std::uint16_t { kShare = 1, kHandOver = 2 };
  enum class Backing : std::uint32_t { kMemfd = 1, kFiles = 2 };
  Kind kind = Kind::kShare;
  bool last = true;
  PoolId pool_id{};
  std::uint64_t chunk_size = 0;
  std::uint64_t max_chunks = 0;
  Backing backing = Backing::kMemfd;
  std::vector<WireChunk> chunks;  // one per descriptor, in order
  std::vector<BlockHandle> live;  // handover only
};

std::vector<std::byte> Encode(const WireMessage& m);
// kInvalidArgument, saying what is wrong, unless `bytes` is a whole valid message whose chunk
// count is `descriptors`.
absl::StatusOr<WireMessage> Decode(std::span<const std::byte> bytes, std::size_t descriptors);

// The most bytes a message may have (a handover's live list included): 1 GiB of 4 KiB blocks
// named one by one is 6 MiB.
inline constexpr std::size_t kMaxWireBytes = std::size_t{256} << 20;
// The most chunks one message describes: each comes with its descriptor, and the kernel passes
// at most 253 descriptors in one message (SCM_MAX_FD). The sender cuts a pool into messages of at
// most this many chunks; os/fd_passing.h carries no more.
inline constexpr std::size_t kMaxChunksPerMessage = 250;

}  // namespace pinpool::internal

#endif  // PINPOOL_WIRE_SHARE_MESSAGE_H_
