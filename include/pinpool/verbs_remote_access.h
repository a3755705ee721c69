// VerbsRemoteAccess: per-block remote access for ONE connection (an RC queue pair), granted to a
// peer and revoked before the memory is reused.
//
// A pool's chunk regions give peers nothing by default (pinpool/verbs.h). To let the peer of a
// connection RDMA READ, WRITE or use atomics on one block, or on a range inside it, grant it:
//
//   auto access = pinpool::VerbsRemoteAccess::Create(*pool, qp);       // once per connection
//   absl::StatusOr<pinpool::RemoteGrant> g = (*access)->Grant(block, {.write = true});
//   send_to_peer(g->remote());                                    // address, rkey, length
//   ...                                                           // the peer writes
//   (*access)->Revoke(*g);      // or the peer sends SEND_WITH_INV with the rkey, or free it
//   pool->Deallocate(block);    // held, never handed out again, until the revocation completed
//
// Mechanisms (GrantMechanism), chosen per connection:
//  - kWindow: a type 2 memory window bound over exactly the granted range by a work request on
//    the connection's QP (IBV_WR_BIND_MW; no system call). Only that QP's peer can use its rkey.
//    Revoked by IBV_WR_LOCAL_INV, posted on the QP by Revoke or by freeing the block, and
//    confirmed by its completion; or by the peer's SEND_WITH_INV, the cheapest (the protocol's
//    own "done" message carries it). Windows come from a per-PD pool, allocated ahead
//    (options.min_idle_windows), never on the grant path once warm.
//  - kRegion: a memory region registered over exactly the granted range (its pages are pinned
//    already by the chunk); range-checked by every provider; usable from any QP of the PD;
//    revoked synchronously by deregistration. A kernel command each way.
//  - kAuto (default): kWindow where the device has type 2 windows AND enforces their bounds,
//    kRegion otherwise. Soft-RoCE (rxe) does not enforce window bounds (VerbsDomain::windows()
//    says why), so there kAuto means kRegion. A grant's `range_enforced` says, per grant,
//    whether a peer is kept inside the range; an explicit kWindow on such a device still
//    revokes and is still bound to the connection, but does not isolate.
//
// Safe reuse: while any grant can reach a block, freeing it does not return it to the heap: the
// free starts the revocation of its grants and the block is held (GrantStats::held_*) until
// every revocation is confirmed. Window invalidations are confirmed by their completions, which
// only the application sees: pass every completion of the connection's send and receive queues
// to OnCompletion (it recognises pinpool's work requests by options.wr_id_tag in the high 32
// bits of wr_id, and SEND_WITH_INV by the received invalidated rkey). An application that never
// reports completions gets held memory, never unsafe reuse. RevokeAllNow and the destructor
// revoke everything synchronously (deallocating the bound windows), for a connection that is
// over or broken.
//
// The queue pair: RC, in RTS, on the PD of the pool's verbs domain number options.domain,
// created by the application, which keeps posting its own work requests on it. pinpool posts a
// bind (unsignaled) per window grant and a signaled local invalidate per revocation: size the
// send queue and CQ for two more work requests per concurrent window grant. On hardware a bind
// executes asynchronously: post the message that carries the grant to the peer with
// IBV_SEND_FENCE (or after the bind's completion), so the peer cannot use the rkey first.
// A peer that uses a revoked, out-of-range or foreign key gets a remote access error, and the
// RC connection goes to the error state (verbs semantics); its memory is untouched.
//
// rkeys: a window's rkey changes only in its low 8 bits from one binding to the next. Windows are
// reused oldest first with at least options.min_idle_windows others idle, so no rkey value is
// issued again on the PD before 256 x min_idle_windows further window grants (16,384 by
// default); a stale rkey a peer still holds then names an invalidated window, never a new grant.
//
// Lifetime: the pool and the QP must outlive the VerbsRemoteAccess (destroy it before the QP: bound
// windows hold a reference to it). Thread safety: every method may be called from any thread;
// the grant operations of one pool are serialized by one lock (none is on the allocation fast
// path).
#ifndef PINPOOL_VERBS_REMOTE_ACCESS_H_
#define PINPOOL_VERBS_REMOTE_ACCESS_H_

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pinpool/abi.h"
#include "pinpool/array.h"
#include "pinpool/block.h"
#include "pinpool/export.h"
#include "pinpool/pool.h"
#include "pinpool/verbs.h"

namespace pinpool {
PINPOOL_ABI_BEGIN

enum class GrantMechanism : std::uint8_t {
  kAuto,    // kWindow where the device enforces window bounds, else kRegion
  kWindow,  // a type 2 memory window bound on the connection's QP
  kRegion,  // a memory region registered over exactly the granted range
};
// "auto", "window", "region"
constexpr const char* GrantMechanismName(GrantMechanism m) noexcept {
  switch (m) {
    case GrantMechanism::kAuto:
      return "auto";
    case GrantMechanism::kWindow:
      return "window";
    case GrantMechanism::kRegion:
      return "region";
  }
  return "?";
}

struct VerbsRemoteAccessOptions {
  // The pool's domain (PoolOptions::domains order) the QP's PD belongs to: a VerbsDomain.
  std::size_t domain = 0;
  GrantMechanism mechanism = GrantMechanism::kAuto;
  // Windows kept idle in the domain's pool beyond those in use (allocated at Create): bounds how
  // soon an rkey value comes back (256 x this many window grants), and how many grants can be
  // made before the pool must grow on the grant path.
  std::uint32_t min_idle_windows = 64;
  // High 32 bits of the wr_id of every work request pinpool posts on the QP; the application's
  // own wr_ids must never have them.
  std::uint32_t wr_id_tag = 0x70706f6c;  // "ppol"
};

// What a grant gives the peer, and how it is enforced. A default-constructed grant is empty.
struct RemoteGrant {
  std::uint64_t id = 0;  // non-zero: the VerbsRemoteAccess's handle for Revoke
  std::uint64_t address = 0;
  RKey rkey{};
  std::uint32_t length = 0;
  GrantMechanism mechanism = GrantMechanism::kAuto;  // kWindow or kRegion
  bool range_enforced = false;  // the device refuses the peer outside [address, address+length)

  // What the peer needs (send it over your control channel).
  RemoteBuffer remote() const noexcept { return {address, rkey, length}; }
  explicit operator bool() const noexcept { return id != 0; }
};

// The counters VerbsRemoteAccess keeps in PoolStats::grants.figures, summed over the pool's
// connections (read one with FigureValue(stats.grants.figures, VerbsGrantFigures::kWindowBinds)).
struct VerbsGrantFigures {
  static constexpr std::string_view kWindowBinds = "verbs_window_binds";
  static constexpr std::string_view kLocalInvalidations = "verbs_local_invalidations";
  static constexpr std::string_view kPeerInvalidations = "verbs_peer_invalidations";
  static constexpr std::string_view kWindowsDiscarded = "verbs_windows_discarded";
  static constexpr std::string_view kRegionRegistrations = "verbs_region_registrations";
  static constexpr std::string_view kRegionDeregistrations = "verbs_region_deregistrations";
  // Completions OnCompletion saw with IBV_WC_REM_ACCESS_ERR: the peer refused a request of this
  // side (the application's or pinpool's) for its rkey, range or rights; a stale grant used by
  // this side is caught here. (A peer's stale access to this side's memory is refused by this
  // side's device without a completion here: docs/metrics.md.)
  static constexpr std::string_view kRemoteAccessErrors = "verbs_remote_access_errors";
  // pinpool's own work requests (binds, invalidations) that completed in error.
  static constexpr std::string_view kWorkRequestErrors = "verbs_work_request_errors";
};

// The latency histograms VerbsRemoteAccess records in PoolStats::grants.histograms.
struct VerbsGrantHistograms {
  static constexpr std::string_view kWindowBindSeconds = "verbs_window_bind_seconds";
  static constexpr std::string_view kInvalidateSeconds = "verbs_invalidate_seconds";
  static constexpr std::string_view kRegionRegisterSeconds = "verbs_region_register_seconds";
  static constexpr std::string_view kRegionDeregisterSeconds = "verbs_region_deregister_seconds";
};

class PINPOOL_EXPORT VerbsRemoteAccess {
 public:
  // Errors: kInvalidArgument (null QP, a QP that is not RC, a domain index that is not a verbs
  // domain of the pool, a QP on another PD), kUnimplemented (kWindow asked of a device without
  // type 2 windows: the message names the capability), kResourceExhausted (windows could not be
  // allocated).
  static absl::StatusOr<std::unique_ptr<VerbsRemoteAccess>> Create(
      Pool& pool, ibv_qp* qp, const VerbsRemoteAccessOptions& options = {});
  // Revokes every grant at once (RevokeAllNow) and releases the blocks they held.
  ~VerbsRemoteAccess();
  VerbsRemoteAccess(const VerbsRemoteAccess&) = delete;
  VerbsRemoteAccess& operator=(const VerbsRemoteAccess&) = delete;

  // Grants the connection's peer `rights` on the whole of `block` (its `size()` bytes), or on
  // [offset, offset + length) of it. `block` must be live, from this pool. Errors:
  // kInvalidArgument (empty rights, an empty or out-of-block range, a block of another pool or
  // not a block's start, atomics on a range whose start or end is not a multiple of 8 bytes),
  // kFailedPrecondition (the block was freed: held until its grants end, or back in the pool;
  // or the connection was closed by RevokeAllNow or a failed work request), kUnimplemented (a
  // right the device lacks: atomics), kResourceExhausted (the send queue is full, windows or
  // regions ran out; the message names which). What cannot be detected: a block freed and
  // allocated again (by this thread or another) is a live block again, and a free that races
  // with Grant on another thread is the application's race, like any use of a block being freed.
  absl::StatusOr<RemoteGrant> Grant(const Block& block, RemoteRights rights);
  absl::StatusOr<RemoteGrant> Grant(const Block& block, std::size_t offset, std::size_t length,
                                    RemoteRights rights);

  // Grants the peer `rights` on elements [first, first + count) of `array` (all of it by
  // default): one grant per chunk run the range touches, over exactly those elements (count x
  // stride bytes from the first one's address), never one per element. Each is a grant like any
  // other: Revoke, Ended and SEND_WITH_INV apply to it, and freeing the array holds every run a
  // grant reaches until its revocation completed (pinpool/array.h). Errors: as Grant's, and
  // kInvalidArgument for an empty array or an empty or out-of-range subrange; on any error the
  // grants already made for earlier runs are revoked. DescribeGrants turns the result into a
  // descriptor for the peer.
  absl::StatusOr<std::vector<RemoteGrant>> GrantArray(const Array& array, RemoteRights rights,
                                                      std::size_t first = 0,
                                                      std::size_t count = SIZE_MAX);

  // Revokes a grant: a region is deregistered at once; a window's invalidation is posted and
  // completes with its completion (OnCompletion). Idempotent: a grant already revoking or
  // ended is OK. kNotFound for an id this connection never issued.
  absl::Status Revoke(const RemoteGrant& grant);
  // True once no peer can use the grant any more (its revocation completed, the peer
  // invalidated it, or the connection's grants were all revoked).
  bool Ended(const RemoteGrant& grant) const;

  // Give every completion of the connection's QP (send and receive side) here first. Returns
  // true when it was pinpool's own work request (consume it: it is not the application's);
  // false otherwise, including receive completions that carry the peer's invalidation of a
  // window (pinpool notes it; the receive is still the application's). An error completion of
  // pinpool's work request means the QP failed: every grant is revoked at once (RevokeAllNow).
  bool OnCompletion(const ibv_wc& wc);

  // Revokes every grant of the connection synchronously: windows are deallocated (which
  // invalidates them wherever they are bound), regions deregistered; held blocks are released.
  // For a connection that is over or whose QP is in the error state. Further grants fail.
  void RevokeAllNow();

  GrantMechanism mechanism() const noexcept;  // what kAuto chose: kWindow or kRegion
  bool range_enforced() const noexcept;       // whether this connection's grants isolate
  ibv_qp* qp() const noexcept;
  std::size_t live_grants() const;          // grants a peer may still use
  std::size_t pending_revocations() const;  // window invalidations not yet confirmed

  class PINPOOL_NO_EXPORT Impl;

 private:
  PINPOOL_NO_EXPORT explicit VerbsRemoteAccess(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A compact descriptor (pinpool/descriptor.h) of what GrantArray granted on `array`: one run per
// grant, with the grant's rkey, elements renumbered from 0 (element i of the descriptor is
// element first + i of the array). kInvalidArgument for no grants, or a grant that is not whole
// elements of the array.
PINPOOL_EXPORT absl::StatusOr<std::vector<std::byte>> DescribeGrants(
    const Array& array, std::span<const RemoteGrant> grants);

PINPOOL_ABI_END
}  // namespace pinpool

#endif  // PINPOOL_VERBS_REMOTE_ACCESS_H_
