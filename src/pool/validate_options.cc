// ValidatePoolOptions (see validate_options.h).
#include "pool/validate_options.h"

#include <string>

#include "absl/strings/str_format.h"
#include "os/os.h"
#include "util/bytes.h"
#include "util/status_macros.h"

namespace pinpool::internal {

os::BackingSpec ToBackingSpec(const Backing& backing) {
  os::BackingSpec spec;
  switch (backing.kind) {
    case BackingKind::kAnonymous:
      spec.kind = os::BackingSpec::Kind::kAnonymous;
      break;
    case BackingKind::kMemfd:
      spec.kind = os::BackingSpec::Kind::kMemfd;
      break;
    case BackingKind::kFiles:
      spec.kind = os::BackingSpec::Kind::kFile;
      spec.directory = backing.directory;
      break;
  }
  return spec;
}

absl::Status ValidatePoolOptions(const PoolOptions& o) {
  if (!IsPowerOfTwo(o.chunk_size) || o.chunk_size < kMinChunkSize || o.chunk_size > kMaxChunkSize) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "PoolOptions::chunk_size is %s; it must be a power of two from %s to %s",
        FormatBytes(o.chunk_size), FormatBytes(kMinChunkSize), FormatBytes(kMaxChunkSize)));
  }
  if (o.budget < o.chunk_size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("PoolOptions::budget (%s) is smaller than one chunk (%s)",
                        FormatBytes(o.budget), FormatBytes(o.chunk_size)));
  }
  // initial_size rounds up to chunks, the budget down: compare what each really means.
  if ((o.initial_size + o.chunk_size - 1) / o.chunk_size > o.budget / o.chunk_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "PoolOptions::initial_size (%s, %s in whole chunks) is larger than the budget (%s, %s "
        "in whole chunks of %s)",
        FormatBytes(o.initial_size),
        FormatBytes((o.initial_size + o.chunk_size - 1) / o.chunk_size * o.chunk_size),
        FormatBytes(o.budget), FormatBytes(o.budget / o.chunk_size * o.chunk_size),
        FormatBytes(o.chunk_size)));
  }
  if (o.require_page_size && PageBytes(o.page_size) > o.chunk_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "PoolOptions::require_page_size asks for %s pages, larger than chunk_size %s",
        PageSizeName(o.page_size), FormatBytes(o.chunk_size)));
  }
  if (o.domains.size() > kMaxDomains) {
    return absl::InvalidArgumentError(
        absl::StrFormat("PoolOptions::domains has %d entries; at most %d are supported",
                        o.domains.size(), kMaxDomains));
  }
  for (const auto& d : o.domains) {
    if (d == nullptr) return absl::InvalidArgumentError("PoolOptions::domains holds a null domain");
  }
  if (o.numa_node < kNoNumaNode) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "PoolOptions::numa_node is %d: name a node (>= 0), kDeviceNumaNode or kNoNumaNode",
        o.numa_node));
  }
  if (o.low_watermark > o.budget) {
    return absl::InvalidArgumentError(
        absl::StrFormat("PoolOptions::low_watermark (%s) is larger than the budget (%s)",
                        FormatBytes(o.low_watermark), FormatBytes(o.budget)));
  }
  if (o.backing.kind != BackingKind::kFiles && !o.backing.directory.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "PoolOptions::backing.directory is %s but backing.kind is not BackingKind::kFiles: the "
        "directory would be ignored",
        o.backing.directory));
  }
  if (o.backing.kind == BackingKind::kFiles) {
    PINPOOL_RETURN_IF_ERROR(os::CheckBackingDirectory(o.backing.directory, o.page_size,
                                                      o.require_page_size, o.chunk_size)
                                .status());
  }
  return ValidateClasses(o);
}

// Classes are accounted in whole chunks (docs/classes.md): compare what each number means in
// chunks, and say so when rounding is what made it fail.
absl::Status ValidateClasses(const PoolOptions& o) {
  if (o.classes.empty()) return absl::OkStatus();
  const std::size_t chunk = o.chunk_size;
  const std::size_t budget_chunks = o.budget / chunk;
  if (o.classes.size() > kMaxBufferClasses) {
    return absl::InvalidArgumentError(
        absl::StrFormat("PoolOptions::classes has %d classes; at most %d are supported",
                        o.classes.size(), kMaxBufferClasses));
  }
  std::size_t reserved_chunks = 0;
  for (std::size_t i = 0; i < o.classes.size(); ++i) {
    const BufferClass& c = o.classes[i];
    if (c.name.empty() || c.name == "default") {
      return absl::InvalidArgumentError(absl::StrFormat(
          "PoolOptions::classes[%d] is named \"%s\": name each class, and not \"default\" "
          "(the class of Allocate without a class)",
          i, c.name));
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (o.classes[j].name == c.name) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "PoolOptions::classes[%d] and classes[%d] are both named \"%s\"", j, i, c.name));
      }
    }
    const std::size_t reserve = (c.reserved + chunk - 1) / chunk;
    const std::size_t cap = c.cap == 0 ? budget_chunks : c.cap / chunk;
    if (c.cap != 0 && (cap == 0 || cap < reserve)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "class \"%s\": cap %s (%d whole chunks of %s) is below its reservation %s (%d chunks, "
          "rounded up): raise the cap or lower the reservation",
          c.name, FormatBytes(c.cap), cap, FormatBytes(chunk), FormatBytes(c.reserved), reserve));
    }
    if (cap > budget_chunks) {
      return absl::InvalidArgumentError(
          absl::StrFormat("class \"%s\": cap %s is above the pool's budget %s", c.name,
                          FormatBytes(c.cap), FormatBytes(budget_chunks * chunk)));
    }
    reserved_chunks += reserve;
  }
  if (reserved_chunks > budget_chunks) {
    std::string each;
    for (const BufferClass& c : o.classes) {
      absl::StrAppendFormat(&each, "%s%s: %s", each.empty() ? "" : ", ", c.name,
                            FormatBytes((c.reserved + chunk - 1) / chunk * chunk));
    }
    return absl::InvalidArgumentError(absl::StrFormat(
        "the classes' reservations (%s; %s in all, in whole chunks of %s) are more than the "
        "budget (%s): raise PoolOptions::budget or lower the reservations",
        each, FormatBytes(reserved_chunks * chunk), FormatBytes(chunk),
        FormatBytes(budget_chunks * chunk)));
  }
  return absl::OkStatus();
}

}  // namespace pinpool::internal
