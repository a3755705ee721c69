// libfabric: registering pool chunks with an application's fabric domain (fid_domain), so that
// blocks carry their descriptor and key; per-block remote grants; and RMA helpers that check a
// transfer against the block before posting it.
//
// A FabricDomain registers each chunk of every pool it serves ONCE (fi_mr_regattr, one iovec),
// obeying the provider's memory-registration mode (info->domain_attr->mr_mode, as fi_getinfo
// returned it):
//  - FI_MR_LOCAL: local buffers need a descriptor: FabricDesc(block) (always valid to pass);
//  - FI_MR_PROV_KEY: the provider chooses keys; without it pinpool requests keys, unique in the
//    fid_domain (counting up from FabricDomainOptions::first_key, skipping any key the provider
//    says is taken, FI_ENOKEY, e.g. by the application's own registrations);
//  - FI_MR_VIRT_ADDR: a peer addresses remote memory by its virtual address; without it, by the
//    offset from the start of the registration (FabricRemote::address is always what the peer
//    must pass);
//  - FI_MR_ENDPOINT: each registration is bound to an endpoint (FabricDomainOptions::endpoint,
//    FabricRemoteAccess's endpoint) and enabled before use (not exercised by any provider here:
//    none of tcp, shm, sockets or verbs requires it);
//  - FI_MR_ALLOCATED: the memory must be mapped: pool chunks always are;
//  - FI_MR_RAW (keys longer than 64 bits) is refused (kUnimplemented).
//
// Remote exposure follows the verbs domain's rules (docs/remote-access.md). A chunk is
// registered for local access only by default; a peer gets one block, or a range of one, through
// a grant (FabricRemoteAccess): a registration of exactly that range with its own key, revoked by
// closing it (fi_close, synchronous), and no block a grant can still reach is handed out again
// before its revocation. Whether a peer is kept inside the range is up to the provider:
//  - enforced (measured): verbs (by the device), tcp (the target drops the access and the
//    connection fails), sockets (an access error);
//  - NOT enforced (measured): shm with cross-memory attach (its default): a write told to cross
//    the end of a registration lands past it; FabricGrant::range_enforced is false there.
// Registration caches break grants: libfabric's verbs provider caches registrations by default
// and hands a range inside a registered chunk the chunk's own registration (same key, and
// with remote write access, whatever pinpool asked: measured). FabricDomain detects that on each
// chunk (shared_registrations()) and FabricRemoteAccess then refuses to grant, naming the fix:
// FI_MR_CACHE_MAX_COUNT=0 (pinpool's chunks need no cache: they are registered once).
// Chunk-wide keys (FabricDomainOptions::trusted_whole_chunk) remain for trusted peers only.
//
// This header includes <rdma/fabric.h>; it belongs to the optional library libpinpool_fabric
// (CMake: find_package(pinpool CONFIG COMPONENTS fabric), target pinpool::fabric; pkg-config:
// pinpool-fabric). Programs that use only the core library need no libfabric.
//
// Thread safety: Register and Deregister may be called from any thread at once (libfabric
// domains here are FI_THREAD_SAFE; pinpool's key counter and counters are atomic); FabricChunk
// records are immutable from registration to deregistration. A FabricRemoteAccess may be used from
// any thread; its grant operations share the pool's grant lock. The transfer helpers are plain
// functions; the endpoint and completion queue follow the provider's threading model.
#ifndef PINPOOL_FABRIC_H_
#define PINPOOL_FABRIC_H_

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pinpool/abi.h"
#include "pinpool/array.h"
#include "pinpool/block.h"
#include "pinpool/domain.h"
#include "pinpool/export.h"
#include "pinpool/keys.h"
#include "pinpool/pool.h"
#include "pinpool/verbs.h"  // RemoteRights

namespace pinpool {
PINPOOL_ABI_BEGIN

struct FabricDomainOptions {
  // DANGER, for trusted peers only: remote rights on each chunk's own registration, so that
  // ToFabricRemote gives the CHUNK's key, which opens every block of the chunk to any peer that
  // learns it, for as long as the pool lives (freeing a block revokes nothing). Use grants
  // (FabricRemoteAccess) unless every peer is part of the application's own trust domain.
  RemoteRights trusted_whole_chunk = {};
  // FI_MR_ENDPOINT providers: the endpoint each chunk registration is bound to. Required there
  // (kInvalidArgument otherwise), ignored elsewhere.
  fid_ep* endpoint = nullptr;
  // Without FI_MR_PROV_KEY: the first key pinpool requests (chunks and grants share one
  // counter). 0 picks 0x7070000000000000 ("pp") shifted down to the provider's key size.
  std::uint64_t first_key = 0;
  // What registration does to the chunk's pages: RDMA providers (verbs) take a long-term pin
  // (VmPin; the pool checks RLIMIT_MEMLOCK headroom first); tcp, shm and sockets pin nothing
  // (Pinning::kNone).
  Pinning pinning = Pinning::kLongTerm;
};

class FabricDomain;
template <typename Record>
class ChunkHandles;  // pinpool/provider.h

// One chunk's registration, what Keys::handle points to for a FabricDomain. Immutable while the
// chunk is registered; `magic` is kMagic exactly then.
struct FabricChunk {
  static constexpr std::uint64_t kMagic = 0x6661622d6368756e;  // "fab-chun"
  std::uint64_t magic = kMagic;
  fid_mr* mr = nullptr;
  void* desc = nullptr;   // fi_mr_desc(mr)
  std::uint64_t key = 0;  // fi_mr_key(mr)
  std::uintptr_t base = 0;
  std::size_t length = 0;
  // The provider returned a registration it shares with overlapping ones (a registration cache):
  // its rights are the cache's, and a range inside the chunk cannot get a registration of its
  // own. Measured when the chunk was registered.
  bool shared = false;
  const FabricDomain* domain = nullptr;
};

class PINPOOL_EXPORT FabricDomain final : public Domain {
 public:
  // Registers into the application's fabric domain, opened from `info` (the fi_info fi_getinfo
  // returned, whose mr_mode, key size, provider and message size are copied). The fid_domain
  // must outlive this object and every pool using it. Errors: kInvalidArgument (null domain or
  // info; FI_MR_ENDPOINT without options.endpoint; first_key beyond the key size),
  // kUnimplemented (FI_MR_RAW).
  static absl::StatusOr<std::shared_ptr<FabricDomain>> Wrap(
      fid_domain* domain, const fi_info* info, const FabricDomainOptions& options = {});
  ~FabricDomain() override;
  FabricDomain(const FabricDomain&) = delete;
  FabricDomain& operator=(const FabricDomain&) = delete;

  // kCustom: the domain plugs into the core through the Domain interface; name() says more.
  DomainKind kind() const noexcept override { return DomainKind::kCustom; }
  // "fabric<n>/<provider>/<domain name>", e.g. "fabric0/verbs;ofi_rxm/rxe0".
  std::string name() const override { return name_; }
  Pinning pinning() const noexcept override { return options_.pinning; }

  // fi_mr_regattr of [base, base+length) with FI_READ|FI_WRITE|FI_SEND|FI_RECV (plus the
  // trusted remote rights), a requested key when the provider takes them, bound and enabled for
  // FI_MR_ENDPOINT; then a probe registration of the chunk's first page to learn whether the
  // provider shares registrations (FabricChunk::shared). Keys: base, length, handle = a
  // FabricChunk. Errors: kResourceExhausted (the provider is out of registrations, or pinning
  // was refused: RLIMIT_MEMLOCK), kInternal otherwise, with the provider's text.
  absl::StatusOr<Keys> Register(void* base, std::size_t length) override;
  // fi_close of the registration. A failure is reported on stderr and counted.
  void Deregister(const Keys& keys) noexcept override;

  fid_domain* domain() const noexcept { return domain_; }
  const FabricDomainOptions& options() const noexcept { return options_; }
  const std::string& provider() const noexcept { return provider_; }
  std::uint64_t mr_mode() const noexcept { return mr_mode_; }  // FI_MR_BASIC/SCALABLE expanded
  std::size_t key_size() const noexcept { return key_size_; }
  std::size_t max_msg_size() const noexcept { return max_msg_size_; }
  bool virtual_addressing() const noexcept { return (mr_mode_ & FI_MR_VIRT_ADDR) != 0; }
  bool provider_keys() const noexcept { return (mr_mode_ & FI_MR_PROV_KEY) != 0; }
  // Whether the provider keeps a peer inside a registration's key and range (module comment).
  bool range_enforced() const noexcept { return range_enforced_; }
  // True once a chunk came back shared (see FabricChunk::shared): grants are then refused.
  bool shared_registrations() const noexcept { return shared_.load(); }
  std::uint64_t live_registrations() const noexcept;
  std::uint64_t total_registrations() const noexcept;
  std::uint64_t failed_deregistrations() const noexcept;

 private:
  friend class FabricRemoteAccess;

  // For Register and FabricRemoteAccess (inside the library only): registers [address,
  // address+length) with `access` under a fresh key, bound to `endpoint` under FI_MR_ENDPOINT.
  PINPOOL_NO_EXPORT absl::StatusOr<fid_mr*> RegisterRange(const void* address, std::size_t length,
                                                          std::uint64_t access,
                                                          fid_ep* endpoint) const;

  PINPOOL_NO_EXPORT FabricDomain(fid_domain* domain, const fi_info* info,
                                 const FabricDomainOptions& options, std::uint64_t mr_mode,
                                 std::uint64_t first_key);

  fid_domain* const domain_;
  const FabricDomainOptions options_;
  const std::string provider_;
  const std::uint64_t mr_mode_;
  const std::size_t key_size_;
  const std::size_t max_msg_size_;
  const bool range_enforced_;
  const std::string name_;
  mutable std::atomic<std::uint64_t> next_key_;
  std::atomic<bool> shared_{false};
  const std::unique_ptr<ChunkHandles<FabricChunk>> chunks_;  // registered chunks, counters
};

// The registration of the chunk `at` lies in, for the pool's domain number `domain` (which must
// be a FabricDomain).
inline const FabricChunk& FabricChunkOf(const Location& at, std::size_t domain = 0) noexcept {
  const auto* chunk = static_cast<const FabricChunk*>(at.keys(domain).handle);
  assert(chunk != nullptr && chunk->magic == FabricChunk::kMagic);
  return *chunk;
}
// The descriptor of the chunk's registration, for the local side of any data transfer from or
// into the block (mandatory under FI_MR_LOCAL, harmless elsewhere).
inline void* FabricDesc(const Location& at, std::size_t domain = 0) noexcept {
  return FabricChunkOf(at, domain).desc;
}

// What a peer needs to read or write remote memory: the address to pass (the owner's virtual
// address under FI_MR_VIRT_ADDR, the offset inside the registration otherwise), the key, and the
// bytes it may touch from there. Send it over your control channel.
struct FabricRemote {
  std::uint64_t address = 0;
  std::uint64_t key = 0;
  std::uint64_t length = 0;
};
// A block with its CHUNK's key: only with FabricDomainOptions::trusted_whole_chunk
// (kFailedPrecondition otherwise), and then the key opens the whole chunk to the peer for the
// pool's lifetime, whatever `length` says. For any peer not fully trusted, grant the block.
PINPOOL_EXPORT absl::StatusOr<FabricRemote> ToFabricRemote(const Block& block,
                                                           std::size_t domain = 0);

// A grant: one block, or a range of it, registered on its own for a peer. Empty when id is 0.
struct FabricGrant {
  std::uint64_t id = 0;
  FabricRemote remote = {};     // what the peer needs
  bool range_enforced = false;  // the provider keeps the peer inside the range (measured table)
  explicit operator bool() const noexcept { return id != 0; }
};

// Per-block grants on one FabricDomain of a pool, and per chunk run of an array. A grant
// registers exactly the granted range with the asked remote rights and its own key (scope: every
// endpoint of the fid_domain, or the given endpoint under FI_MR_ENDPOINT), and is revoked by
// closing that registration, at once. Freeing a granted block (or array) revokes its grants
// first; the memory is reused only after that. The pool must outlive the FabricRemoteAccess,
// which revokes everything when destroyed.
class PINPOOL_EXPORT FabricRemoteAccess {
 public:
  // Errors: kInvalidArgument (the domain number is not a FabricDomain of the pool; FI_MR_ENDPOINT
  // without an endpoint), kFailedPrecondition (the provider shares registrations: a grant would
  // be the whole chunk's registration; the message names the setting that turns that off).
  static absl::StatusOr<std::unique_ptr<FabricRemoteAccess>> Create(Pool& pool,
                                                                    std::size_t domain = 0,
                                                                    fid_ep* endpoint = nullptr);
  ~FabricRemoteAccess();
  FabricRemoteAccess(const FabricRemoteAccess&) = delete;
  FabricRemoteAccess& operator=(const FabricRemoteAccess&) = delete;

  // Grants `rights` on the whole block or on [offset, offset + length) of it (atomic rights are
  // granted as remote read and write: libfabric has no separate atomic access). Errors:
  // kInvalidArgument (no rights, empty or out-of-block range, not a block of this pool),
  // kFailedPrecondition (the block was freed, whether held for its grants or back in the pool;
  // the access was closed; or the provider returned a shared registration), kResourceExhausted
  // (out of registrations). A block freed and allocated again is a live block again: it cannot
  // be told from the one freed.
  absl::StatusOr<FabricGrant> Grant(const Block& block, RemoteRights rights);
  absl::StatusOr<FabricGrant> Grant(const Block& block, std::size_t offset, std::size_t length,
                                    RemoteRights rights);
  // Grants `rights` on elements [first, first + count) of `array` (all of it by default): one
  // grant per chunk run the range touches (Array::Slices), a registration of exactly those
  // elements, never one per element. Each is a grant like any other: Revoke and Ended apply to
  // it, and freeing the array revokes every run's grant before its chunk is reused (closing is
  // synchronous: nothing stays held). Errors: as Grant's, and kInvalidArgument for an empty array
  // or an empty or out-of-range subrange; on any error the grants already made for earlier runs
  // are revoked. DescribeGrants turns the result into a descriptor for the peer.
  absl::StatusOr<std::vector<FabricGrant>> GrantArray(const Array& array, RemoteRights rights,
                                                      std::size_t first = 0,
                                                      std::size_t count = SIZE_MAX);
  // Closes the grant's registration: no peer can use its key afterwards. Idempotent; kNotFound
  // for an id this object never issued; kInternal if the provider refused to close it (the
  // memory then stays reserved for good, never reused).
  absl::Status Revoke(const FabricGrant& grant);
  bool Ended(const FabricGrant& grant) const;
  // Revokes every grant; further grants fail.
  void RevokeAllNow();

  std::size_t live_grants() const;
  bool range_enforced() const noexcept;

  class Impl;  // the library's own: not exported

 private:
  PINPOOL_NO_EXPORT explicit FabricRemoteAccess(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A compact descriptor (pinpool/descriptor.h) of what FabricRemoteAccess::GrantArray granted on
// `array`: one run per grant, with the grant's key, elements renumbered from 0 (element i of the
// descriptor is element first + i of the array). A run's base is the grant's remote address:
// the virtual address under FI_MR_VIRT_ADDR, else 0, the offset in the grant's own registration
// (what the peer must pass either way). kInvalidArgument for an empty array, no grants, or a
// grant that is not whole elements of the array.
PINPOOL_EXPORT absl::StatusOr<std::vector<std::byte>> DescribeGrants(
    const Array& array, std::span<const FabricGrant> grants);

// Posts ONE RMA write of bytes [offset, offset + length) of `from` to `to` at `to_offset`
// (fi_writemsg with the chunk's descriptor and `flags`, e.g. FI_COMPLETION, or
// FI_DELIVERY_COMPLETE where the target must see the data before the completion), after checking
// both ranges and length <= the provider's max_msg_size (kOutOfRange / kInvalidArgument:
// nothing is posted). kUnavailable for -FI_EAGAIN: progress the completion queue and retry.
PINPOOL_EXPORT absl::Status FabricWrite(fid_ep* ep, const Block& from, std::size_t offset,
                                        std::size_t length, fi_addr_t dest, const FabricRemote& to,
                                        std::size_t to_offset, void* context,
                                        std::uint64_t flags = FI_COMPLETION,
                                        std::size_t domain = 0);
// Posts ONE RMA read of `length` bytes at `from` + `from_offset` into [offset, offset + length)
// of `into`. As FabricWrite otherwise.
PINPOOL_EXPORT absl::Status FabricRead(fid_ep* ep, const Block& into, std::size_t offset,
                                       std::size_t length, fi_addr_t dest, const FabricRemote& from,
                                       std::size_t from_offset, void* context,
                                       std::uint64_t flags = FI_COMPLETION, std::size_t domain = 0);

// Writes (or reads) the whole range and waits: splits it at max_msg_size, retries -FI_EAGAIN,
// and reads `cq` until every piece completed (an error completion fails with the provider's
// text). Every completion read from `cq` meanwhile is taken to be one of these: use it where
// nothing else completes on that queue. For simple programs and tests.
PINPOOL_EXPORT absl::Status FabricWriteSync(fid_ep* ep, fid_cq* cq, const Block& from,
                                            std::size_t offset, std::size_t length, fi_addr_t dest,
                                            const FabricRemote& to, std::size_t to_offset,
                                            std::uint64_t flags = FI_COMPLETION,
                                            std::size_t domain = 0);
PINPOOL_EXPORT absl::Status FabricReadSync(fid_ep* ep, fid_cq* cq, const Block& into,
                                           std::size_t offset, std::size_t length, fi_addr_t dest,
                                           const FabricRemote& from, std::size_t from_offset,
                                           std::uint64_t flags = FI_COMPLETION,
                                           std::size_t domain = 0);

// A libfabric return code (negative) as an absl::Status: "what: fi_strerror(...)".
PINPOOL_EXPORT absl::Status FabricError(int ret, const std::string& what);

PINPOOL_ABI_END
}  // namespace pinpool

#endif  // PINPOOL_FABRIC_H_
