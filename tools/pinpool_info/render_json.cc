// pinpool-info --json: the facts, the plan and the problems as one JSON object, written with the
// JSON writer PoolStats::ToJson uses (the --try pool's stats are that very object). Field names
// are an interface: docs/pinpool-info.md and --help list them; kSchemaVersion changes when one
// changes meaning or goes away. Sizes are bytes, limits null when unlimited, absent values null.
#include <cstring>
#include <string>

#include "info.h"
#include "pinpool/version.h"
#include "report/stats_json.h"
#include "wire/json_writer.h"

namespace pinpool::info {
namespace {

using internal::JsonWriter;

void Strings(JsonWriter& json, std::string_view key, const std::vector<std::string>& values) {
  json.Key(key).BeginArray();
  for (const std::string& v : values) json.String(v);
  json.EndArray();
}

std::optional<std::string> Errno(const std::optional<int>& err) {
  if (!err) return std::nullopt;
  return std::string(std::strerror(*err));
}

std::optional<std::uint64_t> Number(const std::optional<int>& v) {
  if (!v) return std::nullopt;
  return static_cast<std::uint64_t>(*v);
}

std::vector<std::string> PageSizes(std::uint64_t cap) {
  std::vector<std::string> out;
  for (PageSize s : {PageSize::k4K, PageSize::k2M, PageSize::k1G}) {
    if (cap & PageBytes(s)) out.push_back(PageSizeName(s));
  }
  return out;
}

void WriteDevice(JsonWriter& json, const DeviceInfo& d) {
  json.BeginObject()
      .Field("name", d.name)
      .Field("node_type", d.node_type)
      .Field("transport", d.transport)
      .Field("node_guid", d.node_guid)
      .Field("error", d.error.empty() ? std::nullopt : std::optional<std::string>(d.error));
  if (!d.error.empty()) {
    json.EndObject();
    return;
  }
  json.Field("fw_ver", d.fw_ver)
      .Field("numa_node",
             d.numa_node < 0 ? std::nullopt : std::optional<std::uint64_t>(d.numa_node))
      .Field("vendor_id", d.vendor_id)
      .Field("vendor_part_id", d.vendor_part_id)
      .Field("max_mr_size", d.max_mr_size)
      .Field("max_mr", d.max_mr)
      .Field("max_mw", d.max_mw)
      .Field("max_pd", d.max_pd)
      .Field("max_qp", d.max_qp)
      .Field("page_size_cap", d.page_size_cap);
  Strings(json, "page_sizes", PageSizes(d.page_size_cap));
  json.Field("device_cap_flags", d.device_cap_flags)
      .Key("memory_windows")
      .BeginObject()
      .Field("type1", d.mw_type1)
      .Field("type2a", d.mw_type2a)
      .Field("type2b", d.mw_type2b)
      .EndObject()
      .Field("mem_mgt_extensions", d.mem_mgt_extensions)
      .Key("grants")
      .BeginObject()
      .Field("windows_type2", d.grant_windows.type2)
      .Field("window_bounds_enforced", d.grant_windows.bounds_enforced)
      .Field("mechanism", d.grant_windows.bounds_enforced ? "window" : "region")
      .Field("reason", d.grant_windows.reason.empty()
                           ? std::nullopt
                           : std::optional<std::string>(d.grant_windows.reason))
      .EndObject()
      .Field("atomics", d.atomics)
      .Key("odp")
      .BeginObject()
      .Field("queried", d.extended_query)
      .Field("supported", d.odp)
      .Field("implicit", d.odp_implicit);
  Strings(json, "rc", d.odp_rc);
  Strings(json, "uc", d.odp_uc);
  Strings(json, "ud", d.odp_ud);
  json.EndObject();
  json.Key("ports").BeginArray();
  for (const PortInfo& p : d.ports) {
    json.BeginObject()
        .Field("port", p.port)
        .Field("error", p.error.empty() ? std::nullopt : std::optional<std::string>(p.error))
        .Field("state", p.state)
        .Field("active", p.active)
        .Field("phys_state", p.phys_state)
        .Field("link_layer", p.link_layer)
        .Field("active_mtu", p.active_mtu)
        .Field("max_mtu", p.max_mtu)
        .Field("lid", p.lid)
        .Field("gid_table_size", p.gid_table_size);
    json.Key("gids").BeginArray();
    for (const GidInfo& g : p.gids) {
      json.BeginObject()
          .Field("index", g.index)
          .Field("gid", g.gid)
          .Field("type", g.type)
          .Field("ipv4_mapped", g.ipv4.has_value())
          .Field("ipv4", g.ipv4)
          .Field("netdev", g.netdev.empty() ? std::nullopt : std::optional<std::string>(g.netdev))
          .EndObject();
    }
    json.EndArray().EndObject();
  }
  json.EndArray().EndObject();
}

void WritePlan(JsonWriter& json, const PoolPlan& plan) {
  const ToolOptions& o = plan.options;
  json.Key("pool")
      .BeginObject()
      .Field("chunk_size", o.chunk_size)
      .Field("budget", o.budget)
      .Field("page_size", PageSizeName(o.page_size))
      .Field("require_page_size", o.require_page_size)
      .Field("valid", plan.invalid.empty())
      .Field("invalid_reason",
             plan.invalid.empty() ? std::nullopt : std::optional<std::string>(plan.invalid))
      .Field("chunks", plan.chunks)
      .Field("pinned_bytes", plan.pinned_bytes);
  json.Key("page_sizes").BeginArray();
  for (const PageSizeOutcome& p : plan.page_sizes) {
    json.BeginObject()
        .Field("page_size", PageSizeName(p.page_size))
        .Field("chunks", p.chunks)
        .Field("reason", p.reason)
        .EndObject();
  }
  json.EndArray();
  json.Field("failing_chunks", plan.failing_chunks).Key("first_chunk_page_size");
  if (plan.invalid.empty() && plan.failing_chunks < plan.chunks) {
    json.String(PageSizeName(plan.first_chunk_page_size));
  } else {
    json.Null();
  }
  json.Key("memlock")
      .BeginObject()
      .Field("needed_bytes", plan.pinned_bytes)
      .Field("applies", plan.memlock_applies)
      .Field("fits", plan.memlock_fits)
      .EndObject();
  json.Key("cgroup")
      .BeginObject()
      .Field("needed_bytes", plan.pinned_bytes)
      .Field("applies", plan.cgroup_applies)
      .Field("fits", plan.cgroup_fits)
      .EndObject();
  json.Key("io_uring_rings")
      .BeginObject()
      .Field("rings", o.rings)
      .Field("sharing", plan.ring_sharing == IoUringSharing::kClone ? "clone" : "per_ring")
      .Field("memlock_bytes", plan.ring_memlock_bytes)
      .Field("memlock_bytes_cloned", plan.pinned_bytes)
      .Field("memlock_bytes_per_ring", plan.pinned_bytes * o.rings)
      .Field("fits", plan.ring_memlock_fits)
      .EndObject();
  json.Key("devices").BeginArray();
  for (const DeviceFit& d : plan.devices) {
    json.BeginObject()
        .Field("name", d.device)
        .Field("chunk_fits_max_mr_size", d.chunk_fits_max_mr_size)
        .Field("chunks_fit_max_mr", d.chunks_fit_max_mr)
        .Field("page_size_supported", d.page_size_supported)
        .EndObject();
  }
  json.EndArray();
  json.Key("try");
  if (!plan.tried) {
    json.Null();
  } else {
    const TryResult& t = *plan.tried;
    json.BeginObject()
        .Field("ok", t.ok)
        .Field("domain", t.domain)
        .Field("seconds", t.seconds)
        .Field("error", t.error.empty() ? std::nullopt : std::optional<std::string>(t.error))
        .Key("stats");
    if (t.stats) {
      internal::WriteStatsJson(*t.stats, json);
    } else {
      json.Null();
    }
    json.EndObject();
  }
  json.EndObject();
}

}  // namespace

std::string RenderJson(const Facts& f, const PoolPlan& plan, const std::vector<Finding>& findings) {
  JsonWriter json;
  json.BeginObject()
      .Field("schema_version", kSchemaVersion)
      .Field("pinpool_version", PINPOOL_VERSION_STRING);

  json.Key("system")
      .BeginObject()
      .Field("kernel", f.system.kernel)
      .Field("machine", f.system.machine)
      .Field("cpus", f.system.cpus)
      .Field("uid", f.system.uid)
      .Field("memory_total_bytes", f.memory.total)
      .Field("memory_available_bytes", f.memory.available)
      .EndObject();

  json.Key("rdma")
      .BeginObject()
      .Field("device_list_error", Errno(f.rdma.list_errno))
      .Field("device_list_errno", Number(f.rdma.list_errno));
  json.Key("modules").BeginObject();
  for (const auto& [name, state] : f.rdma.modules) json.Field(name, state);
  json.EndObject();
  Strings(json, "netdevs", f.rdma.netdevs);
  json.Key("devices").BeginArray();
  for (const DeviceInfo& d : f.rdma.devices) WriteDevice(json, d);
  json.EndArray();
  json.Key("providers").BeginArray();
  for (const ProviderInfo& e : f.rdma.providers) {
    json.BeginObject()
        .Field("name", e.name)
        .Field("library", e.library)
        .Field("present", e.present)
        .Field("version", e.present ? std::optional<std::string>(e.version) : std::nullopt)
        .Field("error", e.error.empty() ? std::nullopt : std::optional<std::string>(e.error));
    Strings(json, "transports", e.transports);
    Strings(json, "providers", e.providers);
    json.EndObject();
  }
  json.EndArray().EndObject();

  json.Key("hugepages").BeginObject().Key("pools").BeginArray();
  for (const HugePagePool& p : f.memory.hugepages) {
    const char* name = p.page_bytes == PageBytes(PageSize::k1G)   ? "1G"
                       : p.page_bytes == PageBytes(PageSize::k2M) ? "2M"
                                                                  : "other";
    json.BeginObject()
        .Field("page_size", name)
        .Field("page_size_bytes", p.page_bytes)
        .Field("total", p.total)
        .Field("free", p.free)
        .Field("reserved", p.reserved)
        .Field("surplus", p.surplus)
        .Field("overcommit", p.overcommit)
        .EndObject();
  }
  json.EndArray()
      .Key("thp")
      .BeginObject()
      .Field("enabled", f.memory.thp_enabled)
      .Field("defrag", f.memory.thp_defrag)
      .EndObject()
      .EndObject();

  json.Key("memlock")
      .BeginObject()
      .Field("soft_limit_bytes", f.memlock.soft)
      .Field("hard_limit_bytes", f.memlock.hard)
      .Field("locked_bytes", f.memlock.locked)
      .Field("pinned_bytes", f.memlock.pinned)
      .Field("cap_ipc_lock", f.memlock.cap_ipc_lock)
      .Field("cap_ipc_lock_bounding_only", f.memlock.cap_ipc_lock_bounding_only)
      .Field("user_pins_visible", false)
      .Field("pin_headroom_bytes", f.memlock.PinHeadroom())
      .Field("lock_headroom_bytes", f.memlock.LockHeadroom())
      .EndObject();

  json.Key("cgroup").BeginObject().Key("version");
  if (f.cgroup.version != 0) {
    json.Int(f.cgroup.version);
  } else {
    json.Null();
  }
  const auto text_or_null = [](const std::string& s) {
    return s.empty() ? std::nullopt : std::optional<std::string>(s);
  };
  json.Field("path", text_or_null(f.cgroup.path))
      .Field("note", text_or_null(f.cgroup.note))
      .Field("limit_path", text_or_null(f.cgroup.limit_path))
      .Field("limit_bytes", f.cgroup.limit)
      .Field("usage_bytes", f.cgroup.usage)
      .Field("reclaimable_bytes", f.cgroup.reclaimable)
      .Field("headroom_bytes", f.cgroup.headroom)
      .Field("error", text_or_null(f.cgroup.error))
      .EndObject();

  json.Key("pinning")
      .BeginObject()
      .Field("long_term_available", f.long_term_pin.available)
      .Field("long_term_error", f.long_term_pin.available
                                    ? std::nullopt
                                    : std::optional<std::string>(f.long_term_pin.error));
  json.Key("domains").BeginArray();
  for (const DomainPinning& d : DescribeDomains(f)) {
    json.BeginObject()
        .Field("domain", d.domain)
        .Field("pinning", PinningName(d.pinning))
        .Field("meaning", PinningDescription(d.pinning))
        .Field("how", d.how)
        .Field("available", d.available)
        .Field("unavailable_reason",
               d.available ? std::nullopt : std::optional<std::string>(d.unavailable))
        .EndObject();
  }
  json.EndArray().EndObject();

  json.Key("fork").BeginObject().Field("mode", f.fork_mode).EndObject();

  json.Key("io_uring")
      .BeginObject()
      .Field("available", f.io_uring.available)
      .Field("error", Errno(f.io_uring.error_errno))
      .Field("io_uring_disabled", Number(f.io_uring.disabled_sysctl))
      .Key("sparse_buffers");
  if (f.io_uring.sparse_buffers) {
    json.Bool(*f.io_uring.sparse_buffers);
  } else {
    json.Null();
  }
  json.Field("max_buffer_bytes", IoUringDomain::kMaxBufferBytes)
      .Field("max_buffers", IoUringDomain::kMaxBuffers)
      .Key("clone")
      .BeginObject()
      .Field("whole_table", f.io_uring.clone.whole_table)
      .Field("ranges", f.io_uring.clone.ranges)
      .Field("keeps_later_entries", f.io_uring.clone.keeps_later_entries)
      .EndObject()
      .EndObject();

  WritePlan(json, plan);

  json.Key("problems").BeginArray();
  for (const Finding& p : findings) {
    json.BeginObject()
        .Field("id", p.id)
        .Field("severity", SeverityName(p.severity))
        .Field("problem", p.problem)
        .Field("fix", p.fix)
        .EndObject();
  }
  json.EndArray();
  json.EndObject();
  return std::move(json).Take();
}

}  // namespace pinpool::info
