// This process's chunks in flight, of every pool: claimed by an arena and not yet published or
// dropped. What they will pin (VmPin), lock (VmLck) and charge to the memory cgroup is not in the
// kernel's counters yet, so an arena checking its next chunk against a limit counts all of them,
// not only its own: pools growing side by side, each counting only its own chunks, could overshoot
// a limit together (the soak's pools share one memory cgroup).
//
// A claim adds first and checks the totals after (Claim), so two arenas claiming at once cannot
// both pass on the same headroom: either may be refused when only one would have fit, neither
// overshoots. Lock-free: arenas call it under their own mutex. A forked child starts at zero: its
// parent's growth is not its own.
#pragma once

#include <cstddef>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"

namespace pinpool::internal {

// What one chunk, or a total of chunks, adds to the three counters.
struct GrowthCharge {
  std::size_t pin = 0;     // to VmPin (bytes times the domains that pin long-term)
  std::size_t lock = 0;    // to VmLck (mlock)
  std::size_t cgroup = 0;  // to the memory cgroup's usage
};

// Adds `chunk` to the process's chunks in flight and runs `check` on the totals with it; if the
// check refuses, takes `chunk` back out and returns the refusal. After OK, the caller ends the
// claim with Unclaim(chunk) when the chunk is published or dropped.
absl::Status ClaimGrowth(const GrowthCharge& chunk,
                         absl::FunctionRef<absl::Status(const GrowthCharge& total)> check);
void UnclaimGrowth(const GrowthCharge& chunk);

// The totals now (for a check of several chunks before any is claimed: an adoption's).
GrowthCharge GrowthInFlight();

}  // namespace pinpool::internal
