// Pool::GiveBack and the background work's lease check (pinpool/pool.h and
// pool/sharing/lost_chunks.h have the contract; docs/backing.md the policy). The order is what
// makes it safe, one named step each: (1) withdraw (the arena stops carving, the chunk table sends
// every free of it here, new grants are refused) and revoke every grant on it; (2) the owner the
// arena's record names for it loses it (LostBlocks: a heap forgets it, an array loses its run, an
// adoption its handed-over blocks: what the application lost); (3) wait until every revocation
// is confirmed (AwaitRevocations); (4) only then deregister, unmap and close the file (Finish):
// the lease is released last, so a process truncating the file waits until no device and no
// mapping reaches its pages.
#include <algorithm>
#include <chrono>
#include <thread>

#include "absl/strings/str_format.h"
#include "arena/arena.h"
#include "heap/heap.h"
#include "pinpool/grant_lock.h"
#include "pinpool/pool.h"
#include "pool/grants/registry.h"
#include "pool/sharing/lost_chunks.h"
#include "pool/sharing/sharing.h"
#include "util/status_macros.h"

namespace pinpool {
PINPOOL_ABI_BEGIN

namespace {

// Step 2: the live blocks the chunk's owner (`was`, what BeginGiveBack found) loses with it, less
// `held` (sorted): blocks the application freed that grants held are not lost to it.
absl::StatusOr<std::vector<LostBlock>> LostBlocks(internal::ChunkOwner was, std::uint32_t index,
                                                  std::uintptr_t base, std::size_t chunk_size,
                                                  internal::Heap& heap, internal::Sharing& sharing,
                                                  const std::vector<void*>& held) {
  std::vector<LostBlock> lost;
  const auto add = [&](void* data, std::size_t size) {
    if (!std::binary_search(held.begin(), held.end(), data)) lost.push_back({data, size});
  };
  switch (was.kind) {
    case internal::ChunkOwner::kHeap: {
      // The heap forgets the chunk (its class's heap: `heap`); its live blocks are lost.
      PINPOOL_ASSIGN_OR_RETURN(const std::vector<internal::Heap::LostBlock> live,
                               heap.ForgetChunk(base));
      for (const internal::Heap::LostBlock& b : live) add(b.data, b.size);
      break;
    }
    case internal::ChunkOwner::kArray:  // a live array's run (pool/arrays.h): lost, whole
      lost.push_back({reinterpret_cast<void*>(base), chunk_size});
      break;
    case internal::ChunkOwner::kAdopted:
      // Blocks a predecessor handed over live outside the heap (pool/sharing/sharing.h).
      for (const auto& [data, size] : sharing.ForgetChunk(index)) add(data, size);
      break;
    default:  // kUnowned, kArrayHeld (a freed array's run): nothing is lost
      break;
  }
  return lost;
}

// Step 3: every grant on chunk `index` revoked and confirmed: polled (holders confirm under the
// grant lock, often from the application's completion polling, which has no one to notify).
absl::Status AwaitRevocations(Pool& pool, internal::GrantRegistry& grants, std::uint32_t index,
                              std::chrono::nanoseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::size_t reachable = 0;
    {
      GrantLock lock(pool);
      reachable = grants.ChunkEntriesLocked(index);
    }
    if (reachable == 0) return absl::OkStatus();
    if (std::chrono::steady_clock::now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "chunk %d: %d blocks on it are still reachable through grants being revoked (poll the "
          "grant holders' completions); it stays withdrawn and mapped until they are confirmed: "
          "call GiveBack again",
          index, reachable));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// Step 4: deregister, unmap and close the chunk, with its report recorded once deregistered and
// unmapped, before the lease goes: a process whose truncate waited for the lease finds the report
// when its truncate returns.
void Finish(internal::Arena& arena, internal::TakeBack& t, LostChunk report) {
  arena.FinishGiveBack(report.index, [&] {
    internal::MutexLock lock(&t.mu);
    ++t.chunks_given_back;
    t.lost_blocks += report.blocks.size();
    for (const LostBlock& b : report.blocks) t.lost_bytes += b.size;
    t.reports.push_back(std::move(report));
  });
}

}  // namespace

absl::Status Pool::GiveBack(const void* address, std::chrono::nanoseconds timeout) {
  CheckAlive("GiveBack");
  if (arena_->OwnerOf(address).kind == internal::ChunkOwner::kUnmapped) {
    return absl::InvalidArgumentError(
        absl::StrFormat("GiveBack(%p): not in a chunk of this pool", address));
  }
  const std::uintptr_t off = reinterpret_cast<std::uintptr_t>(address) - head_.range_base;
  return GiveBackChunk(static_cast<std::uint32_t>(off >> head_.chunk_shift),
                       "the application asked (Pool::GiveBack)", timeout);
}

absl::Status Pool::GiveBackChunk(std::uint32_t index, const char* reason,
                                 std::chrono::nanoseconds timeout) {
  internal::TakeBack& t = *take_back_;
  internal::MutexLock give(&t.give_mu);
  const std::uintptr_t base = head_.range_base + (std::uintptr_t{index} << head_.chunk_shift);
  auto it = t.pending.find(index);
  if (it == t.pending.end()) {
    if (arena_->Withdrawn(reinterpret_cast<const void*>(base))) return absl::OkStatus();  // done
    // Step 1: withdraw the chunk and revoke every grant on it, under the grant lock (no grant
    // begins on it in between).
    internal::ChunkOwner was;
    std::vector<void*> held;
    {
      GrantLock lock(*this);
      PINPOOL_ASSIGN_OR_RETURN(was, arena_->BeginGiveBack(index));
      held = grants_->RevokeChunkLocked(index, lock);
    }
    it = t.pending
             .emplace(index,
                      internal::TakeBack::Pending{.reason = reason, .forgotten = false, .lost = {}})
             .first;
    std::sort(held.begin(), held.end());
    // On error the chunk stays withdrawn and mapped: nothing hands it out.
    PINPOOL_ASSIGN_OR_RETURN(
        it->second.lost, LostBlocks(was, index, base, arena_->chunk_size(),
                                    HeapOf(reinterpret_cast<const void*>(base)), *sharing_, held));
    it->second.forgotten = true;
  }
  if (!it->second.forgotten) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "chunk %d is withdrawn but the heap could not forget it (no membarrier): it stays mapped",
        index));
  }
  PINPOOL_RETURN_IF_ERROR(AwaitRevocations(*this, *grants_, index, timeout));
  LostChunk report{.index = index,
                   .base = base,
                   .size = arena_->chunk_size(),
                   .reason = std::move(it->second.reason),
                   .blocks = std::move(it->second.lost)};
  t.pending.erase(it);
  Finish(*arena_, t, std::move(report));
  return absl::OkStatus();
}

std::vector<LostChunk> Pool::TakeLostChunks() {
  CheckAlive("TakeLostChunks");
  internal::MutexLock lock(&take_back_->mu);
  return std::exchange(take_back_->reports, {});
}

void Pool::TakeBackBrokenLeases() {
  // A broken lease holds the breaker for /proc/sys/fs/lease-break-time seconds at most: a short
  // wait per pass, and the pending chunks are finished by the next passes. At most kChecks leases
  // per pass (an F_GETLEASE costs about 0.4 us here: under 0.5% of a CPU at a pass per 10 ms,
  // under 50 us of the arena's lock): a pool of N file chunks sees a break within N / 128 passes.
  constexpr auto kWait = std::chrono::milliseconds(20);
  constexpr std::size_t kChecks = 128;
  std::vector<std::uint32_t> chunks = arena_->BrokenLeases(kChecks);
  {
    internal::MutexLock lock(&take_back_->give_mu);
    for (const auto& [index, pending] : take_back_->pending) chunks.push_back(index);
  }
  for (const std::uint32_t index : chunks) {
    GiveBackChunk(index, "another process opened or truncated its file (its lease broke)", kWait)
        .IgnoreError();
  }
}

PINPOOL_ABI_END
}  // namespace pinpool
