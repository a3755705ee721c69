// The sharing description's encoding (share_message.h has the layout and the contract).
#include "wire/share_message.h"

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "wire/bytes.h"

namespace pinpool::internal {
namespace {

constexpr char kMagic[8] = {'P', 'P', 'S', 'H', 'A', 'R', 'E', '\0'};
constexpr std::size_t kHeaderBytes = 64;
constexpr std::size_t kChunkBytes = 24;  // without its path
constexpr std::size_t kLiveBytes = 24;
constexpr std::size_t kMaxPath = 4096;

absl::Status Bad(const std::string& what) {
  return absl::InvalidArgumentError("not a valid pinpool sharing description: " + what);
}

}  // namespace

std::vector<std::byte> Encode(const WireMessage& m) {
  std::vector<std::byte> out;
  ByteWriter w(out);
  w.PutBytes(kMagic, sizeof(kMagic));
  w.Put(WireMessage::kVersion, 2);
  w.Put(static_cast<std::uint16_t>(m.kind), 2);
  w.Put(m.last ? 1 : 0, 4);
  w.PutBytes(m.pool_id.data(), m.pool_id.size());
  w.Put(m.chunk_size, 8);
  w.Put(m.max_chunks, 8);
  w.Put(static_cast<std::uint32_t>(m.backing), 4);
  w.Put(m.chunks.size(), 4);
  w.Put(m.live.size(), 8);
  for (const WireChunk& c : m.chunks) {
    w.Put(c.index, 4);
    w.Put(c.generation, 4);
    w.Put(c.sealed ? 1 : 0, 4);
    w.Put(c.hugetlb_page_bytes, 8);
    w.Put(c.path.size(), 4);
    w.PutBytes(c.path.data(), c.path.size());
  }
  for (const BlockHandle& h : m.live) {
    w.Put(h.chunk, 4);
    w.Put(h.generation, 4);
    w.Put(h.offset, 8);
    w.Put(h.size, 8);
  }
  return out;
}

absl::StatusOr<WireMessage> Decode(std::span<const std::byte> bytes, std::size_t descriptors) {
  if (bytes.size() < kHeaderBytes || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return Bad(absl::StrFormat("%d bytes without the header (magic \"PPSHARE\")", bytes.size()));
  }
  ByteReader r(bytes);
  r.Seek(sizeof(kMagic));
  WireMessage m;
  const std::uint64_t version = r.Get(2);
  if (version != WireMessage::kVersion) {
    return Bad(
        absl::StrFormat("version %d (this library reads version %d: sender and receiver "
                        "must be of the same pinpool release line)",
                        version, WireMessage::kVersion));
  }
  const std::uint64_t kind = r.Get(2);
  if (kind != 1 && kind != 2) return Bad(absl::StrFormat("kind %d", kind));
  m.kind = static_cast<WireMessage::Kind>(kind);
  const std::uint64_t flags = r.Get(4);
  if ((flags & ~std::uint64_t{1}) != 0) return Bad(absl::StrFormat("unknown flags %#x", flags));
  m.last = (flags & 1) != 0;
  r.GetBytes(m.pool_id.data(), m.pool_id.size());
  m.chunk_size = r.Get(8);
  m.max_chunks = r.Get(8);
  if (m.chunk_size < 4096 || m.chunk_size > (std::uint64_t{1} << 40) ||
      (m.chunk_size & (m.chunk_size - 1)) != 0 || m.max_chunks == 0 ||
      m.max_chunks > (std::uint64_t{1} << 47) / m.chunk_size) {
    return Bad(absl::StrFormat("chunk size %d and %d chunks", m.chunk_size, m.max_chunks));
  }
  const std::uint64_t backing = r.Get(4);
  if (backing != 1 && backing != 2) return Bad(absl::StrFormat("backing %d", backing));
  m.backing = static_cast<WireMessage::Backing>(backing);
  const std::uint64_t chunks = r.Get(4);
  const std::uint64_t live = r.Get(8);
  if (chunks != descriptors || chunks > kMaxChunksPerMessage) {
    return Bad(
        absl::StrFormat("%d chunks described, %d descriptors came with them", chunks, descriptors));
  }
  if (m.kind == WireMessage::Kind::kShare && live != 0) {
    return Bad("a share naming live blocks (only a handover does)");
  }
  std::vector<std::uint32_t> indexes;
  for (std::uint64_t i = 0; i < chunks; ++i) {
    if (r.left() < kChunkBytes) return Bad(absl::StrFormat("cut short in chunk %d", i));
    WireChunk c;
    const std::uint64_t index = r.Get(4);
    const std::uint64_t generation = r.Get(4);
    const std::uint64_t chunk_flags = r.Get(4);
    c.hugetlb_page_bytes = r.Get(8);
    const std::uint64_t path_bytes = r.Get(4);
    if (index >= m.max_chunks || generation == 0 || (chunk_flags & ~std::uint64_t{1}) != 0 ||
        (c.hugetlb_page_bytes != 0 && c.hugetlb_page_bytes != (std::uint64_t{2} << 20) &&
         c.hugetlb_page_bytes != (std::uint64_t{1} << 30)) ||
        path_bytes > kMaxPath || r.left() < path_bytes) {
      return Bad(absl::StrFormat(
          "chunk %d: index %d of %d, generation %d, flags %#x, hugetlb %d, path of "
          "%d bytes",
          i, index, m.max_chunks, generation, chunk_flags, c.hugetlb_page_bytes, path_bytes));
    }
    c.index = static_cast<std::uint32_t>(index);
    c.generation = static_cast<std::uint32_t>(generation);
    c.sealed = (chunk_flags & 1) != 0;
    c.path.resize(path_bytes);
    r.GetBytes(c.path.data(), path_bytes);
    const bool files = m.backing == WireMessage::Backing::kFiles;
    if (files != !c.path.empty() ||
        (files && (c.path[0] != '/' || c.path.find('\0') != std::string::npos))) {
      return Bad(absl::StrFormat("chunk %d: a path that does not fit its backing", index));
    }
    indexes.push_back(c.index);
    m.chunks.push_back(std::move(c));
  }
  std::sort(indexes.begin(), indexes.end());
  if (std::adjacent_find(indexes.begin(), indexes.end()) != indexes.end()) {
    return Bad(absl::StrFormat("chunk %d described twice",
                               *std::adjacent_find(indexes.begin(), indexes.end())));
  }
  if (live > r.left() / kLiveBytes || r.left() != live * kLiveBytes) {
    return Bad(absl::StrFormat("%d live blocks announced in %d remaining bytes", live, r.left()));
  }
  m.live.reserve(live);
  for (std::uint64_t i = 0; i < live; ++i) {
    BlockHandle h;
    h.chunk = static_cast<std::uint32_t>(r.Get(4));
    h.generation = static_cast<std::uint32_t>(r.Get(4));
    h.offset = r.Get(8);
    h.size = r.Get(8);
    if (h.generation == 0 || h.chunk >= m.max_chunks || h.size == 0 || h.offset >= m.chunk_size ||
        h.size > m.chunk_size - h.offset) {
      return Bad(absl::StrFormat(
          "live block %d: chunk %d generation %d, offset %d, %d bytes (chunks of %d)", i, h.chunk,
          h.generation, h.offset, h.size, m.chunk_size));
    }
    m.live.push_back(h);
  }
  return m;
}

}  // namespace pinpool::internal
