// Probing RDMA: the devices libibverbs sees, what each can do for registration (max_mr_size,
// max_mr, memory windows, ODP, page sizes), its ports and their GID tables; and, for the fixes,
// which modules of the kernel's RDMA stack are there and which network interfaces a software
// RDMA device could be put on.
//
// GID types come from ibv_query_gid_table (one call, kernel 5.9+ / rdma-core 31+). Where that
// fails, each entry is read with ibv_query_gid and its type and net device from sysfs
// (ports/N/gid_attrs/{types,ndevs}/I), as older tools do. PINPOOL_INFO_GID_FALLBACK=1 forces
// the sysfs path, so that tests can check that both agree.
// Every context opened here is closed before returning.
#include <arpa/inet.h>
#include <dirent.h>
#include <endian.h>
#include <infiniband/verbs.h>
#include <net/if.h>
#include <sys/utsname.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "info.h"
#include "os/os.h"
#include "providers/verbs/device.h"
#include "providers/verbs/windows.h"

namespace pinpool::info {
namespace {

using internal::os::ReadKernelFile;

struct DeviceListFree {
  void operator()(ibv_device** list) const noexcept { ibv_free_device_list(list); }
};

std::string Trimmed(const std::string& text) {
  return std::string(absl::StripAsciiWhitespace(text));
}

std::string TransportName(ibv_transport_type t) {
  switch (t) {
    case IBV_TRANSPORT_IB:
      return "InfiniBand";
    case IBV_TRANSPORT_IWARP:
      return "iWARP";
    case IBV_TRANSPORT_USNIC:
      return "usNIC";
    case IBV_TRANSPORT_USNIC_UDP:
      return "usNIC UDP";
    case IBV_TRANSPORT_UNSPECIFIED:
      return "unspecified";
    default:
      break;
  }
  return "unknown";
}

// As ibv_devinfo prints them ("PORT_ACTIVE"); ibv_port_state_str says "active".
std::string PortStateName(ibv_port_state s) {
  switch (s) {
    case IBV_PORT_NOP:
      return "PORT_NOP";
    case IBV_PORT_DOWN:
      return "PORT_DOWN";
    case IBV_PORT_INIT:
      return "PORT_INIT";
    case IBV_PORT_ARMED:
      return "PORT_ARMED";
    case IBV_PORT_ACTIVE:
      return "PORT_ACTIVE";
    case IBV_PORT_ACTIVE_DEFER:
      return "PORT_ACTIVE_DEFER";
  }
  return absl::StrFormat("PORT_STATE_%d", static_cast<int>(s));
}

std::string PhysStateName(std::uint8_t s) {
  static constexpr const char* kNames[] = {"NO_STATE_CHANGE",
                                           "SLEEP",
                                           "POLLING",
                                           "DISABLED",
                                           "PORT_CONFIGURATION_TRAINING",
                                           "LINK_UP",
                                           "LINK_ERROR_RECOVERY",
                                           "PHY_TEST"};
  if (s < std::size(kNames)) return kNames[s];
  return absl::StrFormat("%d", s);
}

std::string LinkLayerName(std::uint8_t l) {
  switch (l) {
    case IBV_LINK_LAYER_ETHERNET:
      return "Ethernet";
    case IBV_LINK_LAYER_INFINIBAND:
    case IBV_LINK_LAYER_UNSPECIFIED:  // what IB devices of old kernels report
      return "InfiniBand";
    default:
      break;
  }
  return "unknown";
}

std::uint32_t MtuBytes(ibv_mtu m) {
  return m >= IBV_MTU_256 && m <= IBV_MTU_4096 ? 256u << (m - IBV_MTU_256) : 0;
}

std::vector<std::string> OdpNames(std::uint32_t caps) {
  static constexpr std::pair<std::uint32_t, const char*> kBits[] = {
      {IBV_ODP_SUPPORT_SEND, "send"},     {IBV_ODP_SUPPORT_RECV, "recv"},
      {IBV_ODP_SUPPORT_WRITE, "write"},   {IBV_ODP_SUPPORT_READ, "read"},
      {IBV_ODP_SUPPORT_ATOMIC, "atomic"}, {IBV_ODP_SUPPORT_SRQ_RECV, "srq_recv"}};
  std::vector<std::string> names;
  for (const auto& [bit, name] : kBits) {
    if (caps & bit) names.push_back(name);
  }
  return names;
}

std::string GuidText(__be64 guid) {
  const std::uint64_t g = be64toh(guid);
  return absl::StrFormat("%04x:%04x:%04x:%04x", (g >> 48) & 0xffff, (g >> 32) & 0xffff,
                         (g >> 16) & 0xffff, g & 0xffff);
}

bool IsZero(const ibv_gid& gid) {
  return std::all_of(std::begin(gid.raw), std::end(gid.raw), [](std::uint8_t b) { return b == 0; });
}

GidInfo MakeGid(std::uint32_t index, const ibv_gid& gid, std::string type, std::string netdev) {
  GidInfo g;
  g.index = index;
  char text[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, gid.raw, text, sizeof text);
  g.gid = text;
  g.type = std::move(type);
  g.netdev = std::move(netdev);
  // ::ffff:a.b.c.d (RFC 4291 2.5.5.2): how RoCE carries an IPv4 address.
  static constexpr std::uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(gid.raw, kMapped, sizeof kMapped) == 0) {
    char v4[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, gid.raw + 12, v4, sizeof v4);
    g.ipv4 = v4;
  }
  return g;
}

std::string GidTypeName(std::uint32_t t) {
  switch (t) {
    case IBV_GID_TYPE_IB:
      return "IB";
    case IBV_GID_TYPE_ROCE_V1:
      return "RoCE v1";
    case IBV_GID_TYPE_ROCE_V2:
      return "RoCE v2";
    default:
      break;
  }
  return "unknown";
}

// One call for every valid entry of every port. False when the kernel or provider lacks it.
bool ReadGidTable(ibv_context* ctx, std::vector<PortInfo>& ports) {
  std::size_t total = 0;
  for (const PortInfo& p : ports) total += p.gid_table_size;
  if (total == 0) return true;
  std::vector<ibv_gid_entry> entries(total);
  const ssize_t n = ibv_query_gid_table(ctx, entries.data(), entries.size(), 0);
  if (n < 0) return false;
  for (ssize_t i = 0; i < n; ++i) {
    const ibv_gid_entry& e = entries[static_cast<std::size_t>(i)];
    for (PortInfo& p : ports) {
      if (p.port != e.port_num) continue;
      char name[IF_NAMESIZE] = {};
      std::string netdev;
      if (e.ndev_ifindex != 0 && if_indextoname(e.ndev_ifindex, name) != nullptr) netdev = name;
      p.gids.push_back(MakeGid(e.gid_index, e.gid, GidTypeName(e.gid_type), std::move(netdev)));
    }
  }
  for (PortInfo& p : ports) {
    std::sort(p.gids.begin(), p.gids.end(),
              [](const GidInfo& a, const GidInfo& b) { return a.index < b.index; });
  }
  return true;
}

// Entry by entry, with the type and net device from sysfs.
void ReadGidsFromSysfs(ibv_context* ctx, const std::string& device, PortInfo& port) {
  const std::string attrs =
      absl::StrFormat("/sys/class/infiniband/%s/ports/%d/gid_attrs", device, port.port);
  for (std::uint32_t i = 0; i < port.gid_table_size; ++i) {
    ibv_gid gid{};
    if (ibv_query_gid(ctx, static_cast<std::uint8_t>(port.port), static_cast<int>(i), &gid) != 0 ||
        IsZero(gid)) {
      continue;
    }
    std::string type = "IB";
    if (port.link_layer == "Ethernet") {
      auto text = ReadKernelFile(absl::StrFormat("%s/types/%d", attrs, i).c_str());
      // sysfs says "IB/RoCE v1" for v1 on Ethernet ports.
      type = !text.ok() ? "unknown" : Trimmed(*text) == "RoCE v2" ? "RoCE v2" : "RoCE v1";
    }
    std::string netdev;
    if (auto text = ReadKernelFile(absl::StrFormat("%s/ndevs/%d", attrs, i).c_str()); text.ok()) {
      netdev = Trimmed(*text);
    }
    port.gids.push_back(MakeGid(i, gid, std::move(type), std::move(netdev)));
  }
}

DeviceInfo ProbeDevice(ibv_device* device) {
  DeviceInfo d;
  d.name = ibv_get_device_name(device);
  d.node_type = ibv_node_type_str(device->node_type);
  d.transport = TransportName(device->transport_type);
  d.node_guid = GuidText(ibv_get_device_guid(device));

  errno = 0;
  ibv_context* ctx = ibv_open_device(device);
  if (ctx == nullptr) {
    const int err = errno;
    d.permission_denied = err == EACCES || err == EPERM;
    d.error = absl::StrFormat("ibv_open_device: %s", std::strerror(err));
    return d;
  }
  std::unique_ptr<ibv_context, int (*)(ibv_context*)> closer(ctx, ibv_close_device);

  ibv_device_attr_ex ex{};
  ibv_device_attr& attr = ex.orig_attr;
  if (ibv_query_device_ex(ctx, nullptr, &ex) == 0) {
    d.extended_query = true;
    d.odp = (ex.odp_caps.general_caps & IBV_ODP_SUPPORT) != 0;
    d.odp_implicit = (ex.odp_caps.general_caps & IBV_ODP_SUPPORT_IMPLICIT) != 0;
    d.odp_rc = OdpNames(ex.odp_caps.per_transport_caps.rc_odp_caps);
    d.odp_uc = OdpNames(ex.odp_caps.per_transport_caps.uc_odp_caps);
    d.odp_ud = OdpNames(ex.odp_caps.per_transport_caps.ud_odp_caps);
  } else if (const int err = ibv_query_device(ctx, &attr); err != 0) {
    d.error = absl::StrFormat("ibv_query_device: %s", std::strerror(err));
    return d;
  }
  d.fw_ver = attr.fw_ver;
  d.numa_node = internal::VerbsDeviceNumaNode(d.name);
  d.vendor_id = attr.vendor_id;
  d.vendor_part_id = attr.vendor_part_id;
  d.max_mr_size = attr.max_mr_size;
  d.max_mr = static_cast<std::uint32_t>(attr.max_mr);
  d.max_mw = static_cast<std::uint32_t>(attr.max_mw);
  d.max_pd = static_cast<std::uint32_t>(attr.max_pd);
  d.max_qp = static_cast<std::uint32_t>(attr.max_qp);
  d.page_size_cap = attr.page_size_cap;
  d.device_cap_flags = attr.device_cap_flags;
  d.mw_type1 = (attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW) != 0;
  d.mw_type2a = (attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2A) != 0;
  d.mw_type2b = (attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) != 0;
  d.mem_mgt_extensions = (attr.device_cap_flags & IBV_DEVICE_MEM_MGT_EXTENSIONS) != 0;
  internal::VerbsDeviceCaps caps;
  caps.vendor_id = attr.vendor_id;
  caps.windows_type2 = d.mw_type2a || d.mw_type2b;
  d.grant_windows = internal::WindowSupportOf(caps);
  d.atomics = attr.atomic_cap == IBV_ATOMIC_HCA    ? "hca"
              : attr.atomic_cap == IBV_ATOMIC_GLOB ? "global"
                                                   : "none";

  for (int p = 1; p <= attr.phys_port_cnt; ++p) {
    PortInfo port;
    port.port = static_cast<std::uint32_t>(p);
    ibv_port_attr pa{};
    if (const int err = ibv_query_port(ctx, static_cast<std::uint8_t>(p), &pa); err != 0) {
      port.error = absl::StrFormat("ibv_query_port: %s", std::strerror(err));
      d.ports.push_back(std::move(port));
      continue;
    }
    port.state = PortStateName(pa.state);
    port.active = pa.state == IBV_PORT_ACTIVE;
    port.phys_state = PhysStateName(pa.phys_state);
    port.link_layer = LinkLayerName(pa.link_layer);
    port.active_mtu = MtuBytes(pa.active_mtu);
    port.max_mtu = MtuBytes(pa.max_mtu);
    port.lid = pa.lid;
    port.gid_table_size = static_cast<std::uint32_t>(std::max(pa.gid_tbl_len, 0));
    d.ports.push_back(std::move(port));
  }

  const char* force = std::getenv("PINPOOL_INFO_GID_FALLBACK");
  const bool fallback = force != nullptr && std::string_view(force) == "1";
  if (fallback || !ReadGidTable(ctx, d.ports)) {
    for (PortInfo& port : d.ports) {
      if (port.error.empty()) ReadGidsFromSysfs(ctx, d.name, port);
    }
  }
  return d;
}

// "loaded", "builtin", "available" or "absent" for a kernel module.
std::string ModuleState(const std::string& name, const std::string& proc_modules,
                        const std::string& builtin, const std::string& dep) {
  if (proc_modules.starts_with(name + " ") ||
      proc_modules.find("\n" + name + " ") != std::string::npos) {
    return "loaded";
  }
  const std::string ko = "/" + name + ".ko";
  if (builtin.find(ko) != std::string::npos) return "builtin";
  if (dep.find(ko) != std::string::npos) return "available";
  return "absent";
}

std::vector<std::string> NetDevices() {
  std::vector<std::string> up, other;
  if (DIR* dir = opendir("/sys/class/net")) {
    while (dirent* e = readdir(dir)) {
      const std::string name = e->d_name;
      if (name == "." || name == ".." || name == "lo") continue;
      auto state = ReadKernelFile(("/sys/class/net/" + name + "/operstate").c_str());
      (state.ok() && Trimmed(*state) != "down" ? up : other).push_back(name);
    }
    closedir(dir);
  }
  std::sort(up.begin(), up.end());
  std::sort(other.begin(), other.end());
  up.insert(up.end(), other.begin(), other.end());
  return up;
}

}  // namespace

RdmaFacts ProbeRdma() {
  RdmaFacts facts;
  int count = 0;
  errno = 0;
  std::unique_ptr<ibv_device*[], DeviceListFree> list(ibv_get_device_list(&count));
  if (list == nullptr) {
    facts.list_errno = errno != 0 ? errno : ENODEV;
  } else {
    for (int i = 0; i < count; ++i) facts.devices.push_back(ProbeDevice(list[i]));
  }

  utsname u{};
  uname(&u);
  const std::string modules_dir = absl::StrFormat("/lib/modules/%s/", u.release);
  const std::string proc_modules = ReadKernelFile("/proc/modules").value_or("");
  const std::string builtin =
      ReadKernelFile((modules_dir + "modules.builtin").c_str()).value_or("");
  const std::string dep = ReadKernelFile((modules_dir + "modules.dep").c_str()).value_or("");
  for (const char* name : {"ib_core", "ib_uverbs", "rdma_ucm", "rdma_rxe", "siw"}) {
    facts.modules[name] = ModuleState(name, proc_modules, builtin, dep);
  }
  facts.netdevs = NetDevices();
  facts.providers = ProbeProviders();
  return facts;
}

}  // namespace pinpool::info
