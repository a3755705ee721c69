// The verbs domain: registers each chunk it is given as one RDMA memory region (ibv_reg_mr) in
// its protection domain, and hands back the region's lkey and rkey with the ibv_mr* as handle.
//
// Owns its device context and PD when opened (Open), borrows the application's PD when wrapped
// (Wrap). Everything the device could refuse in advance (access rights, ODP, atomics) is checked
// there, once; Register checks the region size against max_mr_size and otherwise maps
// ibv_reg_mr's errno to a Status that names the limit and the fix (verbs/errors.cc).
//
// Thread safety: Register and Deregister touch only the immutable fields, libibverbs (whose
// calls are thread-safe) and atomic counters, so any number of pools and threads may share one
// domain. Destruction must come after every pool using it (pools hold it by shared_ptr).
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "os/os.h"
#include "pinpool/verbs.h"
#include "providers/verbs/access.h"
#include "providers/verbs/device.h"
#include "providers/verbs/errors.h"
#include "providers/verbs/windows.h"
#include "util/bytes.h"
#include "util/check.h"
#include "util/status_macros.h"

namespace pinpool {
PINPOOL_ABI_BEGIN
namespace {

// Numbers the process's verbs domains, so that two PDs on one device get different names in
// stats and errors.
std::atomic<unsigned> next_domain_number{1};

// Capabilities and access check shared by Open and Wrap.
absl::StatusOr<internal::VerbsDeviceCaps> Admit(ibv_context* context, const VerbsAccess& access,
                                                const std::string& device) {
  PINPOOL_ASSIGN_OR_RETURN(internal::VerbsDeviceCaps caps, internal::QueryVerbsCaps(context));
  PINPOOL_RETURN_IF_ERROR(internal::CheckVerbsAccess(access, caps, device));
  return caps;
}

}  // namespace

absl::StatusOr<std::shared_ptr<VerbsDomain>> VerbsDomain::Open(const VerbsOptions& options) {
  PINPOOL_ASSIGN_OR_RETURN(ibv_context * context, internal::OpenVerbsDevice(options.device));
  std::string device = ibv_get_device_name(context->device);
  absl::StatusOr<internal::VerbsDeviceCaps> caps = Admit(context, options.access, device);
  if (!caps.ok()) {
    ibv_close_device(context);
    return caps.status();
  }
  ibv_pd* pd = ibv_alloc_pd(context);
  if (pd == nullptr) {
    const int err = errno;
    ibv_close_device(context);
    return absl::ResourceExhaustedError(absl::StrFormat(
        "ibv_alloc_pd on %s failed (%s): the device has no protection domain left (max_pd); "
        "share one VerbsDomain between pools instead of opening one per pool",
        device, std::strerror(err)));
  }
  return std::shared_ptr<VerbsDomain>(new VerbsDomain(
      context, pd, /*owned=*/true, std::move(device), options.access, caps->max_mr_size,
      caps->max_mr, internal::WindowSupportOf(*caps), caps->max_mw));
}

absl::StatusOr<std::shared_ptr<VerbsDomain>> VerbsDomain::Wrap(ibv_pd* pd,
                                                               const VerbsAccess& access) {
  if (pd == nullptr) return absl::InvalidArgumentError("VerbsDomain::Wrap was given a null ibv_pd");
  std::string device = ibv_get_device_name(pd->context->device);
  PINPOOL_ASSIGN_OR_RETURN(internal::VerbsDeviceCaps caps, Admit(pd->context, access, device));
  return std::shared_ptr<VerbsDomain>(
      new VerbsDomain(pd->context, pd, /*owned=*/false, std::move(device), access, caps.max_mr_size,
                      caps.max_mr, internal::WindowSupportOf(caps), caps.max_mw));
}

VerbsDomain::VerbsDomain(ibv_context* context, ibv_pd* pd, bool owned, std::string device_name,
                         const VerbsAccess& access, std::uint64_t max_mr_size, std::uint32_t max_mr,
                         WindowSupport windows, std::uint32_t max_mw)
    : context_(context),
      pd_(pd),
      owned_(owned),
      device_name_(std::move(device_name)),
      name_(absl::StrFormat("%s/%s%u", device_name_, owned ? "pd" : "app-pd",
                            next_domain_number.fetch_add(1))),
      access_(access),
      max_mr_size_(max_mr_size),
      max_mr_(max_mr),
      numa_node_(internal::VerbsDeviceNumaNode(device_name_)),
      windows_(std::move(windows)),
      window_pool_(windows_.type2 ? std::make_unique<internal::WindowPool>(pd, max_mw, name_)
                                  : nullptr) {}

std::vector<Figure> VerbsDomain::figures() const {
  std::vector<Figure> out;
  if (window_pool_ != nullptr) {
    const internal::WindowPool::Counts w = window_pool_->counts();
    out.push_back({std::string(VerbsDomainFigures::kWindows), w.windows, false,
                   "type 2 memory windows allocated now (idle and bound)"});
    out.push_back({std::string(VerbsDomainFigures::kWindowsIdle), w.idle, false,
                   "of which idle (unbound, ready for a grant)"});
    out.push_back({std::string(VerbsDomainFigures::kWindowAllocations), w.allocations, true,
                   "ibv_alloc_mw calls, ever"});
    out.push_back({std::string(VerbsDomainFigures::kWindowGrowthAllocations), w.growth_allocations,
                   true, "of which on the grant path (the idle windows ran short)"});
  }
  out.push_back({std::string(VerbsDomainFigures::kFailedDeregistrations), failed_deregs_.load(),
                 true, "ibv_dereg_mr calls that failed (their pages stay pinned)"});
  return out;
}

VerbsDomain::~VerbsDomain() {
  window_pool_.reset();  // windows belong to pd_: deallocated before it
  if (const std::uint64_t live = live_.load(); live != 0) {
    std::fprintf(stderr, "pinpool: verbs domain %s destroyed with %llu regions still registered\n",
                 name_.c_str(), static_cast<unsigned long long>(live));
  }
  if (!owned_) return;
  // EBUSY here means the application still has QPs, CQ-less objects or regions on our PD: they
  // keep the device open, so report rather than abort.
  if (const int err = ibv_dealloc_pd(pd_); err != 0) {
    std::fprintf(stderr,
                 "pinpool: ibv_dealloc_pd of %s failed (%s): destroy the QPs and regions "
                 "created on VerbsDomain::pd() before the domain\n",
                 name_.c_str(), std::strerror(err));
  }
  if (const int err = ibv_close_device(context_); err != 0) {
    std::fprintf(stderr, "pinpool: ibv_close_device of %s failed (%s)\n", name_.c_str(),
                 std::strerror(err));
  }
}

absl::StatusOr<Keys> VerbsDomain::Register(void* base, std::size_t length) {
  PINPOOL_RETURN_IF_ERROR(internal::CheckRegionSize(length, max_mr_size_, name_));
  // With type 2 windows, grants bind windows over the chunk's region, which needs MW_BIND (and
  // nothing else: the region itself keeps no remote rights unless trusted_whole_chunk asks).
  const int flags = access_.ibv_flags() | (windows_.type2 ? IBV_ACCESS_MW_BIND : 0);
  errno = internal::os::InjectedFault(internal::os::Call::kVerbsRegister, length);
  ibv_mr* mr = errno != 0 ? nullptr : ibv_reg_mr(pd_, base, length, flags);
  if (mr == nullptr) {
    const int err = errno != 0 ? errno : EINVAL;  // some providers forget errno
    internal::RegMrContext context{.domain = name_,
                                   .length = length,
                                   .access = access_,
                                   .live_regions = live_.load(),
                                   .max_mr = max_mr_,
                                   .memlock = internal::os::QueryMemlock()};
    return internal::RegMrFailed(err, context);
  }
  live_.fetch_add(1);
  total_.fetch_add(1);
  Keys keys;
  keys.base = reinterpret_cast<std::uintptr_t>(base);
  keys.length = length;
  keys.lkey = LKey{mr->lkey};
  keys.rkey = RKey{mr->rkey};
  keys.handle = mr;
  return keys;
}

void VerbsDomain::Deregister(const Keys& keys) noexcept {
  auto* mr = static_cast<ibv_mr*>(keys.handle);
  // Keys from another domain would deregister someone else's region: corruption, so always on.
  PINPOOL_CHECK(
      mr != nullptr && mr->pd == pd_ && reinterpret_cast<std::uintptr_t>(mr->addr) == keys.base,
      "verbs domain %s asked to deregister keys it did not register (base 0x%lx)", name_.c_str(),
      static_cast<unsigned long>(keys.base));
  if (const int err = ibv_dereg_mr(mr); err != 0) {
    failed_deregs_.fetch_add(1);
    std::fprintf(stderr,
                 "pinpool: ibv_dereg_mr of %s at 0x%lx on %s failed (%s); its pages stay pinned "
                 "until the process exits (a memory window still bound to it?)\n",
                 internal::FormatBytes(keys.length).c_str(), static_cast<unsigned long>(keys.base),
                 name_.c_str(), std::strerror(err));
    return;
  }
  live_.fetch_sub(1);
}

PINPOOL_ABI_END
}  // namespace pinpool
