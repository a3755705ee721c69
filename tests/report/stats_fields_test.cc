// The stats' one description (src/report/stats_fields.h) and the printers that walk it. Each test
// walks the rows themselves, so that a figure added with its row is checked without touching
// this file: every described figure is in ToJson (under its name, with its value: the JSON
// parses) and in ToString (with its value as people read it); the figures domains and grant
// mechanisms report are printed in both; missing values are null for tools and said for
// people; names are snake_case and unique; the member count the compile-time check relies on is
// right; and docs/pinpool-info.md carries the field reference generated from the rows.
//
// The compile-time check itself (a member without a row does not build) cannot be a test that
// runs: adding `std::uint64_t x = 0;` to GrowthStats fails the build of src/pool/stats.cc with
// "GrowthStats: every member needs its row in kGrowthFields (or kGrowthSections)".
#include "report/stats_fields.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "pinpool/options.h"
#include "support/json_parse.h"

namespace pinpool::internal {
namespace {

using ::testing::HasSubstr;
using testing::JsonValue;
using ::testing::Not;
using testing::ParseOrFail;

// Every member set, none to its default, and figures reported by a domain and the grants.
PoolStats Full() {
  PoolStats s;
  s.reserved_bytes = 1 * kGiB;
  s.mapped_bytes = 8 * kMiB;
  s.pinned_bytes = 6 * kMiB;
  s.locked_bytes = 2 * kMiB;
  s.budget_bytes = 512 * kMiB;
  s.live_bytes = 3 * kMiB - 192 * kKiB - 24 * kKiB;  // grants.held_bytes below
  s.cached_bytes = 192 * kKiB;
  s.heap_active_bytes = 4 * kMiB;
  s.thread_caches = 3;
  s.thread_cache_bytes = 64 * kKiB;
  s.transfer_cache_bytes = 128 * kKiB;
  s.thread_cache_limit_bytes = 2 * kMiB;
  s.transfer_cache_limit_bytes = 4 * kMiB;
  s.cache_drains = 5;
  s.growths = 7;
  s.growth_failures = 1;
  s.memlock_limit = 64 * kMiB;
  s.process_pinned_bytes = 10 * kMiB;
  s.process_locked_bytes = 2 * kMiB;
  s.memlock_exempt = false;
  ChunkStats c;
  c.base = 0x7f0000200000;
  c.size = 2 * kMiB;
  c.page_size = PageSize::k2M;
  c.huge_bytes = 2 * kMiB;
  c.index = 3;
  c.numa_node = 1;
  Keys verbs;
  verbs.lkey = LKey{0x11};
  verbs.rkey = RKey{0x22};
  Keys ring;
  ring.buffer_index = BufferIndex{4};
  c.keys = {verbs, ring};
  s.chunks = {c};
  s.domains = {{"rxe0/pd0", DomainKind::kVerbs, Pinning::kLongTerm, 4, 8 * kMiB, 0.004, 0.002},
               {"io_uring/fd3", DomainKind::kIoUring, Pinning::kLongTerm, 2, 8 * kMiB, 0.5, 0.3}};
  s.domains[0].figures = {{"windows", 12, false, "type 2 windows allocated"},
                          {"window_allocations", 40, true, "ibv_alloc_mw calls, ever"}};
  GrantStats& g = s.grants;
  g.connections = 2;
  g.live = 3;
  g.revoking = 1;
  g.grants = 30;
  g.held_blocks = 6;
  g.held_bytes = 24 * kKiB;
  g.held_ever = 11;
  g.figures = {{"fabric_mr_grants", 17, true, "libfabric grants made, ever"}};
  GrowthStats& gr = s.growth;
  gr.low_watermark = 4 * kMiB;
  gr.room_bytes = 5 * kMiB;
  gr.chunks_growing = 1;
  gr.background_growths = 4;
  gr.allocation_growths = 3;
  gr.growth_waits = 2;
  gr.trims = 1;
  gr.trimmed_bytes = 2 * kMiB;
  gr.seconds_to_first_chunk = 0.0125;
  gr.seconds_to_initial_size = 1.5;
  gr.numa_node = 1;
  return s;
}

bool SnakeCase(std::string_view name) {
  if (name.empty() || !std::islower(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!std::islower(static_cast<unsigned char>(c)) &&
        !std::isdigit(static_cast<unsigned char>(c)) && c != '_') {
      return false;
    }
  }
  return name.back() != '_' && name.find("__") == std::string_view::npos;
}

template <class S, std::size_t N, std::size_t M>
void ExpectWellNamed(const char* section, const std::array<Field<S>, N>& fields,
                     const std::array<Section, M>& sections) {
  std::set<std::string_view> names;
  for (const Field<S>& f : fields) {
    EXPECT_TRUE(SnakeCase(f.name)) << section << "." << f.name;
    EXPECT_TRUE(names.insert(f.name).second) << section << ": two rows named " << f.name;
    EXPECT_FALSE(f.help.empty()) << section << "." << f.name << " has no help";
    EXPECT_EQ(f.help.find('\n'), std::string_view::npos) << section << "." << f.name;
    EXPECT_NE(f.read, nullptr) << section << "." << f.name;
  }
  for (const Section& s : sections) {
    EXPECT_TRUE(SnakeCase(s.name)) << section << "." << s.name;
    EXPECT_TRUE(names.insert(s.name).second) << section << ": " << s.name << " named twice";
  }
}

TEST(StatsFieldsTest, NamesAreSnakeCaseUniqueAndHelped) {
  ExpectWellNamed("pool", kPoolFields, kPoolSections);
  ExpectWellNamed("chunks", kChunkFields, kChunkSections);
  ExpectWellNamed("domains", kDomainFields, kDomainSections);
  ExpectWellNamed("grants", kGrantFields, kGrantSections);
  ExpectWellNamed("growth", kGrowthFields, kGrowthSections);
}

// `j` holds `v` as ToJson must write it.
void ExpectJson(const JsonValue& j, const Value& v, std::string_view name) {
  switch (v.type) {
    case Value::Type::kNull:
      EXPECT_TRUE(j.is_null()) << name << " is " << j.text;
      return;
    case Value::Type::kUint:
      EXPECT_EQ(j.Uint(), v.uint) << name << " is " << j.text;
      return;
    case Value::Type::kInt:
      EXPECT_EQ(j.text, std::to_string(v.integer)) << name;
      return;
    case Value::Type::kDouble:
      ASSERT_EQ(j.type, JsonValue::Type::kNumber) << name;
      EXPECT_DOUBLE_EQ(j.Number(), v.real) << name;
      return;
    case Value::Type::kBool:
      ASSERT_EQ(j.type, JsonValue::Type::kBool) << name;
      EXPECT_EQ(j.boolean, v.flag) << name;
      return;
    case Value::Type::kText:
      ASSERT_EQ(j.type, JsonValue::Type::kString) << name;
      EXPECT_EQ(j.text, v.text) << name;
      return;
    case Value::Type::kHistogram: {
      ASSERT_EQ(j.type, JsonValue::Type::kObject) << name;
      EXPECT_EQ(j["count"].Uint(), v.histogram->count) << name;
      EXPECT_DOUBLE_EQ(j["sum_seconds"].Number(), v.histogram->sum_seconds) << name;
      std::uint64_t in_buckets = 0;
      for (const JsonValue& b : j["buckets"].array) in_buckets += *b[1].Uint();
      EXPECT_EQ(in_buckets, v.histogram->count) << name;
      return;
    }
    case Value::Type::kAges:
      ASSERT_EQ(j.type, JsonValue::Type::kArray) << name;
      ASSERT_EQ(j.array.size(), HeldAges::kBuckets) << name;
      for (std::size_t i = 0; i < HeldAges::kBuckets; ++i) {
        EXPECT_EQ(j[i][1].Uint(), v.ages->blocks[i]) << name << " bucket " << i;
        EXPECT_EQ(j[i][2].Uint(), v.ages->bytes[i]) << name << " bucket " << i;
      }
      return;
  }
}

// Every row of `fields` is a member of `object`, with its value, in the rows' order; the sections
// follow.
template <class S, std::size_t N, std::size_t M>
void ExpectJsonRows(const JsonValue& object, const std::array<Field<S>, N>& fields,
                    const std::array<Section, M>& sections, const S& s, std::size_t skip = 0) {
  ASSERT_EQ(object.type, JsonValue::Type::kObject);
  ASSERT_EQ(object.object.size(), skip + N + M);
  for (std::size_t i = 0; i < N; ++i) {
    EXPECT_EQ(object.object[skip + i].first, fields[i].name);
    ExpectJson(object[fields[i].name], Read(fields[i], s), fields[i].name);
  }
  for (std::size_t i = 0; i < M; ++i)
    EXPECT_EQ(object.object[skip + N + i].first, sections[i].name);
}

void ExpectJsonFigures(const JsonValue& list, const std::vector<Figure>& figures) {
  ASSERT_EQ(list.array.size(), figures.size());
  for (std::size_t i = 0; i < figures.size(); ++i) {
    EXPECT_EQ(list[i]["name"].text, figures[i].name);
    EXPECT_EQ(list[i]["value"].Uint(), figures[i].value);
    EXPECT_EQ(list[i]["counter"].boolean, figures[i].counter);
    EXPECT_EQ(list[i]["help"].text, figures[i].help);
  }
}

TEST(StatsFieldsTest, EveryFigureIsInTheJsonWithItsValue) {
  const PoolStats s = Full();
  const JsonValue v = ParseOrFail(s.ToJson());
  ExpectJsonRows(v, kPoolFields, kPoolSections, s);
  ASSERT_EQ(v["chunks"].array.size(), 1u);
  ExpectJsonRows(v["chunks"][0], kChunkFields, kChunkSections, s.chunks[0]);
  ASSERT_EQ(v["domains"].array.size(), 2u);
  for (std::size_t d = 0; d < 2; ++d) {
    EXPECT_EQ(v["domains"][d]["index"].Uint(), d);
    ExpectJsonRows(v["domains"][d], kDomainFields, kDomainSections, s.domains[d], /*skip=*/1);
    ExpectJsonFigures(v["domains"][d]["figures"], s.domains[d].figures);
  }
  ExpectJsonRows(v["grants"], kGrantFields, kGrantSections, s.grants);
  ExpectJsonFigures(v["grants"]["figures"], s.grants.figures);
  ExpectJsonRows(v["growth"], kGrowthFields, kGrowthSections, s.growth);
}

// The value on the line ToString gives `name` ("  name   value   help").
std::string LineValue(const std::string& text, std::string_view name) {
  const std::string head = "\n  " + std::string(name) + " ";
  const std::size_t at = text.find(head);
  if (at == std::string::npos) return "(no line for " + std::string(name) + ")";
  const std::size_t value = text.find_first_not_of(' ', at + head.size());
  return text.substr(value, text.find("  ", value) - value);
}

template <class S, std::size_t N>
void ExpectTextLines(const std::string& text, const std::array<Field<S>, N>& fields, const S& s) {
  for (const Field<S>& f : fields) {
    const std::string value = TextOf(f.unit, Read(f, s), f.absent);
    EXPECT_EQ(LineValue(text, f.name), value) << f.name;
    EXPECT_THAT(text, HasSubstr(" " + std::string(f.help) + "\n")) << f.name;
  }
}

// A record of a list: "<noun> <first value>: name value, name value...".
template <class S, std::size_t N>
void ExpectTextRecord(const std::string& text, std::string_view noun,
                      const std::array<Field<S>, N>& fields, const S& s) {
  std::string record =
      std::string(noun) + " " + TextOf(fields[0].unit, Read(fields[0], s), "") + ":";
  for (std::size_t i = 1; i < N; ++i) {
    record += (i == 1 ? " " : ", ") + std::string(fields[i].name) + " " +
              TextOf(fields[i].unit, Read(fields[i], s), fields[i].absent);
  }
  EXPECT_THAT(text, HasSubstr(record));
}

TEST(StatsFieldsTest, EveryFigureIsInTheTextWithItsValue) {
  const PoolStats s = Full();
  const std::string text = s.ToString();
  ExpectTextLines(text, kPoolFields, s);
  ExpectTextRecord(text, "chunk", kChunkFields, s.chunks[0]);
  EXPECT_THAT(text, HasSubstr("; rxe0/pd0 lkey 0x11 rkey 0x22; io_uring/fd3 buffer 4\n"));
  for (const DomainStats& d : s.domains) ExpectTextRecord(text, "domain", kDomainFields, d);
  ExpectTextLines(text, kGrantFields, s.grants);
  ExpectTextLines(text, kGrowthFields, s.growth);
  // As people read them: bytes, milliseconds or seconds, percentages, hex addresses.
  EXPECT_EQ(LineValue(text, "reserved_bytes"), "1 GiB");
  EXPECT_EQ(LineValue(text, "heap_fragmentation"), "25.0%");
  EXPECT_EQ(LineValue(text, "seconds_to_first_chunk"), "12.500 ms");
  EXPECT_EQ(LineValue(text, "seconds_to_initial_size"), "1.500 s");
  EXPECT_THAT(text, HasSubstr("chunk 3: base 0x7f0000200000, size 2 MiB, page_size 2M,"));
}

TEST(StatsFieldsTest, ReportedFiguresArePrintedInTextAndJson) {
  const PoolStats s = Full();
  const std::string text = s.ToString();
  EXPECT_THAT(text, HasSubstr(", windows 12, window_allocations 40\n")) << "the domain's figures";
  EXPECT_EQ(LineValue(text, "fabric_mr_grants"), "17");
  EXPECT_THAT(text, HasSubstr("17           libfabric grants made, ever"));
  // Covered field by field above; here: a domain with none has an empty list, never a missing
  // key.
  const JsonValue v = ParseOrFail(s.ToJson());
  EXPECT_EQ(v["domains"][1]["figures"].type, JsonValue::Type::kArray);
  EXPECT_TRUE(v["domains"][1]["figures"].array.empty());
}

TEST(StatsFieldsTest, MissingValuesAreNullForToolsAndSaidForPeople) {
  PoolStats s = Full();
  s.memlock_limit = SIZE_MAX;
  s.chunks[0].numa_node = -1;
  s.growth.numa_node = -1;
  s.growth.seconds_to_first_chunk = -1;
  s.domains[1].registrations = 0;
  const JsonValue v = ParseOrFail(s.ToJson());
  for (const char* key : {"memlock_limit", "pin_headroom", "lock_headroom"}) {
    EXPECT_TRUE(v[key].is_null()) << key;
  }
  EXPECT_TRUE(v["chunks"][0]["numa_node"].is_null());
  EXPECT_TRUE(v["growth"]["numa_node"].is_null());
  EXPECT_TRUE(v["growth"]["seconds_to_first_chunk"].is_null());
  EXPECT_TRUE(v["domains"][1]["mean_register_seconds"].is_null());
  const std::string text = s.ToString();
  EXPECT_EQ(LineValue(text, "memlock_limit"), "unlimited");
  EXPECT_EQ(LineValue(text, "pin_headroom"), "no limit");
  EXPECT_EQ(LineValue(text, "seconds_to_first_chunk"), "not yet");
  EXPECT_THAT(text, HasSubstr("numa_node none;"));
  EXPECT_THAT(text, HasSubstr("mean_register_seconds none yet"));
  // A section with nothing in it is one line; a reported figure is something.
  EXPECT_THAT(PoolStats{}.ToString(), HasSubstr("\ngrants: all zero\n"));
  PoolStats reported;
  reported.grants.figures = {{"x", 0, false, "y"}};
  EXPECT_THAT(reported.ToString(), Not(HasSubstr("grants: all zero")));
}

// The counting the static_asserts of stats_fields.h rely on, on aggregates like the stats'.
struct Nested {
  int a = 0;
  std::vector<int> b;
};
struct Mixed {
  std::string name;
  double d = 0;
  Nested nested;
  std::vector<Figure> figures{};
  bool flag = false;
  PageSize page_size = PageSize::k4K;
};
TEST(StatsFieldsTest, CountsTheMembersOfAnAggregate) {
  static_assert(CountMembers<Nested>() == 2);
  static_assert(CountMembers<Mixed>() == 6, "a nested aggregate counts once");
  static_assert(CountMembers<Figure>() == 4);
  static_assert(CountMembers<GrowthStats>() == kGrowthFields.size());
  // A row too many (or a member too few) fails as a member too many does.
  static_assert(!DescribesEveryMember(kGrowthFields, std::array<Section, 1>{{{"extra", "x"}}}));
  SUCCEED();
}

TEST(StatsFieldsTest, TheDocsFieldReferenceIsTheGeneratedOne) {
  const std::filesystem::path doc =
      std::filesystem::path(PINPOOL_SOURCE_DIR) / "docs" / "pinpool-info.md";
  std::ifstream in(doc);
  ASSERT_TRUE(in) << "cannot read " << doc;
  std::stringstream text;
  text << in.rdbuf();
  const std::string reference = StatsFieldReference();
  EXPECT_NE(text.str().find(reference), std::string::npos)
      << doc << " (\"Pool stats\") must carry the field reference made from "
      << "src/report/stats_fields.h; replace its table with:\n"
      << reference;
  for (const Field<PoolStats>& f : kPoolFields) {
    EXPECT_THAT(reference, HasSubstr("| `" + std::string(f.name) + "` |"));
  }
}

}  // namespace
}  // namespace pinpool::internal
