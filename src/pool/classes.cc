// PoolClasses (see classes.h): the chunk ledger of a pool's buffer classes.
#include "pool/classes.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "util/bytes.h"
#include "util/status_macros.h"

namespace pinpool::internal {

PoolClasses::PoolClasses(Arena* arena, std::size_t budget_chunks)
    : arena_(arena),
      chunk_size_(arena->chunk_size()),
      chunk_shift_(arena->chunk_shift()),
      base_(arena->range_base()),
      budget_chunks_(budget_chunks) {}

PoolClasses::~PoolClasses() = default;

absl::StatusOr<std::unique_ptr<PoolClasses>> PoolClasses::Create(Arena* arena,
                                                                 const PoolOptions& options) {
  const std::size_t chunk = arena->chunk_size();
  const std::size_t budget_chunks = options.budget / chunk;
  std::unique_ptr<PoolClasses> p(new PoolClasses(arena, budget_chunks));
  const std::size_t slots = arena->range_size() >> arena->chunk_shift();
  p->last_owner_ = std::make_unique<std::uint8_t[]>(slots);
  std::fill_n(p->last_owner_.get(), slots, kNever);
  auto add = [&](std::string name, std::size_t reserved, std::size_t cap, Scrub scrub) {
    auto k = std::make_unique<Class>(p.get(), static_cast<std::uint32_t>(p->classes_.size()));
    k->name = std::move(name);
    k->reserved = reserved;
    k->cap = cap;
    k->scrub = scrub;
    p->classes_.push_back(std::move(k));
  };
  add("default", 0, budget_chunks, Scrub::kNone);
  for (const BufferClass& c : options.classes) {
    add(c.name, (c.reserved + chunk - 1) / chunk, c.cap == 0 ? budget_chunks : c.cap / chunk,
        c.scrub);
  }
  p->heap_ids_ = std::make_unique<std::uint64_t[]>(p->classes_.size());
  for (std::size_t i = 1; i < p->classes_.size(); ++i) {
    Class& k = *p->classes_[i];
    PINPOOL_ASSIGN_OR_RETURN(k.heap_owned,
                             Heap::Create(arena, {.debug_checks = options.debug_checks,
                                                  .source = &k.source,
                                                  .zero_new_spans = k.scrub == Scrub::kOnReuse}));
    k.heap = k.heap_owned.get();
    p->heap_ids_[i] = k.heap->id();
  }
  return p;
}

void PoolClasses::AttachDefault(Heap* heap) {
  classes_[0]->heap = heap;
  heap_ids_[0] = heap->id();
}

std::size_t PoolClasses::FreeUnreservedLocked() const {
  std::size_t kept = 0;
  for (const auto& k : classes_) kept += std::max(k->held, k->reserved);
  return kept < budget_chunks_ ? budget_chunks_ - kept : 0;
}

std::string PoolClasses::Numbers(const Class& k) const {
  std::size_t held = 0;
  std::size_t reserved = 0;
  for (const auto& other : classes_) {
    held += other->held;
    reserved += other->reserved;
  }
  return absl::StrFormat(
      "it holds %d chunks of %s (%s), reserved %s, cap %s; the pool's budget is %s, the classes "
      "hold %s and reserve %s",
      k.held, FormatBytes(chunk_size_), FormatBytes(k.held * chunk_size_),
      FormatBytes(k.reserved * chunk_size_), FormatBytes(k.cap * chunk_size_),
      FormatBytes(budget_chunks_ * chunk_size_), FormatBytes(held * chunk_size_),
      FormatBytes(reserved * chunk_size_));
}

void PoolClasses::Refuse(Class& k, absl::Status why) {
  ++k.refusals;
  k.error = std::move(why);
}

void* PoolClasses::Take(std::uint32_t c, ChunkOwner as) {
  Class& k = *classes_[c];
  {
    MutexLock lock(&mu_);
    if (k.held >= k.cap) {
      Refuse(k, absl::ResourceExhaustedError(absl::StrFormat(
                    "buffer class \"%s\" reached its cap: %s (raise BufferClass::cap, or free "
                    "blocks of this class)",
                    k.name, Numbers(k))));
      return nullptr;
    }
    if (k.held >= k.reserved && FreeUnreservedLocked() == 0) {
      Refuse(k, absl::ResourceExhaustedError(absl::StrFormat(
                    "buffer class \"%s\" cannot have another chunk: the rest of the budget is "
                    "reserved for or held by other classes; %s",
                    k.name, Numbers(k))));
      return nullptr;
    }
    ++k.held;
  }
  void* chunk = arena_->Carve(chunk_size_, chunk_size_, as);
  if (chunk == nullptr) {
    MutexLock lock(&mu_);
    --k.held;
    const absl::Status growth = arena_->last_growth_error();
    Refuse(k, absl::Status(growth.ok() ? absl::StatusCode::kResourceExhausted : growth.code(),
                           absl::StrFormat("buffer class \"%s\": the pool could not add a chunk "
                                           "(%s); %s",
                                           k.name, growth.message(), Numbers(k))));
    return nullptr;
  }
  const std::size_t index = (reinterpret_cast<std::uintptr_t>(chunk) - base_) >> chunk_shift_;
  bool zero = false;
  {
    MutexLock lock(&mu_);
    const std::uint8_t last = last_owner_[index];
    last_owner_[index] = static_cast<std::uint8_t>(c);
    zero = last != kNever && last != c &&
           (classes_[last]->scrub != Scrub::kNone || k.scrub != Scrub::kNone);
  }
  // Off every lock and before any block of it is handed out: the chunk changes tenant.
  if (zero) {
    std::memset(chunk, 0, chunk_size_);
    k.scrubbed.fetch_add(chunk_size_, std::memory_order_relaxed);
  }
  return chunk;
}

void PoolClasses::Give(std::uint32_t c, void* chunk) {
  {
    MutexLock lock(&mu_);
    --classes_[c]->held;
  }
  arena_->ReturnChunk(chunk);
}

absl::StatusOr<std::uint32_t> PoolClasses::Find(std::string_view name) const {
  std::string names;
  for (std::size_t i = 0; i < classes_.size(); ++i) {
    if (classes_[i]->name == name) return static_cast<std::uint32_t>(i);
    absl::StrAppend(&names, i == 0 ? "" : ", ", classes_[i]->name);
  }
  return absl::NotFoundError(
      absl::StrFormat("no buffer class \"%s\" in this pool (it has: %s)", name, names));
}

absl::Status PoolClasses::error(std::uint32_t c) const {
  MutexLock lock(&mu_);
  return classes_[c]->error;
}

std::vector<ClassStats> PoolClasses::Stats() const {
  std::vector<ClassStats> out;
  for (const auto& k : classes_) {
    const Heap::Counts counts = k->heap->GetCounts();
    ClassStats s;
    s.name = k->name;
    s.reserved_bytes = k->reserved * chunk_size_;
    s.cap_bytes = k->cap * chunk_size_;
    s.cached_bytes = counts.thread_cache_bytes + counts.transfer_bytes;
    s.live_bytes = counts.allocated > s.cached_bytes ? counts.allocated - s.cached_bytes : 0;
    s.scrub = ScrubName(k->scrub);
    s.scrubbed_bytes = k->scrubbed.load(std::memory_order_relaxed);
    out.push_back(std::move(s));
  }
  MutexLock lock(&mu_);
  for (std::size_t i = 0; i < classes_.size(); ++i) {
    out[i].held_bytes = classes_[i]->held * chunk_size_;
    out[i].refusals = classes_[i]->refusals;
  }
  return out;
}

std::size_t PoolClasses::ReleaseIdleChunks() {
  std::size_t n = 0;
  for (std::size_t i = 1; i < classes_.size(); ++i) n += classes_[i]->heap->ReleaseIdleChunks();
  return n;
}

}  // namespace pinpool::internal
