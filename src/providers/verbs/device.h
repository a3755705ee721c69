// Finding and describing RDMA devices for the verbs domain: which device to open and what it can
// do (the capabilities a registration depends on).
// Everything here runs once per domain, at Open/Wrap time, never per registration.
// Stateless functions; thread-safe as libibverbs is.
#ifndef PINPOOL_PROVIDERS_VERBS_DEVICE_H_
#define PINPOOL_PROVIDERS_VERBS_DEVICE_H_

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pinpool::internal {

// What a registration depends on, read from ibv_query_device(_ex).
struct VerbsDeviceCaps {
  std::uint64_t max_mr_size = 0;
  std::uint32_t max_mr = 0;
  bool atomics = false;           // atomic_cap is not IBV_ATOMIC_NONE
  bool odp = false;               // odp_caps.general_caps has IBV_ODP_SUPPORT
  std::uint32_t rc_odp_caps = 0;  // odp_caps.per_transport_caps.rc_odp_caps (IBV_ODP_SUPPORT_*)
  std::uint32_t vendor_id = 0;    // IEEE OUI of the vendor; 0xffffff for soft-RoCE (rxe)
  bool windows_type2 = false;     // device_cap_flags has IBV_DEVICE_MEM_WINDOW_TYPE_2A or _2B
  std::uint32_t max_mw = 0;       // memory windows the device allows
};

// Opens the device named `name`, or when `name` is empty the first one with an ACTIVE port.
// The caller owns the returned context (ibv_close_device). Errors: kNotFound (no device / no
// such name: the message lists the devices there are and what to load), kUnavailable (no
// ACTIVE port: the ports' states are listed), kPermissionDenied (/dev/infiniband access).
absl::StatusOr<ibv_context*> OpenVerbsDevice(const std::string& name);

absl::StatusOr<VerbsDeviceCaps> QueryVerbsCaps(ibv_context* context);

// The NUMA node of RDMA device `name` from sysfs (under `sysfs_root`, for tests): the numa_node of
// the device or of its first ancestor that has one; a software device (rxe, siw) has no device
// link, so the walk starts at the network device its `parent` file names. -1 when none is known
// (the kernel also says -1 for devices on a bus without NUMA affinity).
int VerbsDeviceNumaNode(const std::string& name, const std::string& sysfs_root = "/sys");

}  // namespace pinpool::internal

#endif  // PINPOOL_PROVIDERS_VERBS_DEVICE_H_
