// GrantRegistry: the bookkeeping of granted and held blocks (see registry.h).
#include "pool/grants/registry.h"

#include <algorithm>

#include "heap/size_class.h"
#include "util/check.h"

namespace pinpool::internal {

void GrantRegistry::EntriesChanged(const void* block, int delta) {
  const ChunkInfo* chunk = arena_->ChunkOf(block);
  PINPOOL_DCHECK(chunk != nullptr);
  const std::uintptr_t page = reinterpret_cast<std::uintptr_t>(block) >> kPageShift;
  std::size_t& in_chunk = chunk_entries_[chunk->index];
  std::size_t& on_page = page_entries_[page];
  if (delta > 0) {
    // Tagged before the grant is made: the inline free of the block calls the library from now.
    if (on_page++ == 0) tag_page_(block, true);
    if (in_chunk++ == 0) arena_->SetGranted(block, true);
    return;
  }
  PINPOOL_DCHECK(in_chunk > 0 && on_page > 0);
  if (--on_page == 0) {
    tag_page_(block, false);
    page_entries_.erase(page);
  }
  if (--in_chunk == 0) {
    arena_->SetGranted(block, false);
    chunk_entries_.erase(chunk->index);
  }
}

void GrantRegistry::AddLocked(void* block, std::size_t size, GrantHolder* holder,
                              std::uint64_t id) {
  auto [it, inserted] = entries_.try_emplace(reinterpret_cast<std::uintptr_t>(block));
  Entry& e = it->second;
  // A held block is not live: it cannot be granted again (the caller checks ReachableLocked).
  PINPOOL_DCHECK(!e.freed);
  if (inserted) {
    e.size = size;
    EntriesChanged(block, +1);
  }
  e.grants.emplace_back(holder, id);
}

void GrantRegistry::EndLocked(void* block, GrantHolder* holder, std::uint64_t id) {
  auto it = entries_.find(reinterpret_cast<std::uintptr_t>(block));
  PINPOOL_CHECK(it != entries_.end(), "pinpool: grant %llu ended on %p, which has no grants",
                static_cast<unsigned long long>(id), block);
  Entry& e = it->second;
  std::erase(e.grants, std::make_pair(holder, id));
  if (!e.grants.empty()) return;
  if (e.freed) {
    released_.push_back({block, e.freed_size});
    --counters_.held_blocks;
    counters_.held_bytes -= e.size;
  }
  entries_.erase(it);
  EntriesChanged(block, -1);
}

GrantRegistry::FreeOutcome GrantRegistry::OnFreeLocked(void* block, std::size_t size,
                                                       GrantLock& lock) {
  auto it = entries_.find(reinterpret_cast<std::uintptr_t>(block));
  if (it == entries_.end()) return FreeOutcome::kNotGranted;
  Entry& e = it->second;
  if (e.freed) return FreeOutcome::kAlreadyHeld;
  e.freed = true;
  e.freed_size = size;
  e.freed_at = std::chrono::steady_clock::now();
  ++counters_.held_blocks;
  counters_.held_bytes += e.size;
  ++counters_.held_ever;
  // Revoking may end grants at once (EndLocked erases from e.grants, or the whole entry): walk
  // a copy, and do not touch `e` afterwards.
  const auto grants = e.grants;
  for (const auto& [holder, id] : grants) holder->RevokeForFree(lock, id);
  return FreeOutcome::kHeld;
}

std::vector<void*> GrantRegistry::RevokeChunkLocked(std::uint32_t index, GrantLock& lock) {
  std::vector<void*> held;
  std::vector<std::pair<GrantHolder*, std::uint64_t>> grants;
  for (const auto& [block, e] : entries_) {
    const ChunkInfo* chunk = arena_->ChunkOf(reinterpret_cast<const void*>(block));
    if (chunk == nullptr || chunk->index != index) continue;
    if (e.freed) held.push_back(reinterpret_cast<void*>(block));
    grants.insert(grants.end(), e.grants.begin(), e.grants.end());
  }
  // Revoking may end grants at once, erasing entries: walk the copy.
  for (const auto& [holder, id] : grants) holder->RevokeForFree(lock, id);
  return held;
}

bool GrantRegistry::ReachableLocked(const void* block) const {
  return entries_.contains(reinterpret_cast<std::uintptr_t>(block));
}

bool GrantRegistry::HeldLocked(const void* block) const {
  auto it = entries_.find(reinterpret_cast<std::uintptr_t>(block));
  return it != entries_.end() && it->second.freed;
}

std::vector<GrantRegistry::Released> GrantRegistry::TakeReleasedLocked() {
  return std::exchange(released_, {});
}

GrantStats GrantRegistry::Stats() {
  MutexLock lock(&mu_);
  GrantStats s = counters_;
  s.connections = holders_;
  const auto now = std::chrono::steady_clock::now();
  for (const auto& [block, e] : entries_) {
    if (!e.freed) continue;
    const double age = std::chrono::duration<double>(now - e.freed_at).count();
    std::size_t i = 0;
    while (i < HeldAges::kUpperSeconds.size() && age > HeldAges::kUpperSeconds[i]) ++i;
    ++s.held_ages.blocks[i];
    s.held_ages.sum_seconds += age;
    s.held_ages.bytes[i] += e.size;
  }
  return s;
}

}  // namespace pinpool::internal
