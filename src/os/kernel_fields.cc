// "Key: value" lines of /proc files (see kernel_fields.h).
#include "os/kernel_fields.h"

#include <charconv>

#include "os/os.h"

namespace pinpool::internal::os {

std::optional<std::string_view> KernelField(std::string_view text, std::string_view key) {
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t nl = text.find('\n', at);
    std::string_view line = text.substr(at, nl == std::string_view::npos ? nl : nl - at);
    at = nl == std::string_view::npos ? text.size() : nl + 1;
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ':') {
      line.remove_prefix(key.size() + 1);
      while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
      return line;
    }
  }
  return std::nullopt;
}

std::optional<std::uint64_t> KernelFieldNumber(std::string_view text, std::string_view key,
                                               int base) {
  const std::optional<std::string_view> value = KernelField(text, key);
  if (!value) return std::nullopt;
  std::uint64_t v = 0;
  const auto [end, err] = std::from_chars(value->data(), value->data() + value->size(), v, base);
  if (err != std::errc() || end == value->data()) return std::nullopt;
  return v;
}

std::optional<std::uint64_t> KernelFieldBytes(std::string_view text, std::string_view key) {
  const std::optional<std::uint64_t> kib = KernelFieldNumber(text, key);  // "123 kB"
  if (!kib) return std::nullopt;
  return *kib << 10;
}

std::optional<std::uint64_t> ProcStatusBytes(std::string_view key) {
  const absl::StatusOr<std::string> status = ReadKernelFile("/proc/self/status");
  if (!status.ok()) return std::nullopt;
  return KernelFieldBytes(*status, key);
}

}  // namespace pinpool::internal::os
