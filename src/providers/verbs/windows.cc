// Memory windows: the capability table and the per-PD pool of idle type 2 windows (see
// windows.h for the contract).
#include "providers/verbs/windows.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "os/os.h"

namespace pinpool::internal {
namespace {

// Providers whose type 2 windows do NOT keep a peer inside the window's range. Matched by the
// vendor id the device reports (rxe's is fixed in the kernel; a real NIC's is its vendor's OUI).
// An entry is a measured defect, never a guess; tests/providers/verbs/remote_access_test.cc
// re-measures the rxe entry on every run and fails the day the kernel fixes it, so the table can
// shrink.
struct KnownDefect {
  std::uint32_t vendor_id;
  const char* reason;
};
constexpr std::uint32_t kRxeVendorId = 0xffffff;
constexpr KnownDefect kUnenforcedWindowBounds[] = {
    {kRxeVendorId,
     "soft-RoCE (rxe) checks an access through a window against the window's underlying region, "
     "not against the window (Linux 6.1 rxe_resp.c: check_rkey calls mr_check_range on the "
     "window's MR), so a peer holding a window's rkey can reach the whole chunk until it is "
     "invalidated"},
};

}  // namespace

WindowSupport WindowSupportOf(const VerbsDeviceCaps& caps) {
  WindowSupport s;
  s.type2 = caps.windows_type2;
  if (!s.type2) {
    s.reason =
        "the device has no type 2 memory windows (device_cap_flags lacks "
        "IBV_DEVICE_MEM_WINDOW_TYPE_2A/_2B; SR-IOV virtual functions usually do)";
    return s;
  }
  s.bounds_enforced = true;
  for (const KnownDefect& d : kUnenforcedWindowBounds) {
    if (d.vendor_id == caps.vendor_id) {
      s.bounds_enforced = false;
      s.reason = d.reason;
    }
  }
  return s;
}

unsigned WithInvalidateFlag(const VerbsDeviceCaps& caps) {
  constexpr unsigned kKernelWithInvalidate = 1u << 2;  // the kernel's IB_WC_WITH_INVALIDATE
  return caps.vendor_id == kRxeVendorId ? kKernelWithInvalidate
                                        : static_cast<unsigned>(IBV_WC_WITH_INV);
}

WindowPool::WindowPool(ibv_pd* pd, std::uint32_t max_mw, std::string domain_name)
    : pd_(pd), max_mw_(max_mw), domain_name_(std::move(domain_name)) {}

WindowPool::~WindowPool() {
  MutexLock lock(&mu_);
  for (ibv_mw* mw : idle_) ibv_dealloc_mw(mw);
  if (counts_.windows != counts_.idle) {
    std::fprintf(stderr,
                 "pinpool: the window pool of %s is destroyed with %llu windows still bound "
                 "(destroy every VerbsRemoteAccess before its domain)\n",
                 domain_name_.c_str(),
                 static_cast<unsigned long long>(counts_.windows - counts_.idle));
  }
}

absl::Status WindowPool::AllocateLocked(std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    errno = internal::os::InjectedFault(internal::os::Call::kVerbsWindow, 0);
    ibv_mw* mw = errno != 0 ? nullptr : ibv_alloc_mw(pd_, IBV_MW_TYPE_2);
    if (mw == nullptr) {
      const int err = errno != 0 ? errno : ENOMEM;
      return absl::ResourceExhaustedError(absl::StrFormat(
          "ibv_alloc_mw(type 2) on %s failed (%s) with %d windows allocated (the device allows "
          "%d): lower VerbsRemoteAccessOptions::min_idle_windows or the number of concurrent "
          "grants",
          domain_name_, std::strerror(err), counts_.windows, max_mw_));
    }
    idle_.push_back(mw);
    ++counts_.windows;
    ++counts_.idle;
    ++counts_.allocations;
  }
  return absl::OkStatus();
}

absl::Status WindowPool::Reserve(std::size_t idle) {
  MutexLock lock(&mu_);
  return idle_.size() >= idle ? absl::OkStatus() : AllocateLocked(idle - idle_.size());
}

absl::StatusOr<ibv_mw*> WindowPool::Take(std::size_t keep_idle) {
  MutexLock lock(&mu_);
  if (idle_.size() < keep_idle + 1) {
    const std::size_t before = counts_.allocations;
    // Grow by at least a few at once, so that a pool that runs short does not pay a kernel
    // command on every grant from then on.
    const absl::Status s = AllocateLocked(keep_idle + 1 - idle_.size() + 8);
    counts_.growth_allocations += counts_.allocations - before;
    if (idle_.empty()) return s;  // a partial growth still serves this grant
  }
  ibv_mw* mw = idle_.front();
  idle_.pop_front();
  --counts_.idle;
  return mw;
}

void WindowPool::Return(ibv_mw* mw) {
  MutexLock lock(&mu_);
  idle_.push_back(mw);
  ++counts_.idle;
}

bool WindowPool::Discard(ibv_mw* mw) {
  if (const int err = ibv_dealloc_mw(mw); err != 0) {
    std::fprintf(stderr,
                 "pinpool: ibv_dealloc_mw on %s failed (%s): the memory its binding reached stays "
                 "held, never reused\n",
                 domain_name_.c_str(), std::strerror(err));
    return false;
  }
  MutexLock lock(&mu_);
  --counts_.windows;
  ++counts_.discarded;
  return true;
}

WindowPool::Counts WindowPool::counts() const {
  MutexLock lock(&mu_);
  return counts_;
}

}  // namespace pinpool::internal
