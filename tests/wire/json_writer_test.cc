// The JSON writer shared by PoolStats::ToJson and pinpool-info (src/wire/json_writer.h): what it
// writes parses, means what was written (strings round-trip, integers exact to 64 bits, doubles
// read back equal), and misuse aborts instead of producing a document that looks complete.
#include "wire/json_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "support/json_parse.h"

namespace pinpool::internal {
namespace {

using testing::JsonValue;
using testing::ParseJson;
using testing::ParseOrFail;

TEST(JsonWriterTest, NestedObjectsAndArraysParseWithEveryMember) {
  JsonWriter json;
  json.BeginObject()
      .Field("name", "pool")
      .Field("count", std::uint64_t{3})
      .Key("empty_object")
      .BeginObject()
      .EndObject()
      .Key("empty_array")
      .BeginArray()
      .EndArray()
      .Key("list")
      .BeginArray()
      .Uint(1)
      .BeginObject()
      .Field("inner", true)
      .EndObject()
      .Null()
      .EndArray()
      .EndObject();
  ASSERT_TRUE(json.done());
  const std::string text = std::move(json).Take();
  EXPECT_EQ(text.back(), '\n');
  const JsonValue v = ParseOrFail(text);
  EXPECT_EQ(v["name"].text, "pool");
  EXPECT_EQ(v["count"].Uint(), 3u);
  EXPECT_EQ(v["empty_object"].type, JsonValue::Type::kObject);
  EXPECT_TRUE(v["empty_object"].object.empty());
  EXPECT_EQ(v["empty_array"].type, JsonValue::Type::kArray);
  ASSERT_EQ(v["list"].array.size(), 3u);
  EXPECT_EQ(v["list"][0].Uint(), 1u);
  EXPECT_TRUE(v["list"][1]["inner"].boolean);
  EXPECT_TRUE(v["list"][2].is_null());
}

TEST(JsonWriterTest, IndentsOneMemberPerLineOrWritesOneLine) {
  JsonWriter pretty(2);
  pretty.BeginObject().Field("a", 1).Key("b").BeginArray().Uint(2).EndArray().EndObject();
  EXPECT_EQ(std::move(pretty).Take(), "{\n  \"a\": 1,\n  \"b\": [\n    2\n  ]\n}\n");
  JsonWriter compact(0);
  compact.BeginObject().Field("a", 1).Key("b").BeginArray().Uint(2).EndArray().EndObject();
  EXPECT_EQ(std::move(compact).Take(), "{\"a\":1,\"b\":[2]}\n");
}

TEST(JsonWriterTest, StringsRoundTripWithEscapes) {
  const std::string tricky = std::string("quote \" backslash \\ slash / newline \n tab \t nul ") +
                             '\0' + " bell \x07 del \x7f é 漢 😀";
  JsonWriter json(0);
  json.BeginArray().String(tricky).EndArray();
  const std::string text = std::move(json).Take();
  EXPECT_NE(text.find("\\u0000"), std::string::npos) << text;
  EXPECT_NE(text.find("\\u0007"), std::string::npos) << text;
  EXPECT_EQ(ParseOrFail(text)[0].text, tricky);
}

TEST(JsonWriterTest, InvalidUtf8BecomesReplacementCharacters) {
  // A lone continuation byte, a truncated sequence, an overlong '/', a surrogate, and > U+10FFFF.
  const std::string bad =
      "a\x80"
      "b\xE2\x82"
      "c\xC0\xAF"
      "d\xED\xA0\x80"
      "e\xF4\x90\x80\x80";
  JsonWriter json(0);
  json.BeginArray().String(bad).EndArray();
  const std::string text = std::move(json).Take();
  for (unsigned char c : text) EXPECT_LT(c, 0x80) << "raw invalid byte kept in " << text;
  const std::string decoded = ParseOrFail(text)[0].text;
  EXPECT_EQ(decoded.substr(0, 1), "a");
  EXPECT_NE(decoded.find("\xEF\xBF\xBD"), std::string::npos);  // U+FFFD
  EXPECT_NE(decoded.find('e'), std::string::npos);
}

TEST(JsonWriterTest, IntegersAreExactTo64Bits) {
  JsonWriter json(0);
  json.BeginArray()
      .Uint(std::numeric_limits<std::uint64_t>::max())
      .Int(std::numeric_limits<std::int64_t>::min())
      .Uint(0)
      .Int(-1)
      .EndArray();
  const std::string text = std::move(json).Take();
  EXPECT_EQ(text, "[18446744073709551615,-9223372036854775808,0,-1]\n");
  EXPECT_EQ(ParseOrFail(text)[0].Uint(), std::numeric_limits<std::uint64_t>::max());
}

TEST(JsonWriterTest, DoublesReadBackEqualAndStayFloats) {
  const double values[] = {0.0, 1.0, 0.1, 1e-9, 123456.789, 1e300, -2.5};
  JsonWriter json(0);
  json.BeginArray();
  for (double d : values) json.Double(d);
  json.Double(std::nan("")).Double(std::numeric_limits<double>::infinity()).EndArray();
  const std::string text = std::move(json).Take();
  const JsonValue v = ParseOrFail(text);
  for (std::size_t i = 0; i < std::size(values); ++i) {
    EXPECT_EQ(v[i].Number(), values[i]) << v[i].text;
    EXPECT_NE(v[i].text.find_first_of(".eE"), std::string::npos) << v[i].text << " reads as int";
  }
  EXPECT_TRUE(v[std::size(values)].is_null()) << "NaN must be null";
  EXPECT_TRUE(v[std::size(values) + 1].is_null()) << "infinity must be null";
}

TEST(JsonWriterTest, OptionalFieldsAreNullWhenEmpty) {
  JsonWriter json(0);
  json.BeginObject()
      .Field("limit", std::optional<std::uint64_t>{})
      .Field("name", std::optional<std::string>{})
      .Field("set", std::optional<std::uint64_t>{7})
      .EndObject();
  const JsonValue v = ParseOrFail(std::move(json).Take());
  EXPECT_TRUE(v.Has("limit"));
  EXPECT_TRUE(v["limit"].is_null());
  EXPECT_TRUE(v["name"].is_null());
  EXPECT_EQ(v["set"].Uint(), 7u);
}

TEST(JsonWriterDeathTest, MisuseAbortsInsteadOfWritingBadJson) {
  EXPECT_DEATH(
      {
        JsonWriter json;
        json.BeginObject().Uint(1);
      },
      "without a Key");
  EXPECT_DEATH(
      {
        JsonWriter json;
        json.BeginArray().EndObject();
      },
      "unbalanced");
  EXPECT_DEATH(
      {
        JsonWriter json;
        json.BeginObject();
        (void)std::move(json).Take();
      },
      "before the document is complete");
  EXPECT_DEATH(
      {
        JsonWriter json;
        json.BeginArray().Key("x");
      },
      "outside an object");
  EXPECT_DEATH(
      {
        JsonWriter json;
        json.Uint(1).Uint(2);
      },
      "second top-level value");
}

// The reader the tests rely on must itself refuse what is not JSON, or every check above could
// pass on garbage.
TEST(JsonParseTest, RejectsWhatIsNotJson) {
  for (const char* bad :
       {"", "{", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "01", "1.", "+1", "nul", "\"a\nb\"", "\"\\x\"",
        "{\"a\":1,\"a\":2}", "[1] 2", "{a:1}", "\"\\ud800\""}) {
    EXPECT_FALSE(ParseJson(bad).has_value()) << "accepted: " << bad;
  }
  EXPECT_TRUE(ParseJson(" {\"a\": [1, -0.5e3, true, null, \"\\u00e9\"]} ").has_value());
}

}  // namespace
}  // namespace pinpool::internal
