// What pinpool's own io_uring code needs of an IoUringDomain beyond its public face
// (pinpool/io_uring.h): the zero-copy sends (pinpool/io_uring_zero_copy.h) keep the domain's
// figure of sends in flight on its rings. Thread-safe.
#ifndef PINPOOL_DOMAIN_IO_URING_DOMAIN_INTERNAL_H_
#define PINPOOL_DOMAIN_IO_URING_DOMAIN_INTERNAL_H_

#include <cstdint>

#include "pinpool/io_uring.h"

namespace pinpool::internal {

// Adds `delta` to the domain's IoUringDomainFigures::kZeroCopyInFlight.
void CountZeroCopyInFlight(IoUringDomain& domain, std::int64_t delta) noexcept;

}  // namespace pinpool::internal

#endif  // PINPOOL_DOMAIN_IO_URING_DOMAIN_INTERNAL_H_
