// PoolStats: the figures derived from a snapshot, and its two printed forms: ToString for people
// (the demo, pinpool-info --try) and ToJson for tools (pinpool-info --json through
// WriteStatsJson). Neither names a figure: both walk the rows of report/stats_fields.h, then the
// figures domains and grant mechanisms report (Figure), so every figure is printed in both, in
// the same order, under the same name. The JSON names are a stable interface documented in
// docs/pinpool-info.md ("Pool stats").
// Pure functions of the snapshot; thread-safe.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "pinpool/stats.h"
#include "report/stats_fields.h"
#include "report/stats_json.h"
#include "report/stats_size.h"
#include "util/bytes.h"
#include "util/headroom.h"
#include "wire/json_writer.h"

namespace pinpool {
PINPOOL_ABI_BEGIN

namespace {

// `part` of `whole` as a share in [0, 1]; 0 when `whole` is 0.
double Share(std::size_t part, std::size_t whole) {
  if (whole == 0) return 0;
  return static_cast<double>(std::min(part, whole)) / static_cast<double>(whole);
}

std::optional<std::size_t> Headroom(const PoolStats& s, std::size_t used) {
  return internal::MemlockHeadroom(s.memlock_limit, s.memlock_exempt, used);
}

}  // namespace

std::string FormatBytes(std::uint64_t bytes) { return internal::FormatBytes(bytes); }

// The derived figures read members every PoolStats of this ABI version has (none added since
// the version began): a caller's smaller PoolStats holds them all.
std::optional<std::size_t> PoolStats::pin_headroom() const noexcept {
  return Headroom(*this, process_pinned_bytes);
}

std::optional<std::size_t> PoolStats::lock_headroom() const noexcept {
  return Headroom(*this, process_locked_bytes);
}

namespace {

// Bytes in blocks the heap handed out: live, cached, and held for grants.
std::size_t InBlocks(const PoolStats& s) {
  return s.live_bytes + s.cached_bytes + s.grants.held_bytes;
}

}  // namespace

double PoolStats::heap_fragmentation() const noexcept {
  return heap_active_bytes == 0 ? 0 : 1 - Share(InBlocks(*this), heap_active_bytes);
}

std::size_t PoolStats::mapped_unused_bytes() const noexcept {
  const std::size_t used = InBlocks(*this) + array_bytes;
  return mapped_bytes > used ? mapped_bytes - used : 0;
}

double PoolStats::mapped_unused_fraction() const noexcept {
  return Share(mapped_unused_bytes(), mapped_bytes);
}

PINPOOL_ABI_END
namespace internal {

const char* UnitName(Unit unit) {
  switch (unit) {
    case Unit::kBytes:
      return "bytes";
    case Unit::kCount:
      return "count";
    case Unit::kSeconds:
      return "seconds";
    case Unit::kRatio:
      return "ratio";
    case Unit::kAddress:
      return "address";
    case Unit::kNode:
      return "node";
    case Unit::kFlag:
      return "flag";
    case Unit::kText:
      return "text";
  }
  return "?";
}

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::kCounter:
      return "counter";
    case Kind::kGauge:
      return "gauge";
    case Kind::kLabel:
      return "label";
    case Kind::kHistogram:
      return "histogram";
    case Kind::kGaugeHistogram:
      return "gaugehistogram";
  }
  return "?";
}

namespace {

Value Text(std::string_view text, std::string_view display = {}) {
  Value v;
  v.type = Value::Type::kText;
  v.text = text;
  v.display = display;
  return v;
}

}  // namespace

Value ToValue(PageSize page_size) { return Text(PageSizeName(page_size)); }
Value ToValue(DomainKind kind) { return Text(DomainKindName(kind)); }
Value ToValue(Pinning pinning) { return Text(PinningName(pinning), PinningDescription(pinning)); }
Value ToValue(const LatencyHistogram& histogram) {
  Value v;
  v.type = Value::Type::kHistogram;
  v.histogram = &histogram;
  return v;
}
Value ToValue(const HeldAges& ages) {
  Value v;
  v.type = Value::Type::kAges;
  v.ages = &ages;
  return v;
}

namespace {

// "n 12, mean 1.234 ms, max <= 4.096 ms" ("none" when empty).
std::string HistogramText(const LatencyHistogram& h) {
  if (h.count == 0) return "none";
  std::size_t top = 0;
  for (std::size_t i = 0; i < h.buckets.size(); ++i) top = h.buckets[i] != 0 ? i : top;
  const Value mean = ToValue(h.sum_seconds / static_cast<double>(h.count));
  const double bound = LatencyHistogram::UpperBound(top);
  return absl::StrFormat(
      "n %d, mean %s, max %s", h.count, TextOf(Unit::kSeconds, mean, {}),
      std::isinf(bound)
          ? absl::StrFormat(
                "> %s", TextOf(Unit::kSeconds, ToValue(LatencyHistogram::UpperBound(top - 1)), {}))
          : absl::StrCat("<= ", TextOf(Unit::kSeconds, ToValue(bound), {})));
}

// "2 blocks (8 KiB) <= 0.001 s, 1 (4 KiB) > 600 s" ("none" when nothing is held).
std::string AgesText(const HeldAges& a) {
  std::string out;
  for (std::size_t i = 0; i < HeldAges::kBuckets; ++i) {
    if (a.blocks[i] == 0) continue;
    absl::StrAppendFormat(&out, "%s%d (%s) %s %g s", out.empty() ? "" : ", ", a.blocks[i],
                          FormatBytes(a.bytes[i]), i < HeldAges::kUpperSeconds.size() ? "<=" : ">",
                          HeldAges::kUpperSeconds[std::min(i, HeldAges::kUpperSeconds.size() - 1)]);
  }
  return out.empty() ? "none" : out;
}

}  // namespace

Value TakenBackBy(const ChunkStats& c) {
  if (c.backing.starts_with("file ")) {
    return Text("file-openers",
                "any process that can open the file; its open or truncate breaks pinpool's lease "
                "and pinpool gives the chunk back first");
  }
  if (c.backing.starts_with("memfd")) {
    return Text(c.sealed ? "fd-holders" : "fd-holders-truncate",
                c.sealed ? "a hole punch by a holder of its descriptor (truncation sealed): "
                           "pinpool, a forked child that kept it, a process that may ptrace "
                           "this one (/proc/<pid>/fd)"
                         : "a holder of its descriptor: truncate, punch a hole");
  }
  return Text("nobody", "nothing outside this process (pinpool never unmaps a registered chunk)");
}

// --- for people: one figure per line with its help; a list's records one per line ------------

std::string TextOf(Unit unit, const Value& v, std::string_view absent) {
  const double number = v.type == Value::Type::kDouble ? v.real
                        : v.type == Value::Type::kInt  ? static_cast<double>(v.integer)
                                                       : static_cast<double>(v.uint);
  switch (v.type) {
    case Value::Type::kNull:
      return std::string(absent.empty() ? "-" : absent);
    case Value::Type::kBool:
      return v.flag ? "yes" : "no";
    case Value::Type::kText:
      // The prose (a domain's pinning) in brackets: it has commas of its own.
      return v.display.empty() ? std::string(v.text) : absl::StrFormat("[%s]", v.display);
    case Value::Type::kHistogram:
      return HistogramText(*v.histogram);
    case Value::Type::kAges:
      return AgesText(*v.ages);
    default:
      break;
  }
  switch (unit) {
    case Unit::kBytes:
      return FormatBytes(v.uint);
    case Unit::kSeconds:
      return number < 1 ? absl::StrFormat("%.3f ms", number * 1e3)
                        : absl::StrFormat("%.3f s", number);
    case Unit::kRatio:
      return absl::StrFormat("%.1f%%", number * 100);
    case Unit::kAddress:
      return absl::StrFormat("%#x", v.uint);
    default:
      break;
  }
  if (v.type == Value::Type::kInt) return absl::StrCat(v.integer);
  if (v.type == Value::Type::kDouble) return absl::StrFormat("%g", v.real);
  return absl::StrCat(v.uint);
}

namespace {

void TextLine(std::string& out, std::string_view name, std::string_view value,
              std::string_view help) {
  absl::StrAppendFormat(&out, "  %-26s %-12s %s\n", name, value, help);
}

bool IsZero(const Value& v) {
  switch (v.type) {
    case Value::Type::kNull:
      return true;
    case Value::Type::kUint:
      return v.uint == 0;
    case Value::Type::kInt:
      return v.integer == 0;
    case Value::Type::kDouble:
      return v.real == 0;
    case Value::Type::kBool:
      return !v.flag;
    case Value::Type::kText:
      return v.text.empty();
    case Value::Type::kHistogram:
      return v.histogram->count == 0;
    case Value::Type::kAges: {
      std::uint64_t n = 0;
      for (std::uint64_t b : v.ages->blocks) n += b;
      return n == 0;
    }
  }
  return true;
}

// A section of one record: its title, then each figure on its own line. A section with nothing
// but zeros (no grant holder yet) is one line.
template <class S, std::size_t N>
void TextSection(std::string& out, std::string_view title, const std::array<Field<S>, N>& fields,
                 const S& s, const std::vector<Figure>& figures = {},
                 const std::vector<HistogramFigure>& histograms = {}) {
  bool zero = figures.empty() && histograms.empty();
  for (const Field<S>& f : fields) zero = zero && IsZero(Read(f, s));
  if (zero) {
    absl::StrAppendFormat(&out, "%s: all zero\n", title);
    return;
  }
  absl::StrAppendFormat(&out, "%s\n", title);
  for (const Field<S>& f : fields) {
    TextLine(out, f.name, TextOf(f.unit, Read(f, s), f.absent), f.help);
  }
  for (const Figure& f : figures) {
    TextLine(out, f.name, absl::StrCat(f.value), f.help);
  }
  for (const HistogramFigure& h : histograms) {
    TextLine(out, h.name, HistogramText(h.histogram), h.help);
  }
}

// One record of a list on one line: "<noun> <first figure>: name value, name value, ...".
template <class S, std::size_t N>
std::string TextRecord(std::string_view noun, const std::array<Field<S>, N>& fields, const S& s) {
  std::string out = absl::StrFormat("  %s %s:", noun,
                                    TextOf(fields[0].unit, Read(fields[0], s), fields[0].absent));
  for (std::size_t i = 1; i < N; ++i) {
    absl::StrAppendFormat(&out, "%s %s %s", i == 1 ? "" : ",", fields[i].name,
                          TextOf(fields[i].unit, Read(fields[i], s), fields[i].absent));
  }
  return out;
}

// --- for tools ---------------------------------------------------------------------------------

// A histogram for tools: its count, its sum and its non-empty buckets as [upper bound in seconds
// (null: unbounded), events in that bucket alone].
void JsonHistogram(JsonWriter& json, const LatencyHistogram& h) {
  json.BeginObject().Field("count", h.count).Field("sum_seconds", h.sum_seconds);
  json.Key("buckets").BeginArray();
  for (std::size_t i = 0; i < h.buckets.size(); ++i) {
    if (h.buckets[i] == 0) continue;
    json.BeginArray();
    const double bound = LatencyHistogram::UpperBound(i);
    if (std::isinf(bound)) {
      json.Null();
    } else {
      json.Double(bound);
    }
    json.Uint(h.buckets[i]).EndArray();
  }
  json.EndArray().EndObject();
}

void JsonValue(JsonWriter& json, const Value& v) {
  switch (v.type) {
    case Value::Type::kHistogram:
      JsonHistogram(json, *v.histogram);
      return;
    case Value::Type::kAges:
      // [upper bound in seconds (null: older than the last), blocks, bytes], every bucket.
      json.BeginArray();
      for (std::size_t i = 0; i < HeldAges::kBuckets; ++i) {
        json.BeginArray();
        if (i < HeldAges::kUpperSeconds.size()) {
          json.Double(HeldAges::kUpperSeconds[i]);
        } else {
          json.Null();
        }
        json.Uint(v.ages->blocks[i]).Uint(v.ages->bytes[i]).EndArray();
      }
      json.EndArray();
      return;
    case Value::Type::kNull:
      json.Null();
      return;
    case Value::Type::kUint:
      json.Uint(v.uint);
      return;
    case Value::Type::kInt:
      json.Int(v.integer);
      return;
    case Value::Type::kDouble:
      json.Double(v.real);
      return;
    case Value::Type::kBool:
      json.Bool(v.flag);
      return;
    case Value::Type::kText:
      json.String(v.text);
      return;
  }
}

template <class S, std::size_t N>
void JsonFields(JsonWriter& json, const std::array<Field<S>, N>& fields, const S& s) {
  for (const Field<S>& f : fields) {
    json.Key(f.name);
    JsonValue(json, Read(f, s));
  }
}

void JsonFigures(JsonWriter& json, const std::vector<Figure>& figures) {
  json.Key("figures").BeginArray();
  for (const Figure& f : figures) {
    json.BeginObject()
        .Field("name", f.name)
        .Field("value", f.value)
        .Field("counter", f.counter)
        .Field("help", f.help)
        .EndObject();
  }
  json.EndArray();
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

void WriteStatsJson(const PoolStats& s, JsonWriter& json) {
  json.BeginObject();
  JsonFields(json, kPoolFields, s);

  json.Key("chunks").BeginArray();
  for (const ChunkStats& c : s.chunks) {
    json.BeginObject();
    JsonFields(json, kChunkFields, c);
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
    json.BeginObject().Field("index", std::uint64_t{i});
    JsonFields(json, kDomainFields, s.domains[i]);
    JsonFigures(json, s.domains[i].figures);
    json.EndObject();
  }
  json.EndArray();

  json.Key("grants").BeginObject();
  JsonFields(json, kGrantFields, s.grants);
  JsonFigures(json, s.grants.figures);
  json.Key("histograms").BeginArray();
  for (const HistogramFigure& h : s.grants.histograms) {
    json.BeginObject().Field("name", h.name).Field("help", h.help).Key("histogram");
    JsonHistogram(json, h.histogram);
    json.EndObject();
  }
  json.EndArray();
  json.EndObject();

  json.Key("growth").BeginObject();
  JsonFields(json, kGrowthFields, s.growth);
  json.EndObject();

  json.Key("classes").BeginArray();
  for (const ClassStats& c : s.classes) {
    json.BeginObject();
    JsonFields(json, kClassFields, c);
    json.EndObject();
  }
  json.EndArray();

  json.Key("sharing").BeginObject();
  JsonFields(json, kSharingFields, s.sharing);
  json.EndObject();
  json.EndObject();
}

namespace {

// --- the field reference -----------------------------------------------------------------------

template <class S, std::size_t N>
void ReferenceRows(std::string& out, std::string_view prefix,
                   const std::array<Field<S>, N>& fields) {
  for (const Field<S>& f : fields) {
    std::string meaning(f.help);
    if (f.derived) meaning += " (derived)";
    if (!f.absent.empty()) absl::StrAppendFormat(&meaning, "; null: %s", f.absent);
    absl::StrAppendFormat(&out, "| `%s%s` | %s | %s | %s |\n", prefix, f.name, UnitName(f.unit),
                          KindName(f.kind), meaning);
  }
}

void ReferenceSection(std::string& out, std::string_view prefix, const Section& section,
                      bool list) {
  absl::StrAppendFormat(&out, "| `%s%s%s` | | | %s |\n", prefix, section.name, list ? "[]" : "",
                        section.help);
}

}  // namespace

std::string StatsFieldReference() {
  std::string out = "| field | unit | kind | meaning |\n|---|---|---|---|\n";
  ReferenceRows(out, "", kPoolFields);
  ReferenceSection(out, "", kPoolSections[0], true);
  ReferenceRows(out, "chunks[].", kChunkFields);
  ReferenceSection(out, "chunks[].", kChunkSections[0], true);
  ReferenceSection(out, "", kPoolSections[1], true);
  out +=
      "| `domains[].index` | count | label | its position: what `chunks[].registrations[].domain` "
      "names |\n";
  ReferenceRows(out, "domains[].", kDomainFields);
  ReferenceSection(out, "domains[].", kDomainSections[0], true);
  ReferenceSection(out, "", kPoolSections[2], false);
  ReferenceRows(out, "grants.", kGrantFields);
  ReferenceSection(out, "grants.", kGrantSections[0], true);
  ReferenceSection(out, "grants.", kGrantSections[1], true);
  ReferenceSection(out, "", kPoolSections[3], false);
  ReferenceRows(out, "growth.", kGrowthFields);
  ReferenceSection(out, "", kPoolSections[4], true);
  ReferenceRows(out, "classes[].", kClassFields);
  ReferenceSection(out, "", kPoolSections[5], false);
  ReferenceRows(out, "sharing.", kSharingFields);
  return out;
}

}  // namespace internal
PINPOOL_ABI_BEGIN

// A PoolStats from a program built against an earlier release lacks the members added since:
// each member below reads the caller's through Complete (report/stats_size.h).
std::string PoolStats::ToString() const {
  using internal::TextRecord;
  PoolStats storage;
  const PoolStats& s = internal::Complete(*this, storage);
  std::string out;
  internal::TextSection(out, "pool", internal::kPoolFields, s);
  absl::StrAppendFormat(&out, "chunks (%d)\n", s.chunks.size());
  for (const ChunkStats& c : s.chunks) {
    out += TextRecord("chunk", internal::kChunkFields, c);
    for (std::size_t d = 0; d < c.keys.size() && d < s.domains.size(); ++d) {
      absl::StrAppendFormat(&out, "; %s %s", s.domains[d].name,
                            internal::KeysText(s.domains[d].kind, c.keys[d]));
    }
    out.push_back('\n');
  }
  absl::StrAppendFormat(&out, "domains (%d)\n", s.domains.size());
  for (const DomainStats& d : s.domains) {
    out += TextRecord("domain", internal::kDomainFields, d);
    for (const Figure& f : d.figures) absl::StrAppendFormat(&out, ", %s %d", f.name, f.value);
    out.push_back('\n');
  }
  internal::TextSection(out, "grants", internal::kGrantFields, s.grants, s.grants.figures,
                        s.grants.histograms);
  internal::TextSection(out, "growth", internal::kGrowthFields, s.growth);
  if (!s.classes.empty()) {
    absl::StrAppendFormat(&out, "classes (%d)\n", s.classes.size());
    for (const ClassStats& c : s.classes) {
      out += TextRecord("class", internal::kClassFields, c);
      out.push_back('\n');
    }
  }
  internal::TextSection(out, "sharing", internal::kSharingFields, s.sharing);
  return out;
}

std::string PoolStats::ToOpenMetrics() const {
  PoolStats storage;
  return internal::OpenMetricsText(internal::Complete(*this, storage));
}

std::string PoolStats::ToJson() const {
  PoolStats storage;
  internal::JsonWriter json;
  internal::WriteStatsJson(internal::Complete(*this, storage), json);
  return std::move(json).Take();
}

PINPOOL_ABI_END
}  // namespace pinpool
