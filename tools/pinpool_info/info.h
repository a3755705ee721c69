// pinpool-info: is this machine ready for pinned, registered memory, and what should change?
//
// The tool works in three steps, each in its own file, so that each can be read (and tested) on
// its own:
//   1. probe (probe_*.cc): facts, read from the kernel and the libraries, never interpreted:
//      RDMA devices and ports (libibverbs), huge page pools and THP (sysfs), RLIMIT_MEMLOCK and
//      what is locked and pinned (the os room's QueryMemlock), fork mode, io_uring (liburing),
//      and whether the default domain can take a long-term pin here (by pinning one page).
//   2. plan and findings (plan.cc, findings.cc): what a pool with the given options would get
//      here (page size of each chunk, memlock fit, device limits; with --try a real pool), and
//      every problem found with a concrete fix.
//   3. render (render_text.cc, render_json.cc): for people, or JSON with the stable field names
//      that docs/pinpool-info.md documents.
//
// The tool is part of pinpool and built with it: it uses the library's internal helpers (the
// os room's QueryMemlock and ReadKernelFile, the JSON writer PoolStats::ToJson uses, byte
// formatting) through libpinpool of the same version.
//
// Single-threaded; nothing here is shared.
#ifndef PINPOOL_TOOLS_PINPOOL_INFO_INFO_H_
#define PINPOOL_TOOLS_PINPOOL_INFO_INFO_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "os/cgroup.h"
#include "pinpool/io_uring.h"
#include "pinpool/keys.h"
#include "pinpool/options.h"
#include "pinpool/stats.h"
#include "pinpool/verbs.h"

namespace pinpool::info {

// Bumped when a JSON field changes meaning or disappears (new fields do not bump it). 2: the
// pool stats' pinned/locked fields, memlock headroom per counter. 4: the stats' allocated_bytes
// (live and cached blocks together) split into live_bytes and cached_bytes.
inline constexpr int kSchemaVersion = 4;

// --- command line ------------------------------------------------------------------------------

struct ToolOptions {
  bool json = false;
  // The pool to plan for (PoolOptions' defaults unless given).
  std::size_t chunk_size = PoolOptions{}.chunk_size;
  std::size_t budget = PoolOptions{}.budget;
  PageSize page_size = PoolOptions{}.page_size;
  bool require_page_size = false;
  bool page_size_given = false;  // --page-size named explicitly
  Backing backing;               // --backing: anonymous, memfd, or files in a directory
  bool try_pool = false;         // --try: really create a one-chunk pool
  std::string device;            // --device: the RDMA device --try registers with
  std::string metrics_socket;    // --metrics: a running pool's socket (Pool::ServeMetrics)
  std::uint32_t rings = 8;       // --rings: the io_uring rings to plan the pool's memlock for
};

// --metrics: the OpenMetrics text the pool serving `socket_path` sends (Pool::ServeMetrics), or
// nullopt with `error` saying why (no such socket, nobody listening, refused, cut short).
std::optional<std::string> ReadMetrics(const std::string& socket_path, std::string& error);

// Parses argv. Returns nullopt and sets `error` on bad arguments; sets `help`/`version` when asked.
std::optional<ToolOptions> ParseArguments(int argc, char** argv, std::string& error, bool& help,
                                          bool& version);
// "64M", "1G", "2MiB", "1.5G", "4096": bytes (binary units). nullopt when not a size.
std::optional<std::uint64_t> ParseSize(std::string_view text);
// "1G", "2M", "thp", "4K" (case-insensitive). nullopt otherwise.
std::optional<PageSize> ParsePageSize(std::string_view text);
// --help text (documents the JSON fields).
std::string UsageText();

// --- facts -------------------------------------------------------------------------------------

struct GidInfo {
  std::uint32_t index = 0;
  std::string gid;                  // RFC 5952 text ("fe80::...", "::ffff:10.77.0.1")
  std::string type;                 // "IB", "RoCE v1", "RoCE v2"
  std::optional<std::string> ipv4;  // the address of an IPv4-mapped GID
  std::string netdev;               // the net device it belongs to (RoCE), empty if none
};

struct PortInfo {
  std::uint32_t port = 0;
  std::string error;  // ibv_query_port failed: everything else is empty
  std::string state;  // as ibv_devinfo says it: "PORT_ACTIVE", "PORT_DOWN", "PORT_INIT", ...
  bool active = false;
  std::string phys_state;        // "LINK_UP", "DISABLED", "POLLING", ...
  std::string link_layer;        // "InfiniBand", "Ethernet"
  std::uint32_t active_mtu = 0;  // bytes
  std::uint32_t max_mtu = 0;     // bytes
  std::uint32_t lid = 0;
  std::uint32_t gid_table_size = 0;
  std::vector<GidInfo> gids;  // valid entries only
  std::string gid_error;      // the GID table could not be read
};

struct DeviceInfo {
  std::string name;
  std::string node_type;  // "CA", "RNIC", ...
  std::string transport;  // "InfiniBand", "iWARP", ...
  std::string node_guid;
  std::string error;  // could not open or query: the rest is empty
  bool permission_denied = false;
  std::string fw_ver;
  int numa_node = -1;  // sysfs, as VerbsDomain::numa_node(): where pools place chunks by default
  std::uint32_t vendor_id = 0;
  std::uint32_t vendor_part_id = 0;
  std::uint64_t max_mr_size = 0;
  std::uint32_t max_mr = 0;
  std::uint32_t max_mw = 0;
  std::uint32_t max_pd = 0;
  std::uint32_t max_qp = 0;
  std::uint64_t page_size_cap = 0;  // bit n set: pages of 2^n bytes
  std::uint64_t device_cap_flags = 0;
  bool mw_type1 = false;  // IBV_DEVICE_MEM_WINDOW
  bool mw_type2a = false;
  bool mw_type2b = false;
  bool mem_mgt_extensions = false;
  // What per-block grants get here (pinpool/verbs_remote_access.h): type 2 windows and whether they
  // keep a peer inside their range (the library's capability table), so what kAuto chooses.
  WindowSupport grant_windows;
  std::string atomics;          // "none", "hca", "global"
  bool extended_query = false;  // ibv_query_device_ex worked (ODP fields are meaningful)
  bool odp = false;
  bool odp_implicit = false;
  std::vector<std::string> odp_rc;  // "send", "recv", "write", "read", "atomic", "srq_recv"
  std::vector<std::string> odp_uc;
  std::vector<std::string> odp_ud;
  std::vector<PortInfo> ports;
};

// A transfer engine pinpool has an optional domain for (UCX: libpinpool_ucx; libfabric:
// libpinpool_fabric), as this machine's installed library reports itself. Probed by loading the
// library at run time (probe_providers.cc), so that pinpool-info itself never needs either.
struct ProviderInfo {
  std::string name;      // "ucx", "libfabric"
  std::string library;   // the shared library looked for ("libucp.so.0", "libfabric.so.1")
  bool present = false;  // it could be loaded
  std::string version;
  std::string error;  // why it is absent or could not be asked (empty otherwise)
  // UCX: transports with their devices ("rc_verbs/rxe0:1", "tcp/eth0", "posix/memory").
  std::vector<std::string> transports;
  // libfabric: providers with what they offer ("verbs;ofi_rxm: rdm rma", "tcp: msg rma").
  std::vector<std::string> providers;
};

struct RdmaFacts {
  std::optional<int> list_errno;  // ibv_get_device_list failed with this errno
  std::vector<DeviceInfo> devices;
  // Kernel modules of the RDMA stack: "loaded", "builtin", "available" (not loaded), "absent".
  std::map<std::string, std::string> modules;
  std::vector<std::string> netdevs;     // network interfaces other than lo, UP ones first
  std::vector<ProviderInfo> providers;  // UCX and libfabric (ProbeProviders)
};

struct HugePagePool {
  std::uint64_t page_bytes = 0;
  std::uint64_t total = 0;     // nr_hugepages
  std::uint64_t free = 0;      // free_hugepages
  std::uint64_t reserved = 0;  // resv_hugepages: free but promised to mappings
  std::uint64_t surplus = 0;
  std::uint64_t overcommit = 0;  // nr_overcommit_hugepages
  std::uint64_t available() const { return free > reserved ? free - reserved : 0; }
};

struct MemoryFacts {
  std::vector<HugePagePool> hugepages;  // smallest page size first
  std::string thp_enabled;              // "always", "madvise", "never", or "unavailable"
  std::string thp_defrag;
  std::uint64_t total = 0;      // MemTotal
  std::uint64_t available = 0;  // MemAvailable
  const HugePagePool* Pool(std::uint64_t page_bytes) const;
  bool ThpUsable() const { return thp_enabled == "always" || thp_enabled == "madvise"; }
};

struct MemlockFacts {
  std::optional<std::uint64_t> soft;  // nullopt: unlimited
  std::optional<std::uint64_t> hard;
  std::uint64_t locked = 0;  // VmLck (mlock)
  std::uint64_t pinned = 0;  // VmPin (long-term pins)
  bool cap_ipc_lock = false;
  // CAP_IPC_LOCK in the bounding set but not effective (a non-root user in a container or service
  // that was granted it): inert, though people take it for exemption.
  bool cap_ipc_lock_bounding_only = false;
  // What more can be long-term pinned (soft limit - VmPin) and mlocked (soft limit - VmLck); the
  // kernel checks each counter on its own. nullopt when not limited (CAP_IPC_LOCK or unlimited).
  std::optional<std::uint64_t> PinHeadroom() const;
  std::optional<std::uint64_t> LockHeadroom() const;
};

// The memory cgroup (the os room's QueryMemoryCgroup): pinned pages are charged to it as they
// are faulted in, and past its limit the OOM killer ends the process instead of an error.
struct CgroupFacts {
  int version = 0;         // 1, 2; 0 when no memory cgroup was found
  std::string path;        // this process's cgroup
  std::string note;        // why none was found
  std::string limit_path;  // the level with the least headroom (the process's own or an ancestor)
  std::optional<std::uint64_t> limit;     // nullopt: no limit from the cgroup up to the mount point
  std::uint64_t usage = 0;                // at limit_path
  std::uint64_t reclaimable = 0;          // inactive page cache at limit_path
  std::optional<std::uint64_t> headroom;  // limit - (usage - reclaimable); nullopt: no limit
  std::string error;                      // a file that could not be read
  internal::os::MemoryCgroupState state;  // as read, for the library's own wording of the fix
};

struct IoUringFacts {
  bool available = false;
  std::optional<int> error_errno;      // io_uring_queue_init failed
  std::optional<int> disabled_sysctl;  // kernel.io_uring_disabled, when the kernel has it
  std::optional<bool> sparse_buffers;  // sparse fixed-buffer tables (Linux 5.19+), when available
  std::optional<int> sparse_errno;
  // What IORING_REGISTER_CLONE_BUFFERS can do here (IoUringDomain::KernelCanClone), when
  // available: whole tables (Linux 6.12), ranges into a ring with a table (6.13: what one pin
  // for many rings needs), keeping the destination's later entries (fixed December 2025).
  IoUringCloneSupport clone;
};

// Can the default domain (MakeLongTermPinDomain) take a long-term pin here? Probed by creating it
// and pinning one page.
struct LongTermPinFacts {
  bool available = false;
  std::string error;  // why not: the library's own message (cause, fix, alternatives)
};

struct SystemFacts {
  std::string kernel;   // uname -r
  std::string machine;  // uname -m
  unsigned cpus = 0;
  std::uint32_t uid = 0;
};

struct Facts {
  SystemFacts system;
  RdmaFacts rdma;
  MemoryFacts memory;
  MemlockFacts memlock;
  CgroupFacts cgroup;
  std::string fork_mode;  // pinpool::ForkModeName(QueryForkMode())
  IoUringFacts io_uring;
  LongTermPinFacts long_term_pin;
};

// Each probe reads the machine now; none fails (what cannot be read is reported as such).
SystemFacts ProbeSystem();
RdmaFacts ProbeRdma();
MemoryFacts ProbeMemory();
MemlockFacts ProbeMemlock();
CgroupFacts ProbeCgroup();
IoUringFacts ProbeIoUring();
LongTermPinFacts ProbeLongTermPin();
std::vector<ProviderInfo> ProbeProviders();  // part of ProbeRdma
Facts ProbeAll();

// --- what each domain does to the pages -------------------------------------------------------

struct DomainPinning {
  std::string domain;  // "default", "io_uring", "verbs", "mlock"
  Pinning pinning = Pinning::kNone;
  std::string how;          // the mechanism ("io_uring fixed buffers in private tables", ...)
  bool available = false;   // usable on this machine now
  std::string unavailable;  // why not, when not
};
// The domains pinpool has, in the order the report lists them.
std::vector<DomainPinning> DescribeDomains(const Facts& facts);

// --- what a pool would get ---------------------------------------------------------------------

struct PageSizeOutcome {
  PageSize page_size = PageSize::k4K;
  std::uint64_t chunks = 0;  // chunks that would get this page size
  std::string reason;        // why (no) more chunks get it
};

struct DeviceFit {
  std::string device;
  bool chunk_fits_max_mr_size = true;
  bool chunks_fit_max_mr = true;
  bool page_size_supported = true;  // the planned page size is in page_size_cap
};

struct TryResult {
  bool ok = false;
  std::string domain;  // the domain the pool registered with ("long-term pin", "rxe0/pd0")
  double seconds = 0;  // Pool::Create with one chunk
  std::string error;
  std::optional<PoolStats> stats;
};

struct PoolPlan {
  ToolOptions options;
  std::string invalid;             // why Pool::Create would refuse the options; empty when valid
  std::uint64_t chunks = 0;        // budget / chunk_size
  std::uint64_t pinned_bytes = 0;  // chunks * chunk_size
  std::vector<PageSizeOutcome> page_sizes;  // each size tried, in order
  std::uint64_t failing_chunks = 0;         // require_page_size: chunks that would not be mapped
  PageSize first_chunk_page_size = PageSize::k4K;
  bool memlock_applies = false;  // the limit constrains this pool (no CAP_IPC_LOCK, not unlimited)
  bool memlock_fits = true;
  bool cgroup_applies = false;  // a memory cgroup limit was found above this process
  bool cgroup_fits = true;      // the budget fits its headroom now
  // An IoUringDomain serving options.rings rings over this pool: what its registrations charge
  // against RLIMIT_MEMLOCK here (once when the kernel clones them into every ring, once per ring
  // when it cannot), and whether that fits.
  IoUringSharing ring_sharing = IoUringSharing::kPerRing;
  std::uint64_t ring_memlock_bytes = 0;
  bool ring_memlock_fits = true;
  std::vector<DeviceFit> devices;
  std::optional<TryResult> tried;
};

PoolPlan PlanPool(const ToolOptions& options, const Facts& facts);
// --try: creates the pool (one chunk) with a verbs domain on `options.device` or the first
// ACTIVE device when there is one, else the default (long-term pin) domain; reports and destroys
// it.
TryResult TryPool(const ToolOptions& options, const Facts& facts);

// --- problems and fixes ------------------------------------------------------------------------

enum class Severity : std::uint8_t { kError, kWarning, kNote };
const char* SeverityName(Severity s);  // "error", "warning", "note"

struct Finding {
  std::string id;  // stable: docs/pinpool-info.md lists every id
  Severity severity = Severity::kNote;
  std::string problem;
  std::string fix;
};

// Every problem the facts and the plan show, errors first.
std::vector<Finding> FindProblems(const Facts& facts, const PoolPlan& plan);

// --- output --------------------------------------------------------------------------------------

std::string RenderText(const Facts& facts, const PoolPlan& plan,
                       const std::vector<Finding>& findings);
std::string RenderJson(const Facts& facts, const PoolPlan& plan,
                       const std::vector<Finding>& findings);

}  // namespace pinpool::info

#endif  // PINPOOL_TOOLS_PINPOOL_INFO_INFO_H_
