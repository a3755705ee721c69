// Warm restart (pinpool/share.h; docs/sharing.md): Quiesce and HandOver on the predecessor's
// side, Adopt and Claim on the successor's.
//
// Live blocks are named across the handover by BlockHandle (chunk index, offset, size): the
// successor's arena puts every adopted chunk in the slot it had, so a handle means the same bytes
// on both sides, and the successor's application keeps its own index of blocks by handle (a
// KV-cache's page table, say) or takes them back from Pool::AdoptedBlocks.
// Thread safety: Quiesce and HandOver need the pool to themselves; Adopt and Claim as Pool.
#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "arena/arena.h"
#include "os/chunk_file.h"
#include "pinpool/pool.h"
#include "pool/background.h"
#include "pool/classes.h"
#include "pool/grants/registry.h"
#include "pool/sharing/sharing.h"
#include "pool/sharing/transfer.h"
#include "util/bytes.h"
#include "util/status_macros.h"

namespace pinpool {
PINPOOL_ABI_BEGIN
namespace {

// OK when `live` are disjoint blocks inside ready chunks of `arena`, each handle of the chunk
// there now (its generation).
absl::Status CheckLive(std::span<const BlockHandle> live, const internal::Arena& arena,
                       std::uintptr_t range_base) {
  std::vector<BlockHandle> sorted(live.begin(), live.end());
  std::sort(sorted.begin(), sorted.end(), [](const BlockHandle& a, const BlockHandle& b) {
    return a.chunk != b.chunk ? a.chunk < b.chunk : a.offset < b.offset;
  });
  const std::size_t size = arena.chunk_size();
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    const BlockHandle& h = sorted[i];
    const void* p = reinterpret_cast<void*>(range_base + std::uintptr_t{h.chunk} * size + h.offset);
    if (h.chunk >= arena.range_size() / size || h.size == 0 || h.offset >= size ||
        h.size > size - h.offset || arena.ChunkOf(p) == nullptr) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "live block {chunk %d, offset %d, %d bytes} is not inside a chunk of this pool", h.chunk,
          h.offset, h.size));
    }
    if (const std::uint32_t now = arena.ChunkOf(p)->generation; now != h.generation) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "live block {chunk %d, offset %d, %d bytes} names generation %d of its chunk; the "
          "pool's chunk %d is generation %d (the handle is of another chunk at that index: one "
          "trimmed since)",
          h.chunk, h.offset, h.size, h.generation, h.chunk, now));
    }
    if (i > 0 && sorted[i - 1].chunk == h.chunk &&
        sorted[i - 1].offset + sorted[i - 1].size > h.offset) {
      return absl::InvalidArgumentError(
          absl::StrFormat("live blocks overlap in chunk %d (at offsets %d and %d)", h.chunk,
                          sorted[i - 1].offset, h.offset));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Pool::Quiesce() {
  CheckAlive("Quiesce");
  PINPOOL_RETURN_IF_ERROR(internal::CheckShareable(options_, classes_ != nullptr));
  if (const std::size_t holders = grants_->holders(); holders != 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%d grant holder(s) (VerbsRemoteAccess, FabricRemoteAccess) still use the pool: destroy "
        "them first (that ends each of their grants), so that no peer can reach its memory",
        holders));
  }
  background_.reset();                      // no growth or trim from here on
  head_.heap_id = internal::Heap::kDeadId;  // the inline paths miss; the slow path refuses
  sharing_->quiesced.store(true);
  arena_->Quiesce();
  return absl::OkStatus();
}

absl::Status Pool::HandOver(int socket, std::span<const BlockHandle> live) {
  CheckAlive("HandOver");
  PINPOOL_RETURN_IF_ERROR(internal::CheckShareable(options_, classes_ != nullptr));
  if (!sharing_->quiesced.load()) {
    return absl::FailedPreconditionError("HandOver needs a quiesced pool: call Quiesce first");
  }
  if (sharing_->handed_over.load()) {
    // Handed over, but the successor may have failed to adopt it (its Adopt returned an error,
    // or it went away): then no process holds the chunks' ownership locks, and the pool takes its
    // files back and may be sent again. A successor that adopted holds them.
    PINPOOL_RETURN_IF_ERROR(arena_->TakeBackFiles());
    sharing_->handed_over.store(false);
  }
  if (const std::size_t failed = arena_->failed_adoptions(); failed != 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%d adopted chunk(s) of this pool could not be built: Claim a block of each (which tries "
        "again) before handing the pool over, so that their blocks go with it",
        failed));
  }
  PINPOOL_RETURN_IF_ERROR(CheckLive(live, *arena_, head_.range_base));
  // Every chunk or none: a handover missing one would lose its blocks (the successor refuses it).
  PINPOOL_ASSIGN_OR_RETURN(std::vector<internal::Arena::SharedChunk> chunks,
                           arena_->SharedChunks());
  // The ownership locks go before the descriptors do: the successor takes them on receipt.
  arena_->HandOverFiles(true);
  const absl::Status sent =
      internal::SendPool(socket,
                         internal::Describe(internal::WireMessage::Kind::kHandOver, id(), options_,
                                            arena_->range_size() / arena_->chunk_size()),
                         chunks, live);
  if (!sent.ok()) {
    arena_->HandOverFiles(false);  // still ours: the locks again
    return sent;
  }
  sharing_->handed_over.store(true);
  sharing_->CountHandover();
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Pool>> Pool::Adopt(PoolOptions options, int socket) {
  const auto start = std::chrono::steady_clock::now();
  PINPOOL_RETURN_IF_ERROR(internal::CheckShareable(options, !options.classes.empty()));
  PINPOOL_ASSIGN_OR_RETURN(internal::ReceivedPool got,
                           internal::ReceivePool(socket, internal::WireMessage::Kind::kHandOver));
  const internal::WireMessage& d = got.description;
  const bool files = d.backing == internal::WireMessage::Backing::kFiles;
  if (files != (options.backing.kind == BackingKind::kFiles) ||
      d.chunk_size != options.chunk_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the handed-over pool has %s chunks of %s; these options ask for %s chunks of %s",
        files ? "file" : "memfd", internal::FormatBytes(d.chunk_size),
        options.backing.kind == BackingKind::kFiles ? "file" : "memfd",
        internal::FormatBytes(options.chunk_size)));
  }
  std::uint32_t highest = 0;
  for (const internal::WireChunk& c : d.chunks) highest = std::max(highest, c.index);
  if (!d.chunks.empty() && options.budget / options.chunk_size <= highest) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the handed-over pool has a chunk at position %d: PoolOptions::budget must hold at least "
        "%s (it is %s)",
        highest, internal::FormatBytes((std::size_t{highest} + 1) * options.chunk_size),
        internal::FormatBytes(options.budget)));
  }
  internal::Handover handover{.id = d.pool_id, .chunks = {}, .live = d.live};
  const auto give_up = [&handover] {
    for (auto& c : handover.chunks) c.file.Disown();  // the data keeps its names
  };
  for (std::size_t i = 0; i < d.chunks.size(); ++i) {
    const internal::WireChunk& c = d.chunks[i];
    absl::StatusOr<internal::os::ChunkFile> file =
        internal::os::AdoptChunkFile(got.fds[i].get(), c.path, d.chunk_size);
    if (file.ok() && file->hugetlb_page_bytes() != c.hugetlb_page_bytes) {
      file->Disown();
      file = absl::InvalidArgumentError(absl::StrFormat(
          "chunk %d: its file's hugetlb page size is not the description's", c.index));
    }
    if (!file.ok()) {
      give_up();
      return absl::Status(file.status().code(), absl::StrFormat("adopting chunk %d: %s", c.index,
                                                                file.status().message()));
    }
    const bool held = std::any_of(d.live.begin(), d.live.end(),
                                  [&](const BlockHandle& h) { return h.chunk == c.index; });
    handover.chunks.push_back(
        {.index = c.index, .generation = c.generation, .file = *std::move(file), .held = held});
  }
  got.fds.clear();  // the predecessor's descriptions: ours are reopened
  // Every chunk is built in the background, adopted ones first: Adopt returns before any
  // registration.
  options.initial_size_in_background = true;
  absl::StatusOr<std::unique_ptr<Pool>> pool = Build(std::move(options), handover.id);
  if (!pool.ok()) {
    give_up();
    return pool.status();
  }
  const std::size_t chunks = handover.chunks.size();
  // Claimed now (on error nothing is claimed and the files are disowned).
  PINPOOL_RETURN_IF_ERROR((*pool)->arena_->QueueAdoption(std::move(handover.chunks)));
  (*pool)->sharing_->SetAdoptedChunks(chunks);
  (*pool)->sharing_->AdoptBlocks(handover.live, (*pool)->head_.range_base,
                                 (*pool)->arena_->chunk_size());
  PINPOOL_RETURN_IF_ERROR((*pool)->StartBackgroundWork(start, /*adopting=*/true));
  return pool;
}

absl::StatusOr<Block> Pool::Claim(const BlockHandle& handle) {
  CheckAlive("Claim");
  const std::size_t size = arena_->chunk_size();
  const std::uintptr_t p = head_.range_base + std::uintptr_t{handle.chunk} * size +
                           std::min<std::uint64_t>(handle.offset, size);
  std::size_t live = 0;
  std::uint32_t generation = 0;
  if (handle.chunk >= arena_->range_size() / size || handle.offset >= size ||
      !sharing_->Reclaimed(reinterpret_cast<void*>(p), &live, &generation) || live != handle.size ||
      generation != handle.generation) {
    return absl::NotFoundError(absl::StrFormat(
        "{chunk %d generation %d, offset %d, %d bytes} names no handed-over block that is still "
        "live",
        handle.chunk, handle.generation, handle.offset, handle.size));
  }
  if (!arena_->AwaitReady(handle.chunk)) {
    // Its adoption failed earlier (the chunk is kept, file and all): once more, on this thread.
    if (const absl::Status why = arena_->RetryAdoption(handle.chunk); !why.ok()) {
      return absl::UnavailableError(absl::StrFormat(
          "chunk %d could not be adopted: %s; its blocks are kept, not lost: Claim again to try "
          "once more",
          handle.chunk, why.message()));
    }
  }
  return Block(reinterpret_cast<void*>(p), live, arena_->ChunkOf(reinterpret_cast<void*>(p)));
}

std::vector<BlockHandle> Pool::AdoptedBlocks() const {
  CheckAlive("AdoptedBlocks");
  return sharing_->adopted();
}

PINPOOL_ABI_END
}  // namespace pinpool
