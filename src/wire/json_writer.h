// JsonWriter: the one JSON writer of pinpool, used by PoolStats::ToJson and by pinpool-info, so
// that both print numbers, strings and nesting the same way.
//
// It writes RFC 8259 JSON to a string as the calls come: Begin/End pairs for objects and arrays,
// Key before every member of an object, one value call per value. Commas and indentation are its
// business. Strings are escaped (", \, control characters) and must be UTF-8; invalid bytes
// become U+FFFD so that the output always parses. Integers are written exactly (all 64 bits:
// readers that hold numbers as doubles lose precision above 2^53); a double that is not finite
// becomes null.
//
// Misuse (a value where a key is due, unbalanced End calls, Take before the document is done)
// is a bug in the caller and aborts (PINPOOL_CHECK): a half-written document must never look
// complete.
//
// Not thread-safe: one writer per document.
#ifndef PINPOOL_WIRE_JSON_WRITER_H_
#define PINPOOL_WIRE_JSON_WRITER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pinpool::internal {

class JsonWriter {
 public:
  // `indent` spaces per level, one member or element per line; 0 writes everything on one line.
  explicit JsonWriter(int indent = 2) : indent_(indent) {}

  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  // The name of the next member; only inside an object, once before each value.
  JsonWriter& Key(std::string_view name);

  JsonWriter& String(std::string_view value);
  JsonWriter& Uint(std::uint64_t value);
  JsonWriter& Int(std::int64_t value);
  JsonWriter& Double(double value);
  JsonWriter& Bool(bool value);
  JsonWriter& Null();

  // Key and value in one call, for the common case. The optional forms write null when empty.
  JsonWriter& Field(std::string_view name, std::string_view value) {
    return Key(name).String(value);
  }
  JsonWriter& Field(std::string_view name, const char* value) { return Key(name).String(value); }
  JsonWriter& Field(std::string_view name, const std::string& value) {
    return Key(name).String(value);
  }
  JsonWriter& Field(std::string_view name, bool value) { return Key(name).Bool(value); }
  JsonWriter& Field(std::string_view name, double value) { return Key(name).Double(value); }
  JsonWriter& Field(std::string_view name, std::uint64_t value) { return Key(name).Uint(value); }
  JsonWriter& Field(std::string_view name, unsigned long long value) {
    return Key(name).Uint(value);
  }
  JsonWriter& Field(std::string_view name, unsigned value) { return Key(name).Uint(value); }
  JsonWriter& Field(std::string_view name, std::int64_t value) { return Key(name).Int(value); }
  JsonWriter& Field(std::string_view name, int value) { return Key(name).Int(value); }
  JsonWriter& Field(std::string_view name, const std::optional<std::uint64_t>& value);
  JsonWriter& Field(std::string_view name, const std::optional<std::string>& value);

  // True once exactly one complete top-level value has been written.
  bool done() const noexcept { return stack_.empty() && wrote_top_; }
  // The document, with a final newline. Aborts unless done().
  std::string Take() &&;

 private:
  enum class Frame : std::uint8_t { kObject, kArray };
  void BeforeValue();  // separator and indentation before a value (or a key's value)
  void NewLine();
  void Close(Frame frame, char bracket);
  void AppendEscaped(std::string_view text);

  const int indent_;
  std::string out_;
  std::vector<Frame> stack_;
  std::vector<bool> first_;   // per open frame: nothing written in it yet
  bool key_pending_ = false;  // Key written, its value not yet
  bool wrote_top_ = false;
};

}  // namespace pinpool::internal

#endif  // PINPOOL_WIRE_JSON_WRITER_H_
