// The one description of pinpool's stats: a row per figure of each stats section (PoolStats and
// the structs it holds), which every printer walks: PoolStats::ToString, PoolStats::ToJson (and
// through it pinpool-info's text and JSON), and the field reference in docs/pinpool-info.md
// (tests/report/stats_fields_test.cc checks it against these rows). A row holds what an exporter
// needs too: the stable snake_case name (the JSON key), the unit, counter or gauge, one line of
// help.
//
// Invariants, checked at compile time below: every member of a described struct has exactly one
// row, or is named as a section (a nested struct or list the printers write around the rows);
// a member added to pinpool/stats.h without its row fails the static_assert. Rows marked
// `derived` are figures computed from the others (PoolStats::pin_headroom...), not members.
// Names are unique within a section (tested).
//
// Adding a figure: the member in pinpool/stats.h, one row here, the code that counts it.
//
// Everything here is constant and the readers are pure: thread-safe.
#ifndef PINPOOL_REPORT_STATS_FIELDS_H_
#define PINPOOL_REPORT_STATS_FIELDS_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "pinpool/keys.h"
#include "pinpool/stats.h"

namespace pinpool::internal {

// What a figure measures; says how it is printed for people (FormatBytes, ms, %) and the unit an
// exporter declares. Tools always get the plain number (bytes, seconds, a fraction in [0, 1]).
enum class Unit : std::uint8_t {
  kBytes,
  kCount,
  kSeconds,
  kRatio,    // a fraction in [0, 1]
  kAddress,  // a virtual address (hex for people)
  kNode,     // a NUMA node number
  kFlag,     // yes or no
  kText,     // a name or a word from a fixed set
};

// Counter: only grows, counted since the pool was created. Gauge: a level now (or a setting).
// Label: says which record this is (a domain's name, a chunk's index), not a measurement: an
// exporter makes it a label of the record's samples. Histogram: a LatencyHistogram, events
// counted ever by how long they took. Gauge histogram: HeldAges, what is there now by age.
enum class Kind : std::uint8_t { kCounter, kGauge, kLabel, kHistogram, kGaugeHistogram };

const char* UnitName(Unit unit);  // "bytes", "count", "seconds", "ratio", ...
const char* KindName(Kind kind);  // "counter", "gauge", "label"

// One figure's value, read from a snapshot. Strings view the snapshot or static text.
struct Value {
  enum class Type : std::uint8_t { kNull, kUint, kInt, kDouble, kBool, kText, kHistogram, kAges };
  Type type = Type::kNull;
  std::uint64_t uint = 0;
  std::int64_t integer = 0;
  double real = 0;
  bool flag = false;
  std::string_view text;                        // the word tools read ("long-term")
  std::string_view display;                     // what people read instead, when not empty
  const LatencyHistogram* histogram = nullptr;  // kHistogram: points into the snapshot
  const HeldAges* ages = nullptr;               // kAges: points into the snapshot
};

// The Value of a member, by its type; enums by their stable names.
Value ToValue(PageSize page_size);
Value ToValue(DomainKind kind);
Value ToValue(Pinning pinning);
// What can take a chunk's memory back, from its backing (static text; docs/backing.md).
Value TakenBackBy(const ChunkStats& chunk);
Value ToValue(const LatencyHistogram& histogram);
Value ToValue(const HeldAges& ages);
template <class T>
Value ToValue(const T& v) {
  Value out;
  if constexpr (std::is_same_v<T, bool>) {
    out.type = Value::Type::kBool;
    out.flag = v;
  } else if constexpr (std::is_floating_point_v<T>) {
    out.type = Value::Type::kDouble;
    out.real = v;
  } else if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T>) {
    out.type = Value::Type::kUint;
    out.uint = v;
  } else if constexpr (std::is_integral_v<T>) {
    out.type = Value::Type::kInt;
    out.integer = v;
  } else if constexpr (std::is_same_v<T, std::string>) {
    out.type = Value::Type::kText;
    out.text = v;
  } else if constexpr (std::is_same_v<T, std::optional<std::size_t>>) {
    if (v) return ToValue(*v);
  } else {
    static_assert(sizeof(T) == 0, "no Value for this member type: add a ToValue overload");
  }
  return out;
}

// One row: a figure of section S.
template <class S>
struct Field {
  std::string_view name;  // snake_case, stable: the JSON key, the metric's name
  Unit unit = Unit::kCount;
  Kind kind = Kind::kGauge;
  std::string_view help;  // one line
  Value (*read)(const S&) = nullptr;
  bool derived = false;  // computed from other figures, not a member of S
  // What it means when the value is missing, for people ("unlimited", "not yet"); empty when it
  // never is. A member with this set is missing when negative, or the largest value of its
  // type (SIZE_MAX: unlimited); tools get null.
  std::string_view absent = {};
};

template <class M>
struct MemberOf;
template <class S, class T>
struct MemberOf<T S::*> {
  using Struct = S;
};

// The row of member `kMember`.
template <auto kMember, class S = typename MemberOf<decltype(kMember)>::Struct>
constexpr Field<S> Member(std::string_view name, Unit unit, Kind kind, std::string_view help,
                          std::string_view absent = {}) {
  return {name, unit, kind, help, [](const S& s) { return ToValue(s.*kMember); }, false, absent};
}

// The row of a figure computed from the others.
template <class S>
constexpr Field<S> Derived(std::string_view name, Unit unit, Kind kind, std::string_view help,
                           Value (*read)(const S&), std::string_view absent = {}) {
  return {name, unit, kind, help, read, true, absent};
}

// `field`'s value in `s`, null when it is missing (Field::absent).
template <class S>
Value Read(const Field<S>& field, const S& s) {
  Value v = field.read(s);
  if (field.absent.empty()) return v;
  const bool missing = (v.type == Value::Type::kInt && v.integer < 0) ||
                       (v.type == Value::Type::kDouble && v.real < 0) ||
                       (v.type == Value::Type::kUint && v.uint == SIZE_MAX);
  return missing ? Value{} : v;
}

// A member that is a section of its own (a nested struct, a list of records, the run-time
// figures), which the printers write after the rows.
struct Section {
  std::string_view name;  // the JSON key
  std::string_view help;  // one line, for the field reference
};

// How people read a value of `unit` ("64 MiB", "1.500 ms", "25.0%", `absent` when missing).
std::string TextOf(Unit unit, const Value& value, std::string_view absent);

// The OpenMetrics text of a snapshot (PoolStats::ToOpenMetrics; openmetrics.cc).
std::string OpenMetricsText(const PoolStats& stats);

// The field reference of docs/pinpool-info.md ("Pool stats"), as a Markdown table made from the
// rows below: the doc carries this text and a test keeps it equal.
std::string StatsFieldReference();

// --- the rows ----------------------------------------------------------------------------------
// In printing order (the JSON order docs/pinpool-info.md shows).

inline constexpr std::array kPoolFields = {
    Member<&PoolStats::reserved_bytes>("reserved_bytes", Unit::kBytes, Kind::kGauge,
                                       "virtual address range set aside (no memory behind it)"),
    Member<&PoolStats::mapped_bytes>("mapped_bytes", Unit::kBytes, Kind::kGauge, "chunks mapped"),
    Member<&PoolStats::pinned_bytes>(
        "pinned_bytes", Unit::kBytes, Kind::kGauge,
        "chunks a long-term pinning domain holds (physical addresses fixed)"),
    Member<&PoolStats::locked_bytes>("locked_bytes", Unit::kBytes, Kind::kGauge,
                                     "chunks an mlock domain holds (resident, may move)"),
    Member<&PoolStats::budget_bytes>("budget_bytes", Unit::kBytes, Kind::kGauge,
                                     "PoolOptions::budget, in whole chunks"),
    Member<&PoolStats::live_bytes>("live_bytes", Unit::kBytes, Kind::kGauge,
                                   "in live blocks (allocated, not freed): 0 when everything is "
                                   "freed; what a leak check reads"),
    Member<&PoolStats::cached_bytes>(
        "cached_bytes", Unit::kBytes, Kind::kGauge,
        "free blocks in the caches, ready to be handed out again (thread + transfer caches)"),
    Member<&PoolStats::heap_active_bytes>("heap_active_bytes", Unit::kBytes, Kind::kGauge,
                                          "pages the heap has in use for blocks"),
    Member<&PoolStats::thread_caches>("thread_caches", Unit::kCount, Kind::kGauge,
                                      "per-thread caches the heap holds"),
    Member<&PoolStats::thread_cache_bytes>(
        "thread_cache_bytes", Unit::kBytes, Kind::kGauge,
        "free blocks in all per-thread caches (counted in cached_bytes)"),
    Member<&PoolStats::transfer_cache_bytes>(
        "transfer_cache_bytes", Unit::kBytes, Kind::kGauge,
        "free blocks on the shared transfer stacks (counted in cached_bytes)"),
    Member<&PoolStats::thread_cache_limit_bytes>(
        "thread_cache_limit_bytes", Unit::kBytes, Kind::kGauge,
        "the most one thread's cache holds (0: no caches, debug_checks)"),
    Member<&PoolStats::transfer_cache_limit_bytes>("transfer_cache_limit_bytes", Unit::kBytes,
                                                   Kind::kGauge,
                                                   "the most the transfer stacks hold together"),
    Member<&PoolStats::cache_drains>(
        "cache_drains", Unit::kCount, Kind::kCounter,
        "times an allocation that found the budget spent drained every cache"),
    Member<&PoolStats::arrays>("arrays", Unit::kCount, Kind::kGauge,
                               "arrays alive (Pool::AllocateArray, not yet freed)"),
    Member<&PoolStats::array_bytes>(
        "array_bytes", Unit::kBytes, Kind::kGauge,
        "whole chunks arrays hold, unused tails included (one-block arrays are in live_bytes)"),
    Member<&PoolStats::growths>("growths", Unit::kCount, Kind::kCounter,
                                "chunks added, ever (trimmed ones too)"),
    Member<&PoolStats::growth_failures>(
        "growth_failures", Unit::kCount, Kind::kCounter,
        "attempts to add a chunk that failed (allocations, Reserve, background thread, Replenish)"),
    Member<&PoolStats::chunks_given_back>(
        "chunks_given_back", Unit::kCount, Kind::kCounter,
        "chunks given back because their backing had to go (GiveBack, a file's lease broken)"),
    Member<&PoolStats::lost_blocks>("lost_blocks", Unit::kCount, Kind::kCounter,
                                    "live blocks lost with the chunks given back"),
    Member<&PoolStats::lost_bytes>("lost_bytes", Unit::kBytes, Kind::kCounter,
                                   "usable bytes of the live blocks lost with chunks given back"),
    Member<&PoolStats::lost_block_frees>(
        "lost_block_frees", Unit::kCount, Kind::kCounter,
        "frees of lost blocks (accepted and ignored: their chunk is gone)"),
    Member<&PoolStats::memlock_limit>("memlock_limit", Unit::kBytes, Kind::kGauge,
                                      "RLIMIT_MEMLOCK soft limit", "unlimited"),
    Member<&PoolStats::process_pinned_bytes>(
        "process_pinned_bytes", Unit::kBytes, Kind::kGauge,
        "the whole process's VmPin (long-term pins: default domain, io_uring, RDMA)"),
    Member<&PoolStats::process_locked_bytes>("process_locked_bytes", Unit::kBytes, Kind::kGauge,
                                             "the whole process's VmLck (mlock)"),
    Member<&PoolStats::memlock_exempt>("memlock_exempt", Unit::kFlag, Kind::kGauge,
                                       "CAP_IPC_LOCK: RLIMIT_MEMLOCK does not apply"),
    Member<&PoolStats::cgroup_limit_bytes>(
        "cgroup_limit_bytes", Unit::kBytes, Kind::kGauge,
        "the memory cgroup's tightest limit (v1 or v2; this cgroup or an ancestor)", "unlimited"),
    Member<&PoolStats::cgroup_headroom_bytes>(
        "cgroup_headroom_bytes", Unit::kBytes, Kind::kGauge,
        "what the memory cgroup can still be charged before its OOM killer acts", "no limit"),
    Member<&PoolStats::allocate_slow_latency>(
        "allocate_slow_latency_seconds", Unit::kSeconds, Kind::kHistogram,
        "allocations that missed the thread cache (refill, growth; blocks above 64 KiB, which "
        "always come here, one in 32 per thread), by duration"),
    Derived<PoolStats>(
        "pin_headroom", Unit::kBytes, Kind::kGauge,
        "memlock_limit - process_pinned_bytes: more that can be long-term pinned (0 when over)",
        [](const PoolStats& s) { return ToValue(s.pin_headroom()); }, "no limit"),
    Derived<PoolStats>(
        "lock_headroom", Unit::kBytes, Kind::kGauge,
        "memlock_limit - process_locked_bytes: more that can be mlocked (0 when over)",
        [](const PoolStats& s) { return ToValue(s.lock_headroom()); }, "no limit"),
    Derived<PoolStats>(
        "heap_fragmentation", Unit::kRatio, Kind::kGauge,
        "1 - (live + cached + held) / heap_active: active heap pages no block uses (0 when none "
        "active)",
        [](const PoolStats& s) { return ToValue(s.heap_fragmentation()); }),
    Derived<PoolStats>("mapped_unused_bytes", Unit::kBytes, Kind::kGauge,
                       "mapped - (live + cached + held + array_bytes): mapped and registered, in "
                       "no block, cache or array",
                       [](const PoolStats& s) { return ToValue(s.mapped_unused_bytes()); }),
    Derived<PoolStats>("mapped_unused_fraction", Unit::kRatio, Kind::kGauge,
                       "mapped_unused_bytes / mapped_bytes (0 when nothing is mapped)",
                       [](const PoolStats& s) { return ToValue(s.mapped_unused_fraction()); }),
};
// Members printed as sections of their own, after the rows, in this order (JSON keys).
inline constexpr std::array<Section, 6> kPoolSections = {{
    {"chunks", "one object per chunk mapped, below"},
    {"domains", "one object per domain the pool registers with, below"},
    {"grants", "remote grants (docs/remote-access.md), below"},
    {"growth", "growth off the allocation path, start-up, trim, placement (docs/growth.md), below"},
    {"classes",
     "one object per buffer class (docs/classes.md), the default class first; empty when the "
     "pool has no named classes, below"},
    {"sharing", "attached processes, handover and adoption (docs/sharing.md), below"},
}};

inline constexpr std::array kChunkFields = {
    Member<&ChunkStats::index>("index", Unit::kCount, Kind::kLabel,
                               "position in the pool's reserved range"),
    Member<&ChunkStats::base>("base", Unit::kAddress, Kind::kLabel, "first address"),
    Member<&ChunkStats::size>("size", Unit::kBytes, Kind::kGauge, "bytes"),
    Member<&ChunkStats::page_size>("page_size", Unit::kText, Kind::kLabel,
                                   "1G, 2M, THP or 4K: what the kernel gave, read back from it"),
    Member<&ChunkStats::huge_bytes>("huge_bytes", Unit::kBytes, Kind::kGauge,
                                    "bytes backed by huge pages"),
    Member<&ChunkStats::backing>(
        "backing", Unit::kText, Kind::kLabel,
        "what the pages are: anonymous, memfd, memfd hugetlb 2M/1G, or file <path>"),
    Member<&ChunkStats::sealed>("sealed", Unit::kFlag, Kind::kGauge,
                                "truncation of its file refused by seals (memfd)"),
    Derived<ChunkStats>("taken_back_by", Unit::kText, Kind::kLabel,
                        "what can take the memory from under its registrations (docs/backing.md)",
                        [](const ChunkStats& c) { return TakenBackBy(c); }),
    Member<&ChunkStats::numa_node>(
        "numa_node", Unit::kNode, Kind::kLabel,
        "the node every sampled page is on (move_pages), when the pool binds chunks", "none"),
};
inline constexpr std::array<Section, 1> kChunkSections = {{
    {"registrations",
     "per domain (ChunkStats::keys): `domain` (its index), `base`, `length`, `lkey`, `rkey`, "
     "`buffer_index`; null where the domain's kind has no such key (host: none, verbs: lkey and "
     "rkey, io_uring: buffer_index, custom: all)"},
}};

inline constexpr std::array kDomainFields = {
    Member<&DomainStats::name>("name", Unit::kText, Kind::kLabel, "the domain's name"),
    Member<&DomainStats::kind>("kind", Unit::kText, Kind::kLabel,
                               "host, verbs, io_uring or custom"),
    Member<&DomainStats::pinning>(
        "pinning", Unit::kText, Kind::kLabel,
        "what registration does to the pages: long-term (pinned), resident (mlock) or none"),
    Member<&DomainStats::registrations>("registrations", Unit::kCount, Kind::kCounter,
                                        "successful Register() calls, ever"),
    Member<&DomainStats::registered_bytes>("registered_bytes", Unit::kBytes, Kind::kGauge,
                                           "bytes registered now"),
    Member<&DomainStats::register_seconds>("register_seconds", Unit::kSeconds, Kind::kCounter,
                                           "time spent in Register(), in total"),
    Member<&DomainStats::max_register_seconds>("max_register_seconds", Unit::kSeconds, Kind::kGauge,
                                               "the slowest single Register()"),
    Member<&DomainStats::register_latency>("register_latency_seconds", Unit::kSeconds,
                                           Kind::kHistogram,
                                           "each successful Register() of a chunk, by duration"),
    Member<&DomainStats::deregister_latency>(
        "deregister_latency_seconds", Unit::kSeconds, Kind::kHistogram,
        "each Deregister() of a chunk (trim, destruction), by duration"),
    Derived<DomainStats>(
        "mean_register_seconds", Unit::kSeconds, Kind::kGauge, "register_seconds / registrations",
        [](const DomainStats& d) {
          return d.registrations == 0
                     ? Value{}
                     : ToValue(d.register_seconds / static_cast<double>(d.registrations));
        },
        "none yet"),
};
inline constexpr std::array<Section, 1> kDomainSections = {{
    {"figures",
     "what the domain reports about itself at run time: `name`, `value`, `counter` "
     "(true: counted ever; false: a level now), `help`"},
}};

inline constexpr std::array kClassFields = {
    Member<&ClassStats::name>("name", Unit::kText, Kind::kLabel,
                              "the class's name (\"default\": Allocate without a class)"),
    Member<&ClassStats::reserved_bytes>("reserved_bytes", Unit::kBytes, Kind::kGauge,
                                        "kept for it alone (BufferClass::reserved, whole chunks)"),
    Member<&ClassStats::cap_bytes>("cap_bytes", Unit::kBytes, Kind::kGauge,
                                   "the most it may hold (BufferClass::cap, whole chunks)"),
    Member<&ClassStats::held_bytes>("held_bytes", Unit::kBytes, Kind::kGauge,
                                    "its chunks now, used or not"),
    Member<&ClassStats::live_bytes>("live_bytes", Unit::kBytes, Kind::kGauge,
                                    "its blocks the application holds"),
    Member<&ClassStats::cached_bytes>("cached_bytes", Unit::kBytes, Kind::kGauge,
                                      "its free blocks in its caches"),
    Member<&ClassStats::refusals>("refusals", Unit::kCount, Kind::kCounter,
                                  "chunks it asked for and was refused (its cap, the others' "
                                  "reservations, growth failures)"),
    Member<&ClassStats::scrub>("scrub", Unit::kText, Kind::kLabel,
                               "none, on_reuse or on_class_change (BufferClass::scrub)"),
    Member<&ClassStats::scrubbed_bytes>("scrubbed_bytes", Unit::kBytes, Kind::kCounter,
                                        "bytes it zeroed: freed blocks, chunks changing class"),
};
inline constexpr std::array<Section, 0> kClassSections = {};

inline constexpr std::array kGrantFields = {
    Member<&GrantStats::connections>("connections", Unit::kCount, Kind::kGauge,
                                     "grant holders alive (VerbsRemoteAccess, FabricRemoteAccess)"),
    Member<&GrantStats::live>("live", Unit::kCount, Kind::kGauge, "grants a peer may use now"),
    Member<&GrantStats::revoking>("revoking", Unit::kCount, Kind::kGauge,
                                  "revocations started, not yet confirmed"),
    Member<&GrantStats::grants>("grants", Unit::kCount, Kind::kCounter, "grants made, ever"),
    Member<&GrantStats::held_blocks>("held_blocks", Unit::kCount, Kind::kGauge,
                                     "blocks freed while a grant reached them: held until it ends"),
    Member<&GrantStats::held_bytes>("held_bytes", Unit::kBytes, Kind::kGauge,
                                    "the bytes of those blocks"),
    Member<&GrantStats::held_ever>("held_ever", Unit::kCount, Kind::kCounter, "blocks ever held"),
    Member<&GrantStats::held_ages>("held_age_seconds", Unit::kSeconds, Kind::kGaugeHistogram,
                                   "held blocks (and their bytes) by how long ago they were freed"),
};
inline constexpr std::array<Section, 2> kGrantSections = {{
    {"figures",
     "what the grant mechanisms report about themselves at run time: `name`, "
     "`value`, `counter`, `help`"},
    {"histograms",
     "latency histograms the grant mechanisms record at run time: `name`, `help`, and the "
     "histogram (`count`, `sum_seconds`, `buckets`)"},
}};

inline constexpr std::array kGrowthFields = {
    Member<&GrowthStats::low_watermark>("low_watermark", Unit::kBytes, Kind::kGauge,
                                        "PoolOptions::low_watermark (0: off)"),
    Member<&GrowthStats::room_bytes>("room_bytes", Unit::kBytes, Kind::kGauge,
                                     "in mapped chunks, not yet taken by any allocation"),
    Member<&GrowthStats::chunks_growing>("chunks_growing", Unit::kCount, Kind::kGauge,
                                         "chunks being mapped and registered now"),
    Member<&GrowthStats::background_growths>(
        "background_growths", Unit::kCount, Kind::kCounter,
        "chunks the pool's background thread or Replenish added"),
    Member<&GrowthStats::allocation_growths>("allocation_growths", Unit::kCount, Kind::kCounter,
                                             "chunks added because an allocation found no room"),
    Member<&GrowthStats::growth_waits>("growth_waits", Unit::kCount, Kind::kCounter,
                                       "allocations that waited for a chunk in flight"),
    Member<&GrowthStats::trims>("trims", Unit::kCount, Kind::kCounter,
                                "chunks given back (Trim, trim_interval_ms)"),
    Member<&GrowthStats::trimmed_bytes>("trimmed_bytes", Unit::kBytes, Kind::kCounter,
                                        "bytes given back"),
    Member<&GrowthStats::numa_node>("numa_node", Unit::kNode, Kind::kLabel,
                                    "the node chunks are bound to", "none"),
    Member<&GrowthStats::seconds_to_first_chunk>("seconds_to_first_chunk", Unit::kSeconds,
                                                 Kind::kGauge, "from Create to its first chunk",
                                                 "not yet"),
    Member<&GrowthStats::seconds_to_initial_size>("seconds_to_initial_size", Unit::kSeconds,
                                                  Kind::kGauge,
                                                  "from Create to initial_size mapped", "not yet"),
    Member<&GrowthStats::growth_latency>(
        "growth_latency_seconds", Unit::kSeconds, Kind::kHistogram,
        "each chunk added (mapped, populated, registered with every domain), by duration"),
    Member<&GrowthStats::trim_latency>(
        "trim_latency_seconds", Unit::kSeconds, Kind::kHistogram,
        "each chunk given back (deregistered, unmapped), by duration"),
};
inline constexpr std::array<Section, 0> kGrowthSections = {};

inline constexpr std::array kSharingFields = {
    Member<&SharingStats::pool_id>("pool_id", Unit::kText, Kind::kLabel,
                                   "the pool's identity, kept across handovers (hex)"),
    Member<&SharingStats::attached_processes>(
        "attached_processes", Unit::kCount, Kind::kGauge,
        "processes that mapped the chunks (Pool::Share) whose socket is still open"),
    Member<&SharingStats::shares>("shares", Unit::kCount, Kind::kCounter,
                                  "Pool::Share calls that sent the chunks"),
    Member<&SharingStats::quiesced>(
        "quiesced", Unit::kFlag, Kind::kGauge,
        "Pool::Quiesce ended every registration: no allocation, no growth"),
    Member<&SharingStats::handovers>("handovers", Unit::kCount, Kind::kCounter,
                                     "1 once the pool was handed over to a successor"),
    Member<&SharingStats::adopted_chunks>("adopted_chunks", Unit::kCount, Kind::kCounter,
                                          "chunks this pool adopted from its predecessor"),
    Member<&SharingStats::adopted_blocks>("adopted_blocks", Unit::kCount, Kind::kCounter,
                                          "blocks handed over to this pool (Pool::Claim)"),
    Member<&SharingStats::reclaimed_live_blocks>(
        "reclaimed_live_blocks", Unit::kCount, Kind::kGauge,
        "handed-over blocks not freed yet (their chunks are held until the last is)"),
    Member<&SharingStats::reclaimed_live_bytes>("reclaimed_live_bytes", Unit::kBytes, Kind::kGauge,
                                                "their bytes"),
};
inline constexpr std::array<Section, 0> kSharingSections = {};

// --- the compile-time check --------------------------------------------------------------------

// Converts to any member type; only named in unevaluated braced initializers.
struct AnyMember {
  template <class T>
  operator T() const;  // NOLINT(google-explicit-constructor): the point of it
};

// The number of members of aggregate S: the most initializers S{...} takes.
template <class S, class... A>
constexpr std::size_t CountMembers() {
  if constexpr (requires { S{A{}..., AnyMember{}}; }) {
    return CountMembers<S, A..., AnyMember>();
  } else {
    return sizeof...(A);
  }
}

// True when the rows (but the derived ones), the sections and the `not_figures` members name
// as many figures as S has members.
template <class S, std::size_t N, std::size_t M>
constexpr bool DescribesEveryMember(const std::array<Field<S>, N>& fields,
                                    const std::array<Section, M>& /*sections*/,
                                    std::size_t not_figures = 0) {
  std::size_t described = M + not_figures;
  for (const Field<S>& f : fields) described += f.derived ? 0 : 1;
  return described == CountMembers<S>();
}

// struct_size is no figure (report/stats_size.h): one member more than the rows and sections.
static_assert(DescribesEveryMember(kPoolFields, kPoolSections, 1),
              "PoolStats: every member needs its row in kPoolFields (or kPoolSections)");
static_assert(DescribesEveryMember(kChunkFields, kChunkSections),
              "ChunkStats: every member needs its row in kChunkFields (or kChunkSections)");
static_assert(DescribesEveryMember(kDomainFields, kDomainSections),
              "DomainStats: every member needs its row in kDomainFields (or kDomainSections)");
static_assert(DescribesEveryMember(kClassFields, kClassSections),
              "ClassStats: every member needs its row in kClassFields (or kClassSections)");
static_assert(DescribesEveryMember(kGrantFields, kGrantSections),
              "GrantStats: every member needs its row in kGrantFields (or kGrantSections)");
static_assert(DescribesEveryMember(kGrowthFields, kGrowthSections),
              "GrowthStats: every member needs its row in kGrowthFields (or kGrowthSections)");
static_assert(DescribesEveryMember(kSharingFields, kSharingSections),
              "SharingStats: every member needs its row in kSharingFields (or kSharingSections)");

}  // namespace pinpool::internal

#endif  // PINPOOL_REPORT_STATS_FIELDS_H_
