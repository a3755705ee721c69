// Pool: the public face over Arena (chunks, keys) and Heap (blocks). Checks arguments that are
// cheap to check on the fast path and turns misuse into a clear abort rather than corruption
// (docs/robustness.md has the policy for each misuse).
#include "pinpool/pool.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "arena/arena.h"
#include "heap/heap.h"
#include "pinpool/grant_lock.h"
#include "pool/arrays.h"
#include "pool/background.h"
#include "pool/classes.h"
#include "pool/grants/registry.h"
#include "pool/metrics.h"
#include "pool/placement.h"
#include "pool/preflight.h"
#include "pool/sharing/lost_chunks.h"
#include "pool/sharing/sharing.h"
#include "pool/sharing/transfer.h"
#include "pool/validate_options.h"
#include "util/bytes.h"
#include "util/check.h"
#include "util/status_macros.h"

namespace pinpool {
PINPOOL_ABI_BEGIN

using internal::IsPowerOfTwo;

// The fast paths are inline in the callers (pinpool/pool.h, pinpool/fast_path.h); what they
// cannot do comes here: first use by a thread, an empty or full bin, big or over-aligned blocks,
// invalid arguments, null and foreign pointers, double frees, granted blocks, a destroyed pool.
namespace {

// The heap's allocation, timed into `latency`. Out of line: the clock calls it makes would
// otherwise make every caller of the slow path save registers for them, timed or not.
__attribute__((noinline)) void* AllocateTimed(internal::Heap& heap,
                                              internal::LatencyRecorder& latency, std::size_t size,
                                              std::size_t alignment) noexcept {
  const auto start = std::chrono::steady_clock::now();
  void* p = heap.Allocate(size, alignment);
  latency.RecordSince(start);
  return p;
}

}  // namespace

Block Pool::AllocateSlow(std::size_t size, std::size_t alignment) noexcept {
  // Blocks above the inline path's sizes come from the thread's cache too: one call, as before
  // the path was inlined, so large blocks pay nothing for it.
  if (__builtin_expect(size - 1 < head_.max_block && size > fast::kMaxFastSize &&
                           alignment - 1 < internal::kMinBlock &&
                           (alignment & (alignment - 1)) == 0,
                       1)) {
    if (void* p = internal::Heap::TryAllocateCached(head_.heap_id, size)) {
      return Block(p, size, ChunkAt(p));
    }
  }
  CheckAlive("Allocate");
  if (size == 0 || size > max_block_size() || !IsPowerOfTwo(alignment) ||
      alignment > arena_->chunk_size() || sharing_->quiesced.load(std::memory_order_relaxed)) {
    return {};
  }
  // Timed here and only here: the fast path (Allocate's cached case) records nothing. Blocks above
  // the inline path's sizes always come here, most in a few nanoseconds, which two clock reads
  // would double: one in kLargeSample of them per thread is timed (the thread's first included).
  constexpr unsigned kLargeSample = 32;
  static thread_local unsigned large_countdown __attribute__((tls_model("initial-exec"))) = 0;
  if (size > fast::kMaxFastSize && large_countdown-- != 0) {
    void* p = heap_->Allocate(size, alignment);
    return p == nullptr ? Block() : Block(p, size, ChunkAt(p));
  }
  if (size > fast::kMaxFastSize) large_countdown = kLargeSample - 1;
  void* p = AllocateTimed(*heap_, metrics_->allocate_slow, size, alignment);
  if (p == nullptr) return {};
  const ChunkInfo* chunk = arena_->ChunkOf(p);
  PINPOOL_DCHECK(chunk != nullptr);
  return Block(p, size, chunk);
}

// A named class's allocation that missed the inline pop (or any with an alignment argument): the
// class's own heap, which takes chunks only through the ledger (pool/classes.h).
Block Pool::AllocateInClass(ClassId cls, std::size_t size, std::size_t alignment) noexcept {
  CheckAlive("Allocate");
  PINPOOL_CHECK(cls.index < head_.class_count,
                "Allocate(class %u) on pool %p: not one of its classes (it has %u: use the ids "
                "Pool::ClassOf of this pool returns)",
                cls.index, static_cast<const void*>(this), head_.class_count);
  if (cls.index == 0) return Allocate(size, alignment);
  if (size == 0 || size > max_block_size() || !IsPowerOfTwo(alignment) ||
      alignment > arena_->chunk_size()) {
    return {};
  }
  const auto start = std::chrono::steady_clock::now();
  void* p = classes_->heap(cls.index).Allocate(size, alignment);
  metrics_->allocate_slow.RecordSince(start);
  if (p == nullptr) return {};
  return Block(p, size, arena_->ChunkOf(p));
}

namespace {

// An address in a chunk an array holds is no block (the heap never had the chunk, whose bytes are
// the array's): `what` aborts, naming the rule. (Left to the heap's checks, it would fault.)
void CheckNotInArray(internal::ChunkOwner owner, const char* what, const void* p) noexcept {
  PINPOOL_CHECK(
      owner.kind != internal::ChunkOwner::kArray && owner.kind != internal::ChunkOwner::kArrayHeld,
      "%s(%p): not a block: it lies in a chunk of an array (an Array is freed whole, "
      "with Deallocate(Array&&))",
      what, p);
}

}  // namespace

internal::Heap& Pool::HeapOf(const void* p) const noexcept {
  return classes_ == nullptr ? *heap_ : classes_->heap(arena_->OwnerOf(p).heap_class);
}

absl::StatusOr<ClassId> Pool::ClassOf(std::string_view name) const {
  CheckAlive("ClassOf");
  if (classes_ == nullptr) {
    if (name == "default") return kDefaultClass;
    return absl::NotFoundError(
        absl::StrFormat("no buffer class \"%s\" in this pool (it has only \"default\": see "
                        "PoolOptions::classes)",
                        name));
  }
  PINPOOL_ASSIGN_OR_RETURN(const std::uint32_t c, classes_->Find(name));
  return ClassId{c};
}

absl::Status Pool::class_error(ClassId cls) const {
  CheckAlive("class_error");
  PINPOOL_CHECK(cls.index < head_.class_count,
                "class_error(class %u) on pool %p: not one of its classes", cls.index,
                static_cast<const void*>(this));
  if (classes_ == nullptr) return last_growth_error();
  return classes_->error(cls.index);
}

// The slow paths that take a block (DeallocateSlow, Reallocate, UsableSize) read its chunk's owner
// record once (arena/chunk_owner.h) and dispatch on it. A block in a withdrawn chunk is lost
// (accepted, nothing done); an address in no chunk aborts; the predecessor's blocks in an adopted
// chunk are the sharing side's; every other address goes to the heap of the chunk's class, whose
// checks name any other misuse (a double free, an interior pointer, an array's chunk).
void Pool::DeallocateSlow(void* data, std::size_t size) noexcept {
  using Owner = internal::ChunkOwner;
  if (data == nullptr) return;
  CheckAlive("Deallocate");
  const Owner owner = arena_->OwnerOf(data);
  if (owner.kind == Owner::kWithdrawn) {  // a block of a chunk given back: accepted, nothing to do
    take_back_->lost_block_frees.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  PINPOOL_CHECK(owner.kind != Owner::kUnmapped, "Deallocate(%p): not memory of this pool", data);
  CheckNotInArray(owner, "Deallocate", data);
  const std::uintptr_t entry = arena_->EntryOf(data);
  if ((entry & internal::Arena::kSlowFreeTag) != 0) {
    // A granted block is held until every revocation has completed (pool/grants/registry.h); those
    // that complete at once (range regions) release it, or others, right away.
    internal::GrantRegistry::FreeOutcome outcome;
    {
      GrantLock lock(*this);  // frees what the revocations released when it goes
      outcome = grants_->OnFreeLocked(data, size, lock);
    }
    PINPOOL_CHECK(outcome != internal::GrantRegistry::FreeOutcome::kAlreadyHeld,
                  "Deallocate(%p): the block is free already (a double free: it is still held "
                  "until its remote grants are revoked)",
                  data);
    if (outcome == internal::GrantRegistry::FreeOutcome::kHeld) return;
  }
  switch (owner.kind) {
    case Owner::kAdopted:
      // A handed-over block (Adopt) lies in a chunk the heap never had: its last one gives the
      // chunk to the arena, where the heap may take it.
      if (bool chunk_empty = false; sharing_->Release(data, &chunk_empty)) {
        if (chunk_empty) {
          arena_->ReturnChunk(reinterpret_cast<void*>(arena_->ChunkOf(data)->base));
        }
        return;
      }
      break;
    case Owner::kHeap:
      if (classes_ != nullptr && owner.heap_class != 0) {
        const std::uint32_t c = owner.heap_class;
        internal::Heap& heap = classes_->heap(c);
        if (classes_->scrub(c) == Scrub::kOnReuse) {
          // Checked first: zeroing a free block would wipe the free mark that catches a double
          // free.
          const std::size_t usable = heap.CheckBlock(data, size, "Deallocate");
          std::memset(data, 0, usable);
          classes_->CountScrubbed(c, usable);
        }
        if ((entry & internal::Arena::kSlowFreeTag) == 0) {
          // A named class's block: the inline path looked in the default heap's page map, which
          // does not hold it; the same checked push onto this thread's cache of the class's heap.
          const std::uintptr_t page =
              (reinterpret_cast<std::uintptr_t>(data) - head_.range_base) >> fast::kPageShift;
          if (fast::TryFree(heap.id(), heap.secret(), heap.page_map()[page], data, size)) {
            return;
          }
        }
        heap.Free(data, size, "Deallocate");
        return;
      }
      break;
    default:  // kUnowned: no heap's block: the default heap's checks name the misuse
      break;
  }
  heap_->Free(data, size, "Deallocate");
}

absl::StatusOr<Array> Pool::AllocateArray(std::size_t count, std::size_t element_size,
                                          std::size_t alignment) {
  CheckAlive("AllocateArray");
  return arrays_->Allocate(*this, count, element_size, alignment);
}

void Pool::Deallocate(Array&& array) noexcept {
  CheckAlive("Deallocate");
  if (array) arrays_->Free(*this, array);
}

Block Pool::Reallocate(const Block& block, std::size_t new_size) noexcept {
  return Reallocate(block.data(), new_size);
}

Block Pool::Reallocate(void* data, std::size_t new_size) noexcept {
  using Owner = internal::ChunkOwner;
  if (data == nullptr) return Allocate(new_size);
  CheckAlive("Reallocate");
  const Owner owner = arena_->OwnerOf(data);
  const bool granted = (arena_->EntryOf(data) & internal::Arena::kSlowFreeTag) != 0;
  // A peer may be using a granted block: never moved.
  const auto reachable = [&] {
    if (!granted) return false;
    GrantLock lock(*this);
    return grants_->ReachableLocked(data);
  };
  std::size_t size = 0;
  switch (owner.kind) {
    case Owner::kWithdrawn:  // a lost block: its chunk is given back
      return {};
    case Owner::kUnmapped:
      PINPOOL_CHECK(false, "Reallocate(%p): not memory of this pool", data);
      return {};
    case Owner::kArray:
    case Owner::kArrayHeld:
      CheckNotInArray(owner, "Reallocate", data);
      return {};
    case Owner::kAdopted:
      if (Reclaimed(data, &size)) {
        // Not the heap's: always moved (a granted one never is).
        if (new_size == 0 || new_size > max_block_size() || reachable()) return {};
        const Block moved = Allocate(new_size);
        if (!moved) return {};
        std::memcpy(moved.data(), data, std::min(size, new_size));
        DeallocateSlow(data, size);
        return moved;
      }
      break;
    default:
      break;
  }
  const std::uint32_t c = classes_ != nullptr ? owner.heap_class : 0;
  internal::Heap& heap = c != 0 ? classes_->heap(c) : *heap_;
  const std::size_t usable = heap.CheckBlock(data, 0, "Reallocate");
  if (new_size == 0 || new_size > max_block_size() || reachable()) return {};
  if (c != 0 && classes_->scrub(c) == Scrub::kOnReuse) {
    // The heap would free the old block without zeroing it: move here, and free it as Deallocate
    // does. A smaller size stays in place.
    if (new_size <= usable) return Block(data, new_size, arena_->ChunkOf(data));
    const Block moved = AllocateInClass(ClassId{c}, new_size, 16);
    if (!moved) return {};
    std::memcpy(moved.data(), data, usable);
    DeallocateSlow(data, 0);
    return moved;
  }
  void* p = heap.Reallocate(data, new_size);
  if (p == nullptr) return {};
  return Block(p, new_size, arena_->ChunkOf(p));
}

std::optional<Location> Pool::Lookup(const void* address) const noexcept {
  const auto a = reinterpret_cast<std::uintptr_t>(address);
  const ChunkInfo* chunk = a - head_.range_base < head_.range_size ? ChunkAt(address) : nullptr;
  if (chunk == nullptr) {
    CheckAlive("Lookup");
    return std::nullopt;
  }
  return Location(const_cast<void*>(address), chunk);
}

bool Pool::Contains(const void* address) const noexcept { return Lookup(address).has_value(); }

std::size_t Pool::UsableSize(const void* data) const noexcept {
  using Owner = internal::ChunkOwner;
  if (data == nullptr) return 0;
  CheckAlive("UsableSize");
  const Owner owner = arena_->OwnerOf(data);
  switch (owner.kind) {
    case Owner::kWithdrawn:  // a lost block
      return 0;
    case Owner::kUnmapped:
      PINPOOL_CHECK(false, "UsableSize(%p): not memory of this pool", data);
      return 0;
    case Owner::kArray:
    case Owner::kArrayHeld:
      CheckNotInArray(owner, "UsableSize", data);
      return 0;
    case Owner::kAdopted:
      if (std::size_t size = 0; Reclaimed(data, &size)) return size;
      break;
    default:
      break;
  }
  internal::Heap& heap = classes_ != nullptr ? classes_->heap(owner.heap_class) : *heap_;
  return heap.CheckBlock(data, 0, "UsableSize");
}

absl::Status Pool::Reserve(std::size_t bytes) {
  CheckAlive("Reserve");
  return arena_->Reserve(bytes);
}

absl::Status Pool::last_growth_error() const { return arena_->last_growth_error(); }

const PoolOptions& Pool::options() const noexcept { return options_; }

std::size_t Pool::chunk_size() const noexcept { return arena_->chunk_size(); }

// The heap's size classes near a power of two C are 5/8 C, 6/8 C, 7/8 C and C; 7/8 C is the
// largest class that leaves room in a chunk of C bytes (a block never spans two chunks).
std::size_t Pool::max_block_size() const noexcept { return arena_->chunk_size() / 8 * 7; }

PINPOOL_ABI_END
}  // namespace pinpool
