// Opening an RDMA device for a verbs domain, and reading the capabilities registration depends
// on. Runs at Open/Wrap time only. Every failure says what exists on this machine (devices, port
// states) and what to do, because "no device" has many causes: a kernel without RDMA, a missing
// provider module, a link that is down, or /dev/infiniband permissions.
// Stateless; thread-safe as libibverbs is. Every device list and context opened here is released
// on every path except the context handed to the caller.
#include "providers/verbs/device.h"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "os/os.h"

namespace pinpool::internal {
namespace {

constexpr const char* kLoadRdma =
    "load the kernel's RDMA stack and your NIC's provider (modprobe ib_uverbs mlx5_ib, ...), or "
    "for testing soft-RoCE (modprobe rdma_rxe && rdma link add rxe0 type rxe netdev <interface>)";

struct DeviceListFree {
  void operator()(ibv_device** list) const noexcept { ibv_free_device_list(list); }
};

bool IsPermissionError(int err) { return err == EACCES || err == EPERM; }

absl::Status OpenFailed(const char* device, int err) {
  if (IsPermissionError(err)) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "cannot open RDMA device %s (%s): this user may not use /dev/infiniband/uverbs*; add it "
        "to the group owning them (often `rdma`) or fix the udev rule",
        device, std::strerror(err)));
  }
  return absl::UnavailableError(absl::StrFormat(
      "cannot open RDMA device %s: ibv_open_device failed (%s)", device, std::strerror(err)));
}

// True when a port of `context` is ACTIVE; otherwise `states` says what each port is.
bool HasActivePort(ibv_context* context, std::string& states) {
  ibv_device_attr attr{};
  if (const int err = ibv_query_device(context, &attr); err != 0) {
    states = absl::StrFormat("ibv_query_device failed: %s", std::strerror(err));
    return false;
  }
  std::vector<std::string> ports;
  for (int p = 1; p <= attr.phys_port_cnt; ++p) {
    ibv_port_attr port{};
    if (const int err = ibv_query_port(context, static_cast<std::uint8_t>(p), &port); err != 0) {
      ports.push_back(absl::StrFormat("port %d: ibv_query_port failed: %s", p, std::strerror(err)));
      continue;
    }
    if (port.state == IBV_PORT_ACTIVE) return true;
    ports.push_back(absl::StrFormat("port %d %s", p, ibv_port_state_str(port.state)));
  }
  states = ports.empty() ? "no ports" : absl::StrJoin(ports, ", ");
  return false;
}

void FillWindowCaps(const ibv_device_attr& attr, VerbsDeviceCaps& caps) {
  caps.vendor_id = attr.vendor_id;
  caps.windows_type2 = (attr.device_cap_flags &
                        (IBV_DEVICE_MEM_WINDOW_TYPE_2A | IBV_DEVICE_MEM_WINDOW_TYPE_2B)) != 0;
  caps.max_mw = static_cast<std::uint32_t>(attr.max_mw);
}

}  // namespace

absl::StatusOr<ibv_context*> OpenVerbsDevice(const std::string& name) {
  int count = 0;
  errno = 0;
  std::unique_ptr<ibv_device*[], DeviceListFree> list(ibv_get_device_list(&count));
  if (list == nullptr) {
    const int err = errno;
    return absl::NotFoundError(absl::StrFormat(
        "no RDMA device: ibv_get_device_list failed (%s)%s; %s", std::strerror(err),
        err == ENOSYS ? ", this kernel has no RDMA (uverbs) support" : "", kLoadRdma));
  }
  if (count == 0) {
    return absl::NotFoundError(absl::StrFormat(
        "no RDMA device: ibv_get_device_list found none (no provider bound to a NIC); %s",
        kLoadRdma));
  }

  std::vector<std::string> seen;  // every device with what stood in the way, for the error
  int permission_errors = 0;
  for (int i = 0; i < count; ++i) {
    const char* device = ibv_get_device_name(list[i]);
    if (!name.empty() && name != device) {
      seen.push_back(device);
      continue;
    }
    ibv_context* context = ibv_open_device(list[i]);
    if (context == nullptr) {
      const int err = errno;
      if (!name.empty()) return OpenFailed(device, err);
      permission_errors += IsPermissionError(err) ? 1 : 0;
      seen.push_back(absl::StrFormat("%s (cannot open: %s)", device, std::strerror(err)));
      continue;
    }
    // A device asked for by name is used whatever its ports say: registration does not need a
    // link, and the application may bring it up later.
    if (!name.empty()) return context;
    std::string states;
    if (HasActivePort(context, states)) return context;
    seen.push_back(absl::StrFormat("%s (%s)", device, states));
    ibv_close_device(context);
  }

  if (!name.empty()) {
    return absl::NotFoundError(
        absl::StrFormat("no RDMA device named \"%s\"; the devices here are: %s (set "
                        "VerbsOptions::device to one of them, or leave it empty for the first "
                        "ACTIVE one)",
                        name, absl::StrJoin(seen, ", ")));
  }
  if (permission_errors == count) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "no RDMA device could be opened: %s; this user may not use /dev/infiniband/uverbs*: add it "
        "to the group owning them (often `rdma`) or fix the udev rule",
        absl::StrJoin(seen, ", ")));
  }
  return absl::UnavailableError(absl::StrFormat(
      "no RDMA device has an ACTIVE port: %s; bring the link up (`ip link set <netdev> up`, "
      "cable, switch, subnet manager) or name the device in VerbsOptions::device to use it anyway",
      absl::StrJoin(seen, ", ")));
}

absl::StatusOr<VerbsDeviceCaps> QueryVerbsCaps(ibv_context* context) {
  VerbsDeviceCaps caps;
  ibv_device_attr_ex ex{};
  if (ibv_query_device_ex(context, nullptr, &ex) == 0) {
    caps.max_mr_size = ex.orig_attr.max_mr_size;
    caps.max_mr = static_cast<std::uint32_t>(ex.orig_attr.max_mr);
    caps.atomics = ex.orig_attr.atomic_cap != IBV_ATOMIC_NONE;
    caps.odp = (ex.odp_caps.general_caps & IBV_ODP_SUPPORT) != 0;
    caps.rc_odp_caps = ex.odp_caps.per_transport_caps.rc_odp_caps;
    FillWindowCaps(ex.orig_attr, caps);
    return caps;
  }
  // Providers without the extended query have no ODP either: the basic query says the rest.
  ibv_device_attr attr{};
  if (const int err = ibv_query_device(context, &attr); err != 0) {
    return absl::UnavailableError(absl::StrFormat("ibv_query_device on %s failed: %s",
                                                  ibv_get_device_name(context->device),
                                                  std::strerror(err)));
  }
  caps.max_mr_size = attr.max_mr_size;
  caps.max_mr = static_cast<std::uint32_t>(attr.max_mr);
  caps.atomics = attr.atomic_cap != IBV_ATOMIC_NONE;
  FillWindowCaps(attr, caps);
  return caps;
}

int VerbsDeviceNumaNode(const std::string& name, const std::string& sysfs_root) {
  std::error_code ec;
  namespace fs = std::filesystem;
  const fs::path ib = fs::path(sysfs_root) / "class/infiniband" / name;
  fs::path dir = fs::canonical(ib / "device", ec);
  if (ec) {
    absl::StatusOr<std::string> parent = os::ReadKernelFile((ib / "parent").c_str());
    if (!parent.ok()) return -1;
    std::string netdev = *parent;
    while (!netdev.empty() && (netdev.back() == '\n' || netdev.back() == ' ')) netdev.pop_back();
    dir = fs::canonical(fs::path(sysfs_root) / "class/net" / netdev / "device", ec);
    if (ec) return -1;  // a virtual netdev (dummy0): no device, no node
  }
  const fs::path root = fs::canonical(sysfs_root, ec);
  for (; !dir.empty() && dir != root && dir != dir.root_path(); dir = dir.parent_path()) {
    absl::StatusOr<std::string> node = os::ReadKernelFile((dir / "numa_node").c_str());
    if (!node.ok()) continue;
    int v = -1;
    std::from_chars(node->data(), node->data() + node->size(), v);
    return v < 0 ? -1 : v;
  }
  return -1;
}

}  // namespace pinpool::internal
