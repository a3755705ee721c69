// Sharing: a pool's side of sharing its chunks with other processes and of a handover
// (pinpool/share.h; docs/sharing.md), and the transfer both use.
//
//  - Transfer: SendPool cuts a description (pool/share_wire.h) and the chunks' descriptors into
//    messages of at most os::kMaxFdsPerMessage chunks, the live blocks in the last; ReceivePool
//    reads them back until the last, checking that every message is of the same pool and kind.
//  - Attached processes: the sockets Pool::Share sent on (duplicated), one per process; a process
//    counts as attached until its end of the socket closes (polled when the stats are read).
//  - Reclaimed blocks: after Adopt, the blocks the predecessor handed over live in chunks the heap
//    never had (the arena published them "held"). The pool's slow paths (free, usable size,
//    reallocate, grants) ask Reclaimed first; when a held chunk's last reclaimed block is freed,
//    the pool returns the chunk to the arena, and the heap may take it from then on. A lock-free
//    count lets every other slow free skip the lookup.
//
// Thread safety: everything takes the one mutex, but Reclaimed's fast "none" answer.
#ifndef PINPOOL_POOL_SHARING_H_
#define PINPOOL_POOL_SHARING_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "arena/arena.h"
#include "os/fd_passing.h"
#include "pinpool/options.h"
#include "pinpool/share.h"
#include "pinpool/stats.h"
#include "pool/share_wire.h"
#include "util/mutex.h"

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

// A new pool's id: 16 random bytes (share.cc).
PoolId NewPoolId();
// OK when a pool of `options` may share and hand over its chunks: file-backed, no named
// classes; kFailedPrecondition saying why not (share.cc).
absl::Status CheckShareable(const PoolOptions& options, bool named_classes);
// The header of a share or handover of a pool (share.cc).
WireMessage Describe(WireMessage::Kind kind, const PoolId& id, const PoolOptions& options,
                     std::size_t max_chunks);

// What Adopt received and checked, for Pool::CreateWith.
struct Handover {
  PoolId id{};
  std::vector<Arena::AdoptedChunk> chunks;
  std::vector<BlockHandle> live;
};

class Sharing {
 public:
  explicit Sharing(const PoolId& id) : id_(id) {}

  const PoolId& id() const noexcept { return id_; }

  // Attached processes.
  void AddPeer(int socket);
  std::size_t LivePeers();

  // Blocks handed over to this pool (Adopt).
  void AdoptBlocks(std::span<const BlockHandle> live, std::uintptr_t range_base,
                   std::size_t chunk_size);
  std::vector<BlockHandle> adopted() const;
  // Whether `p` is a reclaimed block still live, and its size.
  bool Reclaimed(const void* p, std::size_t* size) const;
  // Forgets the reclaimed blocks of chunk `chunk` (given back: lost to the application) and
  // returns them as {address, size}.
  std::vector<std::pair<void*, std::size_t>> ForgetChunk(std::uint32_t chunk);
  // Frees reclaimed block `p` if it is one: true then, and `*chunk_empty` says whether it was its
  // chunk's last.
  bool Release(const void* p, bool* chunk_empty);

  std::atomic<bool> quiesced{false};
  std::atomic<bool> handed_over{false};

  SharingStats Stats();
  void CountShare() {
    MutexLock lock(&mu_);
    ++stats_.shares;
  }
  void SetAdoptedChunks(std::size_t n) {
    MutexLock lock(&mu_);
    stats_.adopted_chunks = n;
  }
  void CountHandover() {
    MutexLock lock(&mu_);
    ++stats_.handovers;
  }

 private:
  const PoolId id_;
  mutable Mutex mu_;
  std::vector<os::UniqueFd> peers_ ABSL_GUARDED_BY(mu_);
  std::vector<BlockHandle> adopted_ ABSL_GUARDED_BY(mu_);
  struct Live {
    std::size_t size;
    std::uint32_t chunk;
  };
  std::unordered_map<std::uintptr_t, Live> reclaimed_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<std::uint32_t, std::size_t> per_chunk_ ABSL_GUARDED_BY(mu_);
  std::atomic<std::size_t> reclaimed_count_{0};
  SharingStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pinpool::internal

#endif  // PINPOOL_POOL_SHARING_H_
