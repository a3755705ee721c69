// Moving pool blocks with UCX (pinpool/ucx.h): put and get from and into a block, passing its
// chunk's memory handle, after checking both ranges; waiting for requests; unpacked rkeys.
//
// Owns nothing beyond the UcxRkey handles it creates. Nothing here registers memory: the block's
// chunk was mapped once by the UcxDomain, and the memory handle goes with every operation
// (UCP_OP_ATTR_FIELD_MEMH), which UCX 1.15+ uses and 1.13/1.14 ignore (their zero-copy path
// finds the chunk's registration in the memory domains' caches instead).
//
// Thread safety: stateless functions; the worker and endpoint follow UCX's rules.
#include <utility>

#include "absl/strings/str_format.h"
#include "pinpool/provider.h"
#include "pinpool/ucx.h"

namespace pinpool {
PINPOOL_ABI_BEGIN
namespace {

absl::Status CheckRanges(const char* what, const Block& block, std::size_t offset,
                         std::size_t length, const UcxRemote& remote, std::size_t remote_offset,
                         std::size_t domain) {
  if (absl::Status s =
          CheckTransferRanges(what, block, offset, length,
                              {remote.length, "address", remote.address}, remote_offset, domain);
      !s.ok()) {
    return s;
  }
  if (remote.rkey == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: the remote has no unpacked rkey", what));
  }
  return absl::OkStatus();
}

absl::StatusOr<ucs_status_ptr_t> Started(ucs_status_ptr_t request, const char* what) {
  if (UCS_PTR_IS_ERR(request)) return UcxError(UCS_PTR_STATUS(request), what);
  return request;
}

ucp_request_param_t WithMemh(ucp_request_param_t param, const Block& block, std::size_t domain) {
  param.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
  param.memh = UcxChunkOf(block, domain).memh;
  return param;
}

}  // namespace

absl::StatusOr<UcxRkey> UcxRkey::Unpack(ucp_ep_h ep, std::span<const std::byte> packed_rkey) {
  if (ep == nullptr) return absl::InvalidArgumentError("UcxRkey::Unpack: null endpoint");
  if (packed_rkey.empty()) return absl::InvalidArgumentError("UcxRkey::Unpack: empty rkey");
  ucp_rkey_h rkey = nullptr;
  if (const ucs_status_t s = ucp_ep_rkey_unpack(ep, packed_rkey.data(), &rkey); s != UCS_OK) {
    return UcxError(s, absl::StrFormat("ucp_ep_rkey_unpack of a %d-byte rkey", packed_rkey.size()));
  }
  return UcxRkey(rkey);
}

UcxRkey::~UcxRkey() {
  if (rkey_ != nullptr) ucp_rkey_destroy(rkey_);
}

UcxRkey& UcxRkey::operator=(UcxRkey&& other) noexcept {
  if (this != &other) {
    if (rkey_ != nullptr) ucp_rkey_destroy(rkey_);
    rkey_ = std::exchange(other.rkey_, nullptr);
  }
  return *this;
}

absl::StatusOr<ucs_status_ptr_t> UcxPut(ucp_ep_h ep, const Block& from, std::size_t offset,
                                        std::size_t length, const UcxRemote& to,
                                        std::size_t to_offset, std::size_t domain,
                                        ucp_request_param_t param) {
  if (absl::Status s = CheckRanges("UcxPut", from, offset, length, to, to_offset, domain);
      !s.ok()) {
    return s;
  }
  const ucp_request_param_t p = WithMemh(param, from, domain);
  return Started(ucp_put_nbx(ep, static_cast<const std::byte*>(from.data()) + offset, length,
                             to.address + to_offset, to.rkey, &p),
                 "ucp_put_nbx");
}

absl::StatusOr<ucs_status_ptr_t> UcxGet(ucp_ep_h ep, const Block& into, std::size_t offset,
                                        std::size_t length, const UcxRemote& from,
                                        std::size_t from_offset, std::size_t domain,
                                        ucp_request_param_t param) {
  if (absl::Status s = CheckRanges("UcxGet", into, offset, length, from, from_offset, domain);
      !s.ok()) {
    return s;
  }
  const ucp_request_param_t p = WithMemh(param, into, domain);
  return Started(ucp_get_nbx(ep, static_cast<std::byte*>(into.data()) + offset, length,
                             from.address + from_offset, from.rkey, &p),
                 "ucp_get_nbx");
}

absl::Status UcxWait(ucp_worker_h worker, ucs_status_ptr_t request) {
  if (request == nullptr) return absl::OkStatus();  // UCS_OK: completed in place
  if (UCS_PTR_IS_ERR(request)) return UcxError(UCS_PTR_STATUS(request), "UCX operation");
  ucs_status_t s;
  while ((s = ucp_request_check_status(request)) == UCS_INPROGRESS) ucp_worker_progress(worker);
  ucp_request_free(request);
  return UcxError(s, "UCX operation");
}

absl::Status UcxFlush(ucp_worker_h worker, ucp_ep_h ep) {
  ucp_request_param_t param{};
  return UcxWait(worker, ucp_ep_flush_nbx(ep, &param));
}

PINPOOL_ABI_END
}  // namespace pinpool
