// PoolStats in the OpenMetrics text format (what Prometheus scrapes): PoolStats::ToOpenMetrics.
// Like ToString and ToJson it names no figure: it walks the rows of report/stats_fields.h, then the
// figures and histograms domains and grant mechanisms report, so a figure added there is
// exported here with no change.
//
// Mapping (docs/metrics.md): a row of section S becomes the family pinpool_<S>_<name> (the pool's
// own rows pinpool_<name>); counters get the "_total" sample suffix; a unit is declared when the
// name ends with it ("_bytes", "_seconds"); rows of kind label become labels of their record's
// samples (a domain's name is `domain`, a chunk's index `chunk`); histograms write cumulative
// `_bucket{le=...}` samples, `_count` and `_sum`; held blocks by age are a gauge histogram of
// blocks plus a gauge of bytes per age bound. A missing value (Field::absent: unlimited, not
// yet) writes no sample. Text gauges would need a label; none exists.
//
// Why written here rather than with a library: Debian 12 packages no C++ Prometheus or
// OpenMetrics client (prometheus-cpp and opentelemetry-cpp are not in it), and either would put
// its own registry, metric objects and HTTP server into the core library for what is a walk over
// rows we already have. The text is checked by a real parser: tests/report/ runs Python's
// prometheus_client (python3-prometheus-client) over it.
// Pure functions of the snapshot; thread-safe.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "report/stats_fields.h"

namespace pinpool::internal {
namespace {

// A label value or HELP text with backslash, quote and newline escaped.
std::string Escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\' || c == '"') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string Number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  // The shortest of 15 or 17 digits that reads back as `v` (1e-06 rather than
  // 9.9999999999999995e-07).
  std::string text = absl::StrFormat("%.15g", v);
  if (std::strtod(text.c_str(), nullptr) != v) text = absl::StrFormat("%.17g", v);
  return text;
}

// A sample's value, or nothing when it is missing or not a number.
std::optional<std::string> SampleValue(const Value& v) {
  switch (v.type) {
    case Value::Type::kUint:
      return absl::StrCat(v.uint);
    case Value::Type::kInt:
      return absl::StrCat(v.integer);
    case Value::Type::kDouble:
      return Number(v.real);
    case Value::Type::kBool:
      return v.flag ? "1" : "0";
    default:
      return std::nullopt;
  }
}

// A label's value as a string, or nothing when missing.
std::optional<std::string> LabelValue(Unit unit, const Value& v) {
  switch (v.type) {
    case Value::Type::kText:
      return std::string(v.text);
    case Value::Type::kUint:
      return unit == Unit::kAddress ? absl::StrFormat("%#x", v.uint) : absl::StrCat(v.uint);
    case Value::Type::kInt:
      return absl::StrCat(v.integer);
    default:
      return std::nullopt;
  }
}

// `{a="x",b="y"}` from label pairs (empty when none); `extra` is appended last (le="...").
using Labels = std::vector<std::pair<std::string, std::string>>;
std::string LabelText(const Labels& labels, const Labels& extra = {}) {
  if (labels.empty() && extra.empty()) return "";
  std::string out = "{";
  bool first = true;
  for (const Labels* set : {&labels, &extra}) {
    for (const auto& [name, value] : *set) {
      absl::StrAppendFormat(&out, "%s%s=\"%s\"", first ? "" : ",", name, Escape(value));
      first = false;
    }
  }
  return out + "}";
}

const char* TypeName(Kind kind) {
  switch (kind) {
    case Kind::kCounter:
      return "counter";
    case Kind::kHistogram:
      return "histogram";
    case Kind::kGaugeHistogram:
      return "gaugehistogram";
    default:
      return "gauge";
  }
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

void Header(std::string& out, std::string_view family, Kind kind, Unit unit,
            std::string_view help) {
  absl::StrAppendFormat(&out, "# TYPE %s %s\n", family, TypeName(kind));
  const char* unit_name = unit == Unit::kBytes ? "bytes" : unit == Unit::kSeconds ? "seconds" : "";
  if (*unit_name != '\0' && EndsWith(family, std::string("_") + unit_name)) {
    absl::StrAppendFormat(&out, "# UNIT %s %s\n", family, unit_name);
  }
  absl::StrAppendFormat(&out, "# HELP %s %s\n", family, Escape(help));
}

void HistogramSamples(std::string& out, std::string_view family, const Labels& labels,
                      const LatencyHistogram& h) {
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < h.buckets.size(); ++i) {
    cumulative += h.buckets[i];
    absl::StrAppendFormat(&out, "%s_bucket%s %d\n", family,
                          LabelText(labels, {{"le", Number(LatencyHistogram::UpperBound(i))}}),
                          cumulative);
  }
  absl::StrAppendFormat(&out, "%s_count%s %d\n", family, LabelText(labels), h.count);
  absl::StrAppendFormat(&out, "%s_sum%s %s\n", family, LabelText(labels), Number(h.sum_seconds));
}

// The held blocks by age: a gauge histogram of blocks (cumulative by age bound), then a gauge of
// their bytes per age bound (cumulative too) as a family of its own.
void AgesSamples(std::string& out, std::string_view family, const Labels& labels,
                 const HeldAges& a) {
  std::uint64_t blocks = 0;
  for (std::size_t i = 0; i < HeldAges::kBuckets; ++i) {
    blocks += a.blocks[i];
    const double bound = i < HeldAges::kUpperSeconds.size()
                             ? HeldAges::kUpperSeconds[i]
                             : std::numeric_limits<double>::infinity();
    absl::StrAppendFormat(&out, "%s_bucket%s %d\n", family,
                          LabelText(labels, {{"le", Number(bound)}}), blocks);
  }
  absl::StrAppendFormat(&out, "%s_gcount%s %d\n", family, LabelText(labels), blocks);
  absl::StrAppendFormat(&out, "%s_gsum%s %s\n", family, LabelText(labels), Number(a.sum_seconds));
  const std::string bytes_family = std::string(family.substr(0, family.size() - 8)) + "_bytes";
  Header(out, bytes_family, Kind::kGauge, Unit::kBytes,
         "bytes of held blocks freed at most age_le seconds ago (cumulative)");
  std::uint64_t bytes = 0;
  for (std::size_t i = 0; i < HeldAges::kBuckets; ++i) {
    bytes += a.bytes[i];
    const double bound = i < HeldAges::kUpperSeconds.size()
                             ? HeldAges::kUpperSeconds[i]
                             : std::numeric_limits<double>::infinity();
    absl::StrAppendFormat(&out, "%s%s %d\n", bytes_family,
                          LabelText(labels, {{"age_le", Number(bound)}}), bytes);
  }
}

// The labels of one record: its rows of kind label, named after the row (`name_label` for the
// row called "name", `chunk` for "index").
template <class S, std::size_t N>
Labels RecordLabels(const std::array<Field<S>, N>& fields, const S& s,
                    std::string_view name_label) {
  Labels labels;
  for (const Field<S>& f : fields) {
    if (f.kind != Kind::kLabel) continue;
    const std::optional<std::string> v = LabelValue(f.unit, Read(f, s));
    if (!v) continue;
    std::string label(f.name);
    if (f.name == "name" || f.name == "index") label = std::string(name_label);
    labels.emplace_back(std::move(label), *v);
  }
  return labels;
}

// One family per measuring row of S, a sample per record (`records` with their labels).
template <class S, std::size_t N>
void Families(std::string& out, std::string_view prefix, const std::array<Field<S>, N>& fields,
              const std::vector<std::pair<const S*, Labels>>& records) {
  for (const Field<S>& f : fields) {
    if (f.kind == Kind::kLabel || records.empty()) continue;
    const std::string family = std::string(prefix) + std::string(f.name);
    Header(out, family, f.kind, f.unit, f.help);
    for (const auto& [record, labels] : records) {
      const Value v = Read(f, *record);
      if (v.type == Value::Type::kHistogram) {
        HistogramSamples(out, family, labels, *v.histogram);
      } else if (v.type == Value::Type::kAges) {
        AgesSamples(out, family, labels, *v.ages);
      } else if (const std::optional<std::string> text = SampleValue(v)) {
        absl::StrAppendFormat(&out, "%s%s%s %s\n", family, f.kind == Kind::kCounter ? "_total" : "",
                              LabelText(labels), *text);
      }
    }
  }
}

// Run-time figures, grouped by name across records (a figure may come from several domains).
void FigureFamilies(std::string& out, std::string_view prefix,
                    const std::vector<std::pair<const std::vector<Figure>*, Labels>>& lists) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::pair<const Figure*, const Labels*>>> by_name;
  for (const auto& [figures, labels] : lists) {
    for (const Figure& f : *figures) {
      auto [it, inserted] = by_name.try_emplace(f.name);
      if (inserted) order.push_back(f.name);
      it->second.emplace_back(&f, &labels);
    }
  }
  for (const std::string& name : order) {
    const auto& samples = by_name[name];
    const Figure& first = *samples.front().first;
    const std::string family = std::string(prefix) + name;
    const Kind kind = first.counter ? Kind::kCounter : Kind::kGauge;
    Header(out, family, kind, EndsWith(name, "_bytes") ? Unit::kBytes : Unit::kCount, first.help);
    for (const auto& [f, labels] : samples) {
      absl::StrAppendFormat(&out, "%s%s%s %d\n", family, first.counter ? "_total" : "",
                            LabelText(*labels), f->value);
    }
  }
}

}  // namespace

std::string OpenMetricsText(const PoolStats& s) {
  std::string out;
  Families(out, "pinpool_", kPoolFields, {{&s, {}}});

  std::vector<std::pair<const ChunkStats*, Labels>> chunks;
  for (const ChunkStats& c : s.chunks)
    chunks.emplace_back(&c, RecordLabels(kChunkFields, c, "chunk"));
  Families(out, "pinpool_chunk_", kChunkFields, chunks);

  std::vector<std::pair<const DomainStats*, Labels>> domains;
  std::vector<std::pair<const std::vector<Figure>*, Labels>> domain_figures;
  for (const DomainStats& d : s.domains) {
    domains.emplace_back(&d, RecordLabels(kDomainFields, d, "domain"));
    domain_figures.emplace_back(&d.figures, domains.back().second);
  }
  Families(out, "pinpool_domain_", kDomainFields, domains);
  FigureFamilies(out, "pinpool_domain_", domain_figures);

  Families(out, "pinpool_grants_", kGrantFields, {{&s.grants, {}}});
  FigureFamilies(out, "pinpool_grants_", {{&s.grants.figures, {}}});
  for (const HistogramFigure& h : s.grants.histograms) {
    const std::string family = "pinpool_grants_" + h.name;
    Header(out, family, Kind::kHistogram, Unit::kSeconds, h.help);
    HistogramSamples(out, family, {}, h.histogram);
  }

  Families(out, "pinpool_growth_", kGrowthFields, {{&s.growth, {}}});
  Families(out, "pinpool_sharing_", kSharingFields, {{&s.sharing, {}}});

  std::vector<std::pair<const ClassStats*, Labels>> classes;
  for (const ClassStats& c : s.classes) {
    classes.emplace_back(&c, RecordLabels(kClassFields, c, "class"));
  }
  Families(out, "pinpool_class_", kClassFields, classes);
  out += "# EOF\n";
  return out;
}

}  // namespace pinpool::internal
