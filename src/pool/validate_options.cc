// ValidatePoolOptions (see validate_options.h).
#include "pool/validate_options.h"

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
  return absl::OkStatus();
}

}  // namespace pinpool::internal
