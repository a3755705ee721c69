// VerbsAccess: pinpool's typed access rights, their IBV_ACCESS_* bits, and the check, made once
// per domain, that the device can honour them. ODP is the capability most often missing (rxe
// and many NICs have none), and ibv_reg_mr only says EINVAL about it, so the check names it.
// Pure functions; thread-safe.
#include "providers/verbs/access.h"

#include "absl/strings/str_format.h"

namespace pinpool {
PINPOOL_ABI_BEGIN

int VerbsAccess::ibv_flags() const noexcept {
  int flags = 0;
  if (local_write) flags |= IBV_ACCESS_LOCAL_WRITE;
  if (trusted_whole_chunk.read) flags |= IBV_ACCESS_REMOTE_READ;
  if (trusted_whole_chunk.write) flags |= IBV_ACCESS_REMOTE_WRITE;
  if (trusted_whole_chunk.atomic) flags |= IBV_ACCESS_REMOTE_ATOMIC;
  if (on_demand) flags |= IBV_ACCESS_ON_DEMAND;
  return flags;
}

PINPOOL_ABI_END
namespace internal {

absl::Status CheckVerbsAccess(const VerbsAccess& access, const VerbsDeviceCaps& caps,
                              const std::string& device) {
  // The verbs specification: a region the peer may write must be writable by the local device.
  const RemoteRights& chunk = access.trusted_whole_chunk;
  if ((chunk.write || chunk.atomic) && !access.local_write) {
    return absl::InvalidArgumentError(
        "VerbsAccess asks for trusted_whole_chunk write or atomic rights without local_write, "
        "which ibv_reg_mr refuses: set VerbsAccess::local_write (the default)");
  }
  if (chunk.atomic && !caps.atomics) {
    return absl::UnimplementedError(
        absl::StrFormat("%s supports no atomic operations (atomic_cap is IBV_ATOMIC_NONE): leave "
                        "VerbsAccess::trusted_whole_chunk.atomic false",
                        device));
  }
  if (access.on_demand) {
    // A pool's memory is the target of RC READ and WRITE (and atomics when granted): the
    // device must be able to fault pages in for those, not just advertise ODP in general.
    std::uint32_t needed = IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_WRITE;
    if (chunk.atomic) needed |= IBV_ODP_SUPPORT_ATOMIC;
    if (!caps.odp || (caps.rc_odp_caps & needed) != needed) {
      return absl::UnimplementedError(absl::StrFormat(
          "%s has no on-demand paging (ODP) for RC %s (ibv_query_device_ex: "
          "odp_caps.general_caps %s IBV_ODP_SUPPORT, rc_odp_caps=0x%x): leave "
          "VerbsAccess::on_demand false; pinpool registers whole pinned chunks up front and "
          "needs no ODP",
          device, chunk.atomic ? "READ, WRITE and atomics" : "READ and WRITE",
          caps.odp ? "has" : "lacks", caps.rc_odp_caps));
    }
  }
  return absl::OkStatus();
}

}  // namespace internal
}  // namespace pinpool
