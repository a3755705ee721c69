// Attachment: another process's view of a shared pool (pinpool/share.h has the contract).
//
// One address-space reservation as large as the owner's (max_chunks x chunk_size, aligned to the
// chunk size), and each chunk's file mapped at its index's place in it, so a handle is one
// multiplication and one addition from an address, as in the owner. Every descriptor is closed
// once its chunk is mapped: the mapping keeps the pages, and the process holds no descriptor that
// could truncate or punch the file (docs/sharing.md says what an attached process can still do).
//
// Which chunk each place holds is its generation (ChunkInfo::generation, sent with each chunk):
// an owner that trims a chunk and grows another at the same index sends the new one under the
// next generation, and Update maps it over the old one's view; a chunk the owner no longer sends
// is unmapped. Map answers a handle only for the generation mapped at its index, so a handle
// never reaches a chunk other than the one it was made for.
//
// Invariant: generation[i] is 0 exactly when nothing is mapped at index i (a reservation), else
// the generation of the chunk whose file is mapped there; `count` is the number of non-zero
// entries. Written by Receive/Update (one thread), read by Map from any thread (atomics).
#include <atomic>
#include <cstring>
#include <memory>

#include "absl/strings/str_format.h"
#include "os/chunk_file.h"
#include "os/os.h"
#include "pool/sharing/sharing.h"
#include "pool/sharing/transfer.h"
#include "util/status_macros.h"

namespace pinpool {
PINPOOL_ABI_BEGIN

struct Attachment::Impl {
  PoolId id{};
  std::size_t chunk_size = 0;
  std::size_t max_chunks = 0;
  internal::os::Range range;
  std::unique_ptr<std::atomic<std::uint32_t>[]> generation;  // by index; 0: nothing mapped
  std::atomic<std::size_t> count{0};

  ~Impl() {
    if (range.base != nullptr) internal::os::Release(range);
  }

  void* At(std::uint32_t index) const {
    return static_cast<char*>(range.base) + std::size_t{index} * chunk_size;
  }
  void Forget(std::uint32_t index) {
    generation[index].store(0, std::memory_order_release);
    count.fetch_sub(1, std::memory_order_relaxed);
  }

  // Makes the chunks mapped here those `got` names (the contract of Update). Every descriptor is
  // checked before anything changes, so a refused message changes nothing.
  absl::Status Apply(const internal::ReceivedPool& got) {
    const internal::WireMessage& d = got.description;
    for (std::size_t i = 0; i < d.chunks.size(); ++i) {
      PINPOOL_RETURN_IF_ERROR(
          internal::os::CheckChunkFile(got.fds[i].get(), d.chunks[i].path, chunk_size).status());
    }
    std::vector<std::uint32_t> named(max_chunks, 0);
    for (const internal::WireChunk& c : d.chunks) named[c.index] = c.generation;
    absl::Status error;
    for (std::size_t i = 0; i < d.chunks.size() && error.ok(); ++i) {
      const std::uint32_t index = d.chunks[i].index;
      const std::uint32_t had = generation[index].load(std::memory_order_relaxed);
      if (had == d.chunks[i].generation) continue;
      // MAP_FIXED over an old chunk's view replaces it at once; a failure leaves a reservation.
      if (had != 0) Forget(index);
      error = internal::os::MapFileView(At(index), chunk_size, got.fds[i].get());
      if (!error.ok()) break;
      generation[index].store(d.chunks[i].generation, std::memory_order_release);
      count.fetch_add(1, std::memory_order_relaxed);
    }
    // Chunks the owner no longer has (and, after an error, old chunks not replaced yet).
    for (std::uint32_t index = 0; index < max_chunks; ++index) {
      const std::uint32_t had = generation[index].load(std::memory_order_relaxed);
      if (had != 0 && had != named[index]) {
        Forget(index);
        internal::os::UnmapView(At(index), chunk_size);
      }
    }
    return error;
  }
};

Attachment::Attachment(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Attachment::~Attachment() = default;

absl::StatusOr<std::unique_ptr<Attachment>> Attachment::Receive(int socket) {
  PINPOOL_ASSIGN_OR_RETURN(internal::ReceivedPool got,
                           internal::ReceivePool(socket, internal::WireMessage::Kind::kShare));
  auto impl = std::make_unique<Impl>();
  impl->id = got.description.pool_id;
  impl->chunk_size = got.description.chunk_size;
  impl->max_chunks = got.description.max_chunks;
  PINPOOL_ASSIGN_OR_RETURN(
      impl->range, internal::os::Reserve(impl->max_chunks * impl->chunk_size, impl->chunk_size));
  impl->generation.reset(new std::atomic<std::uint32_t>[impl->max_chunks]());
  PINPOOL_RETURN_IF_ERROR(impl->Apply(got));  // on error the reservation goes with `impl`
  return std::unique_ptr<Attachment>(new Attachment(std::move(impl)));
}

absl::Status Attachment::Update(int socket) {
  PINPOOL_ASSIGN_OR_RETURN(internal::ReceivedPool got,
                           internal::ReceivePool(socket, internal::WireMessage::Kind::kShare));
  const internal::WireMessage& d = got.description;
  if (d.pool_id != impl_->id || d.chunk_size != impl_->chunk_size ||
      d.max_chunks != impl_->max_chunks) {
    return absl::InvalidArgumentError(
        "Attachment::Update received another pool's share (its id or sizes differ)");
  }
  return impl_->Apply(got);
}

absl::StatusOr<std::span<std::byte>> Attachment::Map(const BlockHandle& handle) const {
  const std::size_t size = impl_->chunk_size;
  if (handle.chunk >= impl_->max_chunks || handle.size == 0 || handle.offset >= size ||
      handle.size > size - handle.offset) {
    return absl::OutOfRangeError(absl::StrFormat(
        "{chunk %d, offset %d, %d bytes} does not lie inside one chunk of the shared pool",
        handle.chunk, handle.offset, handle.size));
  }
  const std::uint32_t mapped = impl_->generation[handle.chunk].load(std::memory_order_acquire);
  if (mapped == 0) {
    return absl::NotFoundError(absl::StrFormat(
        "chunk %d is not mapped here (added after the share: Attachment::Update)", handle.chunk));
  }
  if (mapped != handle.generation) {
    return absl::NotFoundError(absl::StrFormat(
        "the handle names generation %d of chunk %d, and generation %d is mapped here: %s",
        handle.generation, handle.chunk, mapped,
        handle.generation > mapped
            ? "the owner replaced the chunk after the share this process last received "
              "(Attachment::Update)"
            : "the owner has trimmed the handle's chunk since (its blocks are gone)"));
  }
  auto* p = static_cast<std::byte*>(impl_->At(handle.chunk)) + handle.offset;
  return std::span<std::byte>(p, handle.size);
}

const PoolId& Attachment::pool_id() const noexcept { return impl_->id; }
std::size_t Attachment::chunk_size() const noexcept { return impl_->chunk_size; }
std::size_t Attachment::chunks_mapped() const noexcept {
  return impl_->count.load(std::memory_order_relaxed);
}

PINPOOL_ABI_END
}  // namespace pinpool
