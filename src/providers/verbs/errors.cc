// The messages of the verbs domain's registration failures: which limit, which numbers, which
// fix. Kept apart from the domain so they can be tested on machines without an RDMA device.
// Pure functions; thread-safe.
#include "providers/verbs/errors.h"

#include <bit>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <string_view>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "domain/memlock.h"
#include "util/bytes.h"

namespace pinpool::internal {
namespace {

std::string AccessNames(const VerbsAccess& a) {
  std::vector<const char*> names;
  if (a.local_write) names.push_back("local_write");
  if (a.trusted_whole_chunk.read) names.push_back("trusted_whole_chunk.read");
  if (a.trusted_whole_chunk.write) names.push_back("trusted_whole_chunk.write");
  if (a.trusted_whole_chunk.atomic) names.push_back("trusted_whole_chunk.atomic");
  if (a.on_demand) names.push_back("on_demand");
  if (names.empty()) return "read-only";
  return absl::StrJoin(names, "+");
}

}  // namespace

absl::Status CheckRegionSize(std::size_t length, std::uint64_t max_mr_size,
                             const std::string& domain) {
  if (length <= max_mr_size) return absl::OkStatus();
  // Splitting a chunk into several regions would give one block several lkeys (a block may
  // straddle the split), and Keys is one record per chunk and domain: the chunk must shrink.
  return absl::InvalidArgumentError(absl::StrFormat(
      "a %s chunk is larger than the device's max_mr_size (%s) for %s; pinpool registers each "
      "chunk as one memory region: lower PoolOptions::chunk_size to at most %s",
      FormatBytes(length), FormatBytes(max_mr_size), domain,
      FormatBytes(std::bit_floor(max_mr_size))));
}

absl::Status RegMrFailed(int err, const RegMrContext& c) {
  switch (err) {
    case ENOMEM:
    case EAGAIN: {
      const bool unlimited = c.memlock.exempt || c.memlock.limit == SIZE_MAX;
      if (!unlimited) {
        const absl::Status s = MemlockRefused("ibv_reg_mr", err, c.length);
        return absl::ResourceExhaustedError(
            absl::StrFormat("%s (RDMA registrations count against RLIMIT_MEMLOCK as VmPin, %s now)",
                            s.message(), FormatBytes(c.memlock.pinned)));
      }
      return absl::ResourceExhaustedError(absl::StrFormat(
          "ibv_reg_mr of %s failed (%s) although this process may pin without limit "
          "(RLIMIT_MEMLOCK %s, CAP_IPC_LOCK %s): the kernel or the device ran out of resources "
          "for registrations (%s holds %d regions, the device allows %d; %s long-term pinned "
          "(VmPin) now): lower PoolOptions::budget or register fewer regions on this device",
          FormatBytes(c.length), std::strerror(err), FormatBytes(c.memlock.limit),
          c.memlock.exempt ? "held" : "not held", c.domain, c.live_regions, c.max_mr,
          FormatBytes(c.memlock.pinned)));
    }
    case EINVAL:
      return absl::InvalidArgumentError(absl::StrFormat(
          "ibv_reg_mr of %s with access %s failed (%s): the device refuses these access rights "
          "for this memory; check the rights in VerbsAccess against the device's capabilities "
          "(ibv_devinfo -v)",
          FormatBytes(c.length), AccessNames(c.access), std::strerror(err)));
    case EFAULT:
      return absl::InvalidArgumentError(absl::StrFormat(
          "ibv_reg_mr of %s failed (%s): the range is not memory the kernel can pin (unmapped, "
          "or PROT_NONE); register only mapped, accessible memory",
          FormatBytes(c.length), std::strerror(err)));
    case EPERM:
    case EACCES:
      return absl::PermissionDeniedError(absl::StrFormat(
          "ibv_reg_mr of %s with access %s failed (%s): the kernel refused to pin the pages "
          "with these rights (a read-only mapping asked for write access?)",
          FormatBytes(c.length), AccessNames(c.access), std::strerror(err)));
    case EOPNOTSUPP:
      return absl::UnimplementedError(absl::StrFormat(
          "ibv_reg_mr of %s with access %s failed (%s): %s cannot register memory this way",
          FormatBytes(c.length), AccessNames(c.access), std::strerror(err), c.domain));
    default:
      return absl::InternalError(absl::StrFormat("ibv_reg_mr of %s with access %s failed (%s)",
                                                 FormatBytes(c.length), AccessNames(c.access),
                                                 std::strerror(err)));
  }
}

}  // namespace pinpool::internal
