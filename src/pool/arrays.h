// PoolArrays: a pool's arrays (pinpool/array.h): laying them out, taking and giving back their
// chunks, and counting them.
//
// A small array (count x stride <= the pool's largest block) is one block from the pool's own
// Allocate, so it costs what a block costs and lies in one chunk. A larger one takes whole chunks
// the way a heap does: through the buffer-class ledger when the pool has named classes (as the
// default class: so reservations, caps and the budget hold for arrays too), else straight from
// the arena (Arena::Carve of a whole chunk, growing the pool when needed). When no chunk is to be
// had, the heaps first give back the whole chunks they hold idle (Heap::ReleaseIdleChunks, as
// Trim does), so an array is never refused for chunks the pool itself keeps empty. Its chunks are
// fully carved while it lives, so neither Trim nor any heap touches them; freeing the array gives
// each back (ReturnChunk), and only then may a heap or Trim have it again.
//
// Bad input is refused before anything is taken (kInvalidArgument; kResourceExhausted when the
// array needs more chunks than the budget has). A failure to get a chunk half way gives back the
// chunks already taken and trims the pool down to what it had mapped before, so a failed
// AllocateArray leaves nothing mapped or registered behind (chunks another thread mapped meanwhile
// may be trimmed too, if idle: they grow again on demand).
//
// A run's chunk is the array's in the arena's owner record (arena/chunk_owner.h): carved as
// kArray, kArrayHeld once freed while granted, kWithdrawn when given back (its run lost).
// Grants (pinpool/grant_lock.h): a run of a live chunk array is grantable as a block
// (IsLiveRun). Freeing an array asks the grant registry about each run, under the grant lock: a
// run no grant reaches goes back at once; one a grant reaches is held (Arena::HoldArrayRun: its
// chunk stays carved, out of every heap and of Trim) and goes back when its last grant ends
// (ReleaseHeld, from the GrantLock that ended it). Small arrays are blocks and are held as blocks
// are.
//
// Thread safety: Allocate and Free from any thread (the ledger and the arena take their locks);
// the counts are atomics.
#ifndef PINPOOL_POOL_ARRAYS_H_
#define PINPOOL_POOL_ARRAYS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "arena/arena.h"
#include "heap/heap.h"
#include "pinpool/array.h"
#include "pool/classes.h"
#include "pool/grants/registry.h"

namespace pinpool {
PINPOOL_ABI_BEGIN
class Pool;
PINPOOL_ABI_END
}  // namespace pinpool

namespace pinpool::internal {

class PoolArrays {
 public:
  // `classes` may be null (a pool without named classes); the others must outlive this. `heap`
  // is the default class's.
  PoolArrays(Arena* arena, Heap* heap, PoolClasses* classes, GrantRegistry* grants);

  // `count` elements of `element_size` bytes aligned to `alignment`; `pool` serves small arrays.
  // Errors as Pool::AllocateArray states.
  absl::StatusOr<Array> Allocate(Pool& pool, std::size_t count, std::size_t element_size,
                                 std::size_t alignment);
  // Frees a non-empty array of this pool (aborts naming the rule for another pool's) and empties
  // it.
  void Free(Pool& pool, Array& array) noexcept;

  // True when `p` is the base of a run of a live (not freed) chunk array and `size` fits it.
  bool IsLiveRun(const void* p, std::size_t size) const noexcept;
  // When `p` is a held run's chunk (freed while granted), gives the chunk back and returns true
  // (true and nothing more for an array's chunk given back meanwhile: the arena has it no more).
  bool ReleaseHeld(void* p) noexcept;

  std::size_t live() const noexcept { return live_.load(std::memory_order_relaxed); }
  // Whole chunks held by arrays (small arrays are blocks: counted as live blocks).
  std::size_t chunk_bytes() const noexcept { return chunk_bytes_.load(std::memory_order_relaxed); }

 private:
  void* TakeChunk() noexcept;
  void GiveChunk(void* chunk) noexcept;
  // Every heap gives back the whole chunks it holds with no block in them; how many.
  std::size_t ReleaseIdleChunks() noexcept;
  // Why the last TakeChunk failed.
  absl::Status TakeError() const;

  Arena* const arena_;
  Heap* const heap_;
  PoolClasses* const classes_;
  GrantRegistry* const grants_;
  std::atomic<std::size_t> live_{0};
  std::atomic<std::size_t> chunk_bytes_{0};
};

}  // namespace pinpool::internal

#endif  // PINPOOL_POOL_ARRAYS_H_
