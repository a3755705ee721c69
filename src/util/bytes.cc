// FormatBytes: the one rendering of a byte count in messages (binary units, one decimal unless
// exact; SIZE_MAX reads "unlimited", the value limits use for none). A pure function: no state,
// safe from any thread.
#include "util/bytes.h"

#include <cstdint>

#include "absl/strings/str_format.h"

namespace pinpool::internal {

std::string FormatBytes(std::size_t bytes) {
  if (bytes == SIZE_MAX) return "unlimited";
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  if (u == 0) return absl::StrFormat("%d B", bytes);
  if (v == static_cast<double>(static_cast<std::uint64_t>(v)))
    return absl::StrFormat("%.0f %s", v, kUnits[u]);
  return absl::StrFormat("%.1f %s", v, kUnits[u]);
}

}  // namespace pinpool::internal
