// Sharing: what a pool keeps of sharing its chunks with other processes and of a handover
// (pinpool/share.h; docs/sharing.md): its id, whether it is quiesced or handed over, and
//  - Attached processes: the sockets Pool::Share sent on (duplicated), one per process; a process
//    counts as attached until its end of the socket closes (polled when the stats are read).
//  - Reclaimed blocks: after Adopt, the blocks the predecessor handed over live in chunks the heap
//    never had (the arena published them "held": owner kAdopted, arena/chunk_owner.h). The pool's
//    slow paths (free, usable size, reallocate, grants) ask Reclaimed for an address in such a
//    chunk; when a held chunk's last reclaimed block is freed, the pool returns the chunk to the
//    arena, and the heap may take it from then on. A lock-free count answers "none" at once.
//
// Thread safety: everything takes the one mutex, but Reclaimed's fast "none" answer.
#ifndef PINPOOL_POOL_SHARING_SHARING_H_
#define PINPOOL_POOL_SHARING_SHARING_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "os/fd_passing.h"
#include "pinpool/share.h"
#include "pinpool/stats.h"
#include "util/mutex.h"

namespace pinpool::internal {

// A duplicate of `socket` for Sharing::AddPeer, made before a share is sent so that a share that
// went out is always counted. kResourceExhausted at the descriptor limit, kInvalidArgument when
// `socket` is not open.
absl::StatusOr<os::UniqueFd> DupPeerSocket(int socket);

class Sharing {
 public:
  explicit Sharing(const PoolId& id) : id_(id) {}

  const PoolId& id() const noexcept { return id_; }

  // Attached processes: `socket`, a duplicate of the one a share went out on (DupPeerSocket), is
  // kept while its other end is open (dropped when it is a socket kept already).
  void AddPeer(os::UniqueFd socket);
  std::size_t LivePeers();

  // Blocks handed over to this pool (Adopt).
  void AdoptBlocks(std::span<const BlockHandle> live, std::uintptr_t range_base,
                   std::size_t chunk_size);
  std::vector<BlockHandle> adopted() const;
  // Whether `p` is a reclaimed block still live, and its size and chunk generation.
  bool Reclaimed(const void* p, std::size_t* size, std::uint32_t* generation = nullptr) const;
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
    std::uint32_t generation;
  };
  std::unordered_map<std::uintptr_t, Live> reclaimed_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<std::uint32_t, std::size_t> per_chunk_ ABSL_GUARDED_BY(mu_);
  std::atomic<std::size_t> reclaimed_count_{0};
  SharingStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pinpool::internal

#endif  // PINPOOL_POOL_SHARING_SHARING_H_
