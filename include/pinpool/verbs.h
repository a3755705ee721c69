// RDMA verbs: registering pool chunks with a protection domain (PD) of an RDMA device, and the
// few helpers that turn a Block into what verbs calls take.
//
// A VerbsDomain registers each chunk of every pool it serves as ONE memory region (ibv_reg_mr)
// with the access rights of its VerbsAccess, so every block of the chunk carries that region's
// lkey (Block::lkey(d)). By default the region allows local access only; peers are granted one
// block at a time (pinpool/verbs_remote_access.h). Chunk-wide remote rights, where the chunk's rkey
// (Block::rkey(d)) opens the whole chunk, are an explicit opt-in for trusted peers.
// A domain either owns its device context and a PD it allocated (Open) or uses the
// application's PD (Wrap), which must then outlive it.
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
#include <string_view>

#include "absl/status/statusor.h"
#include "pinpool/abi.h"
#include "pinpool/block.h"
#include "pinpool/domain.h"
#include "pinpool/export.h"
#include "pinpool/keys.h"

namespace pinpool {

namespace internal {
class WindowPool;
struct VerbsDomainInternals;
}  // namespace internal

PINPOOL_ABI_BEGIN

// Remote operations a peer may perform on memory: RDMA READ, RDMA WRITE, atomics (compare-and-
// swap, fetch-and-add). Used for per-block grants (pinpool/verbs_remote_access.h) and, for trusted
// peers only, for whole chunks (VerbsAccess::trusted_whole_chunk).
struct RemoteRights {
  bool read = false;
  bool write = false;
  bool atomic = false;
  bool any() const noexcept { return read || write || atomic; }
};

// What the device may do with a domain's chunk registrations. The default is local access only:
// no peer can touch a chunk through the chunk's own region. Peers get access to one block (or a
// range of one) at a time through grants (pinpool::VerbsRemoteAccess), which are revoked before the
// memory is reused; the chunk regions are registered so that grants can bind memory windows
// over them (IBV_ACCESS_MW_BIND, where the device has type 2 windows).
struct PINPOOL_EXPORT VerbsAccess {
  // The device writes into the memory (RECV, RDMA READ responses). Required for any remote
  // write or atomic right, whether granted per block or chunk-wide.
  bool local_write = true;
  // DANGER, for trusted peers only: remote rights on each chunk's own region. The rkey of any
  // block (ToRemoteBuffer) is then the chunk's: a peer that learns it can read or write EVERY
  // block of the chunk (other requests', other peers', the application's own data: tens of
  // MiB), and keeps that access for as long as the pool lives, because freeing a block revokes
  // nothing. A block freed and handed out again is still reachable through the old key: the
  // stale-registration failure, from the remote side. Use per-block grants unless every peer is
  // part of the application's own trust domain. docs/remote-access.md weighs the two.
  RemoteRights trusted_whole_chunk = {};
  // On-demand paging: the device faults pages in instead of pinning them. Only devices with ODP
  // for RC READ and WRITE (ibv_query_device_ex odp_caps) accept it; others (rxe, most NICs
  // without ODP) make Open/Wrap fail with kUnimplemented.
  bool on_demand = false;

  // The IBV_ACCESS_* bits for a chunk's region (without IBV_ACCESS_MW_BIND, which the domain
  // adds when the device has type 2 windows).
  int ibv_flags() const noexcept;
};

// What a device offers per-block grants (pinpool/verbs_remote_access.h): type 2 memory windows, and
// whether it keeps a peer inside a bound window's range. A window whose bounds are not enforced
// still revokes (after invalidation its rkey is refused) and is still bound to one connection,
// but while it is valid a peer can reach the whole region beneath it: the whole chunk.
struct WindowSupport {
  bool type2 = false;            // IBV_DEVICE_MEM_WINDOW_TYPE_2A or _2B
  bool bounds_enforced = false;  // accesses outside a bound window are refused
  // Why not, when either is false: the missing capability, or the known defect of the device's
  // provider (pinpool keeps a table of those: docs/remote-access.md).
  std::string reason = {};
};

struct VerbsOptions {
  // Device to open, by its verbs name ("mlx5_0", "rxe0"); empty means the first device that has
  // a port in state ACTIVE.
  // (Both members have initializers so that designated initializers may omit either without
  // -Wmissing-field-initializers.)
  std::string device = {};
  VerbsAccess access = {};
};

// The figures a VerbsDomain reports in PoolStats::domains[i].figures (read one with FigureValue).
struct VerbsDomainFigures {
  static constexpr std::string_view kWindows = "windows";           // type 2 windows allocated now
  static constexpr std::string_view kWindowsIdle = "windows_idle";  // of which idle
  static constexpr std::string_view kWindowAllocations = "window_allocations";  // ever
  // Of which made on the grant path (the idle windows ran short).
  static constexpr std::string_view kWindowGrowthAllocations = "window_growth_allocations";
  static constexpr std::string_view kFailedDeregistrations = "failed_deregistrations";
};

class PINPOOL_EXPORT VerbsDomain final : public Domain {
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
  // ibv_reg_mr and ibv_dereg_mr are thread-safe: a pool registers several chunks at once.
  bool concurrent_registration() const noexcept override { return true; }
  // The device's NUMA node from sysfs: its own numa_node, or for a software device (rxe) that of
  // the first ancestor of the network device it sits on that has one; -1 when none is known.
  int numa_node() const noexcept override { return numa_node_; }
  // Its type 2 memory windows (shared by every grant on the domain: VerbsRemoteAccess) and its
  // failed deregistrations, by the names in VerbsDomainFigures.
  std::vector<Figure> figures() const override;

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
  // Type 2 memory windows on this device, as grants use them (WindowSupport).
  const WindowSupport& windows() const noexcept { return windows_; }

 private:
  friend struct internal::VerbsDomainInternals;
  PINPOOL_NO_EXPORT VerbsDomain(ibv_context* context, ibv_pd* pd, bool owned,
                                std::string device_name, const VerbsAccess& access,
                                std::uint64_t max_mr_size, std::uint32_t max_mr,
                                WindowSupport windows, std::uint32_t max_mw);

  ibv_context* const context_;
  ibv_pd* const pd_;
  const bool owned_;  // context_ and pd_ were created by Open and are released with the domain
  const std::string device_name_;
  const std::string name_;
  const VerbsAccess access_;
  const std::uint64_t max_mr_size_;
  const std::uint32_t max_mr_;  // the device's limit on regions, for error messages
  const int numa_node_;
  std::atomic<std::uint64_t> live_{0};
  std::atomic<std::uint64_t> total_{0};
  std::atomic<std::uint64_t> failed_deregs_{0};
  const WindowSupport windows_;
  // Idle type 2 windows of pd_, shared by every grant on this domain (created when the domain
  // has type 2 windows).
  std::unique_ptr<internal::WindowPool> window_pool_;
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

// What a peer needs to RDMA READ or WRITE remote memory: send it over your control channel. The
// address is the memory's own virtual address, because pinpool registers with the virtual
// address as the I/O address: the peer puts it in wr.rdma.remote_addr as is (no offset
// arithmetic). A grant (RemoteGrant::remote()) gives one for exactly the granted range.
struct RemoteBuffer {
  std::uint64_t address = 0;
  RKey rkey{};
  std::uint32_t length = 0;
};
// A block with its CHUNK's rkey: only meaningful when the domain was opened with
// VerbsAccess::trusted_whole_chunk rights (otherwise the chunk region has no remote rights and
// any peer access is refused), and then it opens the whole chunk to the peer for the pool's
// lifetime, whatever `length` says. For any peer that is not fully trusted, grant the block
// instead (VerbsRemoteAccess::Grant).
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
PINPOOL_EXPORT ForkMode QueryForkMode() noexcept;
// "disabled", "enabled", "unneeded"
constexpr const char* ForkModeName(ForkMode mode) noexcept {
  switch (mode) {
    case ForkMode::kDisabled:
      return "disabled";
    case ForkMode::kEnabled:
      return "enabled";
    case ForkMode::kUnneeded:
      return "unneeded";
  }
  return "?";
}

PINPOOL_ABI_END
}  // namespace pinpool

#endif  // PINPOOL_VERBS_H_
