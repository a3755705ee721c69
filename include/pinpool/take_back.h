// What a pool tells its application when it gave a chunk back because the chunk's backing had to
// go (Pool::GiveBack, or another process opening or truncating a chunk's file: docs/backing.md,
// "Taking memory back"). The blocks listed were live (allocated and not freed) when the chunk
// was withdrawn: their memory is gone (the range is an inaccessible reservation now), no grant
// reaches them any more, and no device has the chunk registered.
//
// What the application may still do with a lost block: free it (Deallocate accepts it and does
// nothing, counted in PoolStats::lost_block_frees; the chunk's slot is never used again, so such
// a free can never reach another block); Reallocate returns an empty Block and UsableSize 0 for
// it; Lookup and Contains no longer know it. Reading or writing it faults.
#ifndef PINPOOL_TAKE_BACK_H_
#define PINPOOL_TAKE_BACK_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "pinpool/abi.h"

namespace pinpool {
PINPOOL_ABI_BEGIN

struct LostBlock {
  void* data = nullptr;  // the block's address, as Allocate returned it
  std::size_t size = 0;  // its usable size (at least what was asked for)
};

struct LostChunk {
  std::uint32_t index = 0;  // ChunkInfo::index it had
  std::uintptr_t base = 0;  // its range: [base, base + size)
  std::size_t size = 0;
  std::string reason;             // who wanted it back: the application, or its file's lease
  std::vector<LostBlock> blocks;  // by address
};

PINPOOL_ABI_END
}  // namespace pinpool

#endif  // PINPOOL_TAKE_BACK_H_
