// VerbsRemoteAccess: per-block grants for one connection (see pinpool/verbs_remote_access.h for the
// contract). This file owns the grant records of one connection and the work requests pinpool
// posts on its QP; the pool's GrantRegistry owns which blocks are reachable or held, and its
// mutex serializes both (so a free on any thread, a completion and a grant never interleave).
//
// A record lives from its grant until no peer can use it AND no work request of ours still
// names its window: a window whose LOCAL_INV is queued stays out of the pool until that
// completion arrives, even if the peer invalidated it first.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "os/os.h"
#include "pinpool/descriptor.h"
#include "pinpool/grant_lock.h"
#include "pinpool/verbs_remote_access.h"
#include "providers/verbs/device.h"
#include "providers/verbs/windows.h"
#include "util/bytes.h"
#include "util/check.h"
#include "util/status_macros.h"

namespace pinpool {
PINPOOL_ABI_BEGIN

using internal::WindowPool;

namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// ibv_post_send, open to fault injection (os/os.h: kVerbsPost).
int PostSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  if (const int injected = internal::os::InjectedFault(internal::os::Call::kVerbsPost, 0);
      injected != 0) {
    *bad = wr;
    return injected;
  }
  return ibv_post_send(qp, wr, bad);
}

}  // namespace

class VerbsRemoteAccess::Impl final : public GrantHolder {
 public:
  struct Setup {
    Pool* pool;
    std::shared_ptr<VerbsDomain> domain;  // kept alive: its PD and window pool
    ibv_qp* qp;
    VerbsRemoteAccessOptions options;
    GrantMechanism mechanism;  // kWindow or kRegion
    bool range_enforced;
    unsigned with_invalidate_flag;
  };

  explicit Impl(Setup s)
      : s_(std::move(s)), windows_(internal::VerbsDomainInternals::Windows(*s_.domain)) {
    GrantLock lock(*s_.pool);
    lock.AddHolder();
  }

  ~Impl() {
    GrantLock lock(*s_.pool);
    RevokeAllLocked(lock);
    lock.RemoveHolder();
  }

  absl::StatusOr<RemoteGrant> Grant(const Block& block, std::size_t offset, std::size_t length,
                                    RemoteRights rights);
  absl::Status Revoke(std::uint64_t id);
  bool Ended(std::uint64_t id) const;
  bool OnCompletion(const ibv_wc& wc);
  void RevokeAllNow();

  const Setup& setup() const noexcept { return s_; }
  std::size_t live_grants() const {
    GrantLock lock(*s_.pool);
    return live_;
  }
  std::size_t pending_revocations() const {
    GrantLock lock(*s_.pool);
    return revoking_;
  }

  void RevokeForFree(GrantLock& lock, std::uint64_t id) override;

 private:
  enum class State : std::uint8_t {
    kLive,      // the peer may use it
    kRevoking,  // our LOCAL_INV is queued: the peer may use it until it completes
    kEnded,     // no peer can use it; the record waits for our LOCAL_INV's completion
  };
  struct Record {
    std::uint64_t id = 0;
    void* block = nullptr;
    std::uint64_t address = 0;
    std::uint32_t length = 0;
    std::uint32_t rkey = 0;
    ibv_mw* mw = nullptr;  // window grants
    ibv_mr* mr = nullptr;  // region grants
    State state = State::kLive;
    bool inv_posted = false;                                // our LOCAL_INV for it is queued
    std::chrono::steady_clock::time_point inv_posted_at{};  // when (its latency histogram)
  };

  std::uint64_t WrId(std::uint32_t slot) const noexcept {
    return (std::uint64_t{s_.options.wr_id_tag} << 32) | slot;
  }
  // Each *Locked method runs under the pool's grant lock, which `lock` holds.
  absl::StatusOr<RemoteGrant> GrantWindowLocked(GrantLock& lock, Record& r, ibv_mr* chunk_mr,
                                                RemoteRights rights);
  absl::StatusOr<RemoteGrant> GrantRegionLocked(GrantLock& lock, Record& r, RemoteRights rights);
  // Starts revoking a live grant; an error for a region whose deregistration failed.
  absl::Status RevokeLocked(GrantLock& lock, std::uint32_t slot);
  // The grant can no longer be used by any peer: tell the pool (which may release its block).
  void EndGrantLocked(GrantLock& lock, Record& r);
  // Forgets a record whose window (if any) is back in the pool or discarded.
  void EraseLocked(std::uint32_t slot);
  void RevokeAllLocked(GrantLock& lock);
  std::uint32_t NewSlotLocked();

  Setup s_;
  WindowPool* const windows_;  // null when the device has no type 2 windows
  // Guarded by the pool's grant lock.
  std::vector<Record> slots_;
  std::vector<std::uint32_t> free_slots_;
  std::unordered_map<std::uint64_t, std::uint32_t> by_id_;    // records alive
  std::unordered_map<std::uint32_t, std::uint32_t> by_rkey_;  // window grants not yet ended
  std::uint64_t next_id_ = 1;
  std::size_t live_ = 0;      // records in kLive
  std::size_t revoking_ = 0;  // records in kRevoking
  bool closed_ = false;
};

std::uint32_t VerbsRemoteAccess::Impl::NewSlotLocked() {
  if (!free_slots_.empty()) {
    const std::uint32_t slot = free_slots_.back();
    free_slots_.pop_back();
    return slot;
  }
  slots_.emplace_back();
  return static_cast<std::uint32_t>(slots_.size() - 1);
}

absl::StatusOr<RemoteGrant> VerbsRemoteAccess::Impl::Grant(const Block& block, std::size_t offset,
                                                           std::size_t length,
                                                           RemoteRights rights) {
  if (!rights.any()) {
    return absl::InvalidArgumentError(
        "VerbsRemoteAccess::Grant: no rights asked for (RemoteRights)");
  }
  if (!block) return absl::InvalidArgumentError("VerbsRemoteAccess::Grant: empty Block");
  if (length == 0 || offset > block.size() || length > block.size() - offset) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "VerbsRemoteAccess::Grant: range [%d, %d) is empty or outside the %d-byte block", offset,
        offset + length, block.size()));
  }
  if (length > UINT32_MAX) {
    return absl::InvalidArgumentError("VerbsRemoteAccess::Grant: a grant covers at most 4 GiB - 1");
  }
  if (rights.atomic &&
      ((reinterpret_cast<std::uintptr_t>(block.data()) + offset) % 8 != 0 || length % 8 != 0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "VerbsRemoteAccess::Grant: atomics work on aligned 8-byte words: range [%d, %d) of block "
        "%p must start and end on a multiple of 8",
        offset, offset + length, block.data()));
  }
  if ((rights.write || rights.atomic) && !s_.domain->access().local_write) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "VerbsRemoteAccess::Grant: write or atomic rights need a domain with local_write (%s has "
        "VerbsAccess::local_write off)",
        s_.domain->name()));
  }
  const std::optional<Location> where = s_.pool->Lookup(block.data());
  if (!where || where->domain_count() <= s_.options.domain) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "VerbsRemoteAccess::Grant: block %p is not memory of this connection's pool",
        block.data()));
  }
  auto* chunk_mr = static_cast<ibv_mr*>(where->keys(s_.options.domain).handle);

  absl::StatusOr<RemoteGrant> grant;
  {
    GrantLock lock(*s_.pool);
    if (closed_) {
      return absl::FailedPreconditionError(
          "VerbsRemoteAccess::Grant: this connection's grants were all revoked (RevokeAllNow, or a "
          "work request pinpool posted failed because the QP is in the error state); create a "
          "new VerbsRemoteAccess for a new connection");
    }
    if (absl::Status live = lock.CheckLive(block); !live.ok()) {
      return absl::Status(live.code(), absl::StrCat("VerbsRemoteAccess::Grant: ", live.message()));
    }
    const std::uint32_t slot = NewSlotLocked();
    Record& r = slots_[slot];
    r = Record{};
    r.id = next_id_;
    r.block = block.data();
    r.address = reinterpret_cast<std::uintptr_t>(block.data()) + offset;
    r.length = static_cast<std::uint32_t>(length);
    grant = s_.mechanism == GrantMechanism::kWindow ? GrantWindowLocked(lock, r, chunk_mr, rights)
                                                    : GrantRegionLocked(lock, r, rights);
    if (!grant.ok()) {
      // No grant: the slot goes back empty (an id left in it would make RevokeAllLocked end a
      // grant that never was, with no window or region).
      r = Record{};
      free_slots_.push_back(slot);
      return grant.status();
    }
    ++next_id_;
    by_id_[r.id] = slot;
    ++live_;
    GrantStats& c = lock.counters();
    ++c.grants;
    ++c.live;
    lock.Begin(block, *this, r.id);
  }
  return grant;
}

absl::StatusOr<RemoteGrant> VerbsRemoteAccess::Impl::GrantWindowLocked(GrantLock& lock, Record& r,
                                                                       ibv_mr* chunk_mr,
                                                                       RemoteRights rights) {
  const auto start = std::chrono::steady_clock::now();
  PINPOOL_ASSIGN_OR_RETURN(ibv_mw * mw, windows_->Take(s_.options.min_idle_windows));
  const std::uint32_t rkey = ibv_inc_rkey(mw->rkey);
  const std::uint32_t slot = static_cast<std::uint32_t>(&r - slots_.data());
  ibv_send_wr wr{};
  wr.wr_id = WrId(slot);
  wr.opcode = IBV_WR_BIND_MW;
  wr.send_flags = 0;  // unsignaled: only a failure completes (and the application's sq_sig_all)
  wr.bind_mw.mw = mw;
  wr.bind_mw.rkey = rkey;
  wr.bind_mw.bind_info.mr = chunk_mr;
  wr.bind_mw.bind_info.addr = r.address;
  wr.bind_mw.bind_info.length = r.length;
  wr.bind_mw.bind_info.mw_access_flags = (rights.read ? IBV_ACCESS_REMOTE_READ : 0) |
                                         (rights.write ? IBV_ACCESS_REMOTE_WRITE : 0) |
                                         (rights.atomic ? IBV_ACCESS_REMOTE_ATOMIC : 0);
  ibv_send_wr* bad = nullptr;
  if (const int err = PostSend(s_.qp, &wr, &bad); err != 0) {
    windows_->Return(mw);  // never bound
    if (err == ENOMEM) {
      return absl::ResourceExhaustedError(
          "VerbsRemoteAccess::Grant: the QP's send queue is full; size max_send_wr for two pinpool "
          "work requests (bind, invalidate) per concurrent window grant, or let completions "
          "drain");
    }
    return absl::InternalError(absl::StrFormat(
        "VerbsRemoteAccess::Grant: posting the window bind failed: %s", std::strerror(err)));
  }
  // The provider may not update mw->rkey for a bind posted as a work request; the next bind
  // must name the window by the rkey it has now.
  mw->rkey = rkey;
  r.mw = mw;
  r.rkey = rkey;
  by_rkey_[rkey] = slot;
  lock.Count(VerbsGrantFigures::kWindowBinds, "memory windows bound for grants");
  lock.Record(VerbsGrantHistograms::kWindowBindSeconds,
              "a window grant: taking an idle window and posting its bind", Seconds(start));
  return RemoteGrant{.id = r.id,
                     .address = r.address,
                     .rkey = RKey{rkey},
                     .length = r.length,
                     .mechanism = GrantMechanism::kWindow,
                     .range_enforced = s_.range_enforced};
}

absl::StatusOr<RemoteGrant> VerbsRemoteAccess::Impl::GrantRegionLocked(GrantLock& lock, Record& r,
                                                                       RemoteRights rights) {
  const int access = ((rights.write || rights.atomic) ? IBV_ACCESS_LOCAL_WRITE : 0) |
                     (rights.read ? IBV_ACCESS_REMOTE_READ : 0) |
                     (rights.write ? IBV_ACCESS_REMOTE_WRITE : 0) |
                     (rights.atomic ? IBV_ACCESS_REMOTE_ATOMIC : 0);
  const auto start = std::chrono::steady_clock::now();
  errno = internal::os::InjectedFault(internal::os::Call::kVerbsRegister, r.length);
  ibv_mr* mr = errno != 0 ? nullptr
                          : ibv_reg_mr(s_.domain->pd(), reinterpret_cast<void*>(r.address),
                                       r.length, access);
  if (mr == nullptr) {
    const int err = errno != 0 ? errno : EINVAL;
    return absl::Status(
        err == ENOMEM || err == EAGAIN ? absl::StatusCode::kResourceExhausted
                                       : absl::StatusCode::kInternal,
        absl::StrFormat(
            "VerbsRemoteAccess::Grant: registering the %s range region on %s failed (%s)%s",
            internal::FormatBytes(r.length), s_.domain->name(), std::strerror(err),
            err == ENOMEM || err == EAGAIN
                ? ": the device's regions or RLIMIT_MEMLOCK (a range region pins its "
                  "pages once more) ran out"
                : ""));
  }
  r.mr = mr;
  r.rkey = mr->rkey;
  lock.Count(VerbsGrantFigures::kRegionRegistrations, "range regions registered for grants");
  lock.Record(VerbsGrantHistograms::kRegionRegisterSeconds,
              "a range region grant: ibv_reg_mr of the granted range", Seconds(start));
  return RemoteGrant{.id = r.id,
                     .address = r.address,
                     .rkey = RKey{mr->rkey},
                     .length = r.length,
                     .mechanism = GrantMechanism::kRegion,
                     .range_enforced = true};
}

void VerbsRemoteAccess::Impl::EndGrantLocked(GrantLock& lock, Record& r) {
  if (r.state == State::kLive) {
    --live_;
    --lock.counters().live;
  } else if (r.state == State::kRevoking) {
    --revoking_;
    --lock.counters().revoking;
  }
  r.state = State::kEnded;
  if (r.mw != nullptr) by_rkey_.erase(r.rkey);
  lock.End(r.block, *this, r.id);
}

void VerbsRemoteAccess::Impl::EraseLocked(std::uint32_t slot) {
  by_id_.erase(slots_[slot].id);
  slots_[slot] = Record{};
  free_slots_.push_back(slot);
}

absl::Status VerbsRemoteAccess::Impl::RevokeLocked(GrantLock& lock, std::uint32_t slot) {
  Record& r = slots_[slot];
  if (r.state != State::kLive) return absl::OkStatus();
  if (r.mr != nullptr) {
    const auto start = std::chrono::steady_clock::now();
    if (const int err = ibv_dereg_mr(r.mr); err != 0) {
      return absl::InternalError(absl::StrFormat(
          "VerbsRemoteAccess::Revoke: deregistering grant %d's range region failed (%s); the grant "
          "stays live and its block held",
          r.id, std::strerror(err)));
    }
    lock.Count(VerbsGrantFigures::kRegionDeregistrations, "range regions deregistered");
    lock.Record(VerbsGrantHistograms::kRegionDeregisterSeconds,
                "revoking a range region grant: ibv_dereg_mr", Seconds(start));
    EndGrantLocked(lock, r);
    EraseLocked(slot);
    return absl::OkStatus();
  }
  ibv_send_wr wr{};
  wr.wr_id = WrId(slot);
  wr.opcode = IBV_WR_LOCAL_INV;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.invalidate_rkey = r.rkey;
  ibv_send_wr* bad = nullptr;
  if (PostSend(s_.qp, &wr, &bad) == 0) {
    r.state = State::kRevoking;
    r.inv_posted = true;
    r.inv_posted_at = std::chrono::steady_clock::now();
    --live_;
    ++revoking_;
    --lock.counters().live;
    ++lock.counters().revoking;
    return absl::OkStatus();
  }
  // The send queue cannot take the invalidation: deallocating the window invalidates it at
  // once instead (a kernel command; the pool allocates a replacement later).
  if (windows_->Discard(r.mw)) {
    lock.Count(VerbsGrantFigures::kWindowsDiscarded,
               "bound windows deallocated to revoke them at once");
    EndGrantLocked(lock, r);
    EraseLocked(slot);
    return absl::OkStatus();
  }
  return absl::InternalError(absl::StrFormat(
      "VerbsRemoteAccess::Revoke: grant %d could be neither invalidated nor deallocated; its block "
      "stays held for good",
      r.id));
}

absl::Status VerbsRemoteAccess::Impl::Revoke(std::uint64_t id) {
  absl::Status status;
  {
    GrantLock lock(*s_.pool);
    auto it = by_id_.find(id);
    if (it == by_id_.end()) {
      if (id != 0 && id < next_id_) return absl::OkStatus();  // ended already
      return absl::NotFoundError(
          absl::StrFormat("VerbsRemoteAccess::Revoke: this connection never issued grant %d", id));
    }
    status = RevokeLocked(lock, it->second);
  }
  return status;
}

void VerbsRemoteAccess::Impl::RevokeForFree(GrantLock& lock, std::uint64_t id) {
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return;
  // A region whose deregistration failed keeps its block held: never unsafe.
  RevokeLocked(lock, it->second).IgnoreError();
}

bool VerbsRemoteAccess::Impl::Ended(std::uint64_t id) const {
  GrantLock lock(*s_.pool);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return id != 0 && id < next_id_;
  return slots_[it->second].state == State::kEnded;
}

bool VerbsRemoteAccess::Impl::OnCompletion(const ibv_wc& wc) {
  if (wc.qp_num != s_.qp->qp_num) return false;
  bool ours = false;
  {
    GrantLock lock(*s_.pool);
    const bool receive = (wc.opcode & IBV_WC_RECV) != 0;
    if (wc.status == IBV_WC_REM_ACCESS_ERR) {
      // The peer's device refused a request of this side for its rkey, range or rights: the
      // application's READ or WRITE through a grant the peer revoked (a stale grant caught), or
      // one that names memory it never granted.
      lock.Count(VerbsGrantFigures::kRemoteAccessErrors,
                 "requests on pinpool's connections the peer refused (IBV_WC_REM_ACCESS_ERR): "
                 "stale or foreign grants used");
    }
    if (!receive && (wc.wr_id >> 32) == s_.options.wr_id_tag) {
      ours = true;
      const auto slot = static_cast<std::uint32_t>(wc.wr_id);
      if (wc.status != IBV_WC_SUCCESS) {
        lock.Count(VerbsGrantFigures::kWorkRequestErrors,
                   "pinpool's own binds and invalidations that completed in error (the "
                   "connection failed: every grant on it was revoked at once)");
        // A bind or an invalidation failed: the QP is in the error state now, and what its
        // windows reach can only be made safe by deallocating them.
        RevokeAllLocked(lock);
      } else if (wc.opcode == IBV_WC_LOCAL_INV && slot < slots_.size() && slots_[slot].inv_posted) {
        Record& r = slots_[slot];
        r.inv_posted = false;
        if (r.state != State::kEnded) {
          lock.Count(VerbsGrantFigures::kLocalInvalidations,
                     "window invalidations confirmed (LOCAL_INV)");
          lock.Record(VerbsGrantHistograms::kInvalidateSeconds,
                      "revoking a window grant: LOCAL_INV posted to its completion reported",
                      Seconds(r.inv_posted_at));
          EndGrantLocked(lock, r);
        }
        windows_->Return(r.mw);
        EraseLocked(slot);
      }
      // A successful bind (signaled by the application's sq_sig_all) needs nothing.
    } else if (receive && wc.status == IBV_WC_SUCCESS &&
               (wc.wc_flags & s_.with_invalidate_flag) != 0) {
      auto it = by_rkey_.find(wc.invalidated_rkey);
      if (it != by_rkey_.end()) {
        const std::uint32_t slot = it->second;
        Record& r = slots_[slot];
        lock.Count(VerbsGrantFigures::kPeerInvalidations,
                   "windows the peer invalidated (SEND_WITH_INV)");
        EndGrantLocked(lock, r);
        if (!r.inv_posted) {  // else the window returns with our LOCAL_INV's completion
          windows_->Return(r.mw);
          EraseLocked(slot);
        }
      }
    }
  }
  return ours;
}

void VerbsRemoteAccess::Impl::RevokeAllLocked(GrantLock& lock) {
  closed_ = true;
  for (std::uint32_t slot = 0; slot < slots_.size(); ++slot) {
    Record& r = slots_[slot];
    if (r.id == 0) continue;
    if (r.mr != nullptr) {
      if (ibv_dereg_mr(r.mr) != 0) continue;  // stays live: its block stays held
      lock.Count(VerbsGrantFigures::kRegionDeregistrations, "range regions deregistered");
    } else {
      // Deallocation invalidates the window wherever it is bound, whatever our queued work
      // requests do later (the QP is failing or going away).
      if (!windows_->Discard(r.mw)) continue;
      lock.Count(VerbsGrantFigures::kWindowsDiscarded,
                 "bound windows deallocated to revoke them at once");
    }
    if (r.state != State::kEnded) EndGrantLocked(lock, r);
    EraseLocked(slot);
  }
}

void VerbsRemoteAccess::Impl::RevokeAllNow() {
  GrantLock lock(*s_.pool);
  RevokeAllLocked(lock);
}

// --- VerbsRemoteAccess
// ------------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<VerbsRemoteAccess>> VerbsRemoteAccess::Create(
    Pool& pool, ibv_qp* qp, const VerbsRemoteAccessOptions& options) {
  if (qp == nullptr) return absl::InvalidArgumentError("VerbsRemoteAccess::Create: null QP");
  if (qp->qp_type != IBV_QPT_RC) {
    return absl::InvalidArgumentError(
        "VerbsRemoteAccess::Create: grants are for reliable connected (RC) QPs");
  }
  const std::vector<std::shared_ptr<Domain>>& domains = pool.options().domains;
  std::shared_ptr<VerbsDomain> domain =
      options.domain < domains.size()
          ? std::dynamic_pointer_cast<VerbsDomain>(domains[options.domain])
          : nullptr;
  if (domain == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrFormat("VerbsRemoteAccess::Create: the pool's domain %d is not a VerbsDomain "
                        "(VerbsRemoteAccessOptions::"
                        "domain)",
                        options.domain));
  }
  if (qp->pd != domain->pd()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("VerbsRemoteAccess::Create: the QP belongs to another protection domain "
                        "than %s; grants can "
                        "only bind memory of the QP's own PD",
                        domain->name()));
  }
  PINPOOL_ASSIGN_OR_RETURN(internal::VerbsDeviceCaps caps, internal::QueryVerbsCaps(qp->context));
  const WindowSupport& w = domain->windows();
  GrantMechanism mechanism = options.mechanism;
  if (mechanism == GrantMechanism::kAuto) {
    mechanism = w.type2 && w.bounds_enforced ? GrantMechanism::kWindow : GrantMechanism::kRegion;
  }
  if (mechanism == GrantMechanism::kWindow && !w.type2) {
    return absl::UnimplementedError(
        absl::StrFormat("VerbsRemoteAccess::Create: window grants asked for, but on %s %s; use "
                        "GrantMechanism::kRegion or kAuto",
                        domain->device_name(), w.reason));
  }
  if (mechanism == GrantMechanism::kWindow) {
    PINPOOL_RETURN_IF_ERROR(
        internal::VerbsDomainInternals::Windows(*domain)->Reserve(options.min_idle_windows + 1));
  }
  Impl::Setup setup{.pool = &pool,
                    .domain = std::move(domain),
                    .qp = qp,
                    .options = options,
                    .mechanism = mechanism,
                    .range_enforced = mechanism == GrantMechanism::kRegion || w.bounds_enforced,
                    .with_invalidate_flag = internal::WithInvalidateFlag(caps)};
  return std::unique_ptr<VerbsRemoteAccess>(
      new VerbsRemoteAccess(std::make_unique<Impl>(std::move(setup))));
}

VerbsRemoteAccess::VerbsRemoteAccess(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
VerbsRemoteAccess::~VerbsRemoteAccess() = default;

absl::StatusOr<RemoteGrant> VerbsRemoteAccess::Grant(const Block& block, RemoteRights rights) {
  return impl_->Grant(block, 0, block.size(), rights);
}
absl::StatusOr<RemoteGrant> VerbsRemoteAccess::Grant(const Block& block, std::size_t offset,
                                                     std::size_t length, RemoteRights rights) {
  return impl_->Grant(block, offset, length, rights);
}
absl::StatusOr<std::vector<RemoteGrant>> VerbsRemoteAccess::GrantArray(const Array& array,
                                                                       RemoteRights rights,
                                                                       std::size_t first,
                                                                       std::size_t count) {
  std::vector<RemoteGrant> grants;
  absl::Status s = GrantSlices(
      array, first, count, "VerbsRemoteAccess::GrantArray",
      [&](const ArraySlice& slice) -> absl::Status {
        absl::StatusOr<RemoteGrant> g =
            impl_->Grant(array.Run(slice.run), slice.offset, slice.length, rights);
        if (!g.ok()) return g.status();
        grants.push_back(*g);
        return absl::OkStatus();
      },
      [&] {
        for (const RemoteGrant& made : grants) (void)impl_->Revoke(made.id);
      });
  if (!s.ok()) return s;
  return grants;
}

absl::StatusOr<std::vector<std::byte>> DescribeGrants(const Array& array,
                                                      std::span<const RemoteGrant> grants) {
  std::vector<GrantedRange> ranges;
  for (const RemoteGrant& g : grants) {
    ranges.push_back({.address = g.address, .key = ToUnderlying(g.rkey), .length = g.length});
  }
  return DescribeRanges(array, ranges);
}

absl::Status VerbsRemoteAccess::Revoke(const RemoteGrant& grant) { return impl_->Revoke(grant.id); }
bool VerbsRemoteAccess::Ended(const RemoteGrant& grant) const { return impl_->Ended(grant.id); }
bool VerbsRemoteAccess::OnCompletion(const ibv_wc& wc) { return impl_->OnCompletion(wc); }
void VerbsRemoteAccess::RevokeAllNow() { impl_->RevokeAllNow(); }
GrantMechanism VerbsRemoteAccess::mechanism() const noexcept { return impl_->setup().mechanism; }
bool VerbsRemoteAccess::range_enforced() const noexcept { return impl_->setup().range_enforced; }
ibv_qp* VerbsRemoteAccess::qp() const noexcept { return impl_->setup().qp; }
std::size_t VerbsRemoteAccess::live_grants() const { return impl_->live_grants(); }
std::size_t VerbsRemoteAccess::pending_revocations() const { return impl_->pending_revocations(); }

PINPOOL_ABI_END
}  // namespace pinpool
