// The one check of PoolOptions: what Pool::Create refuses, and why, in the words a user acts on.
// pinpool-info's plan asks the same function, so the tool can never disagree with the library.
// Pure functions, but for a backing directory, which is looked at (stat, statfs, access);
// thread-safe.
#ifndef PINPOOL_POOL_VALIDATE_OPTIONS_H_
#define PINPOOL_POOL_VALIDATE_OPTIONS_H_

#include <cstddef>

#include "absl/status/status.h"
#include "os/os.h"
#include "pinpool/io_uring.h"
#include "pinpool/options.h"

namespace pinpool::internal {

inline constexpr std::size_t kMinChunkSize = 2 * kMiB;
// The largest chunk: the default domain pins each chunk as one io_uring fixed buffer.
inline constexpr std::size_t kMaxChunkSize = IoUringDomain::kMaxBufferBytes;

// OK, or kInvalidArgument naming the field, its value and the rule: chunk_size a power of two
// in [kMinChunkSize, kMaxChunkSize]; budget at least one chunk; initial_size (in whole chunks)
// within the budget (in whole chunks); a required page size no larger than a chunk; at most
// kMaxDomains domains, none null; a backing directory only with BackingKind::kFiles, and then
// one chunks can be files in (os::CheckBackingDirectory: exists, writable, tmpfs or hugetlbfs
// with a page size the policy allows; kInvalidArgument or kFailedPrecondition).
// Then ValidateClasses.
absl::Status ValidatePoolOptions(const PoolOptions& options);

// Named buffer classes besides the default one (PoolOptions::classes; class ids are one byte of
// the chunk-owner map, and 0 is the default class).
inline constexpr std::size_t kMaxBufferClasses = 254;
// OK, or kInvalidArgument naming the class: each named (not "default") and named once; a cap
// (in whole chunks, rounded down) at least one chunk, at least the reservation (rounded up) and
// within the budget; the reservations together within the budget (each class listed).
absl::Status ValidateClasses(const PoolOptions& options);

// The os room's words for PoolOptions::backing (the arena names each chunk's file).
os::BackingSpec ToBackingSpec(const Backing& backing);

}  // namespace pinpool::internal

#endif  // PINPOOL_POOL_VALIDATE_OPTIONS_H_
