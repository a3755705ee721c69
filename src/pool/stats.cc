// PoolStats: the figures derived from a snapshot, and its two printed forms: ToString for people
// (the demo, pinpool-info --try) and ToJson for tools. Both print every field; the JSON field
// names are a stable interface documented in docs/pinpool-info.md ("Pool stats").
// Pure functions of the snapshot; thread-safe.
#include "pinpool/stats.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>

#include "absl/strings/str_format.h"
#include "os/os.h"
#include "pool/json.h"
#include "pool/stats_json.h"
#include "util/bytes.h"

namespace pinpool {

namespace {

// `part` of `whole` as a share in [0, 1]; 0 when `whole` is 0.
double Share(std::size_t part, std::size_t whole) {
  if (whole == 0) return 0;
  return static_cast<double>(std::min(part, whole)) / static_cast<double>(whole);
}

// The key text of one chunk's registration with a domain of `kind`: only the keys that kind
// uses (host domains have none), so that no zero reads like a real key.
std::string KeysText(DomainKind kind, const Keys& k) {
  switch (kind) {
    case DomainKind::kHost:
      return "(no keys)";
    case DomainKind::kVerbs:
      return absl::StrFormat("lkey %#x rkey %#x", ToUnderlying(k.lkey), ToUnderlying(k.rkey));
    case DomainKind::kIoUring:
      return absl::StrFormat("buffer %d", ToUnderlying(k.buffer_index));
    case DomainKind::kCustom:
      break;
  }
  return absl::StrFormat("lkey %#x rkey %#x buffer %d", ToUnderlying(k.lkey), ToUnderlying(k.rkey),
                         ToUnderlying(k.buffer_index));
}

}  // namespace

namespace {

std::optional<std::size_t> Headroom(const PoolStats& s, std::size_t used) {
  return internal::os::MemlockState{.limit = s.memlock_limit, .exempt = s.memlock_exempt}.Headroom(
      used);
}

}  // namespace

std::string FormatBytes(std::uint64_t bytes) { return internal::FormatBytes(bytes); }

std::optional<std::size_t> PoolStats::pin_headroom() const noexcept {
  return Headroom(*this, process_pinned_bytes);
}

std::optional<std::size_t> PoolStats::lock_headroom() const noexcept {
  return Headroom(*this, process_locked_bytes);
}

double PoolStats::heap_fragmentation() const noexcept {
  return heap_active_bytes == 0 ? 0 : 1 - Share(allocated_bytes, heap_active_bytes);
}

std::size_t PoolStats::mapped_unused_bytes() const noexcept {
  return mapped_bytes > allocated_bytes ? mapped_bytes - allocated_bytes : 0;
}

double PoolStats::mapped_unused_fraction() const noexcept {
  return Share(mapped_unused_bytes(), mapped_bytes);
}

std::string PoolStats::ToString() const {
  std::string out = absl::StrFormat(
      "reserved %s, mapped %s in %d chunks of a %s budget: %s long-term pinned (physical "
      "addresses fixed), %s locked (resident, may move)\n"
      "allocated %s in blocks (%s of pages active)\n"
      "%d thread caches holding %s (at most %s each), transfer stacks holding %s (at most %s), "
      "%d cache drains\n"
      "growths %d, failed growths %d\n"
      "RLIMIT_MEMLOCK %s; the process has %s long-term pinned (VmPin), %s locked (VmLck)%s\n",
      FormatBytes(reserved_bytes), FormatBytes(mapped_bytes), chunks.size(),
      FormatBytes(budget_bytes), FormatBytes(pinned_bytes), FormatBytes(locked_bytes),
      FormatBytes(allocated_bytes), FormatBytes(heap_active_bytes), thread_caches,
      FormatBytes(thread_cache_bytes), FormatBytes(thread_cache_limit_bytes),
      FormatBytes(transfer_cache_bytes), FormatBytes(transfer_cache_limit_bytes), cache_drains,
      growths, growth_failures, FormatBytes(memlock_limit), FormatBytes(process_pinned_bytes),
      FormatBytes(process_locked_bytes),
      memlock_exempt ? " (CAP_IPC_LOCK: limit does not apply)" : "");
  if (pin_headroom()) {
    absl::StrAppendFormat(&out,
                          "memlock headroom %s for long-term pins, %s for locks (more before "
                          "the limit)\n",
                          FormatBytes(*pin_headroom()), FormatBytes(*lock_headroom()));
  } else {
    absl::StrAppendFormat(&out, "memlock headroom: no limit (%s)\n",
                          memlock_exempt ? "CAP_IPC_LOCK" : "RLIMIT_MEMLOCK unlimited");
  }
  absl::StrAppendFormat(&out,
                        "fragmentation: %.1f%% of active heap pages unused; %s of %s mapped not "
                        "in blocks (%.1f%%)\n",
                        heap_fragmentation() * 100, FormatBytes(mapped_unused_bytes()),
                        FormatBytes(mapped_bytes), mapped_unused_fraction() * 100);
  const GrowthStats& gr = growth;
  absl::StrAppendFormat(
      &out,
      "growth: %s room not yet allocated (low watermark %s), %d chunks being added; %d added "
      "in the background, %d by allocations (%d waited for one in flight); %d trimmed (%s); first "
      "chunk after %.3f s, initial size after %.3f s; NUMA node %s\n",
      FormatBytes(gr.room_bytes), gr.low_watermark == 0 ? "off" : FormatBytes(gr.low_watermark),
      gr.chunks_growing, gr.background_growths, gr.allocation_growths, gr.growth_waits, gr.trims,
      FormatBytes(gr.trimmed_bytes), gr.seconds_to_first_chunk, gr.seconds_to_initial_size,
      gr.numa_node < 0 ? "none" : std::to_string(gr.numa_node));
  for (const ChunkStats& c : chunks) {
    absl::StrAppendFormat(&out, "  chunk %d at %#x: %s, %s pages, %s huge", c.index, c.base,
                          FormatBytes(c.size), PageSizeName(c.page_size),
                          FormatBytes(c.huge_bytes));
    if (c.numa_node >= 0) absl::StrAppendFormat(&out, ", node %d", c.numa_node);
    for (std::size_t d = 0; d < c.keys.size() && d < domains.size(); ++d) {
      absl::StrAppendFormat(&out, "; %s %s", domains[d].name, KeysText(domains[d].kind, c.keys[d]));
    }
    out.push_back('\n');
  }
  for (const DomainStats& d : domains) {
    absl::StrAppendFormat(&out,
                          "  domain %s (%s): %s; %d registrations, %s registered, %.3f ms total, "
                          "%.3f ms max\n",
                          d.name, DomainKindName(d.kind), PinningDescription(d.pinning),
                          d.registrations, FormatBytes(d.registered_bytes),
                          d.register_seconds * 1e3, d.max_register_seconds * 1e3);
  }
  const GrantStats& g = grants;
  if (g.connections != 0 || g.grants != 0 || g.windows != 0) {
    absl::StrAppendFormat(
        &out,
        "remote grants: %d connections, %d live, %d revoking, %d made (%d windows bound, %d "
        "range regions); revoked by local invalidation %d, by the peer %d, by deregistration %d, "
        "by deallocating the window %d\n"
        "  held after free until revoked: %d blocks (%s) now, %d ever; windows %d (%d idle), "
        "%d allocated ever, %d of them on the grant path\n",
        g.connections, g.live, g.revoking, g.grants, g.window_binds, g.region_registrations,
        g.local_invalidations, g.peer_invalidations, g.region_deregistrations, g.windows_discarded,
        g.held_blocks, FormatBytes(g.held_bytes), g.held_ever, g.windows, g.windows_idle,
        g.window_allocations, g.window_growth_allocations);
  }
  return out;
}

std::string PoolStats::ToJson() const {
  internal::JsonWriter json;
  internal::WriteStatsJson(*this, json);
  return std::move(json).Take();
}

namespace internal {

void WriteStatsJson(const PoolStats& s, JsonWriter& json) {
  const auto limit = [](std::size_t bytes) -> std::optional<std::uint64_t> {
    if (bytes == SIZE_MAX) return std::nullopt;  // unlimited
    return bytes;
  };
  const auto optional = [](std::optional<std::size_t> v) -> std::optional<std::uint64_t> {
    if (!v) return std::nullopt;
    return *v;
  };
  json.BeginObject()
      .Field("reserved_bytes", s.reserved_bytes)
      .Field("mapped_bytes", s.mapped_bytes)
      .Field("pinned_bytes", s.pinned_bytes)
      .Field("locked_bytes", s.locked_bytes)
      .Field("budget_bytes", s.budget_bytes)
      .Field("allocated_bytes", s.allocated_bytes)
      .Field("heap_active_bytes", s.heap_active_bytes)
      .Field("thread_caches", s.thread_caches)
      .Field("thread_cache_bytes", s.thread_cache_bytes)
      .Field("transfer_cache_bytes", s.transfer_cache_bytes)
      .Field("thread_cache_limit_bytes", s.thread_cache_limit_bytes)
      .Field("transfer_cache_limit_bytes", s.transfer_cache_limit_bytes)
      .Field("cache_drains", s.cache_drains)
      .Field("growths", s.growths)
      .Field("growth_failures", s.growth_failures)
      .Field("memlock_limit", limit(s.memlock_limit))
      .Field("process_pinned_bytes", s.process_pinned_bytes)
      .Field("process_locked_bytes", s.process_locked_bytes)
      .Field("memlock_exempt", s.memlock_exempt)
      .Field("pin_headroom", optional(s.pin_headroom()))
      .Field("lock_headroom", optional(s.lock_headroom()))
      .Field("heap_fragmentation", s.heap_fragmentation())
      .Field("mapped_unused_bytes", s.mapped_unused_bytes())
      .Field("mapped_unused_fraction", s.mapped_unused_fraction());

  json.Key("chunks").BeginArray();
  for (const ChunkStats& c : s.chunks) {
    json.BeginObject()
        .Field("index", c.index)
        .Field("base", std::uint64_t{c.base})
        .Field("size", c.size)
        .Field("page_size", PageSizeName(c.page_size))
        .Field("huge_bytes", c.huge_bytes)
        .Field("numa_node",
               c.numa_node < 0 ? std::nullopt : std::optional<std::uint64_t>(c.numa_node));
    json.Key("registrations").BeginArray();
    for (std::size_t d = 0; d < c.keys.size(); ++d) {
      const Keys& k = c.keys[d];
      const DomainKind kind = d < s.domains.size() ? s.domains[d].kind : DomainKind::kCustom;
      const bool rdma = kind == DomainKind::kVerbs || kind == DomainKind::kCustom;
      const bool ring = kind == DomainKind::kIoUring || kind == DomainKind::kCustom;
      const auto key = [](bool applies, std::uint32_t v) -> std::optional<std::uint64_t> {
        if (!applies) return std::nullopt;
        return v;
      };
      json.BeginObject()
          .Field("domain", std::uint64_t{d})
          .Field("base", std::uint64_t{k.base})
          .Field("length", k.length)
          .Field("lkey", key(rdma, ToUnderlying(k.lkey)))
          .Field("rkey", key(rdma, ToUnderlying(k.rkey)))
          .Field("buffer_index", key(ring, ToUnderlying(k.buffer_index)))
          .EndObject();
    }
    json.EndArray().EndObject();
  }
  json.EndArray();

  json.Key("domains").BeginArray();
  for (std::size_t i = 0; i < s.domains.size(); ++i) {
    const DomainStats& d = s.domains[i];
    json.BeginObject()
        .Field("index", std::uint64_t{i})
        .Field("name", d.name)
        .Field("kind", DomainKindName(d.kind))
        .Field("pinning", PinningName(d.pinning))
        .Field("registrations", d.registrations)
        .Field("registered_bytes", d.registered_bytes)
        .Field("register_seconds", d.register_seconds)
        .Field("max_register_seconds", d.max_register_seconds)
        .Key("mean_register_seconds");
    if (d.registrations == 0) {
      json.Null();
    } else {
      json.Double(d.register_seconds / static_cast<double>(d.registrations));
    }
    json.EndObject();
  }
  json.EndArray();

  const GrantStats& g = s.grants;
  json.Key("grants")
      .BeginObject()
      .Field("connections", g.connections)
      .Field("live", g.live)
      .Field("revoking", g.revoking)
      .Field("grants", g.grants)
      .Field("window_binds", g.window_binds)
      .Field("region_registrations", g.region_registrations)
      .Field("local_invalidations", g.local_invalidations)
      .Field("peer_invalidations", g.peer_invalidations)
      .Field("region_deregistrations", g.region_deregistrations)
      .Field("windows_discarded", g.windows_discarded)
      .Field("held_blocks", g.held_blocks)
      .Field("held_bytes", g.held_bytes)
      .Field("held_ever", g.held_ever)
      .Field("windows", g.windows)
      .Field("windows_idle", g.windows_idle)
      .Field("window_allocations", g.window_allocations)
      .Field("window_growth_allocations", g.window_growth_allocations)
      .EndObject();
  const GrowthStats& gr = s.growth;
  json.Key("growth")
      .BeginObject()
      .Field("low_watermark", gr.low_watermark)
      .Field("room_bytes", gr.room_bytes)
      .Field("chunks_growing", gr.chunks_growing)
      .Field("background_growths", gr.background_growths)
      .Field("allocation_growths", gr.allocation_growths)
      .Field("growth_waits", gr.growth_waits)
      .Field("trims", gr.trims)
      .Field("trimmed_bytes", gr.trimmed_bytes)
      .Field("numa_node",
             gr.numa_node < 0 ? std::nullopt : std::optional<std::uint64_t>(gr.numa_node));
  // Not reached yet: null.
  for (const auto& [name, v] :
       {std::pair<const char*, double>{"seconds_to_first_chunk", gr.seconds_to_first_chunk},
        {"seconds_to_initial_size", gr.seconds_to_initial_size}}) {
    json.Key(name);
    if (v < 0) {
      json.Null();
    } else {
      json.Double(v);
    }
  }
  json.EndObject();
  json.EndObject();
}

}  // namespace internal
}  // namespace pinpool
