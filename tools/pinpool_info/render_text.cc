// pinpool-info's human-readable report: one section per subject, label and value per line, the
// problems and their fixes last, where the eye ends up. Sizes with binary units (FormatBytes, as
// every pinpool message), hex where the kernel's own tools use it (page_size_cap, GUIDs).
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "info.h"
#include "pinpool/version.h"
#include "util/bytes.h"

namespace pinpool::info {
namespace {

using internal::FormatBytes;

// `text` in lines of at most kWidth columns, broken at spaces but never inside a `command`
// (so that it can be copied whole). The first line continues after `used` columns; the others
// start with `indent` spaces.
constexpr std::size_t kWidth = 100;
std::string Wrap(std::string_view text, std::size_t used, std::size_t indent) {
  std::vector<std::string_view> words;
  bool quoted = false;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size() && text[i] == '`') quoted = !quoted;
    if (i == text.size() || (text[i] == ' ' && !quoted)) {
      if (i > start) words.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  std::string out;
  std::size_t column = used;
  for (std::size_t w = 0; w < words.size(); ++w) {
    if (w != 0 && column + 1 + words[w].size() > kWidth) {
      out += "\n" + std::string(indent, ' ');
      column = indent;
    } else if (w != 0) {
      out += ' ';
      ++column;
    }
    out += words[w];
    column += words[w].size();
  }
  return out;
}

void Line(std::string& out, int indent, std::string_view label, std::string_view value) {
  absl::StrAppendFormat(&out, "%*s%-*s %s\n", indent, "", 20 - indent, label, Wrap(value, 21, 23));
}

std::string Limit(const std::optional<std::uint64_t>& bytes) {
  return bytes ? FormatBytes(*bytes) : "unlimited";
}

void Device(std::string& out, const DeviceInfo& d) {
  absl::StrAppendFormat(&out, "  %s (%s, %s, node GUID %s)\n", d.name, d.transport, d.node_type,
                        d.node_guid);
  if (!d.error.empty()) {
    Line(out, 4, "error", d.error);
    return;
  }
  Line(out, 4, "max_mr_size",
       absl::StrFormat("%s (%#x), max_mr %d", FormatBytes(d.max_mr_size), d.max_mr_size, d.max_mr));
  std::vector<std::string> sizes;
  for (PageSize s : {PageSize::k4K, PageSize::k2M, PageSize::k1G}) {
    if (d.page_size_cap & PageBytes(s)) sizes.push_back(PageSizeName(s));
  }
  Line(out, 4, "page_size_cap",
       absl::StrFormat("%#x (%s)", d.page_size_cap,
                       sizes.empty() ? "none of 4K/2M/1G" : absl::StrJoin(sizes, " ")));
  std::vector<std::string> mw;
  if (d.mw_type1) mw.push_back("type 1");
  if (d.mw_type2a) mw.push_back("type 2A");
  if (d.mw_type2b) mw.push_back("type 2B");
  Line(out, 4, "memory windows",
       mw.empty() ? "none" : absl::StrFormat("%s, max_mw %d", absl::StrJoin(mw, ", "), d.max_mw));
  Line(out, 4, "remote grants",
       d.grant_windows.bounds_enforced
           ? std::string("memory windows (type 2, bounds enforced): cheap, per connection")
           : absl::StrFormat("range regions (a registration per grant); windows not used: %s",
                             d.grant_windows.reason));
  std::string odp = !d.extended_query ? "unknown (no ibv_query_device_ex)"
                    : !d.odp
                        ? "no"
                        : absl::StrFormat("yes%s; RC: %s", d.odp_implicit ? ", implicit" : "",
                                          d.odp_rc.empty() ? "none" : absl::StrJoin(d.odp_rc, " "));
  Line(out, 4, "on-demand paging", odp);
  Line(out, 4, "atomics", d.atomics);
  Line(out, 4, "NUMA node",
       d.numa_node < 0
           ? std::string("none known (pools place chunks wherever the kernel does)")
           : absl::StrFormat("%d (pools place their chunks there by default)", d.numa_node));
  Line(out, 4, "firmware",
       absl::StrFormat("%s, vendor %#x part %d", d.fw_ver.empty() ? "-" : d.fw_ver, d.vendor_id,
                       d.vendor_part_id));
  for (const PortInfo& p : d.ports) {
    if (!p.error.empty()) {
      Line(out, 4, absl::StrFormat("port %d", p.port), p.error);
      continue;
    }
    Line(out, 4, absl::StrFormat("port %d", p.port),
         absl::StrFormat("%s (%s), %s, active MTU %d (max %d)%s", p.state, p.phys_state,
                         p.link_layer, p.active_mtu, p.max_mtu,
                         p.link_layer == "InfiniBand" ? absl::StrFormat(", LID %d", p.lid) : ""));
    if (!p.gid_error.empty()) Line(out, 6, "GIDs", p.gid_error);
    if (p.gids.empty())
      Line(out, 6, "GIDs", absl::StrFormat("none of %d in use", p.gid_table_size));
    for (const GidInfo& g : p.gids) {
      absl::StrAppendFormat(&out, "      GID %-3d %-40s %-8s%s%s\n", g.index, g.gid, g.type,
                            g.ipv4 ? " IPv4-mapped" : "",
                            g.netdev.empty() ? "" : absl::StrFormat(" (%s)", g.netdev));
    }
  }
}

void Plan(std::string& out, const Facts& f, const PoolPlan& plan) {
  const ToolOptions& o = plan.options;
  absl::StrAppendFormat(&out, "\nA pool with chunk_size %s, budget %s, page size %s (%s)\n",
                        FormatBytes(o.chunk_size), FormatBytes(o.budget), PageSizeName(o.page_size),
                        o.require_page_size ? "required" : "falling back to smaller pages");
  if (!plan.invalid.empty()) {
    Line(out, 2, "invalid", plan.invalid);
    return;
  }
  Line(out, 2, "chunks",
       absl::StrFormat("%d of %s (%s pinned at most)", plan.chunks, FormatBytes(o.chunk_size),
                       FormatBytes(plan.pinned_bytes)));
  for (const PageSizeOutcome& p : plan.page_sizes) {
    Line(out, 2, absl::StrFormat("%s pages", PageSizeName(p.page_size)),
         absl::StrFormat("%d chunks: %s", p.chunks, p.reason));
  }
  if (plan.failing_chunks != 0) {
    Line(out, 2, "not mapped",
         absl::StrFormat("%d chunks (--require-page-size: no smaller pages allowed)",
                         plan.failing_chunks));
  }
  std::string memlock;
  if (!plan.memlock_applies) {
    memlock = f.memlock.cap_ipc_lock ? "fits (CAP_IPC_LOCK: no limit for this process)"
                                     : "fits (RLIMIT_MEMLOCK unlimited)";
  } else {
    memlock =
        absl::StrFormat("%s: needs %s, headroom %s", plan.memlock_fits ? "fits" : "DOES NOT FIT",
                        FormatBytes(plan.pinned_bytes), FormatBytes(*f.memlock.PinHeadroom()));
  }
  Line(out, 2, "memlock", memlock);
  Line(out, 2, absl::StrFormat("io_uring, %d rings", o.rings),
       absl::StrFormat("memlock %s (%s)%s", FormatBytes(plan.ring_memlock_bytes),
                       plan.ring_sharing == IoUringSharing::kClone
                           ? absl::StrFormat("the pool once, cloned into every ring; %s if each "
                                             "ring registered it",
                                             FormatBytes(plan.pinned_bytes * o.rings))
                           : std::string("the pool once per ring: this kernel cannot clone"),
                       !plan.memlock_applies    ? ""
                       : plan.ring_memlock_fits ? ", fits"
                                                : ", DOES NOT FIT"));
  Line(
      out, 2, "memory cgroup",
      !plan.cgroup_applies
          ? std::string("no limit found (nothing to charge against)")
          : absl::StrFormat("%s: needs %s, headroom %s", plan.cgroup_fits ? "fits" : "DOES NOT FIT",
                            FormatBytes(plan.pinned_bytes), FormatBytes(*f.cgroup.headroom)));
  for (const DeviceFit& d : plan.devices) {
    Line(out, 2, d.device,
         absl::StrFormat("chunk %s max_mr_size, %d chunks %s max_mr%s",
                         d.chunk_fits_max_mr_size ? "within" : "ABOVE", plan.chunks,
                         d.chunks_fit_max_mr ? "within" : "ABOVE",
                         d.page_size_supported ? "" : ", page size not in page_size_cap"));
  }
  if (plan.tried) {
    const TryResult& t = *plan.tried;
    if (!t.ok) {
      Line(out, 2, "--try", absl::StrFormat("FAILED with the %s domain: %s", t.domain, t.error));
    } else {
      Line(out, 2, "--try",
           absl::StrFormat("created with the %s domain in %.1f ms; its stats:", t.domain,
                           t.seconds * 1e3));
      std::string stats = t.stats->ToString();
      for (std::size_t at = 0; at < stats.size();) {
        const std::size_t nl = stats.find('\n', at);
        const std::size_t end = nl == std::string::npos ? stats.size() : nl;
        absl::StrAppendFormat(&out, "    %s\n", std::string_view(stats).substr(at, end - at));
        at = end + 1;
      }
    }
  }
}

}  // namespace

std::string RenderText(const Facts& f, const PoolPlan& plan, const std::vector<Finding>& findings) {
  std::string out = absl::StrFormat(
      "pinpool-info %s: is this machine ready for pinned RDMA memory?\n", PINPOOL_VERSION_STRING);

  out += "\nSystem\n";
  Line(out, 2, "kernel",
       absl::StrFormat("%s (%s), %d CPUs, uid %d", f.system.kernel, f.system.machine, f.system.cpus,
                       f.system.uid));
  Line(out, 2, "memory",
       absl::StrFormat("%s total, %s available", FormatBytes(f.memory.total),
                       FormatBytes(f.memory.available)));

  out += "\nRDMA devices\n";
  if (f.rdma.devices.empty()) {
    Line(out, 2, "none",
         f.rdma.list_errno
             ? absl::StrFormat("ibv_get_device_list failed: %s", std::strerror(*f.rdma.list_errno))
             : std::string("ibv_get_device_list found no device"));
  }
  for (const DeviceInfo& d : f.rdma.devices) Device(out, d);
  std::vector<std::string> modules;
  for (const auto& [name, state] : f.rdma.modules) {
    modules.push_back(absl::StrFormat("%s %s", name, state));
  }
  Line(out, 2, "kernel modules", absl::StrJoin(modules, ", "));

  out += "\nTransfer engines (pinpool's optional domains: libpinpool_ucx, libpinpool_fabric)\n";
  for (const ProviderInfo& e : f.rdma.providers) {
    std::string what = e.error;
    if (e.present) {
      what = e.library + (e.version.empty() ? "" : " " + e.version) +
             (e.error.empty() ? "" : "; " + e.error);
    }
    Line(out, 2, e.name, what);
    if (!e.transports.empty()) Line(out, 4, "transports", absl::StrJoin(e.transports, ", "));
    if (!e.providers.empty()) Line(out, 4, "providers", absl::StrJoin(e.providers, ", "));
  }

  out += "\nHuge pages\n";
  if (f.memory.hugepages.empty()) Line(out, 2, "hugetlb", "none (no /sys/kernel/mm/hugepages)");
  for (const HugePagePool& p : f.memory.hugepages) {
    Line(out, 2, FormatBytes(p.page_bytes),
         absl::StrFormat("total %d, free %d, reserved %d, surplus %d (overcommit %d)", p.total,
                         p.free, p.reserved, p.surplus, p.overcommit));
  }
  Line(out, 2, "THP",
       absl::StrFormat("enabled [%s], defrag [%s]", f.memory.thp_enabled, f.memory.thp_defrag));

  out += "\nLocked memory\n";
  Line(out, 2, "RLIMIT_MEMLOCK",
       absl::StrFormat("%s soft, %s hard", Limit(f.memlock.soft), Limit(f.memlock.hard)));
  Line(out, 2, "now",
       absl::StrFormat("VmPin %s (long-term pinned), VmLck %s (locked)",
                       FormatBytes(f.memlock.pinned), FormatBytes(f.memlock.locked)));
  Line(out, 2, "CAP_IPC_LOCK",
       f.memlock.cap_ipc_lock ? "yes: RLIMIT_MEMLOCK does not apply to this process"
       : f.memlock.cap_ipc_lock_bounding_only
           ? "in the bounding set only, not effective: RLIMIT_MEMLOCK applies"
           : "no");
  Line(out, 2, "io_uring",
       "the default domain's pins count per user across processes; that total is not visible, "
       "only this process's VmPin");
  std::string cgroup;
  if (f.cgroup.version == 0) {
    cgroup = "none found: " + f.cgroup.note;
  } else if (!f.cgroup.limit) {
    cgroup =
        absl::StrFormat("v%d %s: no limit up to the mount point", f.cgroup.version, f.cgroup.path);
  } else {
    cgroup = absl::StrFormat("v%d %s: limit %s at %s, holds %s (%s reclaimable), headroom %s",
                             f.cgroup.version, f.cgroup.path, FormatBytes(*f.cgroup.limit),
                             f.cgroup.limit_path, FormatBytes(f.cgroup.usage),
                             FormatBytes(f.cgroup.reclaimable), FormatBytes(*f.cgroup.headroom));
  }
  if (!f.cgroup.error.empty()) cgroup += " (" + f.cgroup.error + ")";
  Line(out, 2, "memory cgroup", cgroup);
  Line(out, 2, "fork mode", f.fork_mode);

  out += "\nPinning (what each domain does to a chunk's pages)\n";
  for (const DomainPinning& d : DescribeDomains(f)) {
    Line(out, 2, d.domain,
         absl::StrFormat("%s; %s; %s", PinningDescription(d.pinning), d.how,
                         d.available ? "available here"
                                     : absl::StrFormat("NOT AVAILABLE here: %s", d.unavailable)));
  }
  if (!f.long_term_pin.available) {
    Line(out, 2, "default pools", "FAIL at Pool::Create: see long_term_pinning_unavailable below");
  }

  out += "\nio_uring\n";
  std::string ring;
  if (f.io_uring.available) {
    ring = absl::StrFormat("yes, sparse fixed-buffer tables %s",
                           f.io_uring.sparse_buffers.value_or(false) ? "yes" : "NO");
  } else {
    ring = absl::StrFormat("NO: io_uring_queue_init failed (%s)",
                           std::strerror(f.io_uring.error_errno.value_or(0)));
  }
  Line(out, 2, "available", ring);
  Line(out, 2, "io_uring_disabled",
       f.io_uring.disabled_sysctl ? absl::StrFormat("%d", *f.io_uring.disabled_sysctl)
                                  : std::string("(no such sysctl)"));
  Line(out, 2, "limits",
       absl::StrFormat("fixed buffers of at most %s, at most %d per ring",
                       FormatBytes(IoUringDomain::kMaxBufferBytes), IoUringDomain::kMaxBuffers));
  if (f.io_uring.available) {
    const IoUringCloneSupport& c = f.io_uring.clone;
    Line(out, 2, "cloning",
         c.ranges
             ? absl::StrFormat("yes, ranges (Linux 6.13+): rings share one registration%s",
                               c.keeps_later_entries ? ""
                                                     : "; but clones drop the later slots of the "
                                                       "destination's table (see below)")
         : c.whole_table
             ? std::string("whole tables only (Linux 6.12): each ring registers every chunk")
             : std::string("NO (before Linux 6.12): each ring registers every chunk"));
  }

  Plan(out, f, plan);

  if (findings.empty()) {
    out += "\nNo problems found.\n";
  } else {
    absl::StrAppendFormat(&out, "\nProblems and fixes (%d)\n", findings.size());
    for (const Finding& p : findings) {
      const std::string head = absl::StrFormat("  [%s] %s: ", SeverityName(p.severity), p.id);
      absl::StrAppendFormat(&out, "%s%s\n    fix: %s\n", head, Wrap(p.problem, head.size(), 4),
                            Wrap(p.fix, 9, 9));
    }
  }
  return out;
}

}  // namespace pinpool::info
