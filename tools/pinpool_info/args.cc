// pinpool-info's command line: options, sizes ("64M", "1.5G"), page sizes, and the --help text,
// which also lists the JSON fields (docs/pinpool-info.md has the full description).
#include <charconv>
#include <cmath>
#include <string>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "info.h"

namespace pinpool::info {

namespace {

// Debian 12's Abseil has its own string_view type, not std::string_view.
std::string Lower(std::string_view text) {
  return absl::AsciiStrToLower(absl::string_view(text.data(), text.size()));
}

}  // namespace

std::optional<std::uint64_t> ParseSize(std::string_view text) {
  const std::string t = Lower(text);
  std::string_view s = t;
  std::size_t digits = 0;
  while (digits < s.size() && (absl::ascii_isdigit(s[digits]) || s[digits] == '.')) ++digits;
  if (digits == 0) return std::nullopt;
  std::string_view number = s.substr(0, digits);
  std::string_view unit = s.substr(digits);
  if (unit.ends_with("ib")) {
    unit.remove_suffix(2);
  } else if (unit.size() == 2 && unit.back() == 'b') {
    unit.remove_suffix(1);  // "MB" read as MiB, as ulimit and most RDMA tools do
  } else if (unit == "b") {
    unit = "";
  }
  int shift = 0;
  if (unit == "")
    shift = 0;
  else if (unit == "k")
    shift = 10;
  else if (unit == "m")
    shift = 20;
  else if (unit == "g")
    shift = 30;
  else if (unit == "t")
    shift = 40;
  else
    return std::nullopt;
  double value = 0;
  if (!absl::SimpleAtod(absl::string_view(number.data(), number.size()), &value) ||
      !std::isfinite(value) || value < 0)
    return std::nullopt;
  const double bytes = std::ldexp(value, shift);
  if (bytes >= 0x1p63 || bytes != std::floor(bytes)) return std::nullopt;
  return static_cast<std::uint64_t>(bytes);
}

std::optional<PageSize> ParsePageSize(std::string_view text) {
  const std::string t = Lower(text);
  if (t == "1g") return PageSize::k1G;
  if (t == "2m") return PageSize::k2M;
  if (t == "thp" || t == "transparent") return PageSize::kTransparent;
  if (t == "4k") return PageSize::k4K;
  return std::nullopt;
}

std::string UsageText() {
  return R"(usage: pinpool-info [--json] [--chunk-size SIZE] [--budget SIZE]
                    [--page-size 1G|2M|thp|4K] [--require-page-size]
                    [--backing anonymous|memfd|DIR] [--rings N] [--try [--device NAME]]
       pinpool-info --metrics SOCKET

Says whether this machine is ready for pinned, registered memory (RDMA devices and what they can
register, huge pages, THP, RLIMIT_MEMLOCK and CAP_IPC_LOCK, fork mode, io_uring, what each
domain does to the pages: long-term pinned or only locked), what a pinpool pool with the given
options would get here, and every problem found with a concrete fix.

  --json                machine-readable output (the fields are listed below)
  --chunk-size SIZE     PoolOptions::chunk_size (default 64M): a power of two, 2M to 1G
  --budget SIZE         PoolOptions::budget (default 1G): the most the pool may pin
  --page-size P         PoolOptions::page_size: 1G (default), 2M, thp or 4K: the largest to try
  --require-page-size   PoolOptions::require_page_size: no fallback to smaller pages
  --backing B           PoolOptions::backing: anonymous (default), memfd, or a directory on
                        tmpfs or hugetlbfs for one file per chunk; --try shows each chunk's
                        backing and what can take its pages back (docs/backing.md)
  --rings N             plan what an IoUringDomain serving N rings (default 8) over the pool
                        charges against RLIMIT_MEMLOCK here: the pool once where the kernel
                        clones registrations between rings, N times where it cannot
  --try                 really create the pool, with one chunk mapped, pinned and registered
                        (verbs domain when an RDMA port is ACTIVE or --device is given, else
                        the default long-term pin domain), report its stats and destroy it;
                        without --try nothing is mapped or registered but one page, pinned
                        and released to see whether long-term pinning works here
  --device NAME         the RDMA device --try registers with
  --metrics SOCKET      print a running pool's metrics (OpenMetrics text) from the socket its
                        application opened with Pool::ServeMetrics(SOCKET), and nothing else;
                        exit status 1 when it cannot be read (docs/metrics.md)
  -h, --help            this text
  --version             pinpool's version
SIZE is bytes or a number with K, M, G or T (binary: 1G = 2^30): 64M, 1.5G, 2MiB.
The memlock figures are this process's: run it as the user (and under the service manager's
limits) the application runs with.

Exit status: 0 whatever was found (read the problems), 2 when the arguments are wrong.

JSON fields (schema_version 4; sizes in bytes; null: unlimited, not applicable or unknown):
  schema_version, pinpool_version
  system: kernel, machine, cpus, uid, memory_total_bytes, memory_available_bytes
  rdma: device_list_error, device_list_errno, modules {name: loaded|builtin|available|absent},
    netdevs[], devices[]: name, node_type, transport, node_guid, error, fw_ver, vendor_id,
      vendor_part_id, max_mr_size, max_mr, max_mw, max_pd, max_qp, page_size_cap,
      page_sizes[], device_cap_flags, memory_windows {type1, type2a, type2b},
      mem_mgt_extensions, grants {windows_type2, window_bounds_enforced, mechanism, reason},
      atomics, odp {queried, supported, implicit, rc[], uc[], ud[]},
      ports[]: port, error, state, active, phys_state, link_layer, active_mtu, max_mtu, lid,
        gid_table_size, gids[]: index, gid, type (IB|RoCE v1|RoCE v2), ipv4_mapped, ipv4,
        netdev
  hugepages: pools[]: page_size, page_size_bytes, total, free, reserved, surplus,
    overcommit; thp {enabled, defrag}
  memlock: soft_limit_bytes, hard_limit_bytes, locked_bytes, pinned_bytes, cap_ipc_lock,
    pin_headroom_bytes, lock_headroom_bytes, cap_ipc_lock_bounding_only, user_pins_visible
  cgroup: version, path, note, limit_path, limit_bytes, usage_bytes, reclaimable_bytes,
    headroom_bytes, error
  pinning: long_term_available, long_term_error, domains[]: domain, pinning
    (long-term|resident|none), meaning, how, available, unavailable_reason
  fork: mode (disabled|enabled|unneeded)
  io_uring: available, error, io_uring_disabled, sparse_buffers, max_buffer_bytes,
    max_buffers, clone {whole_table, ranges, keeps_later_entries}
  pool: chunk_size, budget, page_size, require_page_size, valid, invalid_reason, chunks,
    pinned_bytes, page_sizes[]: page_size, chunks, reason; failing_chunks,
    first_chunk_page_size, memlock {needed_bytes, applies, fits},
    cgroup {needed_bytes, applies, fits},
    io_uring_rings {rings, sharing (clone|per_ring), memlock_bytes, memlock_bytes_cloned,
      memlock_bytes_per_ring, fits},
    devices[]: name, chunk_fits_max_mr_size, chunks_fit_max_mr, page_size_supported,
    try: null or {ok, domain, seconds, error, stats (as PoolStats::ToJson)}
  problems[]: id, severity (error|warning|note), problem, fix
docs/pinpool-info.md describes every field and every problem id.
)";
}

std::optional<ToolOptions> ParseArguments(int argc, char** argv, std::string& error, bool& help,
                                          bool& version) {
  ToolOptions o;
  help = false;
  version = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    std::string_view value;
    bool has_value = false;
    if (const std::size_t eq = arg.find('=');
        arg.starts_with("--") && eq != std::string_view::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    const auto take = [&]() -> std::optional<std::string_view> {
      if (has_value) return value;
      if (i + 1 >= argc) {
        error = absl::StrFormat("%s needs a value", arg);
        return std::nullopt;
      }
      return std::string_view(argv[++i]);
    };
    const auto flag = [&]() {
      if (has_value) error = absl::StrFormat("%s takes no value", arg);
      return !has_value;
    };
    if (arg == "-h" || arg == "--help") {
      if (!flag()) return std::nullopt;
      help = true;
    } else if (arg == "--version") {
      if (!flag()) return std::nullopt;
      version = true;
    } else if (arg == "--json") {
      if (!flag()) return std::nullopt;
      o.json = true;
    } else if (arg == "--require-page-size") {
      if (!flag()) return std::nullopt;
      o.require_page_size = true;
    } else if (arg == "--try") {
      if (!flag()) return std::nullopt;
      o.try_pool = true;
    } else if (arg == "--chunk-size" || arg == "--budget") {
      auto v = take();
      if (!v) return std::nullopt;
      auto bytes = ParseSize(*v);
      if (!bytes) {
        error = absl::StrFormat("%s: \"%s\" is not a size (bytes, or 64M, 1G, 1.5G, ...)", arg, *v);
        return std::nullopt;
      }
      (arg == "--budget" ? o.budget : o.chunk_size) = *bytes;
    } else if (arg == "--page-size") {
      auto v = take();
      if (!v) return std::nullopt;
      auto p = ParsePageSize(*v);
      if (!p) {
        error = absl::StrFormat("--page-size: \"%s\" is not one of 1G, 2M, thp, 4K", *v);
        return std::nullopt;
      }
      o.page_size = *p;
      o.page_size_given = true;
    } else if (arg == "--backing") {
      auto v = take();
      if (!v) return std::nullopt;
      if (*v == "anonymous") {
        o.backing = {};
      } else if (*v == "memfd") {
        o.backing = {BackingKind::kMemfd, ""};
      } else if (v->starts_with("/")) {
        o.backing = {BackingKind::kFiles, std::string(*v)};
      } else {
        error = absl::StrFormat(
            "--backing: \"%s\" is not anonymous, memfd or an absolute directory path", *v);
        return std::nullopt;
      }
    } else if (arg == "--rings") {
      auto v = take();
      if (!v) return std::nullopt;
      std::uint32_t rings = 0;
      const auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), rings);
      if (ec != std::errc() || end != v->data() + v->size() || rings == 0 || rings > 65536) {
        error = absl::StrFormat("--rings: \"%s\" is not a number of rings (1 to 65536)", *v);
        return std::nullopt;
      }
      o.rings = rings;
    } else if (arg == "--metrics") {
      auto v = take();
      if (!v) return std::nullopt;
      if (v->empty()) {
        error = "--metrics needs the socket path the pool serves (Pool::ServeMetrics)";
        return std::nullopt;
      }
      o.metrics_socket = std::string(*v);
    } else if (arg == "--device") {
      auto v = take();
      if (!v) return std::nullopt;
      if (v->empty()) {
        error = "--device needs a device name (ibv_devices lists them)";
        return std::nullopt;
      }
      o.device = std::string(*v);
    } else {
      error = absl::StrFormat("unknown argument \"%s\"", argv[i]);
      return std::nullopt;
    }
  }
  if (!o.metrics_socket.empty() && (o.json || o.try_pool)) {
    error = "--metrics reads a running pool's metrics: it takes no other option";
    return std::nullopt;
  }
  if (!o.device.empty() && !o.try_pool) {
    error = "--device only applies to --try";
    return std::nullopt;
  }
  return o;
}

}  // namespace pinpool::info
