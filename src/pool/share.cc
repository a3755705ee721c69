// Pool's members for sharing its chunks (pinpool/share.h; docs/sharing.md): block handles,
// Share, the pool's id, and the question the slow paths ask about handed-over blocks.
// Thread safety: as Pool.
#include "absl/strings/str_format.h"
#include "arena/arena.h"
#include "pinpool/pool.h"
#include "pool/sharing/sharing.h"
#include "pool/sharing/transfer.h"
#include "util/status_macros.h"

namespace pinpool {
PINPOOL_ABI_BEGIN

const PoolId& Pool::id() const noexcept { return sharing_->id(); }

bool Pool::Reclaimed(const void* p, std::size_t* size) const noexcept {
  return sharing_->Reclaimed(p, size);
}

absl::StatusOr<BlockHandle> Pool::HandleOf(const Block& block) const {
  CheckAlive("HandleOf");
  PINPOOL_RETURN_IF_ERROR(internal::CheckShareable(options_, classes_ != nullptr));
  const auto p = reinterpret_cast<std::uintptr_t>(block.data());
  const ChunkInfo* chunk =
      p - head_.range_base < arena_->range_size() ? ChunkAt(block.data()) : nullptr;
  if (chunk == nullptr || block.size() == 0 || block.size() > chunk->base + chunk->size - p) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%p (%d bytes) is not a block inside one chunk of this pool", block.data(), block.size()));
  }
  return BlockHandle{.chunk = chunk->index,
                     .generation = chunk->generation,
                     .offset = p - chunk->base,
                     .size = block.size()};
}

absl::Status Pool::Share(int socket) {
  CheckAlive("Share");
  PINPOOL_RETURN_IF_ERROR(internal::CheckShareable(options_, classes_ != nullptr));
  if (sharing_->quiesced.load()) {
    return absl::FailedPreconditionError("the pool is quiesced (Pool::Quiesce): nothing to share");
  }
  // Every descriptor a share needs is had before anything is sent: a share is all or nothing.
  PINPOOL_ASSIGN_OR_RETURN(internal::os::UniqueFd peer, internal::DupPeerSocket(socket));
  PINPOOL_ASSIGN_OR_RETURN(std::vector<internal::Arena::SharedChunk> chunks,
                           arena_->SharedChunks());
  PINPOOL_RETURN_IF_ERROR(
      internal::SendPool(socket,
                         internal::Describe(internal::WireMessage::Kind::kShare, id(), options_,
                                            arena_->range_size() / arena_->chunk_size()),
                         chunks, {}));
  sharing_->AddPeer(std::move(peer));
  sharing_->CountShare();
  return absl::OkStatus();
}

PINPOOL_ABI_END
}  // namespace pinpool
