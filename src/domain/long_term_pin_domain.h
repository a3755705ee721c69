// The default domain's construction with a table size of the caller's choosing, so that tests can
// fill tables with a few chunks. Applications use MakeLongTermPinDomain (pinpool/domain.h).
#ifndef PINPOOL_DOMAIN_LONG_TERM_PIN_DOMAIN_H_
#define PINPOOL_DOMAIN_LONG_TERM_PIN_DOMAIN_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "pinpool/domain.h"

namespace pinpool::internal {

// Slots of each private io_uring table MakeLongTermPinDomain uses (the kernel allows up to
// 16384; a table's slot array is kernel memory, so a small pool should not hold thousands).
inline constexpr std::uint32_t kLongTermPinSlotsPerTable = 1024;

// MakeLongTermPinDomain with tables of `slots_per_table` chunks (1 .. 16384).
absl::StatusOr<std::shared_ptr<Domain>> MakeLongTermPinDomain(std::uint32_t slots_per_table);

// Tables (rings) a domain made by the above holds now; 0 for any other domain.
std::size_t LongTermPinTables(const Domain& domain);

}  // namespace pinpool::internal

#endif  // PINPOOL_DOMAIN_LONG_TERM_PIN_DOMAIN_H_
