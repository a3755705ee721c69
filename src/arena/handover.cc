// Sharing and handover in the arena (arena.h has the contract): the chunks' files for other
// processes, the end of every registration before a handover, and the adoption of a
// predecessor's chunks into the slots they had.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "arena/arena.h"
#include "os/chunk_file.h"
#include "os/lease.h"
#include "util/bytes.h"
#include "util/check.h"
#include "util/status_macros.h"

namespace pinpool::internal {
namespace {

// What an adoption's headroom error says to lower: lowering the successor's budget would not help.
constexpr const char* kAdoptionLower =
    "the pool handed over (the successor registers every chunk it adopts)";

}  // namespace

absl::StatusOr<std::vector<Arena::SharedChunk>> Arena::SharedChunks() const {
  MutexLock lock(&mu_);
  std::vector<SharedChunk> out;
  for (std::size_t i = 0; i < slots_used_; ++i) {
    const os::ChunkFile& f = slots_[i].file;
    if (slots_[i].state != Slot::kReady || f.fd() < 0) continue;
    const int injected = os::InjectedFault(os::Call::kDupFd, config_.chunk_size);
    const int dup = injected != 0 ? -1 : ::fcntl(f.fd(), F_DUPFD_CLOEXEC, 0);
    if (dup < 0) {
      // A chunk left out would be a pool sent in part, said to be whole: the descriptors
      // duplicated so far close with `out`.
      const int err = injected != 0 ? injected : errno;
      return absl::Status(
          err == EMFILE || err == ENFILE ? absl::StatusCode::kResourceExhausted
                                         : absl::StatusCode::kInternal,
          absl::StrFormat("duplicating chunk %d's descriptor to send it (%d of the pool's chunks "
                          "so far): %s (sending a pool needs one more descriptor per chunk for a "
                          "moment: raise the descriptor limit, ulimit -n)",
                          i, out.size(), std::strerror(err)));
    }
    out.push_back({.index = static_cast<std::uint32_t>(i),
                   .fd = os::UniqueFd(dup),
                   .path = f.path(),
                   .sealed = f.sealed(),
                   .hugetlb_page_bytes = f.hugetlb_page_bytes(),
                   .generation = slots_[i].chunk->generation});
  }
  return out;
}

void Arena::Quiesce() {
  MutexLock lock(&mu_);
  quiesced_ = true;  // ClaimLocked and Trim refuse from here on
  while (growing_ != 0 || trimming_ != 0) chunk_done_.Wait(&mu_);
  if (registrations_ended_) return;
  registrations_ended_ = true;
  for (std::size_t i = slots_used_; i-- > 0;) {
    if (slots_[i].state != Slot::kReady && slots_[i].state != Slot::kGivingBack) continue;
    const ChunkInfo& c = *slots_[i].chunk;
    for (std::size_t d = c.domain_count; d-- > 0;) {
      MutexLock serial(&domain_mu_[d]);
      DeregisterTimed(d, c.keys[d]);
      domain_counters_[d].registered_bytes -= c.size;
    }
  }
}

void Arena::HandOverFiles(bool handed_over) {
  MutexLock lock(&mu_);
  PINPOOL_DCHECK(quiesced_);
  handed_over_ = handed_over;
  for (SlotRecord& slot : slots_) {
    os::ChunkFile& f = slot.file;
    if (f.fd() < 0) continue;
    if (handed_over) {
      // A lease left on the description the successor shares would make every later opener
      // wait the lease-break time with nobody to answer (os/lease.h).
      if (f.leased()) os::ReleaseLease(f.fd());
      f.set_leased(false);
      os::UnlockOwnership(f.fd());
    } else {
      os::LockOwnership(f.fd());
      if (!f.path().empty()) f.set_leased(os::TakeWriteLease(f.fd(), f.path().c_str()).ok());
    }
  }
}

absl::Status Arena::CheckAdoptionHeadroomLocked(std::size_t n) const {
  // ClaimLocked checks each chunk with those already claimed; checked here first for all of them,
  // the error names the adoption's figures (not the few claimed when the limit was met), and what
  // the successor can change: lowering its budget would not help.
  const std::size_t size = config_.chunk_size;
  const GrowthCharge chunk = ChargePerChunk();
  GrowthCharge total = GrowthInFlight();
  total.pin += n * chunk.pin;
  total.lock += n * chunk.lock;
  total.cgroup += n * chunk.cgroup;
  absl::Status s = CheckHeadroom(total, kAdoptionLower);
  if (s.ok()) return s;
  return absl::Status(s.code(),
                      absl::StrFormat("adopting %d chunks of %s (%s): %s", n, FormatBytes(size),
                                      FormatBytes(n * size), s.message()));
}

absl::Status Arena::TakeBackFiles() {
  MutexLock lock(&mu_);
  if (!handed_over_) return absl::OkStatus();
  std::vector<int> taken;
  for (SlotRecord& slot : slots_) {
    os::ChunkFile& f = slot.file;
    if (f.fd() < 0) continue;
    if (const int err = os::LockOwnership(f.fd()); err != 0) {
      for (int fd : taken) os::UnlockOwnership(fd);
      if (err == EWOULDBLOCK) {
        return absl::FailedPreconditionError(
            "the pool was handed over and a successor adopted it: a pool is adopted once");
      }
      return absl::ResourceExhaustedError(absl::StrFormat(
          "taking back the ownership lock (flock) of a chunk's file: %s", std::strerror(err)));
    }
    taken.push_back(f.fd());
  }
  handed_over_ = false;
  for (SlotRecord& slot : slots_) {
    os::ChunkFile& f = slot.file;
    if (f.fd() >= 0 && !f.path().empty()) {
      f.set_leased(os::TakeWriteLease(f.fd(), f.path().c_str()).ok());
    }
  }
  return absl::OkStatus();
}

absl::Status Arena::QueueAdoption(std::vector<AdoptedChunk> chunks) {
  std::sort(chunks.begin(), chunks.end(),
            [](const AdoptedChunk& a, const AdoptedChunk& b) { return a.index < b.index; });
  MutexLock lock(&mu_);
  std::vector<std::uint32_t> claimed;
  absl::Status error = CheckAdoptionHeadroomLocked(chunks.size());
  for (const AdoptedChunk& c : chunks) {
    if (!error.ok()) break;
    absl::StatusOr<std::uint32_t> index = ClaimLocked(c.index);
    if (!index.ok()) {
      error = index.status();
      break;
    }
    claimed.push_back(*index);
  }
  if (!error.ok()) {
    for (std::uint32_t i : claimed) DropClaimLocked(i);
    growing_now_.store(growing_, std::memory_order_relaxed);
    slots_taken_now_.store(SlotsTakenLocked(), std::memory_order_relaxed);
    for (AdoptedChunk& c : chunks) c.file.Disown();
    return error;
  }
  for (AdoptedChunk& c : chunks) {
    // Published with the generation it had: the predecessor's handles name it (PublishLocked
    // takes the next).
    slots_[c.index].generation = c.generation - 1;
    slots_[c.index].adopting = std::move(c.file);
    slots_[c.index].adopt_held = c.held;
    if (c.held) ++growing_held_;
    queued_.push_back(c.index);
  }
  return absl::OkStatus();
}

absl::Status Arena::AdoptQueued(const std::atomic<bool>* cancel) {
  MutexLock lock(&mu_);
  std::vector<std::uint32_t> claimed = std::exchange(queued_, {});
  if (claimed.empty()) return absl::OkStatus();
  std::size_t added = 0;
  return BuildClaimedLocked(claimed, config_.reserve_threads, Why::kReserve, nullptr, cancel,
                            &added, /*keep_going=*/true);
}

absl::Status Arena::RetryAdoption(std::uint32_t index) {
  if (index >= max_chunks_) {
    return absl::FailedPreconditionError(absl::StrFormat("no chunk %d in this pool", index));
  }
  MutexLock lock(&mu_);
  while (slots_[index].state == Slot::kGrowing) chunk_done_.Wait(&mu_);
  if (slots_[index].state == Slot::kReady) return absl::OkStatus();
  if (slots_[index].state != Slot::kAdoptFailed) {
    return absl::FailedPreconditionError(
        absl::StrFormat("chunk %d holds no adopted chunk to build again", index));
  }
  // Checked like any growth (the first build may have failed for want of the room).
  PINPOOL_RETURN_IF_ERROR(StartGrowingLocked(kAdoptionLower));
  slots_[index].state = Slot::kGrowing;
  --adopt_failed_;
  if (slots_[index].adopt_held) ++growing_held_;
  growing_now_.store(growing_, std::memory_order_relaxed);
  mu_.Unlock();
  absl::StatusOr<Built> built = Build(index);
  mu_.Lock();
  return PublishLocked(index, std::move(built), Why::kReserve);
}

absl::Status Arena::RetryAdoptions() {
  std::vector<std::uint32_t> failed;
  {
    MutexLock lock(&mu_);
    for (std::uint32_t i = 0; i < slots_used_; ++i) {
      if (slots_[i].state == Slot::kAdoptFailed) failed.push_back(i);
    }
  }
  absl::Status first;
  for (std::uint32_t i : failed) {
    if (absl::Status s = RetryAdoption(i); !s.ok() && first.ok()) first = s;
  }
  return first;
}

std::size_t Arena::failed_adoptions() const {
  MutexLock lock(&mu_);
  return adopt_failed_;
}

bool Arena::AwaitReady(std::uint32_t index) {
  if (index >= max_chunks_) return false;
  MutexLock lock(&mu_);
  while (slots_[index].state == Slot::kGrowing) chunk_done_.Wait(&mu_);
  return slots_[index].state == Slot::kReady;
}

}  // namespace pinpool::internal
