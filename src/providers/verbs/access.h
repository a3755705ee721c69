// Whether a device can honour a VerbsAccess: checked once when a verbs domain is opened or
// wrapped, so that Register never meets a refusal it could have predicted and the user gets
// the reason (which capability is missing, what to change) instead of ibv_reg_mr's EINVAL.
// Pure function; thread-safe.
#ifndef PINPOOL_PROVIDERS_VERBS_ACCESS_H_
#define PINPOOL_PROVIDERS_VERBS_ACCESS_H_

#include <string>

#include "absl/status/status.h"
#include "pinpool/verbs.h"
#include "providers/verbs/device.h"

namespace pinpool::internal {

// OK when `device` (described by `caps`) can register memory with `access`. kInvalidArgument
// for combinations verbs forbids (remote write or atomics without local write); kUnimplemented
// naming the missing capability (on-demand paging for RC READ and WRITE; atomics).
absl::Status CheckVerbsAccess(const VerbsAccess& access, const VerbsDeviceCaps& caps,
                              const std::string& device);

}  // namespace pinpool::internal

#endif  // PINPOOL_PROVIDERS_VERBS_ACCESS_H_
