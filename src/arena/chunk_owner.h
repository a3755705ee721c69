// ChunkOwner: who holds a chunk slot of an arena, the one record of it (Arena::OwnerOf).
//
// Every slow path that must know whose a chunk is (a free, a reallocation, a usable size, a grant
// check, giving the chunk back) reads this record once and dispatches on its kind; nothing else
// keeps a chunk's owner. The arena writes it, under its lock, only through its named transitions:
//   kUnmapped  -> kUnowned   a chunk is published in the slot (PublishLocked)
//   kUnmapped  -> kAdopted   an adopted chunk holding the predecessor's live blocks is published
//   kUnowned   -> kHeap/kArray  Carve hands the chunk's first bytes to that owner
//   kArray     -> kArrayHeld  a freed array's run that grants still reach (HoldArrayRun)
//   any ready  -> kUnowned   ReturnChunk (the owner holds nothing there any more)
//   kUnowned   -> kUnmapped  Trim gives the chunk back
//   any ready  -> kWithdrawn BeginGiveBack (returning the owner it had, kept in `was`): for good
// Readers load it lock-free (one 4-byte atomic per slot): a thread that holds a block of the chunk
// reads the owner that handed it out, since the owner was written before the block was.
#ifndef PINPOOL_ARENA_CHUNK_OWNER_H_
#define PINPOOL_ARENA_CHUNK_OWNER_H_

#include <cstdint>

namespace pinpool::internal {

struct ChunkOwner {
  enum Kind : std::uint8_t {
    kUnmapped,   // no chunk in the slot (never grown, being built or trimmed), or not in the range
    kUnowned,    // a ready chunk nobody has carved from (or that its owner handed back)
    kHeap,       // a heap's chunk: the heap of buffer class `heap_class` (0: the default heap)
    kArray,      // one run of a live chunk array (pool/arrays.h)
    kArrayHeld,  // a freed array's run still reached by grants: back to the arena when they end
    kAdopted,    // adopted with the predecessor's live blocks in it (pool/sharing/sharing.h)
    kWithdrawn,  // given back, or being given back (Arena::BeginGiveBack): for the arena's life
  };
  Kind kind = kUnmapped;
  Kind was = kUnmapped;         // kWithdrawn: the kind it had before
  std::uint8_t heap_class = 0;  // kHeap, and kWithdrawn from kHeap: the class; else 0
  std::uint8_t unused = 0;

  static constexpr ChunkOwner Heap(std::uint8_t heap_class) {
    return {.kind = kHeap, .heap_class = heap_class};
  }
  static constexpr ChunkOwner Array() { return {.kind = kArray}; }
};
static_assert(sizeof(ChunkOwner) == 4);

}  // namespace pinpool::internal

#endif  // PINPOOL_ARENA_CHUNK_OWNER_H_
