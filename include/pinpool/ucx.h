// UCX: registering pool chunks with an application's UCX context (ucp_context), so that blocks
// carry what UCX needs to move them, and put/get helpers that move a block without registering
// anything per operation.
//
// A UcxDomain maps each chunk of every pool it serves ONCE with ucp_mem_map on the chunk's own
// address (UCX allocates nothing; the chunk stays pinpool's) and keeps the memory handle. A block
// then gives its chunk's ucp_mem_h (UcxChunkOf(block).memh), which the helpers below pass with
// every put and get (UCP_OP_ATTR_FIELD_MEMH).
//
// What UCX does with that handle depends on its version. UCX's put and get use it from 1.15 on
// (by UCX's sources; UcxDomain::memh_used_for_rma() tells). UCX 1.13 (measured here) accepts the
// field but its RMA ignores it: a put or get large enough for zero-copy looks its local buffer up
// in the memory domain's registration cache (the InfiniBand one on RDMA), where the chunk's
// mapping already sits, so it still registers nothing per operation as long as that cache is on
// (UCX's default, UCX_IB_REG_METHODS=rcache,...). With UCX_IB_REG_METHODS=direct, UCX 1.13
// registers the local buffer of every zero-copy operation. docs/providers.md has the measurements.
//
// Remote exposure. UCX cannot give a peer one block: a packed rkey covers the whole mapping it
// was packed from (here: a chunk), for as long as the mapping lives, and UCX has no way to revoke
// it short of unmapping. So pinpool does not pack rkeys unless asked, and when asked
// (UcxDomainOptions::trusted_whole_chunk) a block's rkey opens its WHOLE chunk to any peer that
// holds it, for the pool's lifetime: for trusted peers only, as VerbsAccess::trusted_whole_chunk.
// Note also that UCX 1.13 ignores ucp_mem_map's protection flags: on an RDMA device a mapping
// asked for local access only still took a peer's put (measured on soft-RoCE), whether an rkey
// is packed or not; what keeps peers out of a chunk whose rkey was never packed is only that they
// lack the key. For per-block grants a peer cannot exceed, use the verbs domain and
// pinpool::VerbsRemoteAccess (pinpool/verbs_remote_access.h), or libfabric (pinpool/fabric.h) where
// the provider enforces ranges. For the same reason there are no array grants over UCX: the
// elements of an array a peer may reach would be every element of every chunk the array spans,
// until the pool is destroyed; grant arrays with VerbsRemoteAccess::GrantArray or
// FabricRemoteAccess::GrantArray (docs/arrays.md).
//
// This header includes <ucp/api/ucp.h>; it belongs to the optional library libpinpool_ucx
// (CMake: find_package(pinpool CONFIG COMPONENTS ucx), target pinpool::ucx; pkg-config:
// pinpool-ucx). Programs that use only the core library need no UCX.
//
// Thread safety: Register and Deregister may be called from any thread at once (ucp_mem_map and
// ucp_mem_unmap take the context's lock; the counters are atomic), so one domain may serve
// several pools. UcxChunk records are immutable from registration to deregistration. The
// helpers are plain functions of their arguments; the worker and endpoint they use follow UCX's
// own rules (a UCP_WORKER_THREAD_SINGLE worker belongs to one thread).
#ifndef PINPOOL_UCX_H_
#define PINPOOL_UCX_H_

#include <ucp/api/ucp.h>

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pinpool/abi.h"
#include "pinpool/block.h"
#include "pinpool/domain.h"
#include "pinpool/export.h"
#include "pinpool/keys.h"

namespace pinpool {
PINPOOL_ABI_BEGIN

struct UcxDomainOptions {
  // DANGER, for trusted peers only: pack each chunk's rkey when it is mapped, so that blocks can
  // be handed to peers (ToUcxPeerBlock). That rkey opens the chunk's WHOLE mapping (every block
  // of it: other requests', other peers', the application's own data) to any peer holding it,
  // for as long as the pool lives; freeing a block revokes nothing. Leave it off when the pool
  // only puts from and gets into its own blocks (the initiator side).
  bool trusted_whole_chunk = false;
  // What ucp_mem_map does to the chunk's pages: a long-term pin (counted in VmPin against
  // RLIMIT_MEMLOCK, so the pool checks the headroom before growing) whenever the context has an
  // RDMA device; a context with only tcp and shared-memory transports pins nothing, and
  // Pinning::kNone then avoids a needless refusal.
  Pinning pinning = Pinning::kLongTerm;
};

template <typename Record>
class ChunkHandles;  // pinpool/provider.h

// One chunk's mapping, what Keys::handle points to for a UcxDomain. Immutable while the chunk is
// mapped (from Register to Deregister); `magic` is kMagic exactly then.
struct UcxChunk {
  static constexpr std::uint64_t kMagic = 0x7563782d6368756e;  // "ucx-chun"
  std::uint64_t magic = kMagic;
  ucp_mem_h memh = nullptr;
  // The packed rkey (ucp_rkey_pack, once per chunk): a blob of a size only UCX knows (9-21
  // bytes seen with UCX 1.13), empty unless the domain has trusted_whole_chunk.
  const std::byte* packed_rkey = nullptr;
  std::size_t packed_rkey_size = 0;
  std::uintptr_t base = 0;
  std::size_t length = 0;

  std::span<const std::byte> rkey() const noexcept { return {packed_rkey, packed_rkey_size}; }
};

class PINPOOL_EXPORT UcxDomain final : public Domain {
 public:
  // Maps chunks with the application's context, which must have been created with
  // UCP_FEATURE_RMA (UCX 1.13 cannot be asked which features a context has: put and get fail
  // without it) and must outlive the domain and every pool using it. Errors: kInvalidArgument
  // (null context).
  static absl::StatusOr<std::shared_ptr<UcxDomain>> Wrap(ucp_context_h context,
                                                         const UcxDomainOptions& options = {});

  ~UcxDomain() override;
  UcxDomain(const UcxDomain&) = delete;
  UcxDomain& operator=(const UcxDomain&) = delete;

  // kCustom: the domain plugs into the core library through the Domain interface, as an
  // application's own domain would; name() says what it is.
  DomainKind kind() const noexcept override { return DomainKind::kCustom; }
  // "ucx<n>" (n numbers the process's UCX domains).
  std::string name() const override { return name_; }
  Pinning pinning() const noexcept override { return options_.pinning; }

  // ucp_mem_map of [base, base+length) at that address (UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
  // LENGTH, no flags), then ucp_rkey_pack when trusted_whole_chunk. Keys: base, length,
  // handle = a UcxChunk. Errors: kResourceExhausted when UCX cannot register (RLIMIT_MEMLOCK,
  // out of device resources: the message has UCX's reason), kInternal otherwise.
  absl::StatusOr<Keys> Register(void* base, std::size_t length) override;
  // ucp_rkey_buffer_release and ucp_mem_unmap. A failed unmap is reported on stderr and counted.
  void Deregister(const Keys& keys) noexcept override;

  ucp_context_h context() const noexcept { return context_; }
  const UcxDomainOptions& options() const noexcept { return options_; }
  // True when this UCX's put and get use a memory handle passed with UCP_OP_ATTR_FIELD_MEMH
  // (version 1.15 and later, by UCX's sources); false for older ones, whose put and get find the
  // chunk's registration in UCX's memory-domain caches instead (measured with 1.13). Read from
  // ucp_get_version at run time.
  bool memh_used_for_rma() const noexcept { return memh_used_for_rma_; }
  // Chunks mapped now and ever through this domain; failed ucp_mem_unmap calls.
  std::uint64_t live_registrations() const noexcept;
  std::uint64_t total_registrations() const noexcept;
  std::uint64_t failed_deregistrations() const noexcept;

 private:
  PINPOOL_NO_EXPORT UcxDomain(ucp_context_h context, const UcxDomainOptions& options);

  ucp_context_h const context_;
  const UcxDomainOptions options_;
  const std::string name_;
  const bool memh_used_for_rma_;
  const std::unique_ptr<ChunkHandles<UcxChunk>> chunks_;  // the mapped chunks and their counters
};

// The UCX mapping of the chunk `at` lies in, for the pool's domain number `domain` (which must
// be a UcxDomain).
inline const UcxChunk& UcxChunkOf(const Location& at, std::size_t domain = 0) noexcept {
  const auto* chunk = static_cast<const UcxChunk*>(at.keys(domain).handle);
  assert(chunk != nullptr && chunk->magic == UcxChunk::kMagic);
  return *chunk;
}

// What a peer needs to put into or get from a block: its address (UCX addresses remote memory
// by the owner's virtual address), its length, and its chunk's packed rkey, which the peer
// unpacks once per endpoint and chunk (UcxRkey). Send it over your control channel.
struct UcxPeerBlock {
  std::uint64_t address = 0;
  std::size_t length = 0;
  std::span<const std::byte> packed_rkey = {};  // valid while the chunk is mapped
};
// Only with UcxDomainOptions::trusted_whole_chunk (kFailedPrecondition otherwise), and then the
// rkey opens the whole chunk to the peer for the pool's lifetime, whatever `length` says.
PINPOOL_EXPORT absl::StatusOr<UcxPeerBlock> ToUcxPeerBlock(const Block& block,
                                                           std::size_t domain = 0);

// A peer's packed rkey unpacked on one endpoint (ucp_ep_rkey_unpack), destroyed with the object
// (ucp_rkey_destroy). Destroy it before the endpoint is closed. Unpack once per endpoint and
// peer chunk, not per operation.
class PINPOOL_EXPORT UcxRkey {
 public:
  static absl::StatusOr<UcxRkey> Unpack(ucp_ep_h ep, std::span<const std::byte> packed_rkey);
  UcxRkey() = default;
  ~UcxRkey();
  UcxRkey(UcxRkey&& other) noexcept : rkey_(other.rkey_) { other.rkey_ = nullptr; }
  UcxRkey& operator=(UcxRkey&& other) noexcept;
  UcxRkey(const UcxRkey&) = delete;
  UcxRkey& operator=(const UcxRkey&) = delete;
  ucp_rkey_h get() const noexcept { return rkey_; }

 private:
  explicit UcxRkey(ucp_rkey_h rkey) : rkey_(rkey) {}
  ucp_rkey_h rkey_ = nullptr;
};

// A peer's memory as this process reaches it through one endpoint: what UcxPut and UcxGet
// target. `length` bounds every access the helpers make.
struct UcxRemote {
  std::uint64_t address = 0;
  std::size_t length = 0;
  ucp_rkey_h rkey = nullptr;
};

// Starts a put of bytes [offset, offset + length) of `from` (a live block of a pool whose domain
// number `domain` is a UcxDomain) to to.address + to_offset, passing the chunk's memory handle.
// Both ranges are checked first (kOutOfRange: nothing is posted). Returns what ucp_put_nbx
// returned: UCS_OK (done: `from` may be reused) or a request to wait for (UcxWait, or your own
// callback in `param`); a UCX error as kInternal/kUnavailable. The put is complete at the peer
// only after a flush (UcxFlush). `param` is copied, and its memh field set.
PINPOOL_EXPORT absl::StatusOr<ucs_status_ptr_t> UcxPut(ucp_ep_h ep, const Block& from,
                                                       std::size_t offset, std::size_t length,
                                                       const UcxRemote& to, std::size_t to_offset,
                                                       std::size_t domain = 0,
                                                       ucp_request_param_t param = {});
// Starts a get of `length` bytes at from.address + from_offset into bytes [offset, offset +
// length) of `into`. As UcxPut otherwise; `into` holds the data once the request completed.
PINPOOL_EXPORT absl::StatusOr<ucs_status_ptr_t> UcxGet(
    ucp_ep_h ep, const Block& into, std::size_t offset, std::size_t length, const UcxRemote& from,
    std::size_t from_offset, std::size_t domain = 0, ucp_request_param_t param = {});

// Progresses `worker` until `request` (what a *_nbx call returned: UCS_OK, an error pointer or
// a request) completes, then frees it. Returns the operation's status. Blocks without limit.
PINPOOL_EXPORT absl::Status UcxWait(ucp_worker_h worker, ucs_status_ptr_t request);
// ucp_ep_flush_nbx on `ep`, waited: every put and get issued on it is complete at the peer.
PINPOOL_EXPORT absl::Status UcxFlush(ucp_worker_h worker, ucp_ep_h ep);

// A UCX status as an absl::Status ("what: <UCX's text>"), with a code a caller can act on.
PINPOOL_EXPORT absl::Status UcxError(ucs_status_t status, const std::string& what);

PINPOOL_ABI_END
}  // namespace pinpool

#endif  // PINPOOL_UCX_H_
