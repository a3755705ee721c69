// The owner's side of sharing a pool's chunks (pinpool/share.h; docs/sharing.md): block handles,
// Share, the pool's id, and the question the slow paths ask about handed-over blocks.
// Thread safety: as Pool.
#include <sys/random.h>

#include <chrono>

#include "absl/strings/str_format.h"
#include "arena/arena.h"
#include "pinpool/pool.h"
#include "pool/sharing.h"
#include "util/status_macros.h"

namespace pinpool {
namespace internal {

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

}  // namespace internal

const PoolId& Pool::id() const noexcept { return sharing_->id(); }

bool Pool::Reclaimed(const void* p, std::size_t* size) const noexcept {
  return sharing_->Reclaimed(p, size);
}

absl::StatusOr<BlockHandle> Pool::HandleOf(const Block& block) const {
  CheckAlive("HandleOf");
  PINPOOL_RETURN_IF_ERROR(internal::CheckShareable(options_, classes_ != nullptr));
  const auto p = reinterpret_cast<std::uintptr_t>(block.data());
  const ChunkInfo* chunk = p - range_base_ < arena_->range_size() ? ChunkAt(block.data()) : nullptr;
  if (chunk == nullptr || block.size() == 0 || block.size() > chunk->base + chunk->size - p) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%p (%d bytes) is not a block inside one chunk of this pool", block.data(), block.size()));
  }
  return BlockHandle{.chunk = chunk->index, .offset = p - chunk->base, .size = block.size()};
}

absl::Status Pool::Share(int socket) {
  CheckAlive("Share");
  PINPOOL_RETURN_IF_ERROR(internal::CheckShareable(options_, classes_ != nullptr));
  if (sharing_->quiesced.load()) {
    return absl::FailedPreconditionError("the pool is quiesced (Pool::Quiesce): nothing to share");
  }
  std::vector<internal::Arena::SharedChunk> chunks = arena_->SharedChunks();
  const absl::Status sent =
      internal::SendPool(socket,
                         internal::Describe(internal::WireMessage::Kind::kShare, id(), options_,
                                            arena_->range_size() / arena_->chunk_size()),
                         chunks, {});
  for (auto& c : chunks) internal::os::UniqueFd(c.fd).reset();
  if (!sent.ok()) return sent;
  sharing_->AddPeer(socket);
  sharing_->CountShare();
  return absl::OkStatus();
}

}  // namespace pinpool
