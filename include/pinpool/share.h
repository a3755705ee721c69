// Sharing a pool's chunks with other processes, and handing a pool over to a successor
// (docs/sharing.md). Needs a file-backed pool (PoolOptions::backing: memfds or files in a tmpfs
// or hugetlbfs directory): a chunk is shared by passing its file's descriptor.
//
// Attach (the owner keeps the pool): Pool::Share(socket) sends every chunk's descriptor and a
// small versioned description over a connected Unix stream socket; the other process's
// Attachment::Receive maps them. The owner allocates and frees; it names a block to the attached
// process by a BlockHandle (Pool::HandleOf), which means the same block in every process that maps
// the chunks (their addresses differ), and Attachment::Map turns it into this process's address:
// a handle names one chunk (its index and generation), so it never maps another chunk that took
// the same place after a trim, here or there.
// An attached process reads and writes the blocks it was handed and nothing else; it cannot
// allocate, free, register or grant (it has no pool), and its death changes nothing in the owner's
// pool, its grants or its blocks.
//
// Warm restart (the pool moves): Pool::Quiesce ends every registration, Pool::HandOver sends the
// chunks and the handles of the blocks the application still needs, and the successor's
// Pool::Adopt maps the same files again, registers them with its own domains (in the background:
// a block is served as soon as its chunk is registered) and gives the application those blocks
// back (Pool::Claim), their bytes intact.
//
// Thread safety: Attachment is safe to read (Map) from any thread; Receive/Update from one.
#ifndef PINPOOL_SHARE_H_
#define PINPOOL_SHARE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "absl/status/statusor.h"
#include "pinpool/abi.h"
#include "pinpool/export.h"

namespace pinpool {
PINPOOL_ABI_BEGIN

// A block of a shared pool, named the same way in every process that maps its chunks and across
// a handover: the chunk's index in the pool, which chunk of that index it is (its generation:
// ChunkInfo::generation; an index trimmed and grown again holds a chunk of the next generation),
// the block's offset in that chunk, and its size. Made by Pool::HandleOf; a handle whose
// generation is not the chunk's maps nothing, anywhere (Attachment::Map, Pool::Claim).
struct BlockHandle {
  std::uint32_t chunk = 0;
  std::uint32_t generation = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  friend bool operator==(const BlockHandle&, const BlockHandle&) = default;
};

// A pool's identity: 16 random bytes chosen when it was created, kept across handovers.
using PoolId = std::array<std::uint8_t, 16>;

// Another process's view of a shared pool: its chunks mapped into this process.
class PINPOOL_EXPORT Attachment {
 public:
  // Receives what Pool::Share sent on `socket` (a connected Unix stream socket) and maps every
  // chunk it names, read-write, MAP_SHARED. The descriptors are closed once mapped. Errors: a
  // message that is not a pool's description, of another version, or that does not match its
  // descriptors (kInvalidArgument), the owner gone (kUnavailable), address space or mappings
  // refused (kResourceExhausted). Nothing stays mapped or open after an error.
  static absl::StatusOr<std::unique_ptr<Attachment>> Receive(int socket);
  // Unmaps every chunk. Blocks and the owner's pool are untouched.
  ~Attachment();
  Attachment(const Attachment&) = delete;
  Attachment& operator=(const Attachment&) = delete;

  // Receives a later Pool::Share of the same pool on `socket` and makes the chunks mapped here
  // the ones it names: maps those the owner added since, maps the chunk the owner put in place of
  // one it trimmed (the same index, another generation) over the old one's view, and unmaps the
  // chunks the owner no longer has (trimmed, given back): addresses Map returned in those fault
  // from then on (the owner trims a chunk only when no block lies in it). Whatever it returns,
  // every chunk mapped here afterwards is one the share named; on error some it named may be
  // missing (kNotFound from Map) until the next Update. Errors: kInvalidArgument when the message
  // is of another pool or does not add up, kUnavailable (the owner gone), kResourceExhausted
  // (mappings refused).
  absl::Status Update(int socket);

  // This process's address of the block `handle` names, and its size. kNotFound when the chunk it
  // names is not mapped here: not yet (the owner added it, or put it in place of a trimmed one,
  // after the last share this process received: Update), or no longer (the owner trimmed it; the
  // handle's block is gone). kOutOfRange when the block does not lie inside one chunk.
  absl::StatusOr<std::span<std::byte>> Map(const BlockHandle& handle) const;

  const PoolId& pool_id() const noexcept;
  std::size_t chunk_size() const noexcept;
  std::size_t chunks_mapped() const noexcept;

 private:
  struct Impl;
  explicit Attachment(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

PINPOOL_ABI_END
}  // namespace pinpool

#endif  // PINPOOL_SHARE_H_
