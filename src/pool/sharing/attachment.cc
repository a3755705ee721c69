// Attachment: another process's view of a shared pool (pinpool/share.h has the contract).
//
// One address-space reservation as large as the owner's (max_chunks x chunk_size, aligned to the
// chunk size), and each chunk's file mapped at its index's place in it, so a handle is one
// multiplication and one addition from an address, as in the owner. Every descriptor is closed
// once its chunk is mapped: the mapping keeps the pages, and the process holds no descriptor that
// could truncate or punch the file (docs/sharing.md says what an attached process can still do).
#include <cstring>

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
  std::vector<bool> mapped;
  std::size_t count = 0;

  ~Impl() {
    if (range.base != nullptr) internal::os::Release(range);
  }

  // Maps the chunks of `got` not mapped yet; checked first, all of them, so that an error maps
  // nothing.
  absl::Status MapAll(const internal::ReceivedPool& got) {
    const internal::WireMessage& d = got.description;
    for (std::size_t i = 0; i < d.chunks.size(); ++i) {
      PINPOOL_RETURN_IF_ERROR(
          internal::os::CheckChunkFile(got.fds[i].get(), d.chunks[i].path, chunk_size).status());
    }
    std::vector<std::uint32_t> done;
    for (std::size_t i = 0; i < d.chunks.size(); ++i) {
      const std::uint32_t index = d.chunks[i].index;
      if (mapped[index]) continue;
      void* at = static_cast<char*>(range.base) + std::size_t{index} * chunk_size;
      if (absl::Status s = internal::os::MapFileView(at, chunk_size, got.fds[i].get()); !s.ok()) {
        for (std::uint32_t undo : done) {
          internal::os::UnmapView(static_cast<char*>(range.base) + std::size_t{undo} * chunk_size,
                                  chunk_size);
          mapped[undo] = false;
          --count;
        }
        return s;
      }
      mapped[index] = true;
      ++count;
      done.push_back(index);
    }
    return absl::OkStatus();
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
  impl->mapped.assign(impl->max_chunks, false);
  PINPOOL_RETURN_IF_ERROR(impl->MapAll(got));
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
  return impl_->MapAll(got);
}

absl::StatusOr<std::span<std::byte>> Attachment::Map(const BlockHandle& handle) const {
  const std::size_t size = impl_->chunk_size;
  if (handle.chunk >= impl_->max_chunks || handle.size == 0 || handle.offset >= size ||
      handle.size > size - handle.offset) {
    return absl::OutOfRangeError(absl::StrFormat(
        "{chunk %d, offset %d, %d bytes} does not lie inside one chunk of the shared pool",
        handle.chunk, handle.offset, handle.size));
  }
  if (!impl_->mapped[handle.chunk]) {
    return absl::NotFoundError(absl::StrFormat(
        "chunk %d is not mapped here (added after the share: Attachment::Update)", handle.chunk));
  }
  auto* p =
      static_cast<std::byte*>(impl_->range.base) + std::size_t{handle.chunk} * size + handle.offset;
  return std::span<std::byte>(p, handle.size);
}

const PoolId& Attachment::pool_id() const noexcept { return impl_->id; }
std::size_t Attachment::chunk_size() const noexcept { return impl_->chunk_size; }
std::size_t Attachment::chunks_mapped() const noexcept { return impl_->count; }

PINPOOL_ABI_END
}  // namespace pinpool
