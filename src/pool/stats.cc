// PoolStats::ToString: the human-readable form the demo and tools print.
#include "pinpool/stats.h"

#include <cstdint>

#include "absl/strings/str_format.h"
#include "util/bytes.h"

namespace pinpool {

using internal::FormatBytes;

std::string PoolStats::ToString() const {
  std::string out = absl::StrFormat(
      "reserved %s, mapped %s in %d chunks, pinned %s of a %s budget\n"
      "allocated %s in blocks (%s of pages active)\n"
      "%d thread caches, growths %d, failed growths %d\n"
      "RLIMIT_MEMLOCK %s, locked %s, device-pinned %s%s\n",
      FormatBytes(reserved_bytes), FormatBytes(mapped_bytes), chunks.size(),
      FormatBytes(pinned_bytes), FormatBytes(budget_bytes), FormatBytes(allocated_bytes),
      FormatBytes(heap_active_bytes), thread_caches, growths, growth_failures,
      FormatBytes(memlock_limit), FormatBytes(locked_bytes), FormatBytes(device_pinned_bytes),
      memlock_exempt ? " (CAP_IPC_LOCK: limit does not apply)" : "");
  for (const ChunkStats& c : chunks) {
    absl::StrAppendFormat(&out, "  chunk %#x %s, %s pages, %s huge\n", c.base, FormatBytes(c.size),
                          PageSizeName(c.page_size), FormatBytes(c.huge_bytes));
  }
  for (const DomainStats& d : domains) {
    absl::StrAppendFormat(
        &out, "  domain %s (%s): %d registrations, %s registered, %.3f ms total, %.3f ms max\n",
        d.name, DomainKindName(d.kind), d.registrations, FormatBytes(d.registered_bytes),
        d.register_seconds * 1e3, d.max_register_seconds * 1e3);
  }
  return out;
}

}  // namespace pinpool
