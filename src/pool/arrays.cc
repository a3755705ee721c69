// PoolArrays (pool/arrays.h): the layout of an array, its chunks, its counts.
#include "pool/arrays.h"

#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "pinpool/grant_lock.h"
#include "pinpool/pool.h"
#include "util/bytes.h"
#include "util/check.h"

namespace pinpool::internal {

namespace {

absl::Status Invalid(std::size_t count, std::size_t size, std::size_t alignment,
                     const std::string& why) {
  return absl::InvalidArgumentError(
      absl::StrFormat("AllocateArray(count %zu, element_size %zu, alignment %zu): %s", count, size,
                      alignment, why));
}

}  // namespace

PoolArrays::PoolArrays(Arena* arena, Heap* heap, PoolClasses* classes, GrantRegistry* grants)
    : arena_(arena), heap_(heap), classes_(classes), grants_(grants) {}

bool PoolArrays::IsLiveRun(const void* p, std::size_t size) const noexcept {
  return arena_->OwnerOf(p).kind == ChunkOwner::kArray &&
         (reinterpret_cast<std::uintptr_t>(p) & (arena_->chunk_size() - 1)) == 0 &&
         size <= arena_->chunk_size();
}

bool PoolArrays::ReleaseHeld(void* p) noexcept {
  const ChunkOwner owner = arena_->OwnerOf(p);
  switch (owner.kind) {
    case ChunkOwner::kArrayHeld:
      GiveChunk(p);
      return true;
    case ChunkOwner::kWithdrawn:  // given back while held: nothing to return
      return owner.was == ChunkOwner::kArray || owner.was == ChunkOwner::kArrayHeld;
    default:
      return false;
  }
}

void* PoolArrays::TakeChunk() noexcept {
  const std::size_t cs = arena_->chunk_size();
  return classes_ != nullptr ? classes_->Take(0, ChunkOwner::Array())
                             : arena_->Carve(cs, cs, ChunkOwner::Array());
}

std::size_t PoolArrays::ReleaseIdleChunks() noexcept {
  const std::size_t n = heap_->ReleaseIdleChunks();
  return n + (classes_ != nullptr ? classes_->ReleaseIdleChunks() : 0);
}

void PoolArrays::GiveChunk(void* chunk) noexcept {
  if (classes_ == nullptr) {
    arena_->ReturnChunk(chunk);
    return;
  }
  if (classes_->scrub(0) == Scrub::kOnReuse) {
    // As a freed block of a scrubbing class is: nothing the array held is seen by the next user.
    std::memset(chunk, 0, arena_->chunk_size());
    classes_->CountScrubbed(0, arena_->chunk_size());
  }
  classes_->default_source()->ReturnChunk(chunk);
}

absl::Status PoolArrays::TakeError() const {
  absl::Status why = classes_ != nullptr ? classes_->error(0) : arena_->last_growth_error();
  return why.ok() ? absl::ResourceExhaustedError("the pool has no free chunk") : why;
}

absl::StatusOr<Array> PoolArrays::Allocate(Pool& pool, std::size_t count, std::size_t element_size,
                                           std::size_t alignment) {
  const std::size_t cs = arena_->chunk_size();
  if (count == 0)
    return Invalid(count, element_size, alignment, "an array has at least one element");
  if (element_size == 0) return Invalid(count, element_size, alignment, "elements of 0 bytes");
  if (!IsPowerOfTwo(alignment)) {
    return Invalid(count, element_size, alignment, "the alignment is not a power of two");
  }
  if (alignment > element_size) {
    return Invalid(count, element_size, alignment,
                   "the alignment is larger than the element (pad the element to it)");
  }
  if (element_size > cs) {
    return Invalid(count, element_size, alignment,
                   absl::StrFormat("an element is larger than the pool's chunk (%s): an element "
                                   "never spans two chunks; raise PoolOptions::chunk_size",
                                   FormatBytes(cs)));
  }
  const std::size_t stride = (element_size + alignment - 1) & ~(alignment - 1);
  std::size_t total = 0;
  if (__builtin_mul_overflow(count, stride, &total)) {
    return Invalid(count, element_size, alignment,
                   absl::StrFormat("count x stride (%zu bytes) overflows", stride));
  }
  Array a;
  a.owner_ = this;
  a.count_ = count;
  a.element_size_ = element_size;
  a.stride_ = stride;
  if (total <= pool.max_block_size()) {
    const Block b = pool.Allocate(total, alignment);
    if (!b) return TakeError();
    a.per_run_ = count;
    a.in_block_ = true;
    a.runs_.push_back({b.data(), &b.chunk(), 0, count});
    live_.fetch_add(1, std::memory_order_relaxed);
    return a;
  }
  const std::size_t per_chunk = cs / stride;
  // Rounded up without count + per_chunk - 1, which wraps for a count near SIZE_MAX.
  const std::size_t chunks = count / per_chunk + (count % per_chunk != 0 ? 1 : 0);
  if (std::size_t spanned = 0; __builtin_mul_overflow(chunks, cs, &spanned)) {
    return Invalid(count, element_size, alignment,
                   absl::StrFormat("the size of the %zu chunks of %s it spans overflows", chunks,
                                   FormatBytes(cs)));
  }
  if (chunks > arena_->max_chunks()) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "AllocateArray(count %zu, element_size %zu): needs %zu chunks of %s (%zu elements "
        "each), more than the pool's budget of %zu chunks (%s): raise PoolOptions::budget or "
        "ask for fewer elements",
        count, element_size, chunks, FormatBytes(cs), per_chunk, arena_->max_chunks(),
        FormatBytes(arena_->max_chunks() * cs)));
  }
  const std::size_t mapped_before = arena_->mapped_bytes();
  a.per_run_ = per_chunk;
  a.runs_.reserve(chunks);
  bool released = false;
  for (std::size_t c = 0; c < chunks; ++c) {
    void* chunk = TakeChunk();
    if (chunk == nullptr && !released) {
      // Whole chunks the heaps hold with nothing in them are the pool's own: take them back (as
      // Trim would) rather than refuse, and try once more if there were any (none: the failure
      // stands, with no second growth the caller did not ask for).
      released = true;
      if (ReleaseIdleChunks() != 0) chunk = TakeChunk();
    }
    if (chunk == nullptr) {
      const absl::Status why = TakeError();
      for (const ArrayRun& run : a.runs_) GiveChunk(run.base);
      arena_->Trim(mapped_before);
      return absl::Status(why.code(),
                          absl::StrFormat("AllocateArray(count %zu, element_size "
                                          "%zu): got %zu of the %zu chunks it needs, "
                                          "gave them back; then: %s",
                                          count, element_size, c, chunks, why.message()));
    }
    const std::size_t first = c * per_chunk;
    a.runs_.push_back({chunk, arena_->ChunkOf(chunk), first, std::min(per_chunk, count - first)});
  }
  live_.fetch_add(1, std::memory_order_relaxed);
  chunk_bytes_.fetch_add(chunks * cs, std::memory_order_relaxed);
  return a;
}

void PoolArrays::Free(Pool& pool, Array& array) noexcept {
  PINPOOL_CHECK(array.owner_ == this,
                "Deallocate(Array of %zu elements at %p): not an array of this pool", array.count_,
                array.runs_.empty() ? nullptr : array.runs_[0].base);
  if (array.in_block_) {
    pool.Deallocate(array.runs_[0].base);
  } else {
    // Each run the grant registry knows is held (and may be released at once, by a synchronous
    // revocation, when the lock goes); the others go back now, after the lock.
    std::vector<void*> now;
    now.reserve(array.runs_.size());
    {
      GrantLock lock(pool);
      for (const ArrayRun& run : array.runs_) {
        if (!arena_->HoldArrayRun(run.base)) continue;  // given back: gone
        if (grants_->OnFreeLocked(run.base, 0, lock) == GrantRegistry::FreeOutcome::kNotGranted) {
          now.push_back(run.base);  // held only until GiveChunk returns it, below
        }
      }
    }
    for (void* chunk : now) GiveChunk(chunk);
    chunk_bytes_.fetch_sub(array.runs_.size() * arena_->chunk_size(), std::memory_order_relaxed);
  }
  live_.fetch_sub(1, std::memory_order_relaxed);
  array.Clear();
}

}  // namespace pinpool::internal
