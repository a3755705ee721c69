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

using internal::IsPowerOfTwo;

absl::StatusOr<std::unique_ptr<Pool>> Pool::Create(PoolOptions options) {
  return CreateWith(std::move(options), nullptr);
}

absl::StatusOr<std::unique_ptr<Pool>> Pool::CreateWith(PoolOptions options,
                                                       internal::Handover* handover) {
  PINPOOL_RETURN_IF_ERROR(internal::ValidatePoolOptions(options));
  // Every ceiling initial_size will meet, checked before the default domain's ring exists and
  // before anything is mapped: past the memory cgroup's limit the kernel kills, it does not fail.
  PINPOOL_RETURN_IF_ERROR(internal::PreflightCeilings(options, internal::os::QueryMemlock(),
                                                      internal::os::QueryMemoryCgroup()));
  if (options.domains.empty()) {
    // The default pins long-term or fails saying why; it never falls back to mlock.
    PINPOOL_ASSIGN_OR_RETURN(std::shared_ptr<Domain> pin, MakeLongTermPinDomain());
    options.domains.push_back(std::move(pin));
  }
  PINPOOL_ASSIGN_OR_RETURN(const int node, internal::ResolveNumaNode(options));
  PINPOOL_RETURN_IF_ERROR(internal::PreflightHugePages(options, node));
  internal::ArenaConfig config{.chunk_size = options.chunk_size,
                               .max_chunks = options.budget / options.chunk_size,
                               .page_size = options.page_size,
                               .require_page_size = options.require_page_size,
                               .populate = options.populate,
                               .domains = options.domains,
                               .numa_node = node,
                               .reserve_threads = internal::ReserveThreads(options, node),
                               .low_watermark = options.low_watermark,
                               .backing = internal::ToBackingSpec(options.backing)};
  PINPOOL_ASSIGN_OR_RETURN(std::unique_ptr<internal::Arena> arena,
                           internal::Arena::Create(std::move(config)));
  std::unique_ptr<internal::PoolClasses> classes;  // only with named classes: docs/classes.md
  if (!options.classes.empty()) {
    PINPOOL_ASSIGN_OR_RETURN(classes, internal::PoolClasses::Create(arena.get(), options));
  }
  PINPOOL_ASSIGN_OR_RETURN(
      std::unique_ptr<internal::Heap> heap,
      internal::Heap::Create(arena.get(),
                             {.debug_checks = options.debug_checks,
                              .source = classes != nullptr ? classes->default_source() : nullptr}));
  std::unique_ptr<Pool> pool(new Pool(std::move(arena), std::move(heap)));
  pool->AttachClasses(std::move(classes));
  pool->arrays_ = std::make_unique<internal::PoolArrays>(pool->arena_.get(), pool->heap_.get(),
                                                         pool->classes_.get(), pool->grants_.get());
  pool->options_ = std::move(options);
  pool->sharing_ = std::make_unique<internal::Sharing>(handover != nullptr ? handover->id
                                                                           : internal::NewPoolId());
  if (handover != nullptr) {
    // Claimed now, built by the background work first: Adopt returns before any registration.
    const std::size_t chunks = handover->chunks.size();
    PINPOOL_RETURN_IF_ERROR(pool->arena_->QueueAdoption(std::move(handover->chunks)));
    pool->sharing_->SetAdoptedChunks(chunks);
    pool->sharing_->AdoptBlocks(handover->live, pool->range_base_, pool->arena_->chunk_size());
    pool->options_.initial_size_in_background = true;
  }
  const auto start = std::chrono::steady_clock::now();
  auto first_chunk = start;
  // In the background mode Create builds one chunk; the background work builds the rest
  // (StartBackgroundWork sees what is missing) and times seconds_to_initial_size itself.
  // Adopting, it builds none: the adopted chunks (claimed already) come first.
  const std::size_t now_size =
      handover != nullptr ? 0
      : pool->options_.initial_size_in_background
          ? std::min(pool->options_.initial_size, pool->options_.chunk_size)
          : pool->options_.initial_size;
  PINPOOL_RETURN_IF_ERROR(pool->arena_->Reserve(now_size, &first_chunk));
  if (pool->options_.initial_size != 0) {
    const auto seconds = [&](auto t) { return std::chrono::duration<double>(t - start).count(); };
    pool->startup_first_chunk_ = seconds(first_chunk);
    if (now_size == pool->options_.initial_size) {
      pool->startup_initial_size_ = seconds(std::chrono::steady_clock::now());
    }
  }
  PINPOOL_RETURN_IF_ERROR(pool->StartBackgroundWork(start, handover != nullptr));
  return pool;
}

Pool::Pool(std::unique_ptr<internal::Arena> arena, std::unique_ptr<internal::Heap> heap)
    : arena_(std::move(arena)),
      heap_(std::move(heap)),
      grants_(std::make_unique<internal::GrantRegistry>(
          arena_.get(), [this](const void* p, bool on) { HeapOf(p).SetGrantTag(p, on); })),
      heap_id_(heap_->id()),
      secret_(heap_->secret()),
      range_base_(arena_->range_base()),
      range_size_(arena_->range_size()),
      max_block_(max_block_size()),
      chunk_shift_(arena_->chunk_shift()),
      chunk_table_(arena_->chunk_table()),
      chunk_records_origin_(OriginOf(arena_->chunk_records(), range_base_, chunk_shift_)),
      page_map_origin_(OriginOf(heap_->page_map(), range_base_, fast_v9::kPageShift)),
      metrics_(std::make_unique<internal::PoolMetrics>()),
      take_back_(std::make_unique<internal::TakeBack>()) {}

void Pool::AttachClasses(std::unique_ptr<internal::PoolClasses> classes) {
  if (classes == nullptr) return;
  classes->AttachDefault(heap_.get());
  class_heap_ids_ = classes->heap_ids();
  class_count_ = classes->count();
  classes_ = std::move(classes);
}

namespace {

// A store the compiler must not drop as dead, though the object is being destroyed.
template <typename T>
void StoreForLater(T& field, T value) {
  *const_cast<volatile T*>(&field) = value;
}

}  // namespace

// Marks the pool dead before anything goes: a later call through a dangling pointer then misses
// the fast path (no heap id matches kDeadId, no address is in an empty range) and aborts on the
// slow path's CheckAlive, as long as the Pool's own memory has not been reused. heap_ goes first:
// the heap lets go of the chunks before they are unmapped.
Pool::~Pool() {
  metrics_->server.reset();  // its thread reads the stats: stop it while the pool is whole
  PINPOOL_CHECK(grants_->holders() == 0,
                "pool %p destroyed while %zu grant holders (VerbsRemoteAccess, FabricRemoteAccess) "
                "still use it: "
                "destroy them "
                "first (a peer could still reach the pool's memory)",
                static_cast<const void*>(this), grants_->holders());
  StoreForLater(heap_id_, internal::Heap::kDeadId);
  if (classes_ != nullptr) {
    for (std::uint32_t c = 0; c < classes_->count(); ++c) {
      StoreForLater(classes_->heap_ids()[c], internal::Heap::kDeadId);
    }
  }
  StoreForLater(class_count_, std::uint32_t{0});
  StoreForLater(range_size_, std::size_t{0});
  StoreForLater(max_block_, std::size_t{0});
  StoreForLater(alive_, kDestroyed);
  // The classes (declared last, so destroyed first) hold the ledger the default heap gives
  // chunks back to: the background trim must stop before they go.
  // The background work also gives chunks back (take_back_, declared after it): it stops first.
  background_.reset();
  // The members go in reverse order of declaration: the classes' heaps and ledger, the
  // background work, then the grant registry, the heap (which lets go of the chunks) and the
  // arena (which unmaps them).
}

void Pool::CheckAlive(const char* what) const noexcept {
  PINPOOL_CHECK(alive_ == kAlive,
                "%s on pool %p after the pool was destroyed (a use after free of the Pool)", what,
                static_cast<const void*>(this));
}

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
  if (__builtin_expect(size - 1 < max_block_ && size > fast_v9::kMaxFastSize &&
                           alignment - 1 < internal::kMinBlock &&
                           (alignment & (alignment - 1)) == 0,
                       1)) {
    if (void* p = internal::Heap::TryAllocateCached(heap_id_, size)) {
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
  if (size > fast_v9::kMaxFastSize && large_countdown-- != 0) {
    void* p = heap_->Allocate(size, alignment);
    return p == nullptr ? Block() : Block(p, size, ChunkAt(p));
  }
  if (size > fast_v9::kMaxFastSize) large_countdown = kLargeSample - 1;
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
  PINPOOL_CHECK(cls.index < class_count_,
                "Allocate(class %u) on pool %p: not one of its classes (it has %u: use the ids "
                "Pool::ClassOf of this pool returns)",
                cls.index, static_cast<const void*>(this), class_count_);
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

internal::Heap& Pool::HeapOf(const void* p) const noexcept {
  return classes_ == nullptr ? *heap_ : classes_->heap(classes_->OwnerOf(p));
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
  PINPOOL_CHECK(cls.index < class_count_,
                "class_error(class %u) on pool %p: not one of its classes", cls.index,
                static_cast<const void*>(this));
  if (classes_ == nullptr) return last_growth_error();
  return classes_->error(cls.index);
}

void Pool::DeallocateSlow(void* data, std::size_t size) noexcept {
  if (data == nullptr) return;
  CheckAlive("Deallocate");
  if (arena_->Withdrawn(data)) {  // a block of a chunk given back: accepted, nothing to do
    take_back_->lost_block_frees.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const std::uintptr_t entry = arena_->EntryOf(data);
  PINPOOL_CHECK(internal::Arena::EntryChunk(entry) != nullptr,
                "Deallocate(%p): not memory of this pool", data);
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
  // A handed-over block (Adopt) lies in a chunk the heap never had: its last one gives the chunk
  // to the arena, where the heap may take it.
  if (bool chunk_empty = false; sharing_->Release(data, &chunk_empty)) {
    if (chunk_empty) {
      arena_->ReturnChunk(reinterpret_cast<void*>(arena_->ChunkOf(data)->base));
    }
    return;
  }
  if (classes_ == nullptr) {
    heap_->Free(data, size, "Deallocate");
    return;
  }
  const std::uint32_t c = classes_->OwnerOf(data);
  internal::Heap& heap = classes_->heap(c);
  if (classes_->scrub(c) == Scrub::kOnReuse) {
    // Checked first: zeroing a free block would wipe the free mark that catches a double free.
    const std::size_t usable = heap.CheckBlock(data, size, "Deallocate");
    std::memset(data, 0, usable);
    classes_->CountScrubbed(c, usable);
  }
  if (c != 0 && (entry & internal::Arena::kSlowFreeTag) == 0) {
    // A named class's block: the inline path looked in the default heap's page map, which does
    // not hold it; the same checked push onto this thread's cache of the class's heap.
    const std::uintptr_t page =
        (reinterpret_cast<std::uintptr_t>(data) - range_base_) >> fast_v9::kPageShift;
    if (fast_v9::TryFree(heap.id(), heap.secret(), heap.page_map()[page], data, size)) {
      return;
    }
  }
  heap.Free(data, size, "Deallocate");
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
  if (data == nullptr) return Allocate(new_size);
  CheckAlive("Reallocate");
  if (arena_->Withdrawn(data)) return {};  // a lost block: its chunk is given back
  PINPOOL_CHECK(arena_->ChunkOf(data) != nullptr, "Reallocate(%p): not memory of this pool", data);
  if (std::size_t size = 0; Reclaimed(data, &size)) {
    // Not the heap's: always moved (a granted one never is).
    if (new_size == 0 || new_size > max_block_size()) return {};
    if ((arena_->EntryOf(data) & internal::Arena::kSlowFreeTag) != 0) {
      GrantLock lock(*this);
      if (grants_->ReachableLocked(data)) return {};
    }
    const Block moved = Allocate(new_size);
    if (!moved) return {};
    std::memcpy(moved.data(), data, std::min(size, new_size));
    DeallocateSlow(data, size);
    return moved;
  }
  internal::Heap& heap = HeapOf(data);
  const std::size_t usable = heap.CheckBlock(data, 0, "Reallocate");
  if (new_size == 0 || new_size > max_block_size()) return {};
  if ((arena_->EntryOf(data) & internal::Arena::kSlowFreeTag) != 0) {
    GrantLock lock(*this);
    if (grants_->ReachableLocked(data)) return {};  // a peer may be using it: never moved
  }
  if (classes_ != nullptr && classes_->scrub(classes_->OwnerOf(data)) == Scrub::kOnReuse) {
    // The heap would free the old block without zeroing it: move here, and free it as Deallocate
    // does. A smaller size stays in place.
    if (new_size <= usable) return Block(data, new_size, arena_->ChunkOf(data));
    const Block moved = AllocateInClass(ClassId{classes_->OwnerOf(data)}, new_size, 16);
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
  const ChunkInfo* chunk = a - range_base_ < range_size_ ? ChunkAt(address) : nullptr;
  if (chunk == nullptr) {
    CheckAlive("Lookup");
    return std::nullopt;
  }
  return Location(const_cast<void*>(address), chunk);
}

bool Pool::Contains(const void* address) const noexcept { return Lookup(address).has_value(); }

std::size_t Pool::UsableSize(const void* data) const noexcept {
  if (data == nullptr) return 0;
  CheckAlive("UsableSize");
  if (arena_->Withdrawn(data)) return 0;  // a lost block
  PINPOOL_CHECK(arena_->ChunkOf(data) != nullptr, "UsableSize(%p): not memory of this pool", data);
  if (std::size_t size = 0; Reclaimed(data, &size)) return size;
  return HeapOf(data).CheckBlock(data, 0, "UsableSize");
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

}  // namespace pinpool
