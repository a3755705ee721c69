// Problems and their fixes: every check compares the facts (and the plan for the pool asked
// about) with what pinpool and RDMA need, and states the problem with this machine's numbers and
// a fix concrete enough to paste (the sysctl with N computed, the ulimit, the modprobe with an
// interface that exists here). Ids are stable; docs/pinpool-info.md lists them.
//
// Severity: error = the pool (or RDMA) as asked cannot work here; warning = it works, worse than
// it could (smaller pages, no io_uring); note = worth knowing, nothing fails. The words for why
// io_uring cannot be used, and so why the default domain cannot pin, are the library's
// (domain/io_uring_refusal.h), so that the tool and Pool::Create say the same.
#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "domain/io_uring_refusal.h"
#include "domain/memlock.h"
#include "info.h"
#include "util/bytes.h"

namespace pinpool::info {
namespace {

using internal::FormatBytes;

void Add(std::vector<Finding>& out, std::string id, Severity severity, std::string problem,
         std::string fix) {
  out.push_back({std::move(id), severity, std::move(problem), std::move(fix)});
}

std::string Limit(const std::optional<std::uint64_t>& bytes) {
  return bytes ? FormatBytes(*bytes) : "unlimited";
}

std::string ModuleState(const RdmaFacts& r, const std::string& name) {
  auto it = r.modules.find(name);
  return it == r.modules.end() ? "absent" : it->second;
}

void CheckRdma(const Facts& f, std::vector<Finding>& out) {
  const RdmaFacts& r = f.rdma;
  const std::string netdev = r.netdevs.empty() ? "<interface>" : r.netdevs.front();
  if (r.devices.empty()) {
    std::string problem;
    if (r.list_errno == ENOSYS) {
      problem = absl::StrFormat(
          "no RDMA device: ibv_get_device_list failed (%s): kernel %s has no RDMA (uverbs) "
          "support loaded",
          std::strerror(ENOSYS), f.system.kernel);
    } else if (r.list_errno) {
      problem = absl::StrFormat("no RDMA device: ibv_get_device_list failed (%s)",
                                std::strerror(*r.list_errno));
    } else {
      problem =
          "no RDMA device: libibverbs found none (no RDMA driver and provider bound to a NIC)";
    }
    const std::string software = absl::StrFormat(
        "for software RDMA on %s, soft-RoCE: `modprobe rdma_rxe && rdma link add rxe0 type rxe "
        "netdev %s`, or soft-iWARP: `modprobe siw && rdma link add siw0 type siw netdev %s`",
        netdev, netdev, netdev);
    std::string fix;
    const bool stack_absent = ModuleState(r, "ib_uverbs") == "absent" &&
                              ModuleState(r, "rdma_rxe") == "absent" &&
                              ModuleState(r, "siw") == "absent";
    if (stack_absent) {
      fix = absl::StrFormat(
          "this kernel has no RDMA modules (ib_uverbs, rdma_rxe and siw are absent): boot a "
          "kernel built with CONFIG_INFINIBAND_USER_ACCESS (Debian's linux-image-amd64 has it), "
          "or run RDMA code in a VM that has one (pinpool's scripts/softroce/run-in-guest.sh). "
          "Then load your NIC's driver (mlx5_ib, irdma, bnxt_re, ...) with ib_uverbs, or %s",
          software);
    } else {
      fix = absl::StrFormat(
          "load your NIC's RDMA driver with ib_uverbs (`modprobe ib_uverbs mlx5_ib`, or irdma, "
          "bnxt_re, ...) and install its user-space provider (Debian: ibverbs-providers), or "
          "%s; `rdma link` and `ibv_devices` then list it",
          software);
    }
    Add(out, "no_rdma_device", Severity::kError, problem, fix);
    return;
  }

  bool any_active = false;
  for (const DeviceInfo& d : r.devices) {
    for (const PortInfo& p : d.ports) any_active = any_active || p.active;
  }
  for (const DeviceInfo& d : r.devices) {
    if (d.permission_denied) {
      Add(out, "rdma_device_permission", Severity::kError,
          absl::StrFormat("cannot open RDMA device %s: %s", d.name, d.error),
          "this user may not use /dev/infiniband/uverbs*: add it to the group owning them "
          "(often `rdma`: `usermod -aG rdma USER`, then log in again) or fix the udev rule");
      continue;
    }
    if (!d.error.empty()) {
      Add(out, "rdma_device_error", Severity::kError,
          absl::StrFormat("cannot use RDMA device %s: %s", d.name, d.error),
          "check `dmesg` for the driver's messages and that the device's user-space provider is "
          "installed (Debian: ibverbs-providers)");
      continue;
    }
    std::vector<std::string> states;
    bool active = false;
    for (const PortInfo& p : d.ports) {
      active = active || p.active;
      states.push_back(p.error.empty()
                           ? absl::StrFormat("port %d %s (%s)", p.port, p.state, p.phys_state)
                           : absl::StrFormat("port %d: %s", p.port, p.error));
    }
    if (!active) {
      Add(out, "rdma_no_active_port", any_active ? Severity::kWarning : Severity::kError,
          absl::StrFormat("RDMA device %s has no ACTIVE port: %s", d.name,
                          states.empty() ? "no ports" : absl::StrJoin(states, ", ")),
          "bring the link up: `ip link set <netdev> up` for RoCE/iWARP (the device's net "
          "device), cable and switch port; on InfiniBand a port stuck in INIT needs a subnet "
          "manager (`opensm`). pinpool can register with a device whose ports are down "
          "(VerbsOptions::device names it), but nothing moves until a port is ACTIVE");
    }
    for (const PortInfo& p : d.ports) {
      if (!p.active || p.link_layer != "Ethernet") continue;
      const bool v2_ipv4 = std::any_of(p.gids.begin(), p.gids.end(), [](const GidInfo& g) {
        return g.type == "RoCE v2" && g.ipv4.has_value();
      });
      if (v2_ipv4) continue;
      std::string dev = netdev;
      for (const GidInfo& g : p.gids) {
        if (!g.netdev.empty()) dev = g.netdev;
      }
      Add(out, "roce_no_ipv4_gid", Severity::kWarning,
          absl::StrFormat("%s port %d has no IPv4-mapped RoCE v2 GID: connecting over IPv4 "
                          "(RDMA CM, routable RoCE) needs one",
                          d.name, p.port),
          absl::StrFormat("give its net device an IPv4 address (`ip addr add 192.0.2.1/24 dev "
                          "%s`); the GID table gets the ::ffff:a.b.c.d entry within a second",
                          dev));
    }
  }
}

void CheckDevicesForPool(const Facts& f, const PoolPlan& plan, std::vector<Finding>& out) {
  for (const DeviceFit& fit : plan.devices) {
    const DeviceInfo* d = nullptr;
    for (const DeviceInfo& x : f.rdma.devices) {
      if (x.name == fit.device) d = &x;
    }
    if (d == nullptr) continue;
    if (!fit.chunk_fits_max_mr_size) {
      Add(out, "chunk_exceeds_max_mr_size", Severity::kError,
          absl::StrFormat("%s registers at most %s as one region (max_mr_size) but chunks are "
                          "%s: registration would fail",
                          d->name, FormatBytes(d->max_mr_size),
                          FormatBytes(plan.options.chunk_size)),
          absl::StrFormat("use chunks of at most %s (--chunk-size, PoolOptions::chunk_size)",
                          FormatBytes(std::bit_floor(d->max_mr_size))));
    }
    if (!fit.chunks_fit_max_mr) {
      Add(out, "too_many_regions", Severity::kWarning,
          absl::StrFormat("the budget is %d chunks but %s supports only %d memory regions "
                          "(max_mr), shared by every process using it",
                          plan.chunks, d->name, d->max_mr),
          "use larger chunks (--chunk-size, PoolOptions::chunk_size) so that the budget needs "
          "fewer regions");
    }
    if (!fit.page_size_supported) {
      Add(out, "page_size_not_in_device_cap", Severity::kNote,
          absl::StrFormat("%s does not list %s pages in page_size_cap (%#x): it maps the "
                          "chunks with smaller pages (more translation entries)",
                          d->name, PageSizeName(plan.first_chunk_page_size), d->page_size_cap),
          "nothing to change for correctness; a NIC with larger translation pages saves "
          "translation-table entries");
    }
  }
}

// The hugetlb page size the pool asks for first: the largest the policy allows that fits a
// chunk; 0 when the policy is THP or 4K.
std::uint64_t WantedHugePage(const ToolOptions& o) {
  for (PageSize s : {PageSize::k1G, PageSize::k2M}) {
    if (s >= o.page_size && PageBytes(s) <= o.chunk_size) return PageBytes(s);
  }
  return 0;
}

void CheckPages(const Facts& f, const PoolPlan& plan, std::vector<Finding>& out) {
  const ToolOptions& o = plan.options;
  if (o.page_size_given && o.page_size == PageSize::k1G && o.chunk_size < kGiB &&
      !o.require_page_size) {
    Add(out, "hugepage_1g_needs_1g_chunks", Severity::kNote,
        absl::StrFormat("1 GiB pages need 1 GiB chunks: chunks of %s use 2 MiB pages at most",
                        FormatBytes(o.chunk_size)),
        "--chunk-size 1G (PoolOptions::chunk_size = 1 GiB) to use 1 GiB pages");
  }
  const auto got = [&](PageSize s) -> std::uint64_t {
    for (const PageSizeOutcome& p : plan.page_sizes) {
      if (p.page_size == s) return p.chunks;
    }
    return 0;
  };
  const auto fallback = [&](PageSize from) {
    std::vector<std::string> parts;
    for (const PageSizeOutcome& p : plan.page_sizes) {
      if (p.page_size > from && p.chunks != 0) {
        parts.push_back(absl::StrFormat("%d to %s", p.chunks, PageSizeName(p.page_size)));
      }
    }
    return parts.empty() ? std::string("none") : absl::StrJoin(parts, ", ");
  };

  if (const std::uint64_t page = WantedHugePage(o); page != 0) {
    const PageSize size = page == kGiB ? PageSize::k1G : PageSize::k2M;
    const std::uint64_t have = got(size);
    if (have < plan.chunks) {
      const HugePagePool* pool = f.memory.Pool(page);
      const std::uint64_t per_chunk = o.chunk_size / page;
      const std::uint64_t needed = plan.chunks * per_chunk;
      const std::uint64_t available = pool == nullptr ? 0 : pool->available();
      const std::uint64_t total = pool == nullptr ? 0 : pool->total;
      const std::uint64_t target = total + (needed > available ? needed - available : 0);
      const bool require = o.require_page_size && o.page_size == size;
      std::string problem =
          pool == nullptr ? absl::StrFormat("this machine has no %s huge pages", FormatBytes(page))
          : total == 0    ? absl::StrFormat("no %s huge pages reserved (vm.nr_hugepages is 0)",
                                            FormatBytes(page))
                          : absl::StrFormat(
                                "%d %s huge pages free (%d reserved, %d promised to other "
                                   "mappings) for a budget that needs %d",
                                pool->free, FormatBytes(page), total, pool->reserved, needed);
      if (require) {
        absl::StrAppendFormat(
            &problem,
            ": with --require-page-size the pool maps only %d of its %d chunks (Pool::Create "
            "fails with kFailedPrecondition when the first does not fit)",
            have, plan.chunks);
      } else {
        absl::StrAppendFormat(&problem, ": %d of %d chunks fall back to smaller pages (%s)",
                              plan.chunks - have, plan.chunks, fallback(size));
      }
      std::string fix;
      if (pool == nullptr) {
        fix = size == PageSize::k1G
                  ? "this CPU or kernel has no 1 GiB pages: use --page-size 2M (2 MiB pages)"
                  : "this kernel has no hugetlbfs (CONFIG_HUGETLBFS): use transparent huge "
                    "pages (--page-size thp)";
      } else if (size == PageSize::k2M) {
        fix = absl::StrFormat(
            "reserve them: `sysctl vm.nr_hugepages=%d` (%d for the budget of %s%s), and "
            "`vm.nr_hugepages = %d` in /etc/sysctl.d/ to keep it across reboots",
            target, needed, FormatBytes(plan.pinned_bytes),
            total != 0 ? absl::StrFormat(" on top of the %d there are", total) : "", target);
      } else {
        fix = absl::StrFormat(
            "reserve them: `echo %d > /sys/kernel/mm/hugepages/hugepages-1048576kB/"
            "nr_hugepages` (%d for the budget of %s), or at boot `hugepagesz=1G hugepages=%d` on "
            "the kernel command line (1 GiB pages are hard to find once memory is fragmented)",
            target, needed, FormatBytes(plan.pinned_bytes), target);
      }
      if (needed * page > f.memory.available && f.memory.available != 0) {
        absl::StrAppendFormat(&fix, "; note that %s of huge pages is more than the %s available",
                              FormatBytes(needed * page), FormatBytes(f.memory.available));
      }
      Add(out, "hugepages_missing", require ? Severity::kError : Severity::kWarning, problem, fix);
    }
  }

  // THP, when the pool relies on it.
  for (const PageSizeOutcome& p : plan.page_sizes) {
    if (p.page_size != PageSize::kTransparent) continue;
    if (!f.memory.ThpUsable()) {
      const bool require = o.require_page_size && o.page_size == PageSize::kTransparent;
      Add(out, "thp_disabled", require ? Severity::kError : Severity::kWarning,
          absl::StrFormat("transparent huge pages are [%s]: %s", f.memory.thp_enabled,
                          require ? "--require-page-size thp cannot be met"
                                  : "chunks without hugetlb pages get 4 KiB pages"),
          "`echo madvise > /sys/kernel/mm/transparent_hugepage/enabled` (pinpool asks for THP "
          "with madvise), or reserve hugetlb pages (vm.nr_hugepages)");
    } else if (p.chunks != 0 &&
               (f.memory.thp_defrag == "never" || f.memory.thp_defrag == "defer")) {
      Add(out, "thp_no_defrag", Severity::kNote,
          absl::StrFormat("THP defrag is [%s]: a chunk gets huge pages only where free 2 MiB "
                          "pages exist when it is populated (no compaction for it)",
                          f.memory.thp_defrag),
          "`echo madvise > /sys/kernel/mm/transparent_hugepage/defrag` (compact for "
          "MADV_HUGEPAGE regions only), or reserve hugetlb pages (vm.nr_hugepages)");
    }
  }
}

// The memory cgroup: the budget past its headroom is a warning (Pool::Create refuses only
// initial_size past it; growth stops with kResourceExhausted at each chunk that would not fit),
// with the library's own fix per place.
void CheckCgroup(const Facts& f, const PoolPlan& plan, std::vector<Finding>& out) {
  const CgroupFacts& c = f.cgroup;
  if (plan.cgroup_applies && !plan.cgroup_fits) {
    const std::uint64_t working = c.usage > c.reclaimable ? c.usage - c.reclaimable : 0;
    Add(out, "cgroup_too_small", Severity::kError,
        absl::StrFormat(
            "the memory cgroup %s (cgroup v%d) is limited to %s and holds %s (%s reclaimable): "
            "%s of headroom for a budget of %s. Pinned pages are charged as they are faulted in "
            "and cannot be reclaimed: past the limit the OOM killer would end the process, so "
            "pinpool refuses a chunk that does not fit (Pool::Create refuses an initial_size "
            "that does not)",
            c.limit_path, c.version, FormatBytes(*c.limit), FormatBytes(c.usage),
            FormatBytes(c.reclaimable), FormatBytes(*c.headroom), FormatBytes(plan.pinned_bytes)),
        internal::CgroupFix(c.state, working + plan.pinned_bytes, "the budget"));
  }
  if (!c.error.empty()) {
    Add(out, "cgroup_unreadable", Severity::kWarning,
        absl::StrFormat("the memory cgroup %s cannot be judged: %s", c.path, c.error),
        "run pinpool-info where the application runs, with read access to /sys/fs/cgroup");
  }
}

void CheckMemlock(const Facts& f, const PoolPlan& plan, std::vector<Finding>& out) {
  const MemlockFacts& m = f.memlock;
  const std::uint64_t need = plan.pinned_bytes;
  if (plan.memlock_applies && !plan.memlock_fits) {
    // The pools planned here pin long-term: VmPin is what counts.
    const std::uint64_t used = m.pinned;
    const std::uint64_t headroom = *m.PinHeadroom();
    const std::uint64_t kib = (need + used + 1023) / 1024;
    std::string raise = absl::StrFormat(
        "`ulimit -l unlimited` (or `ulimit -l %d`, in KiB) in the shell that starts the program",
        kib);
    if (!m.hard || *m.hard >= need + used) {
      absl::StrAppendFormat(&raise, " (the hard limit, %s, allows it)", Limit(m.hard));
    } else {
      absl::StrAppendFormat(&raise, " (needs root: above the hard limit of %s)",
                            FormatBytes(*m.hard));
    }
    // What fits instead: whole chunks within the headroom, or smaller chunks.
    const std::size_t chunk = plan.options.chunk_size;
    std::string lower;
    if (headroom >= chunk) {
      lower = absl::StrFormat("lower the budget to %s (%d chunks of %s)",
                              FormatBytes(headroom / chunk * chunk), headroom / chunk,
                              FormatBytes(chunk));
    } else if (headroom >= 2 * kMiB) {
      const std::uint64_t small = std::bit_floor(headroom);
      lower = absl::StrFormat(
          "lower the budget and --chunk-size to %s (one chunk: the headroom "
          "is %s)",
          FormatBytes(small), FormatBytes(headroom));
    } else {
      lower = absl::StrFormat("no pool fits the headroom of %s (the smallest chunk is 2 MiB)",
                              FormatBytes(headroom));
    }
    Add(out, "memlock_too_low", Severity::kError,
        absl::StrFormat("RLIMIT_MEMLOCK is %s but the budget is %s%s: the pool stops growing "
                        "at the limit (kResourceExhausted)",
                        FormatBytes(*m.soft), FormatBytes(need),
                        used != 0 ? absl::StrFormat(" and %s is long-term pinned already (VmPin)",
                                                    FormatBytes(used))
                                  : ""),
        absl::StrFormat(
            "raise the limit: %s; `USER - memlock unlimited` in /etc/security/limits.conf for "
            "logins; LimitMEMLOCK=infinity for a systemd service; `--ulimit memlock=-1` for "
            "docker; for Kubernetes, the node's container runtime, whose limit every container "
            "inherits (LimitMEMLOCK=infinity in a drop-in for containerd.service). Or give the "
            "program CAP_IPC_LOCK, which lifts the limit (`setcap "
            "cap_ipc_lock+ep PROGRAM`, AmbientCapabilities=CAP_IPC_LOCK for a systemd "
            "service). Or %s",
            raise, lower));
  }
  if (m.cap_ipc_lock_bounding_only && plan.memlock_applies) {
    Add(out, "cap_ipc_lock_not_effective", Severity::kWarning,
        absl::StrFormat("CAP_IPC_LOCK is in this process's bounding set but not effective (uid "
                        "%d): it does not lift RLIMIT_MEMLOCK. A container or service granted "
                        "it (`--cap-add IPC_LOCK`, securityContext.capabilities.add) runs a "
                        "non-root user without it",
                        f.system.uid),
        "raise RLIMIT_MEMLOCK itself (the node's container runtime: LimitMEMLOCK=infinity for "
        "containerd.service; `--ulimit memlock=-1`; LimitMEMLOCK= for a unit), or run as root "
        "with the capability, or give it as an ambient capability (AmbientCapabilities="
        "CAP_IPC_LOCK for a systemd service)");
  }
  if (m.cap_ipc_lock && m.soft && *m.soft < need) {
    Add(out, "memlock_exempt_here", Severity::kNote,
        absl::StrFormat("this process has CAP_IPC_LOCK, so RLIMIT_MEMLOCK (%s) does not limit "
                        "it; a process without the capability (a user other than root, a "
                        "service that drops it) would stop at %s of the %s budget",
                        FormatBytes(*m.soft), FormatBytes(*m.soft), FormatBytes(need)),
        "check as the user the application runs as: `runuser -u USER -- pinpool-info "
        "--budget ...` (or `setpriv --reuid=USER --regid=GROUP --clear-groups ...`)");
  }
  if (f.memory.available != 0 && need > f.memory.available) {
    Add(out, "budget_exceeds_memory", Severity::kWarning,
        absl::StrFormat("the budget (%s) is more than the memory available now (%s of %s): "
                        "pinned pages cannot be swapped or reclaimed",
                        FormatBytes(need), FormatBytes(f.memory.available),
                        FormatBytes(f.memory.total)),
        "lower the budget (--budget, PoolOptions::budget) or free memory");
  }
}

void CheckForkAndIoUring(const Facts& f, const PoolPlan& plan, std::vector<Finding>& out) {
  if (f.fork_mode == "disabled") {
    Add(out, "fork_unsafe", Severity::kNote,
        "fork mode is disabled: ibv_fork_init() was not called and libibverbs does not report "
        "a kernel that copies pinned pages for a child, so a child touching memory registered "
        "outside pinpool can break the parent's RDMA (pinpool's own chunks are MADV_DONTFORK "
        "and safe either way)",
        "for memory you register yourself: call ibv_fork_init() (or set RDMAV_FORK_SAFE=1) "
        "before registering, or use a kernel with copy-on-fork for pinned pages (Linux 5.13+ "
        "with RDMA loaded reports fork mode `unneeded`)");
  }
  const IoUringFacts& u = f.io_uring;
  if (!u.available) {
    const internal::IoUringRefusal why =
        internal::ExplainIoUringSetupFailure(u.error_errno.value_or(0), u.disabled_sysctl);
    Add(out, "io_uring_unavailable", Severity::kWarning,
        absl::StrFormat("io_uring is unavailable: %s: IoUringDomain cannot be used", why.cause),
        why.fix);
  } else if (u.sparse_buffers == false) {
    const internal::IoUringRefusal why =
        internal::ExplainSparseTableFailure(u.sparse_errno.value_or(0), 1);
    Add(out, "io_uring_no_sparse_buffers", Severity::kWarning,
        absl::StrFormat("%s: pinpool's IoUringDomain needs sparse tables", why.cause), why.fix);
  }
  if (u.available && u.sparse_buffers == true && !u.clone.ranges && plan.invalid.empty()) {
    Add(out, "io_uring_no_clone", Severity::kNote,
        absl::StrFormat(
            "this kernel cannot clone a fixed-buffer registration into another ring (%s): an "
            "IoUringDomain serving %d rings registers every chunk in each, and the pool's %s "
            "are pinned and charged against RLIMIT_MEMLOCK %d times (%s)",
            u.clone.whole_table
                ? "Linux 6.12 clones only whole tables, into rings that have none"
                : "IORING_REGISTER_CLONE_BUFFERS came in Linux 6.12, ranges in 6.13",
            plan.options.rings, FormatBytes(plan.pinned_bytes), plan.options.rings,
            FormatBytes(plan.ring_memlock_bytes)),
        "Linux 6.13 or later shares one registration between all the rings; until then size "
        "RLIMIT_MEMLOCK for the rings times the budget, or serve fewer rings from the pool");
  }
  if (u.available && u.clone.ranges && !u.clone.keeps_later_entries) {
    Add(out, "io_uring_clone_drops_later_slots", Severity::kNote,
        "this kernel's range clones drop the destination table's entries after the cloned "
        "range (fixed in December 2025): IoUringDomain::AddRing refuses a ring whose table the "
        "application registered (IoUringRingOptions::register_table = false)",
        "let pinpool register the tables of the rings it serves, or use a kernel with the fix "
        "(\"io_uring/rsrc: fix lost entries after cloned range\")");
  }
  // (A budget over the limit on its own is memlock_too_low.)
  if (u.available && plan.invalid.empty() && plan.memlock_fits && !plan.ring_memlock_fits) {
    Add(out, "io_uring_rings_exceed_memlock", Severity::kWarning,
        absl::StrFormat("an IoUringDomain serving %d rings over this pool would charge %s "
                        "against RLIMIT_MEMLOCK (the pool once per ring: this kernel cannot "
                        "clone), more than the %s of headroom: AddRing fails at the limit",
                        plan.options.rings, FormatBytes(plan.ring_memlock_bytes),
                        FormatBytes(f.memlock.PinHeadroom().value_or(0))),
        absl::StrFormat("`ulimit -l %d` (KiB) or unlimited where the program starts, or "
                        "CAP_IPC_LOCK; or serve fewer rings (--rings), lower the budget, or use "
                        "Linux 6.13 or later, where the rings share one registration",
                        (plan.ring_memlock_bytes + f.memlock.pinned + 1023) / 1024));
  }
  if (u.available && plan.chunks > IoUringDomain::kMaxBuffers) {
    Add(out, "io_uring_too_many_chunks", Severity::kNote,
        absl::StrFormat("the budget is %d chunks, more than the %d fixed buffers a ring can "
                        "hold: an IoUringDomain would run out of slots",
                        plan.chunks, IoUringDomain::kMaxBuffers),
        "use larger chunks (--chunk-size) if the pool registers with io_uring");
  }
}

}  // namespace

const char* SeverityName(Severity s) {
  switch (s) {
    case Severity::kError:
      return "error";
    case Severity::kWarning:
      return "warning";
    case Severity::kNote:
      break;
  }
  return "note";
}

std::vector<Finding> FindProblems(const Facts& facts, const PoolPlan& plan) {
  std::vector<Finding> out;
  CheckRdma(facts, out);
  if (!plan.invalid.empty()) {
    Add(out, "invalid_pool_options", Severity::kError,
        absl::StrFormat("Pool::Create would refuse these options: %s", plan.invalid),
        "--chunk-size is a power of two from 2M to 1G, --budget at least one chunk, and "
        "--require-page-size needs pages no larger than a chunk");
  } else {
    CheckDevicesForPool(facts, plan, out);
    CheckPages(facts, plan, out);
    CheckMemlock(facts, plan, out);
    CheckCgroup(facts, plan, out);
  }
  CheckForkAndIoUring(facts, plan, out);
  if (!facts.long_term_pin.available) {
    Add(out, "long_term_pinning_unavailable", Severity::kError,
        absl::StrFormat("the default domain cannot take a long-term pin here, so Pool::Create "
                        "with no domain named fails: %s",
                        facts.long_term_pin.error),
        "remove the cause (io_uring_unavailable, if listed, says how), or name a domain: "
        "VerbsDomain::Open() on an RDMA device (ibv_reg_mr pins long-term), or, only for memory "
        "no device reads or writes, MakeResidentNotPinnedDomain() (mlock: resident, not pinned: "
        "the physical address may change; not for DMA)");
  }
  if (plan.tried && !plan.tried->ok) {
    Add(out, "try_failed", Severity::kError,
        absl::StrFormat("creating the pool (%s domain) failed: %s", plan.tried->domain,
                        plan.tried->error),
        "the message names the limit that was hit and what lifts it; the problems above say "
        "the same for this machine");
  }
  std::stable_sort(out.begin(), out.end(), [](const Finding& a, const Finding& b) {
    return static_cast<int>(a.severity) < static_cast<int>(b.severity);
  });
  return out;
}

}  // namespace pinpool::info
