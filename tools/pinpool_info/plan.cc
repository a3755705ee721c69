// What a pool with the given options would get on this machine, predicted from the facts the way
// the library decides, with the library's own rules (ValidatePoolOptions, the os room's
// page-size order, the memlock headroom): the options Pool::Create would refuse, the page size of
// every chunk up to the budget (hugetlb pages are counted from the free pools; THP is best effort),
// whether the budget fits RLIMIT_MEMLOCK (and what an io_uring domain serving --rings rings would
// charge it), and whether the devices can register such chunks. Nothing
// is mapped unless --try asks for a real pool (TryPool), which is created with one chunk and
// destroyed before returning.
#include <algorithm>
#include <bit>
#include <chrono>
#include <memory>
#include <utility>

#include "absl/strings/str_format.h"
#include "info.h"
#include "os/os.h"
#include "pinpool/pool.h"
#include "pinpool/verbs.h"
#include "pool/validate_options.h"
#include "util/bytes.h"

namespace pinpool::info {
namespace {

using internal::FormatBytes;

// The message Pool::Create would give for invalid options (the same function), or "".
std::string Invalid(const ToolOptions& o) {
  PoolOptions options;
  options.chunk_size = o.chunk_size;
  options.budget = o.budget;
  options.page_size = o.page_size;
  options.require_page_size = o.require_page_size;
  options.backing = o.backing;
  const absl::Status s = internal::ValidatePoolOptions(options);
  return s.ok() ? "" : std::string(s.message());
}

void PlanPageSizes(PoolPlan& plan, const Facts& facts) {
  const ToolOptions& o = plan.options;
  std::uint64_t remaining = plan.chunks;
  for (PageSize s : internal::os::PageSizesToTry(o.page_size, o.require_page_size)) {
    if (remaining == 0) break;
    PageSizeOutcome out;
    out.page_size = s;
    const std::size_t page = PageBytes(s);
    if (s == PageSize::k1G || s == PageSize::k2M) {
      if (page > o.chunk_size) {
        out.reason = absl::StrFormat("a %s chunk cannot hold %s pages (needs --chunk-size %s)",
                                     FormatBytes(o.chunk_size), FormatBytes(page), PageSizeName(s));
      } else if (const HugePagePool* pool = facts.memory.Pool(page); pool == nullptr) {
        out.reason = absl::StrFormat("this machine has no %s huge pages", FormatBytes(page));
      } else {
        const std::uint64_t per_chunk = o.chunk_size / page;
        out.chunks = std::min(remaining, pool->available() / per_chunk);
        out.reason = absl::StrFormat(
            "%d free (nr_hugepages %d%s); a chunk takes %d", pool->free, pool->total,
            pool->reserved != 0
                ? absl::StrFormat(", %d of the free ones promised to other mappings",
                                  pool->reserved)
                : "",
            per_chunk);
      }
    } else if (s == PageSize::kTransparent) {
      if (facts.memory.ThpUsable()) {
        out.chunks = remaining;
        out.reason = absl::StrFormat(
            "transparent huge pages are [%s] (defrag [%s]): best effort, a chunk gets 4 KiB "
            "pages where the kernel finds no free 2 MiB page",
            facts.memory.thp_enabled, facts.memory.thp_defrag);
      } else {
        out.reason = absl::StrFormat("transparent huge pages are [%s]", facts.memory.thp_enabled);
      }
    } else {
      out.chunks = remaining;
      out.reason = "base pages";
    }
    remaining -= out.chunks;
    plan.page_sizes.push_back(std::move(out));
  }
  plan.failing_chunks = remaining;
  for (const PageSizeOutcome& out : plan.page_sizes) {
    if (out.chunks != 0) {
      plan.first_chunk_page_size = out.page_size;
      break;
    }
  }
}

}  // namespace

PoolPlan PlanPool(const ToolOptions& options, const Facts& facts) {
  PoolPlan plan;
  plan.options = options;
  plan.invalid = Invalid(options);
  if (!plan.invalid.empty()) return plan;
  plan.chunks = options.budget / options.chunk_size;
  plan.pinned_bytes = plan.chunks * options.chunk_size;
  PlanPageSizes(plan, facts);

  // Every domain a pool planned here would use (the default, or verbs with --try) takes a
  // long-term pin, which counts in VmPin.
  const std::optional<std::uint64_t> headroom = facts.memlock.PinHeadroom();
  plan.memlock_applies = headroom.has_value();
  plan.memlock_fits = !headroom || plan.pinned_bytes <= *headroom;
  // The cgroup is charged for every chunk (pinning faults the pages in), hugetlb pages aside when
  // they are required; Pool::Create refuses only initial_size past it, growth stops per chunk.
  plan.cgroup_applies = facts.cgroup.headroom.has_value();
  const bool hugetlb_only = options.require_page_size && (options.page_size == PageSize::k1G ||
                                                          options.page_size == PageSize::k2M);
  plan.cgroup_fits =
      !plan.cgroup_applies || hugetlb_only || plan.pinned_bytes <= *facts.cgroup.headroom;

  // An IoUringDomain over options.rings rings: one registration cloned into all of them where
  // the kernel clones ranges, else one per ring (the domain's own ring being one of them).
  plan.ring_sharing =
      facts.io_uring.clone.ranges ? IoUringSharing::kClone : IoUringSharing::kPerRing;
  plan.ring_memlock_bytes = plan.ring_sharing == IoUringSharing::kClone
                                ? plan.pinned_bytes
                                : plan.pinned_bytes * std::max<std::uint32_t>(options.rings, 1);
  plan.ring_memlock_fits = !headroom || plan.ring_memlock_bytes <= *headroom;

  const unsigned page_bit =
      static_cast<unsigned>(std::countr_zero(PageBytes(plan.first_chunk_page_size)));
  for (const DeviceInfo& d : facts.rdma.devices) {
    if (!d.error.empty()) continue;
    DeviceFit fit;
    fit.device = d.name;
    fit.chunk_fits_max_mr_size = options.chunk_size <= d.max_mr_size;
    fit.chunks_fit_max_mr = plan.chunks <= d.max_mr;
    fit.page_size_supported = ((d.page_size_cap >> page_bit) & 1) != 0;
    plan.devices.push_back(std::move(fit));
  }
  if (options.try_pool) plan.tried = TryPool(options, facts);
  return plan;
}

TryResult TryPool(const ToolOptions& options, const Facts& facts) {
  TryResult result;
  PoolOptions o;
  o.chunk_size = options.chunk_size;
  o.budget = options.budget;
  o.page_size = options.page_size;
  o.require_page_size = options.require_page_size;
  o.backing = options.backing;
  o.initial_size = options.chunk_size;

  bool active = false;
  for (const DeviceInfo& d : facts.rdma.devices) {
    for (const PortInfo& p : d.ports) active = active || p.active;
  }
  result.domain = "long-term pin";  // the default
  if (!options.device.empty() || active) {
    auto verbs =
        VerbsDomain::Open({.device = options.device,
                           .access = {.trusted_whole_chunk = {.read = true, .write = true}}});
    if (!verbs.ok()) {
      result.domain = options.device.empty() ? "verbs" : options.device;
      result.error = std::string(verbs.status().message());
      return result;
    }
    result.domain = (*verbs)->name();
    o.domains.push_back(*std::move(verbs));
  }

  const auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<Pool>> pool = Pool::Create(std::move(o));
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!pool.ok()) {
    result.error = std::string(pool.status().message());
    return result;
  }
  result.ok = true;
  result.stats = (*pool)->GetStats();
  result.domain = result.stats->domains.front().name;
  return result;
}

}  // namespace pinpool::info
