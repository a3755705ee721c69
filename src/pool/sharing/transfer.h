// The transfer of a pool to another process (pinpool/share.h; docs/sharing.md): Share and
// HandOver send it, Attachment and Adopt receive it. SendPool cuts a description
// (wire/share_message.h) and the chunks' descriptors into messages of at most
// kMaxChunksPerMessage chunks, the live blocks in the last; ReceivePool reads them back until the
// last, checking that every message is of the same pool and kind. Also what a share or a
// handover is made of: the pool's id, the header, and whether a pool may share at all.
// Thread safety: no state; one sender and one receiver per socket at a time.
#ifndef PINPOOL_POOL_SHARING_TRANSFER_H_
#define PINPOOL_POOL_SHARING_TRANSFER_H_

#include <cstddef>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "arena/arena.h"
#include "os/fd_passing.h"
#include "pinpool/options.h"
#include "pinpool/share.h"
#include "wire/share_message.h"

namespace pinpool::internal {

// Sends a pool's description (`header`: its kind, id, sizes and backing; its chunks and live
// lists are ignored) with `chunks`' descriptors and `live`.
absl::Status SendPool(int socket, const WireMessage& header,
                      const std::vector<Arena::SharedChunk>& chunks,
                      std::span<const BlockHandle> live);

struct ReceivedPool {
  WireMessage description;        // every message's chunks and live blocks together
  std::vector<os::UniqueFd> fds;  // fds[i] is description.chunks[i]'s
};
// Receives what SendPool sent, of kind `kind`. kInvalidArgument when a message is not valid or
// not of the same pool as the first; a live block in a chunk not described; kUnavailable when
// the sender went away.
absl::StatusOr<ReceivedPool> ReceivePool(int socket, WireMessage::Kind kind);

// A new pool's id: 16 random bytes (transfer.cc).
PoolId NewPoolId();
// OK when a pool of `options` may share and hand over its chunks: file-backed, no named
// classes; kFailedPrecondition saying why not (transfer.cc).
absl::Status CheckShareable(const PoolOptions& options, bool named_classes);
// The header of a share or handover of a pool (transfer.cc).
WireMessage Describe(WireMessage::Kind kind, const PoolId& id, const PoolOptions& options,
                     std::size_t max_chunks);

// What Adopt received and checked, before it builds the pool.
struct Handover {
  PoolId id{};
  std::vector<Arena::AdoptedChunk> chunks;
  std::vector<BlockHandle> live;
};

}  // namespace pinpool::internal

#endif  // PINPOOL_POOL_SHARING_TRANSFER_H_
