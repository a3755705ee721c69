// The io_uring fixed-buffer domain (see pinpool/io_uring.h). One slot of a sparse table per
// chunk: register = update that slot with the chunk's iovec, deregister = update it with an
// empty one. The kernel takes a long-term pin of the pages at update time (FOLL_LONGTERM: they
// can no longer migrate), counts them in the process's VmPin, and checks them against
// RLIMIT_MEMLOCK per user, across the user's processes, unless the process has CAP_IPC_LOCK.
// Emptying the slot drops the pin as soon as no submitted I/O still uses the buffer.
// The default long-term pin domain (long_term_pin_domain.cc) is built from these tables.
//
// Owns: the free-slot list (under mu_), and the ring when created by Create().
#include <liburing.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <vector>

#include "absl/strings/str_format.h"
#include "domain/io_uring_refusal.h"
#include "domain/memlock.h"
#include "os/os.h"
#include "pinpool/io_uring.h"
#include "util/bytes.h"

namespace pinpool {
namespace {

class IoUringDomainImpl final : public IoUringDomain {
 public:
  IoUringDomainImpl(io_uring* ring, std::unique_ptr<io_uring> owned, IoUringDomainOptions options)
      : ring_(ring), owned_(std::move(owned)), options_(options) {
    for (std::uint32_t i = options.slots; i-- > 0;) free_.push_back(options.first_slot + i);
  }

  // Pools hold the domain by shared_ptr, so every chunk has been deregistered by now. The table
  // is unregistered even when the ring is closed right after: that waits until the kernel has
  // dropped the pins of the emptied slots. Linux 6.1 otherwise drops them from a delayed worker
  // (measured: VmPin back 1-1.5 s after the slots were emptied), and closing the ring from yet
  // another; a destroyed pool must have given its pins back when its destructor returns.
  ~IoUringDomainImpl() override {
    if (owned_ || options_.register_table) io_uring_unregister_buffers(ring_);
    if (owned_) io_uring_queue_exit(owned_.get());
  }

  DomainKind kind() const noexcept override { return DomainKind::kIoUring; }
  Pinning pinning() const noexcept override { return Pinning::kLongTerm; }
  // Its own lock serializes what must be (the table's slots); the kernel does the rest.
  bool concurrent_registration() const noexcept override { return true; }
  std::string name() const override { return absl::StrFormat("io_uring/fd%d", ring_->ring_fd); }

  absl::StatusOr<Keys> Register(void* base, std::size_t length) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.empty()) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "all %d io_uring buffer slots of the domain are in use (one per chunk): raise "
          "IoUringDomainOptions::slots or PoolOptions::chunk_size",
          options_.slots));
    }
    const std::uint32_t slot = free_.back();
    iovec iov{base, length};
    __u64 tag = 0;
    const int injected = internal::os::InjectedFault(internal::os::Call::kPinBuffer, length);
    const int ret = injected != 0
                        ? -injected
                        : io_uring_register_buffers_update_tag(ring_, slot, &iov, &tag, 1);
    if (ret != 1) {
      const int err = ret < 0 ? -ret : EIO;
      if (err == ENOMEM) {
        return internal::MemlockRefused("io_uring buffer registration", err, length,
                                        internal::MemlockAccounting::kUser);
      }
      return absl::InternalError(
          absl::StrFormat("io_uring buffer registration of %s into slot %d failed: %s",
                          internal::FormatBytes(length), slot, std::strerror(err)));
    }
    free_.pop_back();
    Keys keys;
    keys.base = reinterpret_cast<std::uintptr_t>(base);
    keys.length = length;
    keys.buffer_index = BufferIndex{slot};
    return keys;
  }

  void Deregister(const Keys& keys) noexcept override {
    std::lock_guard<std::mutex> lock(mu_);
    iovec empty{nullptr, 0};
    __u64 tag = 0;
    io_uring_register_buffers_update_tag(ring_, ToUnderlying(keys.buffer_index), &empty, &tag, 1);
    free_.push_back(ToUnderlying(keys.buffer_index));
  }

  io_uring* ring() const noexcept override { return ring_; }
  std::uint32_t slots_in_use() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return options_.slots - static_cast<std::uint32_t>(free_.size());
  }

 private:
  io_uring* const ring_;
  const std::unique_ptr<io_uring> owned_;
  const IoUringDomainOptions options_;
  mutable std::mutex mu_;
  std::vector<std::uint32_t> free_;  // free slots, used last-freed first
};

absl::Status RegisterTable(io_uring* ring, const IoUringDomainOptions& o) {
  const int injected = internal::os::InjectedFault(internal::os::Call::kRegisterTable, 0);
  const int ret =
      injected != 0 ? -injected : io_uring_register_buffers_sparse(ring, o.first_slot + o.slots);
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
  if (absl::Status s = RegisterTable(ring.get(), options); !s.ok()) {
    io_uring_queue_exit(ring.get());
    return s;
  }
  io_uring* raw = ring.get();
  return std::shared_ptr<IoUringDomain>(
      std::make_shared<IoUringDomainImpl>(raw, std::move(ring), options));
}

absl::StatusOr<std::shared_ptr<IoUringDomain>> IoUringDomain::Wrap(io_uring* ring,
                                                                   IoUringDomainOptions options) {
  if (ring == nullptr) return absl::InvalidArgumentError("IoUringDomain::Wrap: null ring");
  if (absl::Status s = Validate(options); !s.ok()) return s;
  if (options.register_table) {
    if (absl::Status s = RegisterTable(ring, options); !s.ok()) return s;
  }
  return std::shared_ptr<IoUringDomain>(
      std::make_shared<IoUringDomainImpl>(ring, nullptr, options));
}

}  // namespace pinpool
