// The pool's face of growth off the allocation path, trim and placement: Replenish and
// NeedsReplenish for an application's event loop, Trim, starting the background work the
// options ask for (pool/background.h). The work itself is the
// arena's (arena/growth.cc, arena/trim.cc) and the heap's.
// Thread safety: as Pool (any thread; Trim and Replenish may race with allocation).
#include <chrono>

#include "arena/arena.h"
#include "heap/heap.h"
#include "pinpool/pool.h"
#include "pool/background.h"
#include "pool/classes.h"
#include "pool/placement.h"

namespace pinpool {
PINPOOL_ABI_BEGIN

namespace {
// How often the background work checks the leases on the chunks' files (up to 128 of them per
// pass, Pool::TakeBackBrokenLeases): a breaker waits this long at most, in a pool of up to 128
// file chunks, before its chunk is being given back.
constexpr std::chrono::milliseconds kLeaseCheckInterval{10};
}  // namespace

bool Pool::NeedsReplenish() const noexcept { return arena_->BelowWatermark(); }

absl::Status Pool::Replenish(std::size_t max_chunks) {
  CheckAlive("Replenish");
  return arena_->Replenish(max_chunks);
}

std::size_t Pool::Trim(std::size_t floor_bytes) {
  CheckAlive("Trim");
  // The named classes' heaps give their idle chunks back first (the ledger counts them out);
  // the background trim policy sees only the default class's heap.
  if (classes_ != nullptr) classes_->ReleaseIdleChunks();
  return internal::TrimIdleChunks(*heap_, *arena_, floor_bytes);
}

absl::Status Pool::StartBackgroundWork(std::chrono::steady_clock::time_point start, bool adopting) {
  const int node = arena_->Stats().growth.numa_node;
  const std::size_t built = arena_->Stats().chunks.size() * arena_->chunk_size();
  absl::StatusOr<std::unique_ptr<internal::BackgroundWork>> work = internal::BackgroundWork::Start(
      *heap_, *arena_,
      {// Without grow_in_background the application keeps the watermark (Replenish).
       .keep_watermark = options_.grow_in_background && options_.low_watermark != 0,
       .trim_every = std::chrono::milliseconds(options_.trim_interval_ms),
       .trim_floor = options_.trim_floor,
       .numa_node = node,
       .workers = options_.background_workers != 0 ? options_.background_workers
                                                   : internal::ReserveThreads(options_, node),
       // Create built only the first chunk when it left the rest to the background.
       .startup_bytes = built < options_.initial_size ? options_.initial_size : 0,
       .adopt = adopting,
       .startup_begin = start,
       .initial_size_seconds = &startup_initial_size_,
       // Files in a directory are leased: a break must be seen well within lease-break-time.
       .check_leases = options_.backing.kind == BackingKind::kFiles ? kLeaseCheckInterval
                                                                    : std::chrono::milliseconds(0),
       .on_lease_check = [this] { TakeBackBrokenLeases(); }});
  if (!work.ok()) return work.status();
  background_ = *std::move(work);
  return absl::OkStatus();
}

bool Pool::Ready() const {
  CheckAlive("Ready");
  return background_ == nullptr || background_->StartupDone();
}

absl::Status Pool::AwaitInitialSize(std::chrono::nanoseconds timeout) const {
  CheckAlive("AwaitInitialSize");
  return background_ == nullptr ? absl::OkStatus() : background_->AwaitStartup(timeout);
}

PINPOOL_ABI_END
}  // namespace pinpool
