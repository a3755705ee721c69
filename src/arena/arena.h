// Arena: the chunks of one pool, and the only code that registers memory with domains
// (Register, Deregister; the pool reads a domain's figures for its stats).
//
// At creation it reserves one virtual range of budget bytes aligned to the chunk size, so that
// `address -> chunk -> keys` is a subtraction, a shift and one acquire load (ChunkOf), with no
// lock. The range is cut into slots, one per chunk of the budget; a slot is empty, growing (a
// thread is mapping and registering its chunk), ready (published), trimming (being given
// back idle), or withdrawn because its backing must go (give_back.cc: being given back, then
// given back for good). It knows its own configuration (ArenaConfig) and reports its own figures
// (ArenaStats); the pool validates the user's options and turns these into its public types.
//
// Growth of one chunk is three steps: claim a slot under `mu_` (budget, RLIMIT_MEMLOCK and the
// memory cgroup's headroom checked for it and every chunk in flight in the process, of any pool
// (growth_in_flight.h): past the cgroup's limit the kernel would OOM-kill the process instead of
// failing the pin), build it with no lock held (map on the configured NUMA node, populate,
// register with every domain in order; a failure at any step undoes the earlier ones, so no
// chunk is ever half-registered), then publish it under
// `mu_`. So chunks grow in parallel (Reserve's workers, Replenish from the pool's background work
// or the application, an allocation that finds no room), and nobody ever waits for a lock held
// across a registration: an allocation that finds no room while a chunk is in flight waits for that
// chunk (or its failure) on a condition variable, else grows one itself. A failure anywhere is
// counted and kept in last_growth_error(), whichever thread met it.
//
// The heap asks for space with Carve(): first fit over the unused tails of the ready chunks.
// Carved space is given back only as a whole chunk (ReturnChunk, when the heap holds nothing in
// it), so it is always fresh (zero) memory.
//
// Each slot has one owner record (arena/chunk_owner.h; OwnerOf): who holds its chunk (nobody, a
// heap and its class, an array, a freed array's held run, an adoption's live blocks, or nobody
// for good: withdrawn). It is the only table of a chunk's owner: the pool's slow paths dispatch
// on it. It is written here only, under `mu_`, by the transitions that change it: publication,
// Carve (for the owner the caller names), HoldArrayRun, ReturnChunk, Trim and BeginGiveBack. Trim
// (trim.cc) deregisters and unmaps ready chunks with nothing carved and no granted blocks.
//
// The chunk table's entries are the ChunkInfo's address, with bit 0 (kSlowFreeTag) set while the
// pool has remotely granted blocks in the chunk; an unmapped chunk's entry is the tag alone. So
// the pool's slow paths and Trim need only that entry, and one bit test, to tell a chunk whose
// frees need more (foreign memory, granted blocks: pool/grants/registry.h); the inline free reads
// the heap's page map instead, whose entries carry a grant tag of their own. ChunkInfo records
// are immutable once published and never freed before the arena (a trimmed chunk's record is
// retired, not deleted), so a lock-free reader racing a trim reads a valid record.
//
// Chunks backed by files (ArenaConfig::backing: memfds, files in a directory) each have one
// os::ChunkFile, held by the arena per slot (SlotRecord::file) from publication until the chunk is
// trimmed or the arena destroyed, and closed (a directory's file unlinked) only after the chunk is
// deregistered and unmapped. The arena is the one owner of every chunk's descriptor: nothing else
// keeps, duplicates or closes one (docs/backing.md). Files are named
// pinpool-<pid>-<arena serial>-chunk-<slot>, so two pools of a process never collide.
//
// Sharing and handover (handover.cc; docs/sharing.md): SharedChunks lists the ready chunks
// files (duplicated descriptors) for another process to map. Quiesce ends every registration and
// all growth and trim for good; HandOverFiles then gives up ownership of the files (their
// ownership locks released, their names kept at destruction) so a successor can adopt them. A
// successor's arena adopts chunks into the very slots they had (QueueAdoption claims them at
// once, AdoptQueued maps and registers them on Reserve's workers): an adopted chunk that holds
// live blocks of the predecessor is published "held" (all of it carved: no Carve hands it out)
// until the pool returns it with ReturnChunk; an allocation never waits for a held chunk in flight.
//
// Thread safety: ChunkOf/OwnerOf/Carved/BelowWatermark are lock-free and may race with growth
// and trim. Everything else takes `mu_` (briefly: never across a map or a registration).
// SetGranted and BeginGiveBack are called under the pool's grant lock (so a withdrawn chunk keeps
// its tag).
#ifndef PINPOOL_ARENA_ARENA_H_
#define PINPOOL_ARENA_ARENA_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "arena/chunk_owner.h"
#include "arena/growth_in_flight.h"
#include "os/cgroup.h"
#include "os/fd_passing.h"
#include "os/os.h"
#include "pinpool/domain.h"
#include "pinpool/keys.h"
#include "pinpool/stats.h"
#include "util/latency.h"
#include "util/mutex.h"

namespace pinpool::internal {

// What an arena is made of. The pool checks it (ValidatePoolOptions) before Create.
struct ArenaConfig {
  std::size_t chunk_size = 0;  // a power of two
  std::size_t max_chunks = 0;  // the budget, in chunks (>= 1)
  PageSize page_size = PageSize::k4K;
  bool require_page_size = false;
  bool populate = true;
  std::vector<std::shared_ptr<Domain>> domains = {};  // 1 .. kMaxDomains, none null
  int numa_node = -1;             // bind every chunk to this node before touching it; -1: don't
  unsigned reserve_threads = 1;   // workers Reserve may use (>= 1)
  std::size_t low_watermark = 0;  // uncarved bytes below which growth.cc adds chunks; 0: off
  os::BackingSpec backing = {};   // kind and directory; the arena names each chunk's file
};

// An arena's figures, read under its lock.
struct ArenaStats {
  struct DomainCounters {
    std::string name;
    DomainKind kind = DomainKind::kCustom;
    Pinning pinning = Pinning::kNone;
    std::uint64_t registrations = 0;      // successful Register() calls, ever
    std::uint64_t registered_bytes = 0;   // bytes registered now
    double seconds = 0;                   // total time in Register()
    double max_seconds = 0;               // slowest Register()
    LatencyHistogram register_latency;    // each successful Register()
    LatencyHistogram deregister_latency;  // each Deregister()
  };
  struct Placement {
    int node = -1;  // verified node of every sampled page; -1 mixed or none present
    std::size_t sampled = 0;
    std::size_t on_node = 0;
    std::size_t not_present = 0;
  };
  std::size_t reserved_bytes = 0;
  std::size_t chunk_size = 0;
  std::size_t max_chunks = 0;
  std::uint64_t growth_failures = 0;
  // The growth figures as the pool reports them (pinpool/stats.h), counted here directly: all but
  // the start-up times, which the pool measures.
  GrowthStats growth;
  std::vector<Placement> placements;  // placements[i] is chunks[i]'s
  struct Backing {
    std::string description;  // os::ChunkFile::Describe: "anonymous", "memfd", "file <path>"
    bool sealed = false;      // truncation refused by seals
  };
  std::vector<Backing> backings;  // backings[i] is chunks[i]'s
  std::size_t pinned_bytes = 0;   // chunks held by a long-term pinning domain
  std::size_t locked_bytes = 0;   // chunks held by an mlocking domain
  std::vector<ChunkInfo> chunks;
  std::vector<DomainCounters> domains;
};

class Arena {
 public:
  // Reserves the range (kResourceExhausted when the address space is not there).
  static absl::StatusOr<std::unique_ptr<Arena>> Create(ArenaConfig config);
  ~Arena();  // deregisters and unmaps every chunk
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // Bit 0 of a chunk table entry: frees in the chunk take the slow path (set while the chunk
  // holds granted blocks, and in the entries of chunks not mapped).
  static constexpr std::uintptr_t kSlowFreeTag = 1;
  static const ChunkInfo* EntryChunk(std::uintptr_t entry) noexcept {
    return reinterpret_cast<const ChunkInfo*>(entry & ~kSlowFreeTag);
  }

  // The chunk holding `p`, or null when `p` is not inside a mapped chunk of this arena.
  const ChunkInfo* ChunkOf(const void* p) const noexcept { return EntryChunk(EntryOf(p)); }
  // The raw table entry for `p` (kSlowFreeTag alone outside mapped chunks).
  std::uintptr_t EntryOf(const void* p) const noexcept {
    const std::uintptr_t off = reinterpret_cast<std::uintptr_t>(p) - base_;
    const std::uintptr_t index = off >> chunk_shift_;
    if (index >= max_chunks_) return kSlowFreeTag;
    return table_[index].load(std::memory_order_acquire);
  }
  // Sets or clears the granted tag of the mapped chunk holding `p`.
  void SetGranted(const void* p, bool granted) noexcept;

  // The chunk map, for callers that keep a copy next to their own hot data (the pool).
  std::uintptr_t range_base() const noexcept { return base_; }
  std::size_t range_size() const noexcept { return max_chunks_ << chunk_shift_; }
  unsigned chunk_shift() const noexcept { return chunk_shift_; }
  const std::atomic<std::uintptr_t>* chunk_table() const noexcept { return table_.get(); }
  // By slot: the record of the chunk last published there (null before the first; a trimmed
  // chunk's retired record after it), written when a chunk is published and read with a plain
  // load: only for an address of a block the reader holds, whose path through the heap's locks
  // orders the write before the read (the pool's inline allocation builds its Block from it).
  const ChunkInfo* const* chunk_records() const noexcept { return records_.get(); }

  // True when `p` lies in space of its chunk that Carve has handed out (so the heap has
  // pages there). `p` must lie in a mapped chunk (ChunkOf(p) != null). Lock-free.
  bool Carved(const void* p) const noexcept {
    const std::uintptr_t off = reinterpret_cast<std::uintptr_t>(p) - base_;
    return (off & (config_.chunk_size - 1)) <
           carved_end_[off >> chunk_shift_].load(std::memory_order_acquire);
  }

  // `size` bytes aligned to `alignment` inside one chunk, growing if needed (or waiting for a
  // chunk in flight); null when it cannot (then last_growth_error() says why). Never returns the
  // same bytes twice. A chunk nobody owned becomes `owner`'s (kHeap or kArray).
  void* Carve(std::size_t size, std::size_t alignment, ChunkOwner owner = ChunkOwner::Heap(0));
  // The owner holds nothing in the ready chunk at `chunk_base` and will not touch it again unless
  // Carve hands it out anew: its carved space is reset and it is kUnowned, so Trim may give it
  // back. Ignored for a withdrawn chunk (the owner letting go of it).
  void ReturnChunk(const void* chunk_base);
  // The run of a freed array in the chunk at `chunk_base` is held (grants reach it): kArray ->
  // kArrayHeld, true. False, with nothing changed, when the chunk is withdrawn (its run is lost).
  bool HoldArrayRun(const void* chunk_base);
  // The owner record of the slot holding `p` (kUnmapped outside the range). Lock-free.
  ChunkOwner OwnerOf(const void* p) const noexcept {
    const std::uintptr_t index = (reinterpret_cast<std::uintptr_t>(p) - base_) >> chunk_shift_;
    return index < max_chunks_ ? owners_[index].load(std::memory_order_acquire) : ChunkOwner{};
  }

  // Grows until at least `bytes` are mapped, building up to reserve_threads chunks at once (each
  // worker on the NUMA node's CPUs). Chunks built before a failure stay; the error says how many
  // of those asked for were added. `first_added`, when given, is set to when the first chunk this
  // call added was published (left alone when it added none). Once `*cancel` is true no worker
  // starts another chunk (chunks being built finish) and Reserve returns kCancelled: how the
  // pool's background start-up lets its owner stop it early.
  absl::Status Reserve(std::size_t bytes,
                       std::chrono::steady_clock::time_point* first_added = nullptr,
                       const std::atomic<bool>* cancel = nullptr);
  absl::Status last_growth_error() const;

  // Growth off the allocation path (growth.cc): primitives for whoever keeps the low watermark
  // (the pool's background work, or the application through Pool::Replenish). True when the
  // room no allocation has taken yet, counting chunks in flight, is below the low watermark and
  // the budget has room. Lock-free.
  bool BelowWatermark() const noexcept;
  // Adds what is missing below the watermark, at most `max_chunks`: claimed at once, built on up
  // to `workers` threads at once (1: the calling thread alone), so a keeper that falls behind
  // catches up in one registration's time, not one per chunk. OK when none was needed.
  // `added`, when given, is set to the chunks this call added.
  absl::Status Replenish(std::size_t max_chunks, unsigned workers = 1,
                         std::size_t* added = nullptr);
  // Room the keeper wants above low_watermark (growing ahead of consumption: its rate times the
  // time a chunk takes to build); BelowWatermark and Replenish aim at both. 0 by default; the
  // policy that sets it is the keeper's (pool/background.cc). Lock-free.
  void SetExtraRoom(std::size_t bytes) noexcept {
    extra_room_.store(bytes, std::memory_order_relaxed);
  }
  // Bytes Carve has handed out, ever (the keeper's measure of consumption). Lock-free.
  std::uint64_t carved_total() const noexcept {
    return carved_total_.load(std::memory_order_relaxed);
  }
  // Blocks until the room is below the watermark (an allocation took it: Carve signals it),
  // `deadline` passes, or ReleaseWaiters was called. Returns BelowWatermark() as it leaves.
  bool WaitBelowWatermark(std::chrono::steady_clock::time_point deadline);
  // Every WaitBelowWatermark, now and later, returns at once (for the waiter's shutdown).
  void ReleaseWaiters();

  // Trim (trim.cc): deregisters and unmaps ready chunks that hold nothing (nothing carved, no
  // granted blocks), highest first, while more than `floor_bytes` stay mapped and the room left
  // stays at or above the low watermark. Returns the bytes given back.
  std::size_t Trim(std::size_t floor_bytes);

  // --- sharing and handover (handover.cc) --------------------------------------------------------
  struct SharedChunk {
    std::uint32_t index = 0;
    os::UniqueFd fd;   // a duplicate, closed with the SharedChunk
    std::string path;  // a directory's file; empty for a memfd
    bool sealed = false;
    std::size_t hugetlb_page_bytes = 0;
    std::uint32_t generation = 0;  // ChunkInfo::generation
  };
  // Every ready chunk's file, duplicated under the lock (a trim cannot close it under the caller).
  // Empty for anonymous chunks. A duplication that fails fails the whole list, with nothing left
  // open: kResourceExhausted at the descriptor limit (EMFILE, ENFILE), kInternal otherwise.
  absl::StatusOr<std::vector<SharedChunk>> SharedChunks() const;
  // Waits for chunks in flight, deregisters every ready chunk from every domain, and refuses all
  // growth (kFailedPrecondition) and trim from then on. Idempotent.
  void Quiesce();
  // After Quiesce, `true`: releases every chunk file's ownership lock, and the arena's destruction
  // will close their descriptors but keep their names (the successor owns them). `false` undoes
  // it (the handover failed): the locks are taken again.
  void HandOverFiles(bool handed_over);
  // After HandOverFiles(true): takes every ownership lock back, and the files with them, when no
  // successor holds one (it did not adopt the pool: its Adopt failed, or it is gone). With
  // nothing taken: kFailedPrecondition when one is held (a successor owns the chunks),
  // kResourceExhausted when flock fails otherwise (ENOLCK).
  absl::Status TakeBackFiles();
  struct AdoptedChunk {
    std::uint32_t index = 0;
    std::uint32_t generation = 1;  // the predecessor's ChunkInfo::generation: kept
    os::ChunkFile file;            // adopted (os::AdoptChunkFile): this process's own, locked
    bool held = false;             // holds live blocks: published all carved, until ReturnChunk
  };
  // Claims each chunk's slot now (it must be empty; the budget, RLIMIT_MEMLOCK and the cgroup are
  // checked as for growth) and parks its file; AdoptQueued builds them, each published with the
  // generation it had. On error nothing is claimed and the files are disowned (their names kept).
  absl::Status QueueAdoption(std::vector<AdoptedChunk> chunks);
  // Maps and registers the queued chunks, in slot order, on up to reserve_threads workers (as
  // Reserve); one that fails does not stop the others. A chunk that fails is kept, its file
  // open and its slot taken (nothing else grows there), for RetryAdoption: the blocks it holds
  // are not lost to a passing failure. The first error is returned (and kept in
  // last_growth_error). `cancel` as for Reserve.
  absl::Status AdoptQueued(const std::atomic<bool>* cancel = nullptr);
  // Builds the adopted chunk of slot `index` again if its adoption failed; waits if it is being
  // built. OK once it is ready; its failure again (the chunk still kept); kFailedPrecondition when
  // the slot holds no adopted chunk (never handed over, or given back).
  absl::Status RetryAdoption(std::uint32_t index);
  // RetryAdoption of every adopted chunk that failed, in slot order; the first error.
  absl::Status RetryAdoptions();
  // Adopted chunks whose build failed and that are kept for another try.
  std::size_t failed_adoptions() const;
  // Waits while slot `index` is being built: true once it is ready.
  bool AwaitReady(std::uint32_t index);
  // Giving a chunk back because its backing must go (give_back.cc; docs/backing.md): in two steps,
  // so that the caller can revoke what reaches the chunk in between. BeginGiveBack withdraws the
  // ready chunk of slot `index`: Carve, Trim and ReturnChunk leave it alone from then on, its
  // chunk table entry keeps kSlowFreeTag for good (SetGranted no longer clears it) and
  // Withdrawn() is true for its addresses, forever. It stays mapped and registered until
  // FinishGiveBack deregisters it from every domain (last first), unmaps it (a PROT_NONE
  // reservation again), calls `before_close` (the pool records its report there, so that a
  // process whose truncate waited for the lease finds it) and closes its file (releasing the
  // lease, unlinking a directory's file).
  // The slot is never used again, so a late free of one of its blocks can never reach a new
  // chunk: the budget has one chunk fewer. BeginGiveBack returns the owner the chunk had (whose
  // blocks are lost); kFailedPrecondition unless the slot holds a ready chunk (one being built,
  // trimmed or given back already).
  absl::StatusOr<ChunkOwner> BeginGiveBack(std::uint32_t index);
  void FinishGiveBack(
      std::uint32_t index, absl::FunctionRef<void()> before_close = [] {});
  // True when `p` lies in a chunk withdrawn by BeginGiveBack (given back or being given back).
  // Lock-free.
  bool Withdrawn(const void* p) const noexcept { return OwnerOf(p).kind == ChunkOwner::kWithdrawn; }
  // Slots of ready chunks whose file's lease is breaking: another process opened or truncated the
  // file (os/lease.h). Checks at most `max_checks` leased chunks (one fcntl each, under the lock),
  // round robin from where the last call stopped, so a caller that polls bounds both its cost
  // and how long it holds the lock, and still sees every chunk in turn.
  std::vector<std::uint32_t> BrokenLeases(std::size_t max_checks = SIZE_MAX);

  std::size_t chunk_size() const noexcept { return config_.chunk_size; }
  // Bytes in ready chunks now (takes mu_ briefly).
  std::size_t mapped_bytes() const;
  std::size_t max_chunks() const noexcept { return max_chunks_; }
  // This process's memory cgroup, as found when the arena was made (checked before each chunk).
  const os::MemoryCgroupLocation& cgroup() const noexcept { return cgroup_; }
  const std::vector<std::shared_ptr<Domain>>& domains() const noexcept { return config_.domains; }

  ArenaStats Stats() const;

 private:
  // kGivingBack: withdrawn, still mapped and registered; kGivenBack: unmapped, never reused.
  // kAdoptFailed: an adopted chunk whose build failed, its file kept in SlotRecord::adopting
  // (RetryAdoption).
  enum class Slot : std::uint8_t {
    kEmpty,
    kGrowing,
    kReady,
    kTrimming,
    kGivingBack,
    kGivenBack,
    kAdoptFailed
  };
  // What the arena keeps of one slot under `mu_`, in one place. What must be read without the lock
  // lives apart, by slot: table_ and records_ (the chunk), carved_end_ (carved), owners_ (owner).
  struct SlotRecord {
    Slot state = Slot::kEmpty;
    std::unique_ptr<ChunkInfo> chunk;  // null if none
    std::size_t carved = 0;            // bytes used from the front of the chunk
    ArenaStats::Placement placement;
    os::ChunkFile file;  // a ready chunk's file, when it has one (the one owner of its descriptor)
    // A chunk queued for adoption: its file, until Build takes it, and whether it is held.
    os::ChunkFile adopting;
    bool adopt_held = false;
    // The generation last given to a chunk here (ChunkInfo::generation); every claim of the slot
    // that ends, published or not, takes the next, so none is ever given twice.
    std::uint32_t generation = 0;
  };
  // Why a chunk is added (stats).
  enum class Why : std::uint8_t { kReserve, kAllocation, kBackground };
  // A chunk built outside the lock, waiting to be published.
  struct Built {
    std::unique_ptr<ChunkInfo> chunk;
    ArenaStats::Placement placement;
    double seconds[kMaxDomains] = {};  // time in each domain's Register
    os::ChunkFile file;                // the chunk's file, when it has one
    double build_seconds = 0;          // the whole build: map, populate, register, place
  };

  Arena(ArenaConfig config, os::Range range);

  // Claims the lowest empty slot for a new chunk, or slot `want` (which must be empty)
  // (kResourceExhausted: budget or RLIMIT_MEMLOCK; kFailedPrecondition: quiesced).
  absl::StatusOr<std::uint32_t> ClaimLocked(std::optional<std::uint32_t> want = std::nullopt)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Maps, places and registers the chunk of slot `index`. No lock held; all or nothing.
  absl::StatusOr<Built> Build(std::uint32_t index) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status RegisterAll(ChunkInfo& chunk, double* seconds) ABSL_LOCKS_EXCLUDED(mu_);
  // Makes slot `index` ready (or empty again, on error, which is counted and kept) and wakes
  // whoever waits for a chunk in flight. Either way the slot's next generation is taken (the
  // chunk's, when it is published).
  absl::Status PublishLocked(std::uint32_t index, absl::StatusOr<Built> built, Why why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // OK when RLIMIT_MEMLOCK and the memory cgroup leave room for `n` adopted chunks on top of those
  // in flight; else their error, naming the adoption's figures (QueueAdoption).
  absl::Status CheckAdoptionHeadroomLocked(std::size_t n) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Gives back the claim on slot `index`, never built (growth stopped, adoption refused or
  // abandoned): the slot empty again, an adopted file's name kept. The caller updates the
  // lock-free copies of the counts.
  void DropClaimLocked(std::uint32_t index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The next generation of slot `index` (never 0, wrapping past 2^32 - 1 to 1), now taken.
  std::uint32_t NextGenerationLocked(std::uint32_t index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Claim, build, publish: one chunk, on the calling thread.
  absl::Status GrowOne(Why why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Builds and publishes the claimed slots on up to `workers` threads (1: this one), taken in
  // order; after a failure (unless `keep_going`), or once `*cancel` is set, none takes another and
  // the rest are released unbuilt. Returns the first error (kCancelled when cancelled); `added`
  // counts the chunks published. Lets go of `mu_` while building.
  absl::Status BuildClaimedLocked(const std::vector<std::uint32_t>& claimed, std::size_t workers,
                                  Why why, std::chrono::steady_clock::time_point* first_added,
                                  const std::atomic<bool>* cancel, std::size_t* added,
                                  bool keep_going = false) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void* CarveLocked(std::size_t size, std::size_t alignment, ChunkOwner owner)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The one writer of owners_ (under mu_, read lock-free).
  void SetOwnerLocked(std::size_t index, ChunkOwner owner) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    owners_[index].store(owner, std::memory_order_release);
  }
  bool BelowWatermarkLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The room the keeper aims at: low_watermark plus the extra room (0 when the watermark is off).
  std::size_t RoomTarget() const noexcept;
  std::size_t DomainsThatPin(Pinning kind) const noexcept;
  // Slots in use: ready, being built, being trimmed, withdrawn for good (given back), or holding
  // an adoption to try again.
  std::size_t SlotsTakenLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return ready_ + growing_ + trimming_ + withdrawn_count_ + adopt_failed_;
  }
  // What one chunk adds to VmPin (each long-term pin counts: two pinning domains pin it twice),
  // VmLck (once, however many domains lock it) and the memory cgroup (all of it when it is
  // populated or pinned, since pinning faults every page in, unless the chunk must be hugetlb
  // pages, charged to the hugetlb controller; 0 otherwise, and 0 without a cgroup limit to check).
  GrowthCharge ChargePerChunk() const noexcept;
  // OK when RLIMIT_MEMLOCK and the memory cgroup leave room for `total`, the process's chunks in
  // flight with the ones being claimed (growth_in_flight.h); `lower` ends the error's fix.
  absl::Status CheckHeadroom(const GrowthCharge& total, const char* lower) const;
  // A chunk in flight starts (growing_ counts it, and the process's count claims its charge,
  // checked with CheckHeadroom) and ends (published or dropped): the only writers of growing_.
  absl::Status StartGrowingLocked(const char* lower) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EndGrowingLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Deregisters chunk `c` from every domain (last first; not when `registered` is false: Quiesce
  // did), unmaps it (a PROT_NONE reservation again), calls `before_close` and only then closes
  // `file` (trim.cc); timed as a trim. No lock held.
  void TakeDown(
      const ChunkInfo& c, os::ChunkFile file, bool registered = true,
      absl::FunctionRef<void()> before_close = [] {}) ABSL_LOCKS_EXCLUDED(mu_);
  // Domain `d`'s Deregister of `keys`, timed (the caller holds domain_mu_[d] where needed).
  void DeregisterTimed(std::size_t d, const Keys& keys);

  const ArenaConfig config_;
  const os::Range range_;
  // The process's memory cgroup, found once at creation; its figures are read before each chunk.
  const os::MemoryCgroupLocation cgroup_ = os::FindMemoryCgroup();
  const std::uintptr_t base_;
  const unsigned chunk_shift_;
  const std::size_t max_chunks_;
  const std::unique_ptr<std::atomic<std::uintptr_t>[]> table_;
  const std::unique_ptr<const ChunkInfo*[]> records_;  // chunk_records()
  // SlotRecord::carved again, readable without the lock (written under it).
  const std::unique_ptr<std::atomic<std::size_t>[]> carved_end_;
  // By slot: the owner record (OwnerOf), written under mu_ (SetOwnerLocked).
  const std::unique_ptr<std::atomic<ChunkOwner>[]> owners_;
  static_assert(std::atomic<ChunkOwner>::is_always_lock_free);
  // Domains that did not opt into concurrent registration are called one chunk at a time.
  const std::unique_ptr<Mutex[]> domain_mu_;
  // Latency histograms, recorded lock-free where the slow work happens (util/latency.h).
  const std::unique_ptr<LatencyRecorder[]> register_latency_;    // per domain
  const std::unique_ptr<LatencyRecorder[]> deregister_latency_;  // per domain
  LatencyRecorder growth_latency_;
  LatencyRecorder trim_latency_;

  mutable Mutex mu_;
  CondVar chunk_done_;       // a chunk in flight was published or failed
  CondVar below_watermark_;  // an allocation took the room below the watermark, or ReleaseWaiters
  std::vector<SlotRecord> slots_ ABSL_GUARDED_BY(mu_);                    // by slot index
  std::vector<std::unique_ptr<ChunkInfo>> retired_ ABSL_GUARDED_BY(mu_);  // trimmed chunks' records
  std::vector<std::uint32_t> queued_ ABSL_GUARDED_BY(mu_);  // slots QueueAdoption claimed
  std::size_t growing_held_ ABSL_GUARDED_BY(mu_) = 0;       // of growing_: held adoptions
  bool quiesced_ ABSL_GUARDED_BY(mu_) = false;
  bool registrations_ended_ ABSL_GUARDED_BY(mu_) = false;
  bool handed_over_ ABSL_GUARDED_BY(mu_) = false;
  const std::string file_prefix_;                    // "pinpool-<pid>-<serial>"
  std::size_t slots_used_ ABSL_GUARDED_BY(mu_) = 0;  // one past the highest slot ever claimed
  std::size_t ready_ ABSL_GUARDED_BY(mu_) = 0;
  std::size_t growing_ ABSL_GUARDED_BY(mu_) = 0;
  std::size_t trimming_ ABSL_GUARDED_BY(mu_) = 0;
  std::size_t withdrawn_count_ ABSL_GUARDED_BY(mu_) = 0;  // slots kGivingBack or kGivenBack
  std::size_t adopt_failed_ ABSL_GUARDED_BY(mu_) = 0;     // slots kAdoptFailed
  std::size_t lease_cursor_ ABSL_GUARDED_BY(mu_) = 0;     // where BrokenLeases goes on
  std::size_t uncarved_ ABSL_GUARDED_BY(mu_) = 0;
  // Copies of growing_, ready_ + growing_ + trimming_ + withdrawn_count_ and uncarved_ for
  // BelowWatermark.
  std::atomic<std::size_t> growing_now_{0};
  std::atomic<std::size_t> slots_taken_now_{0};
  std::atomic<std::size_t> uncarved_now_{0};
  std::atomic<std::size_t> extra_room_{0};      // SetExtraRoom
  std::atomic<std::uint64_t> carved_total_{0};  // carved_total
  std::vector<ArenaStats::DomainCounters> domain_counters_ ABSL_GUARDED_BY(mu_);
  std::uint64_t growth_failures_ ABSL_GUARDED_BY(mu_) = 0;
  GrowthStats growth_ ABSL_GUARDED_BY(mu_);  // its counters; the levels are filled by Stats()
  absl::Status last_growth_error_ ABSL_GUARDED_BY(mu_);
  bool waiters_released_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace pinpool::internal

#endif  // PINPOOL_ARENA_ARENA_H_
