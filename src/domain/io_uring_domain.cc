// The io_uring fixed-buffer domain (see pinpool/io_uring.h). One slot of a sparse table per
// chunk, the same slot in every ring: register = fill that slot in the domain's ring (the source,
// which holds the one pin of kClone), then share it with every ring that joined (a clone of the
// source's slots, or a registration of the ring's own with kPerRing); deregister = empty it in
// every ring, the source last. The kernel takes a long-term pin of the pages at registration
// (FOLL_LONGTERM: they can no longer migrate), counts them in the process's VmPin, and checks them
// against RLIMIT_MEMLOCK per user, across the user's processes, unless the process has
// CAP_IPC_LOCK. A clone shares the source's pinned pages (no new pin, no new charge). Emptying a
// slot drops its pin as soon as no submitted I/O still uses the buffer (Linux 6.13 and later), or
// from a delayed kernel worker about a second later (6.1).
//
// Clones: a clone of slot s copies source slots [s, end of the domain's range) into the ring,
// not slot s alone: kernels from 6.13 until a fix of December 2025 drop the destination's entries
// after a cloned range, and the domain's later slots must survive. Every ring mirrors the source
// over the domain's range at all times (under mu_), so re-cloning them changes nothing but the
// kernel's node objects; I/O in flight holds the old ones.
//
// The default long-term pin domain (long_term_pin_domain.cc) is built from these tables.
//
// Owns: the free-slot list and the chunks by slot, the rings that joined (with pinpool's own
// descriptor of each: io_uring_ring_ref.h), all under mu_; and the ring when created by Create().
// Lock order: mu_ is a leaf (nothing else is taken under it).
#include <liburing.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "domain/io_uring_accounting.h"
#include "domain/io_uring_calls.h"
#include "domain/io_uring_domain_internal.h"
#include "domain/io_uring_refusal.h"
#include "domain/io_uring_ring_ref.h"
#include "domain/memlock.h"
#include "pinpool/io_uring.h"
#include "util/bytes.h"
#include "util/mutex.h"
#include "util/status_macros.h"

namespace pinpool {
PINPOOL_ABI_BEGIN
namespace {

using internal::MutexLock;
using internal::RingRef;

// Not in liburing 2.3's headers (Linux 6.0).
constexpr unsigned kSetupSingleIssuer = 1U << 12;
// Rings found closed whose story RemoveRing can still tell: the most recent ones.
constexpr std::size_t kClosedRemembered = 64;

// A refused registration of `length` bytes into slot `slot` of `where`.
absl::Status RegistrationError(int ret, std::size_t length, std::uint32_t slot,
                               const std::string& where) {
  const int err = ret < 0 ? -ret : EIO;
  if (err == ENOMEM) {
    const absl::Status s = internal::MemlockRefused("io_uring buffer registration", err, length,
                                                    internal::MemlockAccounting::kUser);
    return absl::Status(s.code(), absl::StrFormat("%s: %s", where, s.message()));
  }
  return absl::InternalError(
      absl::StrFormat("io_uring buffer registration of %s into slot %d of %s failed: %s",
                      internal::FormatBytes(length), slot, where, std::strerror(err)));
}

// A refused clone into `where`.
absl::Status CloneError(int ret, const std::string& where) {
  const int err = -ret;
  if (err == EINVAL) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the kernel refused to clone the domain's buffers into %s (EINVAL): its memory is "
        "accounted to another process or user (a ring inherited across fork, or taken with "
        "pidfd_getfd), and the kernel shares registrations only between rings of one "
        "accounting; create the ring in this process",
        where));
  }
  if (err == ENOMEM) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "cloning the domain's buffers into %s failed: out of kernel memory (ENOMEM)", where));
  }
  return absl::InternalError(
      absl::StrFormat("the kernel refused to clone the domain's buffers "
                      "into %s: %s",
                      where, std::strerror(err)));
}

class IoUringDomainImpl final : public IoUringDomain {
 public:
  IoUringDomainImpl(io_uring* ring, RingRef source, std::unique_ptr<io_uring> owned,
                    IoUringDomainOptions options)
      : ring_(ring), source_(std::move(source)), owned_(std::move(owned)), options_(options) {
    for (std::uint32_t i = options.slots; i-- > 0;) free_.push_back(options.first_slot + i);
  }

  // Pools hold the domain by shared_ptr, so every chunk has been deregistered by now. Tables
  // pinpool registered are unregistered, which waits until the kernel has dropped the pins of
  // their emptied slots: Linux 6.1 otherwise drops them from a delayed worker (measured: VmPin
  // back 1-1.5 s after the slots were emptied), and closing the ring from yet another; a
  // destroyed pool must have given its pins back when its destructor returns. A ring the
  // application closed is only let go (its teardown may wait for I/O still in flight).
  ~IoUringDomainImpl() override {
    for (const Member& m : members_) {
      if (m.own_table && !m.ref.ClosedByApplication()) internal::UnregisterTable(m.ref.fd());
    }
    if (owned_ || options_.register_table) internal::UnregisterTable(source_.fd());
    if (owned_) io_uring_queue_exit(owned_.get());
  }

  DomainKind kind() const noexcept override { return DomainKind::kIoUring; }
  Pinning pinning() const noexcept override { return Pinning::kLongTerm; }
  // Its own lock serializes what must be (the slots, the rings); the kernel does the rest.
  bool concurrent_registration() const noexcept override { return true; }
  std::string name() const override { return absl::StrFormat("io_uring/fd%d", ring_->ring_fd); }

  absl::StatusOr<Keys> Register(void* base, std::size_t length) override {
    MutexLock lock(&mu_);
    DropClosedLocked();
    if (free_.empty()) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "all %d io_uring buffer slots of the domain are in use (one per chunk): raise "
          "IoUringDomainOptions::slots or PoolOptions::chunk_size",
          options_.slots));
    }
    const std::uint32_t slot = free_.back();
    if (const int ret = internal::UpdateSlot(source_.fd(), slot, base, length); ret != 1) {
      return RegistrationError(ret, length, slot, "the domain's ring");
    }
    const Chunk chunk{base, length};
    for (std::size_t i = 0; i < members_.size(); ++i) {
      if (absl::Status s = ShareLocked(members_[i], slot, chunk); !s.ok()) {
        for (std::size_t j = 0; j < i; ++j) internal::UpdateSlot(members_[j].ref.fd(), slot, {}, 0);
        internal::UpdateSlot(source_.fd(), slot, nullptr, 0);
        return absl::Status(
            s.code(),
            absl::StrFormat("a chunk of %s was not registered: ring %d of the %d that "
                            "joined the domain refused it: %s",
                            internal::FormatBytes(length), i + 1, members_.size(), s.message()));
      }
    }
    free_.pop_back();
    used_[slot] = chunk;
    Keys keys;
    keys.base = reinterpret_cast<std::uintptr_t>(base);
    keys.length = length;
    keys.buffer_index = BufferIndex{slot};
    return keys;
  }

  void Deregister(const Keys& keys) noexcept override {
    MutexLock lock(&mu_);
    DropClosedLocked();
    const std::uint32_t slot = ToUnderlying(keys.buffer_index);
    for (const Member& m : members_) internal::UpdateSlot(m.ref.fd(), slot, nullptr, 0);
    internal::UpdateSlot(source_.fd(), slot, nullptr, 0);
    used_.erase(slot);
    free_.push_back(slot);
  }

  io_uring* ring() const noexcept override { return ring_; }
  std::uint32_t slots_in_use() const override {
    MutexLock lock(&mu_);
    return options_.slots - static_cast<std::uint32_t>(free_.size());
  }

  absl::Status AddRing(io_uring* ring, IoUringRingOptions ropts) override {
    if (ring == nullptr) return absl::InvalidArgumentError("IoUringDomain::AddRing: null ring");
    if ((ring->flags & kSetupSingleIssuer) != 0) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "ring fd %d was created with IORING_SETUP_SINGLE_ISSUER: the kernel refuses buffer "
          "registrations on it from any thread but its submitter, and pools register chunks "
          "from the threads that grow them; create the rings a pool serves without it",
          ring->ring_fd));
    }
    PINPOOL_ASSIGN_OR_RETURN(RingRef ref, RingRef::Take(ring->ring_fd));
    MutexLock lock(&mu_);
    DropClosedLocked();
    if (ring == ring_ || source_.Names(ring->ring_fd)) {
      return absl::AlreadyExistsError("IoUringDomain::AddRing: that is the domain's own ring");
    }
    for (const Member& m : members_) {
      if (m.ring == ring || m.ref.Names(ring->ring_fd)) {
        return absl::AlreadyExistsError(absl::StrFormat(
            "IoUringDomain::AddRing: ring fd %d has joined the domain already", ring->ring_fd));
      }
    }
    const IoUringSharing sharing = SharingLocked();
    if (!ropts.register_table && sharing == IoUringSharing::kClone &&
        !internal::KernelCloneSupport().keeps_later_entries) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "this kernel's range clones drop the destination table's entries after the range (fixed "
          "in December 2025: \"io_uring/rsrc: fix lost entries after cloned range\"), so the "
          "slots of ring fd %d's own table after the domain's would be lost: let pinpool register "
          "the ring's table (IoUringRingOptions::register_table = true)",
          ring->ring_fd));
    }
    Member m{ring, std::move(ref), ropts.register_table};
    PINPOOL_RETURN_IF_ERROR(PrepareTableLocked(m));
    if (absl::Status s = JoinLocked(m, sharing); !s.ok()) {
      for (const auto& [slot, chunk] : used_) internal::UpdateSlot(m.ref.fd(), slot, nullptr, 0);
      if (m.own_table) internal::UnregisterTable(m.ref.fd());
      return s;
    }
    std::erase_if(closed_, [&](const auto& c) { return c.first == ring; });
    members_.push_back(std::move(m));
    return absl::OkStatus();
  }

  absl::Status RemoveRing(io_uring* ring) override {
    std::optional<Member> leaving;
    {
      MutexLock lock(&mu_);
      if (ring == ring_) {
        return absl::FailedPreconditionError(
            "IoUringDomain::RemoveRing: the domain's own ring leaves only with the domain");
      }
      DropClosedLocked();
      for (auto it = members_.begin(); it != members_.end(); ++it) {
        if (it->ring != ring) continue;
        for (const auto& [slot, chunk] : used_) internal::UpdateSlot(it->ref.fd(), slot, {}, 0);
        leaving = std::move(*it);
        members_.erase(it);
        break;
      }
      if (!leaving) {
        for (auto it = closed_.begin(); it != closed_.end(); ++it) {
          if (it->first != ring) continue;
          const std::string story = std::move(it->second);
          closed_.erase(it);
          return absl::FailedPreconditionError(story);
        }
        return absl::NotFoundError(
            "IoUringDomain::RemoveRing: the domain does not serve that ring");
      }
    }
    // Outside the lock: before Linux 6.13 this waits for the ring's I/O on the domain's buffers
    // and for the delayed unpin of its slots, and growth need not wait with it.
    if (leaving->own_table) internal::UnregisterTable(leaving->ref.fd());
    return absl::OkStatus();
  }

  bool Serves(const io_uring* ring) const override {
    if (ring == nullptr) return false;
    MutexLock lock(&mu_);
    if (ring == ring_) return true;
    for (const Member& m : members_) {
      if (m.ring == ring) return !m.ref.ClosedByApplication();
    }
    return false;
  }

  std::size_t rings() const override {
    MutexLock lock(&mu_);
    DropClosedLocked();
    return 1 + members_.size();
  }

  IoUringSharing sharing() const override {
    MutexLock lock(&mu_);
    return SharingLocked();
  }

  std::vector<Figure> figures() const override {
    MutexLock lock(&mu_);
    DropClosedLocked();
    const IoUringSharing sharing = SharingLocked();
    std::uint64_t registered = 0;
    for (const auto& [slot, chunk] : used_) registered += chunk.length;
    const std::uint64_t charged_rings =
        1 + (sharing == IoUringSharing::kPerRing ? members_.size() : 0);
    const auto name = [](std::string_view n) { return std::string(n); };
    using F = IoUringDomainFigures;
    return {
        {name(F::kRings), 1 + members_.size(), false,
         "rings the domain serves (its own and those that joined)"},
        {name(F::kCloning), sharing == IoUringSharing::kClone ? 1u : 0u, false,
         "1 when the rings that joined get clones of the domain's registrations (one pin), 0 "
         "when each registers every chunk itself (one pin and memlock charge per ring)"},
        {name(F::kClones), clones_, true, "IORING_REGISTER_CLONE_BUFFERS calls, ever"},
        {name(F::kRingRegistrations), ring_registrations_, true,
         "chunks registered separately in a ring that joined, ever"},
        {name(F::kMemlockBytes), registered * charged_rings, false,
         "bytes the domain's registrations charge against RLIMIT_MEMLOCK (VmPin)"},
        {name(F::kRingsClosed), rings_closed_, true,
         "rings closed by the application while the domain served them"},
        {name(F::kZeroCopyInFlight),
         static_cast<std::uint64_t>(std::max<std::int64_t>(0, zc_in_flight_.load())), false,
         "zero-copy sends on the domain's rings waiting for their notification"},
    };
  }

  void CountZeroCopyInFlight(std::int64_t delta) noexcept { zc_in_flight_ += delta; }

 private:
  struct Member {
    io_uring* ring;  // the application's, as a key: never read after AddRing
    RingRef ref;     // pinpool's descriptor of it
    bool own_table;  // pinpool registered its table (and unregisters it)
  };
  struct Chunk {
    void* base;
    std::size_t length;
  };

  std::uint32_t end() const noexcept { return options_.first_slot + options_.slots; }

  IoUringSharing SharingLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!sharing_) {  // probed at first need: Create need not pay for it
      sharing_ = options_.clone && internal::KernelCloneSupport().ranges ? IoUringSharing::kClone
                                                                         : IoUringSharing::kPerRing;
    }
    return *sharing_;
  }

  static std::string Where(const Member& m) {
    return absl::StrFormat("ring fd %d", m.ref.app_fd());
  }

  // The ring's table, registered or checked.
  absl::Status PrepareTableLocked(const Member& m) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (m.own_table) {
      const int ret = internal::RegisterSparseTable(m.ref.fd(), end());
      if (ret == -EBUSY) {
        return absl::FailedPreconditionError(absl::StrFormat(
            "%s already has a fixed-buffer table: register it sparse yourself, covering slots "
            "[%d, %d), and pass IoUringRingOptions::register_table = false",
            Where(m), options_.first_slot, end()));
      }
      if (ret < 0) {
        const internal::IoUringRefusal refusal = internal::ExplainSparseTableFailure(-ret, end());
        return absl::Status(refusal.code, refusal.Message());
      }
      return absl::OkStatus();
    }
    // The application's table must cover the domain's slots: emptying the last one (which is
    // the domain's to use) says whether there is a table and whether it reaches that far.
    const int ret = internal::UpdateSlot(m.ref.fd(), end() - 1, nullptr, 0);
    if (ret == -ENXIO) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s has no fixed-buffer table: register a sparse table of at least %d slots "
          "(io_uring_register_buffers_sparse) or pass IoUringRingOptions::register_table = true",
          Where(m), end()));
    }
    if (ret == -EINVAL) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s's fixed-buffer table has fewer than the %d slots the domain uses ([%d, %d)): "
          "register a larger sparse table",
          Where(m), end(), options_.first_slot, end()));
    }
    if (ret < 0) {
      return absl::InternalError(absl::StrFormat("checking %s's fixed-buffer table failed: %s",
                                                 Where(m), std::strerror(-ret)));
    }
    return absl::OkStatus();
  }

  // Gives the joining ring every chunk registered so far.
  absl::Status JoinLocked(const Member& m, IoUringSharing sharing)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (sharing == IoUringSharing::kClone) {
      // The kernel checks that both rings are charged to one process and user (EINVAL if not).
      const int ret =
          internal::CloneSlots(m.ref.fd(), source_.fd(), options_.first_slot, options_.slots);
      if (ret < 0) return CloneError(ret, Where(m));
      ++clones_;
      return absl::OkStatus();
    }
    // Registering, the kernel charges whoever created the ring: check it is this process (its
    // first slot is empty: the table is new, or the domain's slots of the application's one).
    if (absl::Status s = internal::CheckAccountedHere(m.ref.fd(), options_.first_slot); !s.ok()) {
      return absl::Status(s.code(), absl::StrFormat("%s: %s", Where(m), s.message()));
    }
    for (const auto& [slot, chunk] : used_) {
      if (const int ret = internal::UpdateSlot(m.ref.fd(), slot, chunk.base, chunk.length);
          ret != 1) {
        return RegistrationError(ret, chunk.length, slot,
                                 Where(m) + " (each ring registers every chunk on this kernel)");
      }
      ++ring_registrations_;
    }
    return absl::OkStatus();
  }

  // Shares the chunk just registered in the source's `slot` with the ring that joined.
  absl::Status ShareLocked(const Member& m, std::uint32_t slot, const Chunk& chunk)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (SharingLocked() == IoUringSharing::kClone) {
      const int ret = internal::CloneSlots(m.ref.fd(), source_.fd(), slot, end() - slot);
      if (ret < 0) return CloneError(ret, Where(m));
      ++clones_;
      return absl::OkStatus();
    }
    const int ret = internal::UpdateSlot(m.ref.fd(), slot, chunk.base, chunk.length);
    if (ret != 1) {
      return RegistrationError(ret, chunk.length, slot,
                               Where(m) + " (each ring registers every chunk on this kernel)");
    }
    ++ring_registrations_;
    return absl::OkStatus();
  }

  // Lets go of the rings the application closed: their slots are emptied (their pins dropped,
  // at once or by the kernel's delayed worker) and pinpool's descriptor closed, so that the
  // kernel tears them down.
  void DropClosedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (auto it = members_.begin(); it != members_.end();) {
      if (!it->ref.ClosedByApplication()) {
        ++it;
        continue;
      }
      for (const auto& [slot, chunk] : used_) internal::UpdateSlot(it->ref.fd(), slot, {}, 0);
      if (closed_.size() == kClosedRemembered) closed_.erase(closed_.begin());
      closed_.emplace_back(
          it->ring,
          absl::StrFormat("ring fd %d was closed while the domain served it (io_uring_queue_exit "
                          "before IoUringDomain::RemoveRing): pinpool emptied its %d slots when "
                          "it noticed and let the kernel tear the ring down; remove a ring "
                          "before closing it",
                          it->ref.app_fd(), used_.size()));
      ++rings_closed_;
      it = members_.erase(it);
    }
  }

  io_uring* const ring_;
  const RingRef source_;
  const std::unique_ptr<io_uring> owned_;
  const IoUringDomainOptions options_;
  mutable internal::Mutex mu_;
  std::vector<std::uint32_t> free_ ABSL_GUARDED_BY(mu_);  // free slots, used last-freed first
  std::map<std::uint32_t, Chunk> used_ ABSL_GUARDED_BY(mu_);
  // Rings closed under the pool are dropped by const methods too (figures, rings), hence mutable.
  mutable std::vector<Member> members_ ABSL_GUARDED_BY(mu_);
  mutable std::vector<std::pair<const io_uring*, std::string>> closed_ ABSL_GUARDED_BY(mu_);
  mutable std::uint64_t rings_closed_ ABSL_GUARDED_BY(mu_) = 0;
  mutable std::optional<IoUringSharing> sharing_ ABSL_GUARDED_BY(mu_);
  std::uint64_t clones_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t ring_registrations_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<std::int64_t> zc_in_flight_{0};
};

absl::Status RegisterTable(int fd, const IoUringDomainOptions& o) {
  const int injected = internal::os::InjectedFault(internal::os::Call::kRegisterTable, 0);
  const int ret =
      injected != 0 ? -injected : internal::RegisterSparseTable(fd, o.first_slot + o.slots);
  if (ret == 0) return absl::OkStatus();
  if (ret == -EBUSY) {
    return absl::FailedPreconditionError(
        "the ring already has a fixed-buffer table: register it sparse yourself and set "
        "IoUringDomainOptions::register_table = false with the slots pinpool may use");
  }
  const internal::IoUringRefusal refusal =
      internal::ExplainSparseTableFailure(-ret, o.first_slot + o.slots);
  return absl::Status(refusal.code, refusal.Message());
}

absl::Status Validate(const IoUringDomainOptions& o) {
  if (o.slots == 0 || o.first_slot + std::uint64_t{o.slots} > IoUringDomain::kMaxBuffers) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "IoUringDomainOptions: slots %d from %d must be 1 .. %d in all (the kernel's "
        "fixed-buffer limit)",
        o.slots, o.first_slot, IoUringDomain::kMaxBuffers));
  }
  return absl::OkStatus();
}

// The domain over `ring`, owned (Create) or the application's (Wrap).
absl::StatusOr<std::shared_ptr<IoUringDomain>> MakeDomain(io_uring* ring,
                                                          std::unique_ptr<io_uring> owned,
                                                          const IoUringDomainOptions& options) {
  absl::StatusOr<RingRef> source = RingRef::Take(ring->ring_fd);
  absl::Status s = source.status();
  if (s.ok() && options.register_table) s = RegisterTable(source->fd(), options);
  if (!s.ok()) {
    if (owned) io_uring_queue_exit(owned.get());
    return s;
  }
  return std::shared_ptr<IoUringDomain>(
      std::make_shared<IoUringDomainImpl>(ring, *std::move(source), std::move(owned), options));
}

}  // namespace

absl::StatusOr<std::shared_ptr<IoUringDomain>> IoUringDomain::Create(unsigned entries,
                                                                     IoUringDomainOptions options) {
  if (absl::Status s = Validate(options); !s.ok()) return s;
  options.register_table = true;
  auto ring = std::make_unique<io_uring>();
  const int injected = internal::os::InjectedFault(internal::os::Call::kRingSetup, 0);
  if (int ret = injected != 0 ? -injected : io_uring_queue_init(entries, ring.get(), 0); ret < 0) {
    const internal::IoUringRefusal refusal =
        internal::ExplainIoUringSetupFailure(-ret, internal::ReadIoUringDisabled());
    return absl::Status(refusal.code, refusal.Message());
  }
  io_uring* raw = ring.get();
  return MakeDomain(raw, std::move(ring), options);
}

absl::StatusOr<std::shared_ptr<IoUringDomain>> IoUringDomain::Wrap(io_uring* ring,
                                                                   IoUringDomainOptions options) {
  if (ring == nullptr) return absl::InvalidArgumentError("IoUringDomain::Wrap: null ring");
  if (absl::Status s = Validate(options); !s.ok()) return s;
  return MakeDomain(ring, nullptr, options);
}

IoUringCloneSupport IoUringDomain::KernelCanClone() { return internal::KernelCloneSupport(); }

PINPOOL_ABI_END
namespace internal {

void CountZeroCopyInFlight(IoUringDomain& domain, std::int64_t delta) noexcept {
  if (auto* impl = dynamic_cast<IoUringDomainImpl*>(&domain)) impl->CountZeroCopyInFlight(delta);
}

}  // namespace internal
}  // namespace pinpool
