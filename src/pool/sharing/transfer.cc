// The transfer of a pool to another process (transfer.h has the contract).
#include "pool/sharing/transfer.h"

#include <sys/random.h>

#include <algorithm>
#include <chrono>
#include <unordered_map>

#include "absl/strings/str_format.h"
#include "util/status_macros.h"

namespace pinpool::internal {

static_assert(os::kMaxFdsPerMessage >= kMaxChunksPerMessage);

PoolId NewPoolId() {
  PoolId id{};
  if (getrandom(id.data(), id.size(), 0) != static_cast<ssize_t>(id.size())) {
    // No entropy source: the time and the address of a local tell pools apart well enough.
    const auto t = std::chrono::steady_clock::now().time_since_epoch().count();
    const auto a = reinterpret_cast<std::uintptr_t>(&id);
    for (std::size_t i = 0; i < 8; ++i) {
      id[i] = static_cast<std::uint8_t>(t >> (8 * i));
      id[8 + i] = static_cast<std::uint8_t>(a >> (8 * i));
    }
  }
  return id;
}

// Why this pool cannot share or hand over, or OK.
absl::Status CheckShareable(const PoolOptions& options, bool named_classes) {
  if (options.backing.kind == BackingKind::kAnonymous) {
    return absl::FailedPreconditionError(
        "an anonymous pool's chunks cannot be shared or handed over: create the pool with "
        "PoolOptions::backing kMemfd or kFiles (docs/backing.md)");
  }
  if (named_classes) {
    return absl::FailedPreconditionError(
        "a pool with named buffer classes cannot be shared or handed over yet");
  }
  return absl::OkStatus();
}

WireMessage Describe(WireMessage::Kind kind, const PoolId& id, const PoolOptions& options,
                     std::size_t max_chunks) {
  WireMessage m;
  m.kind = kind;
  m.pool_id = id;
  m.chunk_size = options.chunk_size;
  m.max_chunks = max_chunks;
  m.backing = options.backing.kind == BackingKind::kFiles ? WireMessage::Backing::kFiles
                                                          : WireMessage::Backing::kMemfd;
  return m;
}

absl::Status SendPool(int socket, const WireMessage& header,
                      const std::vector<Arena::SharedChunk>& chunks,
                      std::span<const BlockHandle> live) {
  std::size_t next = 0;
  do {
    WireMessage m = header;
    m.chunks.clear();
    m.live.clear();
    const std::size_t n = std::min(kMaxChunksPerMessage, chunks.size() - next);
    std::vector<int> fds;
    for (std::size_t i = next; i < next + n; ++i) {
      m.chunks.push_back({.index = chunks[i].index,
                          .generation = chunks[i].generation,
                          .sealed = chunks[i].sealed,
                          .hugetlb_page_bytes = chunks[i].hugetlb_page_bytes,
                          .path = chunks[i].path});
      fds.push_back(chunks[i].fd.get());
    }
    next += n;
    m.last = next == chunks.size();
    if (m.last) m.live.assign(live.begin(), live.end());
    const std::vector<std::byte> bytes = Encode(m);
    PINPOOL_RETURN_IF_ERROR(os::SendMessage(socket, bytes, fds));
  } while (next < chunks.size());
  return absl::OkStatus();
}

absl::StatusOr<ReceivedPool> ReceivePool(int socket, WireMessage::Kind kind) {
  ReceivedPool got;
  std::unordered_map<std::uint32_t, std::uint32_t> got_chunks;  // index -> generation
  for (bool first = true;; first = false) {
    PINPOOL_ASSIGN_OR_RETURN(os::Message msg, os::ReceiveMessage(socket, kMaxWireBytes));
    PINPOOL_ASSIGN_OR_RETURN(WireMessage m, Decode(msg.payload, msg.fds.size()));
    WireMessage& d = got.description;
    if (m.kind != kind) {
      return absl::InvalidArgumentError(
          kind == WireMessage::Kind::kShare
              ? "a handover arrived where a share (Pool::Share) was expected"
              : "a share arrived where a handover (Pool::HandOver) was expected");
    }
    if (!first && (m.pool_id != d.pool_id || m.chunk_size != d.chunk_size ||
                   m.max_chunks != d.max_chunks || m.backing != d.backing)) {
      return absl::InvalidArgumentError(
          "a message of another pool in the middle of a share or handover");
    }
    if (first) {
      d.kind = m.kind;
      d.pool_id = m.pool_id;
      d.chunk_size = m.chunk_size;
      d.max_chunks = m.max_chunks;
      d.backing = m.backing;
    }
    for (std::size_t i = 0; i < m.chunks.size(); ++i) {
      const std::uint32_t index = m.chunks[i].index;
      if (!got_chunks.emplace(index, m.chunks[i].generation).second) {
        return absl::InvalidArgumentError(
            absl::StrFormat("chunk %d described twice in one share or handover", index));
      }
      d.chunks.push_back(std::move(m.chunks[i]));
      got.fds.push_back(std::move(msg.fds[i]));
    }
    d.live.insert(d.live.end(), m.live.begin(), m.live.end());
    if (m.last) break;
  }
  for (const BlockHandle& h : got.description.live) {
    const auto chunk = got_chunks.find(h.chunk);
    if (chunk == got_chunks.end()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "a live block in chunk %d, which the handover does not include", h.chunk));
    }
    if (chunk->second != h.generation) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "a live block in chunk %d of generation %d; the handover's chunk %d is of generation %d",
          h.chunk, h.generation, h.chunk, chunk->second));
    }
  }
  return got;
}

}  // namespace pinpool::internal
