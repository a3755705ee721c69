// Moving pool blocks with libfabric RMA (pinpool/fabric.h): one checked write or read, and the
// synchronous whole-range versions that split at the provider's message size.
//
// Every transfer is checked against the local block and the peer's range BEFORE it is posted:
// some providers do not check at all (shm with cross-memory attach writes past a registration's
// end), and others fail the whole connection for one bad access (tcp, verbs).
//
// Owns nothing. Thread safety: stateless; the endpoint and queue follow the provider's model.
#include <rdma/fi_rma.h>
#include <sys/uio.h>

#include <algorithm>

#include "absl/strings/str_format.h"
#include "pinpool/fabric.h"
#include "pinpool/provider.h"

namespace pinpool {
PINPOOL_ABI_BEGIN
namespace {

enum class Direction { kWrite, kRead };

absl::Status Check(Direction dir, const Block& block, std::size_t offset, std::size_t length,
                   const FabricRemote& remote, std::size_t remote_offset, std::size_t domain,
                   bool one_message) {
  const char* what = dir == Direction::kWrite ? "FabricWrite" : "FabricRead";
  if (absl::Status s = CheckTransferRanges(
          what, block, offset, length, {remote.length, "key", remote.key}, remote_offset, domain);
      !s.ok()) {
    return s;
  }
  const FabricDomain& d = *FabricChunkOf(block, domain).domain;
  if (one_message && length > d.max_msg_size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: %d bytes exceed %s's max_msg_size %d; split the transfer (or use %sSync)", what,
        length, d.provider(), d.max_msg_size(), what));
  }
  return absl::OkStatus();
}

absl::Status Post(Direction dir, fid_ep* ep, const Block& block, std::size_t offset,
                  std::size_t length, fi_addr_t peer, const FabricRemote& remote,
                  std::size_t remote_offset, void* context, std::uint64_t flags,
                  std::size_t domain) {
  iovec iov{static_cast<std::byte*>(block.data()) + offset, length};
  void* desc = FabricDesc(block, domain);
  fi_rma_iov rma{remote.address + remote_offset, length, remote.key};
  fi_msg_rma msg{};
  msg.msg_iov = &iov;
  msg.desc = &desc;
  msg.iov_count = 1;
  msg.addr = peer;
  msg.rma_iov = &rma;
  msg.rma_iov_count = 1;
  msg.context = context;
  const int injected = InjectedProviderFault(ProviderCall::kFabricPost, length);
  const ssize_t ret = injected != 0              ? -injected
                      : dir == Direction::kWrite ? fi_writemsg(ep, &msg, flags)
                                                 : fi_readmsg(ep, &msg, flags);
  if (ret == 0) return absl::OkStatus();
  return FabricError(static_cast<int>(ret),
                     dir == Direction::kWrite ? "fi_writemsg" : "fi_readmsg");
}

// Reads one completion from `cq`, whatever its format (a tagged entry is the largest). Returns
// 1 for a completion, 0 for none yet, or an error carrying the failed completion's text.
absl::StatusOr<int> ReadOne(fid_cq* cq) {
  fi_cq_tagged_entry entry{};
  const ssize_t n = fi_cq_read(cq, &entry, 1);
  if (n == 1) return 1;
  if (n == -FI_EAGAIN) return 0;
  if (n == -FI_EAVAIL) {
    fi_cq_err_entry err{};
    if (fi_cq_readerr(cq, &err, 0) < 0) return FabricError(FI_EIO, "fi_cq_readerr");
    return FabricError(
        err.err, absl::StrFormat("RMA completion (provider error %d: %s)", err.prov_errno,
                                 fi_cq_strerror(cq, err.prov_errno, err.err_data, nullptr, 0)));
  }
  return FabricError(static_cast<int>(n), "fi_cq_read");
}

absl::Status Sync(Direction dir, fid_ep* ep, fid_cq* cq, const Block& block, std::size_t offset,
                  std::size_t length, fi_addr_t peer, const FabricRemote& remote,
                  std::size_t remote_offset, std::uint64_t flags, std::size_t domain) {
  if (absl::Status s = Check(dir, block, offset, length, remote, remote_offset, domain, false);
      !s.ok()) {
    return s;
  }
  const std::size_t piece = FabricChunkOf(block, domain).domain->max_msg_size();
  std::size_t posted = 0;
  std::size_t outstanding = 0;
  absl::Status first_error;
  // After an error nothing more is posted, but the pieces in flight are waited for: the block
  // must not be handed back while the provider may still be reading or writing it.
  while ((first_error.ok() && posted < length) || outstanding > 0) {
    if (first_error.ok() && posted < length) {
      const std::size_t n = std::min(piece, length - posted);
      absl::Status s = Post(dir, ep, block, offset + posted, n, peer, remote,
                            remote_offset + posted, nullptr, flags | FI_COMPLETION, domain);
      if (s.ok()) {
        posted += n;
        ++outstanding;
        continue;
      }
      if (!absl::IsUnavailable(s)) first_error = s;  // -FI_EAGAIN: progress, then retry
    }
    absl::StatusOr<int> got = ReadOne(cq);
    if (!got.ok()) {
      if (first_error.ok()) first_error = got.status();
      if (outstanding > 0) --outstanding;  // a failed completion is still that piece's
      if (outstanding == 0) break;
      continue;
    }
    if (*got == 1 && outstanding > 0) --outstanding;
  }
  return first_error;
}

}  // namespace

absl::Status FabricWrite(fid_ep* ep, const Block& from, std::size_t offset, std::size_t length,
                         fi_addr_t dest, const FabricRemote& to, std::size_t to_offset,
                         void* context, std::uint64_t flags, std::size_t domain) {
  if (absl::Status s = Check(Direction::kWrite, from, offset, length, to, to_offset, domain, true);
      !s.ok()) {
    return s;
  }
  return Post(Direction::kWrite, ep, from, offset, length, dest, to, to_offset, context, flags,
              domain);
}

absl::Status FabricRead(fid_ep* ep, const Block& into, std::size_t offset, std::size_t length,
                        fi_addr_t dest, const FabricRemote& from, std::size_t from_offset,
                        void* context, std::uint64_t flags, std::size_t domain) {
  if (absl::Status s =
          Check(Direction::kRead, into, offset, length, from, from_offset, domain, true);
      !s.ok()) {
    return s;
  }
  return Post(Direction::kRead, ep, into, offset, length, dest, from, from_offset, context, flags,
              domain);
}

absl::Status FabricWriteSync(fid_ep* ep, fid_cq* cq, const Block& from, std::size_t offset,
                             std::size_t length, fi_addr_t dest, const FabricRemote& to,
                             std::size_t to_offset, std::uint64_t flags, std::size_t domain) {
  return Sync(Direction::kWrite, ep, cq, from, offset, length, dest, to, to_offset, flags, domain);
}

absl::Status FabricReadSync(fid_ep* ep, fid_cq* cq, const Block& into, std::size_t offset,
                            std::size_t length, fi_addr_t dest, const FabricRemote& from,
                            std::size_t from_offset, std::uint64_t flags, std::size_t domain) {
  return Sync(Direction::kRead, ep, cq, into, offset, length, dest, from, from_offset, flags,
              domain);
}

PINPOOL_ABI_END
}  // namespace pinpool
