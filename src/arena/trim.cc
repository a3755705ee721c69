// Trim: giving whole idle chunks back. A chunk is idle when nothing of it is carved (the heap
// never took it, or handed it back with Arena::ReturnChunk because it holds no block there) and
// no remotely granted block lies in it (its chunk table entry carries no kSlowFreeTag): then no
// block can be live in it and no peer can reach it. Trim takes such a chunk out of the table
// under the lock (slot kTrimming: Carve skips it, growth does not reuse it), then deregisters it
// from every domain, last first, unmaps it and closes its file (memfd and file chunks; a
// directory's file is unlinked) with no lock held, then frees the slot. Its
// ChunkInfo record is retired, not deleted (a lock-free Lookup may still be reading it).
//
// Chunks go highest slot first, so what stays is packed at the front of the range; it stops at
// the floor (mapped bytes) and never takes the room left below the low watermark, which would
// only make the grower add the chunk again.
//
// Thread safety: as the arena; Trim may race with Carve, growth and other Trims.
#include <chrono>

#include "arena/arena.h"
#include "util/check.h"

namespace pinpool::internal {

void Arena::TakeDown(const ChunkInfo& c, os::ChunkFile file, bool registered,
                     absl::FunctionRef<void()> before_close) {
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t d = registered ? c.domain_count : 0; d-- > 0;) {
    MutexLock serial(&domain_mu_[d]);
    DeregisterTimed(d, c.keys[d]);
  }
  os::UnmapChunk(reinterpret_cast<void*>(c.base), config_.chunk_size);
  // Deregistered and unmapped: now its descriptor (and lease), and its name, go too.
  before_close();
  file.Close();
  trim_latency_.RecordSince(t0);
}

std::size_t Arena::Trim(std::size_t floor_bytes) {
  const std::size_t size = config_.chunk_size;
  std::size_t given = 0;
  MutexLock lock(&mu_);
  if (quiesced_) return 0;  // nothing is registered, and the chunks are being handed over
  for (std::size_t i = slots_used_; i-- > 0;) {
    if (ready_ * size < floor_bytes + size) break;  // one more would cross the floor
    if (slots_[i].state != Slot::kReady || slots_[i].carved != 0) continue;
    if ((table_[i].load(std::memory_order_acquire) & kSlowFreeTag) != 0) continue;  // granted
    if (config_.low_watermark != 0 && uncarved_ < config_.low_watermark + size) break;
    ChunkInfo& c = *slots_[i].chunk;
    slots_[i].state = Slot::kTrimming;
    --ready_;
    ++trimming_;
    uncarved_ -= size;
    uncarved_now_.store(uncarved_, std::memory_order_relaxed);
    table_[i].store(kSlowFreeTag, std::memory_order_release);
    SetOwnerLocked(i, {});  // kUnmapped: after the entry, so a chunk found has its owner
    os::ChunkFile file = std::move(slots_[i].file);
    mu_.Unlock();
    TakeDown(c, std::move(file));
    mu_.Lock();
    for (std::size_t d = 0; d < c.domain_count; ++d) domain_counters_[d].registered_bytes -= size;
    retired_.push_back(std::move(slots_[i].chunk));
    slots_[i].placement = {};
    slots_[i].state = Slot::kEmpty;
    --trimming_;
    slots_taken_now_.store(SlotsTakenLocked(), std::memory_order_relaxed);
    ++growth_.trims;
    growth_.trimmed_bytes += size;
    given += size;
    chunk_done_.NotifyAll();
  }
  return given;
}

}  // namespace pinpool::internal
