// Giving a chunk back because its backing must go (Arena::BeginGiveBack and FinishGiveBack in
// arena.h have the contract; docs/backing.md the policy). Unlike a trim, the chunk may hold live
// blocks and granted ones: the first step only withdraws it (nothing carves from it, nothing
// trims it, its frees go to the pool's slow path for good), so that the pool can revoke its grants
// and have the heap forget it; the second deregisters, unmaps and closes it, as a trim does, but
// leaves its slot given back for the arena's life instead of empty: a late free of one of its
// blocks then finds no chunk there, never a new one.
//
// Thread safety: as the arena. BeginGiveBack under the pool's grant lock (see SetGranted);
// FinishGiveBack once for each BeginGiveBack, by the thread that began it.
#include "absl/strings/str_format.h"
#include "arena/arena.h"
#include "os/lease.h"
#include "util/check.h"

namespace pinpool::internal {

absl::StatusOr<ChunkOwner> Arena::BeginGiveBack(std::uint32_t index) {
  MutexLock lock(&mu_);
  if (quiesced_) {
    return absl::FailedPreconditionError(
        "the pool is quiesced (Pool::Quiesce): its chunks are the successor's, not to give back");
  }
  if (index >= max_chunks_ || slots_[index].state != Slot::kReady) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "chunk %d is not a ready chunk of this pool (being added, trimmed or given back already)",
        index));
  }
  const std::size_t size = config_.chunk_size;
  slots_[index].state = Slot::kGivingBack;
  --ready_;
  ++withdrawn_count_;
  uncarved_ -= size - slots_[index].carved;
  uncarved_now_.store(uncarved_, std::memory_order_relaxed);
  slots_taken_now_.store(SlotsTakenLocked(), std::memory_order_relaxed);
  const ChunkOwner was = owners_[index].load(std::memory_order_relaxed);
  SetOwnerLocked(index,
                 {.kind = ChunkOwner::kWithdrawn, .was = was.kind, .heap_class = was.heap_class});
  table_[index].fetch_or(kSlowFreeTag, std::memory_order_release);
  return was;
}

void Arena::FinishGiveBack(std::uint32_t index, absl::FunctionRef<void()> before_close) {
  const std::size_t size = config_.chunk_size;
  MutexLock lock(&mu_);
  PINPOOL_CHECK(index < max_chunks_ && slots_[index].state == Slot::kGivingBack,
                "internal: FinishGiveBack(%u) of a chunk not being given back", index);
  ChunkInfo& c = *slots_[index].chunk;
  os::ChunkFile file = std::move(slots_[index].file);
  const bool registered = !registrations_ended_;
  mu_.Unlock();
  // The lease goes last (a truncate waiting for it proceeds): no device and no mapping reaches
  // the pages by then.
  TakeDown(c, std::move(file), registered, before_close);
  mu_.Lock();
  for (std::size_t d = 0; d < c.domain_count; ++d) domain_counters_[d].registered_bytes -= size;
  table_[index].store(kSlowFreeTag, std::memory_order_release);
  retired_.push_back(std::move(slots_[index].chunk));
  slots_[index].placement = {};
  slots_[index].state = Slot::kGivenBack;
  chunk_done_.NotifyAll();
}

std::vector<std::uint32_t> Arena::BrokenLeases(std::size_t max_checks) {
  std::vector<std::uint32_t> broken;
  MutexLock lock(&mu_);
  if (quiesced_) return broken;  // the chunks are being handed over: their leases are released
  std::size_t checks = 0;
  for (std::size_t n = 0; n < slots_used_ && checks < max_checks; ++n) {
    const std::size_t i = lease_cursor_;
    lease_cursor_ = i + 1 < slots_used_ ? i + 1 : 0;
    if (slots_[i].state != Slot::kReady || slots_[i].file.path().empty()) continue;
    ++checks;
    if (!slots_[i].file.leased()) {
      // An adopted chunk's file: leased once its predecessor's descriptions are all closed
      // (a write lease needs the file's one open file description); until then, unprotected.
      slots_[i].file.set_leased(
          os::TakeWriteLease(slots_[i].file.fd(), slots_[i].file.path().c_str()).ok());
      continue;
    }
    if (!os::LeaseHeld(slots_[i].file.fd())) broken.push_back(static_cast<std::uint32_t>(i));
  }
  return broken;
}

}  // namespace pinpool::internal
