// RDMA verbs: registering pool chunks with a protection domain (PD) of an RDMA device, and the
// few helpers that turn a Block into what verbs calls take.
//
// A VerbsDomain registers each chunk of every pool it serves as ONE memory region (ibv_reg_mr)
// with the access rights of its VerbsAccess, so every block of the chunk carries that region's
// lkey and rkey (Block::lkey(d), Block::rkey(d)). It either owns its device context and a PD it
// allocated (Open) or uses the application's PD (Wrap), which must then outlive it.
//
// Thread safety: Register and Deregister may be called from any thread at once (libibverbs'
// calls are thread-safe and the counters are atomic), so one domain may serve several pools.
// The helpers below are plain functions of their arguments.
//
// This header includes <infiniband/verbs.h>: programs that use it move data with verbs anyway,
// and libpinpool links libibverbs for them (pinpool::pinpool, pinpool.pc).
#ifndef PINPOOL_VERBS_H_
#define PINPOOL_VERBS_H_

#include <infiniband/verbs.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "pinpool/block.h"
#include "pinpool/domain.h"
#include "pinpool/keys.h"

namespace pinpool {

// What the device may do with a domain's registrations. The default is local write only: a
// peer cannot touch the memory until the application grants remote access explicitly.
struct VerbsAccess {
  // The device writes into the memory (RECV, RDMA READ responses). Required by remote_write
  // and remote_atomic.
  bool local_write = true;
  bool remote_read = false;    // peers may RDMA READ
  bool remote_write = false;   // peers may RDMA WRITE
  bool remote_atomic = false;  // peers may compare-and-swap / fetch-and-add
  // On-demand paging: the device faults pages in instead of pinning them. Only devices with ODP
  // for RC READ and WRITE (ibv_query_device_ex odp_caps) accept it; others (rxe, most NICs
  // without ODP) make Open/Wrap fail with kUnimplemented.
  bool on_demand = false;

  // The IBV_ACCESS_* bits for ibv_reg_mr.
  int ibv_flags() const noexcept;
};

struct VerbsOptions {
  // Device to open, by its verbs name ("mlx5_0", "rxe0"); empty means the first device that has
  // a port in state ACTIVE.
  // (Both members have initializers so that designated initializers may omit either without
  // -Wmissing-field-initializers.)
  std::string device = {};
  VerbsAccess access = {};
};

class VerbsDomain final : public Domain {
 public:
  // Opens the device, allocates a PD, and owns both. Errors: kNotFound (no RDMA device, or none
  // by that name; the message lists what exists), kUnavailable (devices exist but no port is
  // ACTIVE), kPermissionDenied (/dev/infiniband not accessible), kInvalidArgument (inconsistent
  // access), kUnimplemented (the device lacks on-demand paging or atomics that were asked for).
  static absl::StatusOr<std::shared_ptr<VerbsDomain>> Open(const VerbsOptions& options = {});
  // Registers into the application's PD, which is not owned and must outlive the domain and
  // every pool using it. Errors as for Open, plus kInvalidArgument for a null pd.
  static absl::StatusOr<std::shared_ptr<VerbsDomain>> Wrap(ibv_pd* pd,
                                                           const VerbsAccess& access = {});

  ~VerbsDomain() override;
  VerbsDomain(const VerbsDomain&) = delete;
  VerbsDomain& operator=(const VerbsDomain&) = delete;

  DomainKind kind() const noexcept override { return DomainKind::kVerbs; }
  // "<device>/pd<n>" (n numbers the process's verbs domains), "<device>/app-pd<n>" when wrapped.
  std::string name() const override { return name_; }
  // Long-term pinned (ibv_reg_mr pins with FOLL_LONGTERM), except with on-demand paging, where
  // the device pins nothing up front.
  Pinning pinning() const noexcept override {
    return access_.on_demand ? Pinning::kNone : Pinning::kLongTerm;
  }

  // ibv_reg_mr of [base, base+length) as one region. Keys: base, length, lkey, rkey and
  // handle = the ibv_mr*. Errors: kInvalidArgument when length exceeds the device's max_mr_size
  // (lower PoolOptions::chunk_size) or the device refuses the access flags; kResourceExhausted
  // when the kernel refuses to pin (RLIMIT_MEMLOCK) or the device is out of regions.
  absl::StatusOr<Keys> Register(void* base, std::size_t length) override;
  // ibv_dereg_mr. A failure (a memory window still bound to the region) is reported on stderr
  // and counted; the pages then stay pinned until the process exits.
  void Deregister(const Keys& keys) noexcept override;

  ibv_context* context() const noexcept { return context_; }
  ibv_pd* pd() const noexcept { return pd_; }
  const std::string& device_name() const noexcept { return device_name_; }
  const VerbsAccess& access() const noexcept { return access_; }
  // Largest region the device can register (ibv_query_device: max_mr_size).
  std::uint64_t max_mr_size() const noexcept { return max_mr_size_; }
  // Regions registered now, and ever, through this domain; failed ibv_dereg_mr calls.
  std::uint64_t live_registrations() const noexcept { return live_.load(); }
  std::uint64_t total_registrations() const noexcept { return total_.load(); }
  std::uint64_t failed_deregistrations() const noexcept { return failed_deregs_.load(); }

 private:
  VerbsDomain(ibv_context* context, ibv_pd* pd, bool owned, std::string device_name,
              const VerbsAccess& access, std::uint64_t max_mr_size, std::uint32_t max_mr);

  ibv_context* const context_;
  ibv_pd* const pd_;
  const bool owned_;  // context_ and pd_ were created by Open and are released with the domain
  const std::string device_name_;
  const std::string name_;
  const VerbsAccess access_;
  const std::uint64_t max_mr_size_;
  const std::uint32_t max_mr_;  // the device's limit on regions, for error messages
  std::atomic<std::uint64_t> live_{0};
  std::atomic<std::uint64_t> total_{0};
  std::atomic<std::uint64_t> failed_deregs_{0};
};

// A block as one scatter/gather entry for a local work request, with the lkey of the pool's
// domain number `domain` (which must be a verbs domain). Block sizes stay far below 4 GiB (at
// most 7/8 of a 1 GiB chunk), so the length always fits.
inline ibv_sge ToSge(const Block& block, std::size_t domain = 0) noexcept {
  return ibv_sge{.addr = reinterpret_cast<std::uintptr_t>(block.data()),
                 .length = static_cast<std::uint32_t>(block.size()),
                 .lkey = ToUnderlying(block.lkey(domain))};
}
// `length` bytes at a Location (any interior pointer a Pool::Lookup found).
inline ibv_sge ToSge(const Location& at, std::uint32_t length, std::size_t domain = 0) noexcept {
  return ibv_sge{.addr = reinterpret_cast<std::uintptr_t>(at.address()),
                 .length = length,
                 .lkey = ToUnderlying(at.lkey(domain))};
}

// What a peer needs to RDMA READ or WRITE a block: send it over your control channel. The
// address is the block's own virtual address, because ibv_reg_mr registers a chunk with its
// virtual address as the I/O address: the peer puts it in wr.rdma.remote_addr as is (no offset
// arithmetic), and any address inside the block works the same way.
struct RemoteBuffer {
  std::uint64_t address = 0;
  RKey rkey{};
  std::uint32_t length = 0;
};
inline RemoteBuffer ToRemoteBuffer(const Block& block, std::size_t domain = 0) noexcept {
  return RemoteBuffer{.address = reinterpret_cast<std::uintptr_t>(block.data()),
                      .rkey = block.rkey(domain),
                      .length = static_cast<std::uint32_t>(block.size())};
}

// Whether fork() is safe for registered memory, as libibverbs sees it (ibv_is_fork_initialized).
// pinpool marks every chunk MADV_DONTFORK itself, so a child never shares or copies registered
// pages (it gets no mapping there at all: touching pool memory in a child is SIGSEGV) and the
// parent's registrations stay valid whichever mode this is. The mode matters for memory the
// application registers itself outside pinpool.
enum class ForkMode : std::uint8_t {
  kDisabled,  // ibv_fork_init() not called, kernel without copy-on-fork for pinned pages
  kEnabled,   // ibv_fork_init() called: libibverbs marks each region MADV_DONTFORK
  kUnneeded,  // the kernel copies pinned pages for the child (Linux 5.13+): fork is safe
};
ForkMode QueryForkMode() noexcept;
const char* ForkModeName(ForkMode mode) noexcept;  // "disabled", "enabled", "unneeded"

}  // namespace pinpool

#endif  // PINPOOL_VERBS_H_
