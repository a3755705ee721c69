// A strict, minimal JSON reader for tests: parses one RFC 8259 document into a tree, so that a
// test can check both that pinpool's JSON is valid and that each field holds the right value.
// Strict on purpose: no trailing commas, no comments, no leading zeros, no raw control
// characters in strings, escapes checked, duplicate keys rejected (the writer never makes them).
// Numbers keep their text, so 64-bit integers compare exactly. Not for production use.
#ifndef PINPOOL_TESTS_SUPPORT_JSON_PARSE_H_
#define PINPOOL_TESTS_SUPPORT_JSON_PARSE_H_

#include <gtest/gtest.h>

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pinpool::testing {

struct JsonValue {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  std::string text;  // a string's value, or a number's text
  std::vector<JsonValue> array;
  std::vector<std::pair<std::string, JsonValue>> object;

  bool is_null() const { return type == Type::kNull; }
  // The member named `key`, or null when this is not an object or has no such member.
  const JsonValue* Find(std::string_view key) const {
    if (type != Type::kObject) return nullptr;
    for (const auto& [k, v] : object) {
      if (k == key) return &v;
    }
    return nullptr;
  }
  // The member named `key`; a null value when absent (check with Has when it matters).
  const JsonValue& operator[](std::string_view key) const {
    static const JsonValue kNull;
    const JsonValue* v = Find(key);
    return v == nullptr ? kNull : *v;
  }
  const JsonValue& operator[](std::size_t i) const { return array.at(i); }
  bool Has(std::string_view key) const { return Find(key) != nullptr; }
  // An exact unsigned integer; nullopt for anything else (a fraction, a negative, a string).
  std::optional<std::uint64_t> Uint() const {
    if (type != Type::kNumber) return std::nullopt;
    std::uint64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return v;
  }
  double Number() const { return type == Type::kNumber ? std::strtod(text.c_str(), nullptr) : 0; }
};

namespace json_internal {

class Parser {
 public:
  explicit Parser(std::string_view in) : in_(in) {}

  std::optional<JsonValue> Document(std::string* error) {
    JsonValue v;
    Space();
    if (!Value(v, 0)) return Fail(error);
    Space();
    if (at_ != in_.size()) {
      why_ = "text after the document";
      return Fail(error);
    }
    return v;
  }

 private:
  std::optional<JsonValue> Fail(std::string* error) {
    if (error != nullptr) *error = why_ + " at offset " + std::to_string(at_);
    return std::nullopt;
  }
  bool Error(const char* why) {
    why_ = why;
    return false;
  }
  void Space() {
    while (at_ < in_.size() &&
           (in_[at_] == ' ' || in_[at_] == '\n' || in_[at_] == '\r' || in_[at_] == '\t')) {
      ++at_;
    }
  }
  bool Eat(char c) {
    if (at_ < in_.size() && in_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }
  bool Literal(std::string_view word) {
    if (in_.substr(at_, word.size()) != word) return Error("bad literal");
    at_ += word.size();
    return true;
  }
  static bool Digit(char c) { return c >= '0' && c <= '9'; }

  bool Value(JsonValue& v, int depth) {
    if (depth > 64) return Error("nested too deep");
    if (at_ >= in_.size()) return Error("unexpected end");
    const char c = in_[at_];
    if (c == '{') return Object(v, depth);
    if (c == '[') return Array(v, depth);
    if (c == '"') {
      v.type = JsonValue::Type::kString;
      return String(v.text);
    }
    if (c == 't') {
      v.type = JsonValue::Type::kBool;
      v.boolean = true;
      return Literal("true");
    }
    if (c == 'f') {
      v.type = JsonValue::Type::kBool;
      return Literal("false");
    }
    if (c == 'n') {
      v.type = JsonValue::Type::kNull;
      return Literal("null");
    }
    return Number(v);
  }

  bool Number(JsonValue& v) {
    const std::size_t start = at_;
    Eat('-');
    if (Eat('0')) {
      if (at_ < in_.size() && Digit(in_[at_])) return Error("leading zero");
    } else {
      if (at_ >= in_.size() || !Digit(in_[at_])) return Error("expected a value");
      while (at_ < in_.size() && Digit(in_[at_])) ++at_;
    }
    if (Eat('.')) {
      if (at_ >= in_.size() || !Digit(in_[at_])) return Error("digit expected after '.'");
      while (at_ < in_.size() && Digit(in_[at_])) ++at_;
    }
    if (Eat('e') || Eat('E')) {
      if (!Eat('+')) Eat('-');
      if (at_ >= in_.size() || !Digit(in_[at_])) return Error("digit expected in exponent");
      while (at_ < in_.size() && Digit(in_[at_])) ++at_;
    }
    v.type = JsonValue::Type::kNumber;
    v.text = std::string(in_.substr(start, at_ - start));
    return true;
  }

  static void AppendUtf8(std::string& out, std::uint32_t cp) {
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  bool Hex4(std::uint32_t& cp) {
    if (at_ + 4 > in_.size()) return Error("short \\u escape");
    cp = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = in_[at_++];
      cp <<= 4;
      if (Digit(h))
        cp |= static_cast<std::uint32_t>(h - '0');
      else if (h >= 'a' && h <= 'f')
        cp |= static_cast<std::uint32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F')
        cp |= static_cast<std::uint32_t>(h - 'A' + 10);
      else
        return Error("bad hex digit in \\u escape");
    }
    return true;
  }

  bool String(std::string& out) {
    ++at_;  // the opening quote
    for (;;) {
      if (at_ >= in_.size()) return Error("unterminated string");
      const char c = in_[at_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return Error("raw control character in string");
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (at_ >= in_.size()) return Error("unterminated escape");
      const char e = in_[at_++];
      switch (e) {
        case '"':
          out.push_back('"');
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '/':
          out.push_back('/');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u': {
          std::uint32_t cp = 0;
          if (!Hex4(cp)) return false;
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            std::uint32_t low = 0;
            if (!Eat('\\') || !Eat('u') || !Hex4(low) || low < 0xDC00 || low > 0xDFFF) {
              return Error("unpaired surrogate");
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return Error("unpaired surrogate");
          }
          AppendUtf8(out, cp);
          break;
        }
        default:
          return Error("bad escape");
      }
    }
  }

  bool Array(JsonValue& v, int depth) {
    ++at_;
    v.type = JsonValue::Type::kArray;
    Space();
    if (Eat(']')) return true;
    for (;;) {
      Space();
      v.array.emplace_back();
      if (!Value(v.array.back(), depth + 1)) return false;
      Space();
      if (Eat(']')) return true;
      if (!Eat(',')) return Error("expected ',' or ']'");
    }
  }

  bool Object(JsonValue& v, int depth) {
    ++at_;
    v.type = JsonValue::Type::kObject;
    Space();
    if (Eat('}')) return true;
    for (;;) {
      Space();
      if (at_ >= in_.size() || in_[at_] != '"') return Error("expected a member name");
      std::string key;
      if (!String(key)) return false;
      if (v.Find(key) != nullptr) return Error("duplicate member name");
      Space();
      if (!Eat(':')) return Error("expected ':'");
      Space();
      JsonValue member;
      if (!Value(member, depth + 1)) return false;
      v.object.emplace_back(std::move(key), std::move(member));
      Space();
      if (Eat('}')) return true;
      if (!Eat(',')) return Error("expected ',' or '}'");
    }
  }

  std::string_view in_;
  std::size_t at_ = 0;
  std::string why_;
};

}  // namespace json_internal

// The document in `text`, or nullopt with the reason and offset in `*error`.
inline std::optional<JsonValue> ParseJson(std::string_view text, std::string* error = nullptr) {
  return json_internal::Parser(text).Document(error);
}

// The parsed value of `text`, or a gtest failure naming the error (and an empty value).
inline JsonValue ParseOrFail(const std::string& text) {
  std::string error;
  std::optional<JsonValue> v = ParseJson(text, &error);
  EXPECT_TRUE(v.has_value()) << error << " in:\n" << text;
  return v.value_or(JsonValue{});
}

}  // namespace pinpool::testing

#endif  // PINPOOL_TESTS_SUPPORT_JSON_PARSE_H_
