// A Pool's life: Create and Adopt over one build step, and destruction.
//
// Build validates the options, checks every ceiling initial_size will meet before anything is
// pinned or mapped (docs/ceilings.md), opens the default domain when none is named, places the
// pool (NUMA), reserves the arena's range and makes the heaps and the other parts; nothing is
// mapped yet. Create then maps the start-up chunks (all of initial_size, or only the first with
// PoolOptions::initial_size_in_background) and starts the background work; Adopt
// (handover.cc) queues the handed-over chunks instead, for the background work to build first.
// The parts are Pool's members, declared so that each uses only those before it: destruction
// takes them down in reverse with nothing to arrange by hand.
// Thread safety: as Pool (Create and Adopt from any thread; destruction with no other user).
#include <algorithm>
#include <chrono>
#include <utility>

#include "arena/arena.h"
#include "heap/heap.h"
#include "pinpool/pool.h"
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
#include "util/check.h"
#include "util/status_macros.h"

namespace pinpool {
PINPOOL_ABI_BEGIN

absl::StatusOr<std::unique_ptr<Pool>> Pool::Create(PoolOptions options) {
  const auto start = std::chrono::steady_clock::now();
  PINPOOL_ASSIGN_OR_RETURN(std::unique_ptr<Pool> pool,
                           Build(std::move(options), internal::NewPoolId()));
  PINPOOL_RETURN_IF_ERROR(pool->MapStartup(start));
  PINPOOL_RETURN_IF_ERROR(pool->StartBackgroundWork(start, /*adopting=*/false));
  return pool;
}

absl::StatusOr<std::unique_ptr<Pool>> Pool::Build(PoolOptions options, const PoolId& id) {
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
  return std::unique_ptr<Pool>(
      new Pool(std::move(options), std::move(arena), std::move(classes), std::move(heap), id));
}

Pool::Pool(PoolOptions options, std::unique_ptr<internal::Arena> arena,
           std::unique_ptr<internal::PoolClasses> classes, std::unique_ptr<internal::Heap> heap,
           const PoolId& id)
    : options_(std::move(options)),
      arena_(std::move(arena)),
      classes_(std::move(classes)),
      heap_(std::move(heap)),
      grants_(std::make_unique<internal::GrantRegistry>(
          arena_.get(), [this](const void* p, bool on) { HeapOf(p).SetGrantTag(p, on); })),
      arrays_(std::make_unique<internal::PoolArrays>(arena_.get(), heap_.get(), classes_.get(),
                                                     grants_.get())),
      sharing_(std::make_unique<internal::Sharing>(id)),
      take_back_(std::make_unique<internal::TakeBack>()),
      metrics_(std::make_unique<internal::PoolMetrics>()) {
  // What the inline paths read, copied once.
  head_.heap_id = heap_->id();
  head_.secret = heap_->secret();
  head_.range_base = arena_->range_base();
  head_.range_size = arena_->range_size();
  head_.max_block = max_block_size();
  head_.chunk_shift = arena_->chunk_shift();
  head_.chunk_table = arena_->chunk_table();
  head_.chunk_records_origin =
      OriginOf(arena_->chunk_records(), head_.range_base, head_.chunk_shift);
  head_.page_map_origin = OriginOf(heap_->page_map(), head_.range_base, fast::kPageShift);
  head_.class_heap_ids = &head_.heap_id;
  if (classes_ != nullptr) {
    classes_->AttachDefault(heap_.get());
    head_.class_heap_ids = classes_->heap_ids();
    head_.class_count = classes_->count();
  }
}

absl::Status Pool::MapStartup(std::chrono::steady_clock::time_point start) {
  auto first_chunk = start;
  // In the background mode Create builds one chunk; the background work builds the rest
  // (StartBackgroundWork sees what is missing) and times seconds_to_initial_size itself.
  const std::size_t now_size = options_.initial_size_in_background
                                   ? std::min(options_.initial_size, options_.chunk_size)
                                   : options_.initial_size;
  PINPOOL_RETURN_IF_ERROR(arena_->Reserve(now_size, &first_chunk));
  if (options_.initial_size != 0) {
    const auto seconds = [&](auto t) { return std::chrono::duration<double>(t - start).count(); };
    startup_first_chunk_ = seconds(first_chunk);
    if (now_size == options_.initial_size) {
      startup_initial_size_ = seconds(std::chrono::steady_clock::now());
    }
  }
  return absl::OkStatus();
}

namespace {

// A store the compiler must not drop as dead, though the object is being destroyed.
template <typename T>
void StoreForLater(T& field, T value) {
  *const_cast<volatile T*>(&field) = value;
}

}  // namespace

// Marks the pool dead before anything goes: a later call through a dangling pointer then misses
// the fast path (no heap id matches kDeadId, no class is in range, no address is in an empty
// range) and aborts on the slow path's CheckAlive, as long as the Pool's own memory has not been
// reused. Then the members go, in reverse order of declaration (pool.h).
Pool::~Pool() {
  PINPOOL_CHECK(grants_->holders() == 0,
                "pool %p destroyed while %zu grant holders (VerbsRemoteAccess, "
                "FabricRemoteAccess) still use it: destroy them first (a peer could still reach "
                "the pool's memory)",
                static_cast<const void*>(this), grants_->holders());
  StoreForLater(head_.heap_id, internal::Heap::kDeadId);
  StoreForLater(head_.class_count, std::uint32_t{0});
  StoreForLater(head_.range_size, std::size_t{0});
  StoreForLater(head_.max_block, std::size_t{0});
  StoreForLater(alive_, kDestroyed);
}

void Pool::CheckAlive(const char* what) const noexcept {
  PINPOOL_CHECK(alive_ == kAlive,
                "%s on pool %p after the pool was destroyed (a use after free of the Pool)", what,
                static_cast<const void*>(this));
}

PINPOOL_ABI_END
}  // namespace pinpool
