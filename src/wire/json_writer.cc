// JsonWriter's implementation (json.h has the contract): commas and indentation from the stack of
// open frames, escaping with invalid UTF-8 replaced by U+FFFD, integers exact, doubles in the
// shortest form that reads back equal. Misuse aborts through PINPOOL_CHECK.
#include "wire/json_writer.h"

#include <charconv>
#include <cmath>
#include <utility>

#include "absl/strings/str_format.h"
#include "util/check.h"

namespace pinpool::internal {
namespace {

// Length of the valid UTF-8 sequence at the start of `s`, or 0 if it does not start with one
// (overlong forms, surrogates and code points above U+10FFFF are invalid).
std::size_t Utf8Length(std::string_view s) {
  const auto b = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const auto cont = [&](std::size_t i) { return i < s.size() && (b(i) & 0xC0) == 0x80; };
  const unsigned char c = b(0);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    if (c == 0xE0 && b(1) < 0xA0) return 0;   // overlong
    if (c == 0xED && b(1) >= 0xA0) return 0;  // UTF-16 surrogate
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if (c == 0xF0 && b(1) < 0x90) return 0;   // overlong
    if (c == 0xF4 && b(1) >= 0x90) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

}  // namespace

void JsonWriter::NewLine() {
  if (indent_ <= 0) return;
  out_.push_back('\n');
  out_.append(stack_.size() * static_cast<std::size_t>(indent_), ' ');
}

void JsonWriter::BeforeValue() {
  if (stack_.empty()) {
    PINPOOL_CHECK(!wrote_top_, "JsonWriter: a second top-level value");
    wrote_top_ = true;
    return;
  }
  if (stack_.back() == Frame::kObject) {
    PINPOOL_CHECK(key_pending_, "JsonWriter: a value inside an object without a Key");
    key_pending_ = false;
    return;  // Key wrote the separator
  }
  if (!first_.back()) out_.push_back(',');
  first_.back() = false;
  NewLine();
}

JsonWriter& JsonWriter::Key(std::string_view name) {
  PINPOOL_CHECK(!stack_.empty() && stack_.back() == Frame::kObject && !key_pending_,
                "JsonWriter: Key(\"%.*s\") outside an object or twice in a row",
                static_cast<int>(name.size()), name.data());
  if (!first_.back()) out_.push_back(',');
  first_.back() = false;
  NewLine();
  AppendEscaped(name);
  out_.append(indent_ > 0 ? ": " : ":");
  key_pending_ = true;
  return *this;
}

JsonWriter& JsonWriter::BeginObject() {
  BeforeValue();
  out_.push_back('{');
  stack_.push_back(Frame::kObject);
  first_.push_back(true);
  return *this;
}

JsonWriter& JsonWriter::BeginArray() {
  BeforeValue();
  out_.push_back('[');
  stack_.push_back(Frame::kArray);
  first_.push_back(true);
  return *this;
}

void JsonWriter::Close(Frame frame, char bracket) {
  PINPOOL_CHECK(!stack_.empty() && stack_.back() == frame && !key_pending_,
                "JsonWriter: unbalanced %c", bracket);
  const bool empty = first_.back();
  stack_.pop_back();
  first_.pop_back();
  if (!empty) NewLine();
  out_.push_back(bracket);
}

JsonWriter& JsonWriter::EndObject() {
  Close(Frame::kObject, '}');
  return *this;
}

JsonWriter& JsonWriter::EndArray() {
  Close(Frame::kArray, ']');
  return *this;
}

void JsonWriter::AppendEscaped(std::string_view text) {
  out_.push_back('"');
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    switch (c) {
      case '"':
        out_.append("\\\"");
        ++i;
        continue;
      case '\\':
        out_.append("\\\\");
        ++i;
        continue;
      case '\n':
        out_.append("\\n");
        ++i;
        continue;
      case '\t':
        out_.append("\\t");
        ++i;
        continue;
      case '\r':
        out_.append("\\r");
        ++i;
        continue;
      default:
        break;
    }
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      absl::StrAppendFormat(&out_, "\\u%04x", static_cast<unsigned char>(c));
      ++i;
      continue;
    }
    const std::size_t n = Utf8Length(text.substr(i));
    if (n == 0) {
      out_.append("\\ufffd");
      ++i;
      continue;
    }
    out_.append(text.substr(i, n));
    i += n;
  }
  out_.push_back('"');
}

JsonWriter& JsonWriter::String(std::string_view value) {
  BeforeValue();
  AppendEscaped(value);
  return *this;
}

JsonWriter& JsonWriter::Uint(std::uint64_t value) {
  BeforeValue();
  absl::StrAppendFormat(&out_, "%d", value);
  return *this;
}

JsonWriter& JsonWriter::Int(std::int64_t value) {
  BeforeValue();
  absl::StrAppendFormat(&out_, "%d", value);
  return *this;
}

JsonWriter& JsonWriter::Double(double value) {
  BeforeValue();
  if (!std::isfinite(value)) {
    out_.append("null");
    return *this;
  }
  // The shortest text that reads back as the same double; always with a '.' or an exponent, so
  // that readers keep it a float.
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  PINPOOL_CHECK(ec == std::errc(), "JsonWriter: cannot format a double");
  std::string_view text(buf, static_cast<std::size_t>(end - buf));
  out_.append(text);
  if (text.find_first_of(".eE") == std::string_view::npos) out_.append(".0");
  return *this;
}

JsonWriter& JsonWriter::Bool(bool value) {
  BeforeValue();
  out_.append(value ? "true" : "false");
  return *this;
}

JsonWriter& JsonWriter::Null() {
  BeforeValue();
  out_.append("null");
  return *this;
}

JsonWriter& JsonWriter::Field(std::string_view name, const std::optional<std::uint64_t>& value) {
  Key(name);
  return value ? Uint(*value) : Null();
}

JsonWriter& JsonWriter::Field(std::string_view name, const std::optional<std::string>& value) {
  Key(name);
  return value ? String(*value) : Null();
}

std::string JsonWriter::Take() && {
  PINPOOL_CHECK(done(), "JsonWriter: Take() before the document is complete");
  out_.push_back('\n');
  return std::move(out_);
}

}  // namespace pinpool::internal
