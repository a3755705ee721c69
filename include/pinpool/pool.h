// Pool: registered memory, long-term pinned by default, handed out in blocks that carry their
// keys.
//
// A pool reserves one aligned virtual range at creation and maps and registers it a whole chunk
// at a time, with every domain, up to its budget. Registration is what pins: each domain says how
// (Domain::pinning; GetStats().pinned_bytes and locked_bytes count the chunks by it). Blocks are
// carved from the chunks by the pool's own heap (size classes, per-thread caches, a shared
// transfer layer, a page heap); registered pages are never returned to the kernel while they are
// registered: only Trim gives memory back, whole idle chunks, deregistered first.
//
// Thread safety: Allocate, Deallocate, Reallocate, Lookup and UsableSize may be called from any
// thread at once; a block may be freed by a thread other than the one that allocated it. They
// make no system call and no registration once the pool has the chunks it needs. Growth (when
// the chunks are full) maps and registers a chunk with no lock held: with a low watermark it
// happens in the background (PoolOptions::low_watermark, Replenish); otherwise the allocation
// that finds no room does it, and one that finds another chunk being added waits for that chunk
// only (docs/growth.md). Destroying the pool while other threads use it is a bug.
//
// Buffer classes (PoolOptions::classes, docs/classes.md): named shares of the pool, each with a
// reservation in whole chunks no other class can take and a cap; Allocate(ClassId, size) draws
// from a class, Allocate(size) from the default class, exactly as fast as without classes.
//
// Errors: Create and Reserve return a Status saying which limit was hit and what to change. The
// allocation path never throws: it returns an empty Block, and last_growth_error() says why.
// Misuse that would corrupt the pool aborts with a message naming the pointer and the rule:
// freeing an address outside the pool's chunks, a double free, a pointer that is not the start
// of a block, a sized free naming more bytes than the block has. docs/robustness.md states the
// policy for every misuse and exactly what is caught; PoolOptions::debug_checks catches the rest
// (races), at the cost of the fast path.
#ifndef PINPOOL_POOL_H_
#define PINPOOL_POOL_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pinpool/abi.h"
#include "pinpool/array.h"
#include "pinpool/block.h"
#include "pinpool/export.h"
#include "pinpool/fast_path.h"
#include "pinpool/options.h"
#include "pinpool/share.h"
#include "pinpool/stats.h"
#include "pinpool/take_back.h"

namespace pinpool {

namespace internal {
class Arena;
class BackgroundWork;
struct CApi;
class GrantRegistry;
class Heap;
struct PoolMetrics;
class PoolArrays;
class PoolClasses;
class Sharing;
struct TakeBack;
}  // namespace internal

PINPOOL_ABI_BEGIN

class GrantLock;

// A buffer class of one pool (PoolOptions::classes; docs/classes.md), from Pool::ClassOf. Only
// meaningful to the pool it came from.
struct ClassId {
  std::uint32_t index = 0;
  friend bool operator==(ClassId, ClassId) = default;
};
// The class of Allocate without a class: no reservation, and whatever the named classes have
// not reserved (up to the budget).
inline constexpr ClassId kDefaultClass{0};

class PINPOOL_EXPORT Pool {
 public:
  // Validates the options, checks that `initial_size` fits under every ceiling before pinning
  // or mapping anything (docs/ceilings.md), reserves the address range and maps `initial_size`
  // (only its first chunk with PoolOptions::initial_size_in_background: the pool's thread maps
  // the rest, and Ready() / AwaitInitialSize() say when it is there).
  // Errors: kInvalidArgument (bad option), kResourceExhausted (budget, address space, and, for
  // initial_size before anything is pinned: RLIMIT_MEMLOCK, or the memory cgroup's limit, past
  // which the kernel would OOM-kill the process; the message names the ceiling, the numbers and
  // the fix), kFailedPrecondition (required huge pages missing, for initial_size before anything
  // is mapped: fix the system, then retry), or what a
  // domain returned. With no domain named, kPermissionDenied or kUnimplemented when long-term
  // pinning is impossible here (io_uring disabled or blocked, an old kernel): the message names
  // the cause and the alternatives.
  static absl::StatusOr<std::unique_ptr<Pool>> Create(PoolOptions options);

  // Deregisters and unmaps everything the pool created. Blocks still live become invalid (with
  // PoolOptions::debug_checks, a warning on stderr counts them). Every VerbsRemoteAccess on the
  // pool must be destroyed first (else this aborts saying so: peers could still reach the memory).
  // Using the pool afterwards is undefined, like any destroyed object; while its memory is not
  // reused, calls abort saying so.
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  // `size` bytes aligned to `alignment` (a power of two, at most chunk_size). Empty Block when
  // the size is 0 (adapters that need a pointer for 0 bytes ask for 1) or above
  // max_block_size(), the alignment is invalid, or the budget is spent.
  // Inline (pinpool/fast_path.h): a block of up to 64 KiB, aligned to at most 16, comes from the
  // thread's cache without a call into the library.
  PINPOOL_FAST_INLINE Block Allocate(std::size_t size, std::size_t alignment) noexcept {
    if (__builtin_expect(alignment - 1 < 16 && (alignment & (alignment - 1)) == 0, 1)) {
      return Allocate(size);
    }
    return AllocateSlow(size, alignment);
  }
  // The same with alignof(std::max_align_t) (16).
  PINPOOL_FAST_INLINE Block Allocate(std::size_t size) noexcept {
    if (__builtin_expect(size - 1 < fast::kMaxFastSize, 1)) {
      if (void* p = fast::TryPop(head_.heap_id, size)) return Block(p, size, BlockChunk(p));
    }
    return AllocateSlow(size, 16);
  }

  // A block of class `cls` (ClassOf): from that class's own chunks, so it never takes what
  // another class reserved, and an empty Block when the class is at its cap (class_error says
  // which class and its numbers) or the pool cannot give the class another chunk. The same
  // inline cache pop as Allocate: a thread that keeps to one class pays the same; one that
  // switches classes finds its cache of the class in a short per-thread list (a call).
  // `cls` must come from this pool's ClassOf (else this aborts naming it).
  PINPOOL_FAST_INLINE Block Allocate(ClassId cls, std::size_t size) noexcept {
    if (__builtin_expect(size - 1 < fast::kMaxFastSize && cls.index < head_.class_count, 1)) {
      if (void* p = fast::TryPop(head_.class_heap_ids[cls.index], size)) {
        return Block(p, size, BlockChunk(p));
      }
    }
    return AllocateInClass(cls, size, 16);
  }
  Block Allocate(ClassId cls, std::size_t size, std::size_t alignment) noexcept {
    return AllocateInClass(cls, size, alignment);
  }
  // The class named `name` ("default" names kDefaultClass): kNotFound, listing the names,
  // otherwise.
  absl::StatusOr<ClassId> ClassOf(std::string_view name) const;
  // Why the class's last allocation that needed a chunk failed (OK if none did): its cap, the
  // other classes' reservations, or the pool's growth error; the message names the class and
  // its numbers. `cls` must be this pool's.
  absl::Status class_error(ClassId cls) const;

  // Frees a block from Allocate/Reallocate. An empty block is ignored. Aborts on a double free
  // or a pointer that is not a block's start (see docs/robustness.md for what is caught). A
  // block a remote grant can still reach (pinpool/verbs_remote_access.h) is not reused at once: its
  // grants' revocation starts and the block is held until every one has completed.
  // Inline, as Allocate: a free onto the thread's cache is checked and done in the caller.
  PINPOOL_FAST_INLINE void Deallocate(const Block& block) noexcept {
    Deallocate(block.data(), block.size());
  }
  // Frees by address and the size it was allocated (or last reallocated) with: as fast as
  // freeing the Block. Null is ignored; size 0 means unknown (as the next overload).
  PINPOOL_FAST_INLINE void Deallocate(void* data, std::size_t size) noexcept {
    data = fast::Launder(data);
    if (!TryFreeFast(data, size)) DeallocateSlow(data, size);
  }
  // Frees by address alone (C-style): checked as closely as the sized free, and as fast but for
  // a pair of allocate and free (the block's class comes from the pool's page map, which the
  // free must read before it knows the bin; a sized free up to 64 KiB takes the bin from the
  // size and tests that the page map names the same class). Null is ignored.
  PINPOOL_FAST_INLINE void Deallocate(void* data) noexcept { Deallocate(data, 0); }

  // An array of `count` elements of `element_size` bytes, each aligned to `alignment` (a power
  // of two, at most element_size), that may span many chunks, no element straddling one
  // (pinpool/array.h; docs/arrays.md). One block when it fits one (count x stride <=
  // max_block_size()), else whole chunks of the default class. Its contents are unspecified, as
  // a block's. Not the fast path: it may grow the pool (a registration per chunk).
  // Errors: kInvalidArgument (count 0, element_size 0, an alignment that is not a power of two or
  // is larger than the element, an element larger than chunk_size(), count x stride or the whole
  // chunks the array spans overflowing),
  // kResourceExhausted (more chunks than the budget holds, or the budget, a class's reservations
  // or a ceiling met while growing), or the growth error; on any error nothing it took stays
  // taken, and chunks it mapped are unmapped again.
  absl::StatusOr<Array> AllocateArray(std::size_t count, std::size_t element_size,
                                      std::size_t alignment = 1);
  // Frees an array of this pool and empties it; an empty Array is ignored. Aborts for an array of
  // another pool. Its elements are not blocks: freeing one with Deallocate(void*) aborts (not a
  // block's start), except element 0 of a one-block array (Array::in_block), which is its block's
  // start: freeing it frees the array's memory, and a later Deallocate(Array) aborts (a double
  // free).
  void Deallocate(Array&& array) noexcept;

  // Resizes in place when it can, else moves the contents to a new block (aligned to 16 bytes;
  // a larger alignment the block was allocated with is not kept). On failure returns an empty
  // Block and leaves `block` allocated and unchanged. An empty `block` allocates. A block a
  // remote grant reaches is never resized (empty Block): revoke its grants first.
  Block Reallocate(const Block& block, std::size_t new_size) noexcept;
  // The same by address alone (C-style). Null allocates.
  Block Reallocate(void* data, std::size_t new_size) noexcept;

  // The chunk and keys of any address inside the pool's chunks: constant time, no lock.
  std::optional<Location> Lookup(const void* address) const noexcept;
  // True when `address` lies in one of this pool's chunks.
  bool Contains(const void* address) const noexcept;
  // Bytes usable at `data`, a pointer Allocate returned (>= the size asked for). Aborts if
  // `data` is outside the pool's chunks, free, or not a block's start (as Deallocate(data)
  // checks it); 0 for null.
  std::size_t UsableSize(const void* data) const noexcept;

  // Maps and registers chunks until at least `bytes` are mapped (setup-time growth), on up to
  // PoolOptions::reserve_threads threads at once. Chunks added before a failure stay. Each chunk
  // is checked before it is mapped: kResourceExhausted past the budget, RLIMIT_MEMLOCK or the
  // memory cgroup's headroom (the same messages as Create's, ending "or lower
  // PoolOptions::budget"); growth on the allocation path meets the same checks.
  absl::Status Reserve(std::size_t bytes);
  // Whether all of initial_size is mapped: true once Create returns, unless
  // PoolOptions::initial_size_in_background asked for the rest to be built after it returned.
  // A few loads, no lock held across growth.
  bool Ready() const;
  // Waits at most `timeout` for all of initial_size: OK once mapped; the start-up's failure when
  // it failed (kept in last_growth_error() as well; the pool serves from what it has);
  // kDeadlineExceeded when the time ran out first.
  absl::Status AwaitInitialSize(std::chrono::nanoseconds timeout) const;
  // Why the last growth failed (OK if none did), whichever thread grew: an allocation, Reserve,
  // the background grower or Replenish.
  absl::Status last_growth_error() const;

  // Growth off the allocation path, for an application that keeps the low watermark from its own
  // event loop (PoolOptions::low_watermark): NeedsReplenish is a few relaxed loads (no lock, no
  // system call), true when the room left is below the watermark and the budget allows more;
  // Replenish adds chunks on the calling thread until the watermark is met, at most
  // `max_chunks` of them (each one maps, populates and registers a chunk: milliseconds), and
  // returns the first failure (also in last_growth_error()). OK when nothing was needed.
  bool NeedsReplenish() const noexcept;
  absl::Status Replenish(std::size_t max_chunks = SIZE_MAX);

  // Gives whole idle chunks back (deregistered from every domain, unmapped) while more than
  // `floor_bytes` stay mapped, never leaving less room than the low watermark. A chunk is idle
  // when no live block lies in it and no grant can reach it (a block freed while granted is held
  // until its revocation completes, and keeps its chunk). Drains every thread's cache first
  // (the same handshake a failing allocation uses), so call it from a quiet moment, not per
  // request. Returns the bytes given back; registered bytes, VmPin/VmLck and the mapping count go
  // down with them. The pool grows again on demand afterwards. PoolOptions::trim_interval_ms does
  // it periodically.
  std::size_t Trim(std::size_t floor_bytes = 0);

  // Gives back the chunk holding `address` because its backing must go (docs/backing.md, "Taking
  // memory back"); the background work does the same by itself when another process opens or
  // truncates the file of a chunk in PoolOptions::backing's directory. In order: the chunk is
  // withdrawn (nothing is handed out from it again, frees of its blocks are ignored), every grant
  // on its blocks is revoked through its holder, the heap forgets it, and once every revocation
  // is confirmed it is deregistered from every domain, unmapped and its file closed; then
  // TakeLostChunks reports it, with its blocks that were live. Its slot is never used again: the
  // budget has one chunk fewer (so a late free of a lost block can never reach another block).
  // Returns OK when the chunk is given back. kDeadlineExceeded when grants on it are still
  // being revoked after `timeout` (a verbs window's invalidation completes when the application
  // polls its completions): the chunk stays withdrawn and mapped, and a later GiveBack of it, or
  // the background work, finishes it. kInvalidArgument when `address` is not in a chunk of the
  // pool; kFailedPrecondition when its chunk is being added or trimmed, or other threads' caches
  // cannot be emptied (no membarrier: the chunk is then withdrawn but stays mapped).
  absl::Status GiveBack(const void* address,
                        std::chrono::nanoseconds timeout = std::chrono::seconds(1));
  // The chunks given back since the last call (pinpool/take_back.h: each with the live blocks it
  // held). Poll it after GiveBack, and from time to time when chunks are files another process
  // could open (or when PoolStats::chunks_given_back moves).
  std::vector<LostChunk> TakeLostChunks();

  // A snapshot of the pool's figures (pinpool/stats.h). Inline, so that the PoolStats is the
  // caller's: FillStats fills the members the caller knows (PoolStats::struct_size) and no more.
  PoolStats GetStats() const {
    PoolStats stats;
    FillStats(stats);
    return stats;
  }
  void FillStats(PoolStats& stats) const;
  // Serves the pool's metrics to other processes: a Unix socket at `socket_path` (mode 0600,
  // removed when serving stops) answers each connection with GetStats().ToOpenMetrics() and
  // closes it; `pinpool-info --metrics PATH` reads it. Off unless called; one socket per pool
  // (a second call with another path replaces the first once the new socket serves; the same
  // path again is OK and changes nothing; a call that fails leaves the first serving). For an
  // HTTP endpoint of the application's own, serve
  // GetStats().ToOpenMetrics() instead. Errors: kInvalidArgument (path too long),
  // kAlreadyExists (another process listens there, or the path is not a socket),
  // kPermissionDenied, kInternal.
  absl::Status ServeMetrics(const std::string& socket_path);
  // Stops serving (removes the socket); the destructor does it too.
  void StopServingMetrics();
  // --- sharing and handover (pinpool/share.h; docs/sharing.md) ---------------------------------
  // Need a file-backed pool (PoolOptions::backing not kAnonymous: kFailedPrecondition otherwise)
  // without named classes (kFailedPrecondition).

  // The handle naming `block` (a block of this pool, as Allocate or Claim returned it) in every
  // process that maps the pool's chunks. kInvalidArgument when it lies in no chunk of this pool
  // or does not fit in its chunk. Does not check the block is live (a few arithmetic steps).
  absl::StatusOr<BlockHandle> HandleOf(const Block& block) const;
  // Sends every chunk's descriptor and the pool's description on `socket` (a connected Unix stream
  // socket) for the process at the other end to map (Attachment::Receive; call again after the
  // pool grew: Attachment::Update). The pool watches that socket: the process counts as attached
  // (PoolStats::sharing) until its end closes. All or nothing: every chunk's descriptor is
  // duplicated before anything is sent. Errors: kUnavailable (the peer is gone),
  // kInvalidArgument (not a socket), kFailedPrecondition (see above; or quiesced),
  // kResourceExhausted (this process's descriptor limit: sending needs one more per chunk).
  absl::Status Share(int socket);

  // Warm restart, first step: ends every registration of the pool so that no device can reach its
  // memory, and stops it: no allocation succeeds afterwards (empty Blocks), Trim and growth do
  // nothing, blocks may still be freed; Lookup's keys are void. Needs every grant holder
  // (VerbsRemoteAccess, FabricRemoteAccess) destroyed first: destroying one ends each of its grants
  // (windows invalidated, regions deregistered), so nothing a peer holds can reach the pool
  // (kFailedPrecondition otherwise, nothing changed). Waits for chunks being built. No other
  // thread may use the pool meanwhile. Idempotent.
  absl::Status Quiesce();
  // Second step: sends the pool (its chunks' descriptors and description, with `live`, the blocks
  // the successor's application needs back) on `socket` to the successor (Pool::Adopt). The
  // chunks' files belong to the successor afterwards: this pool's destruction keeps them (a
  // directory's files are not removed) and this process must not touch the memory again. Keep the
  // pool until the successor's Adopt returned OK (the application's protocol says so): when it
  // failed, or the successor went away, no process owns the chunks and HandOver may be called
  // again (on a new socket); once a successor adopted them, HandOver is refused. Errors:
  // kFailedPrecondition (not quiesced; adopted by a successor already; an adopted chunk of this
  // pool still to be built, see Claim), kInvalidArgument (a
  // handle outside the pool's chunks, or overlapping another), kUnavailable (the successor is
  // gone) or kResourceExhausted (the descriptor limit, before anything is sent): after either the
  // pool is as before the call and may be handed over again.
  absl::Status HandOver(int socket, std::span<const BlockHandle> live);
  // The successor's side: receives a handed-over pool on `socket` and creates a pool of `options`
  // over the same chunks, each in the position it had, its contents intact. Returns once the
  // chunks are mapped by name and owned (each file's ownership lock taken: a pool is adopted once),
  // before they are registered: registering them with `options.domains` goes on in the background
  // (Ready() and AwaitInitialSize() tell when every chunk is registered, and initial_size beyond
  // the adopted chunks is added after), and allocations are served meanwhile from chunks already
  // registered. The handed-over blocks are live blocks of the new pool (Claim). `options` must
  // match what was handed over: the same backing kind, chunk_size, a budget that holds every
  // adopted chunk's position, no named classes (kInvalidArgument saying which, or
  // kFailedPrecondition for a pool another process adopted already); kResourceExhausted when
  // RLIMIT_MEMLOCK or the memory cgroup cannot take every chunk, or a descriptor, a lock or memory
  // is short. Errors leave nothing mapped or registered, every file with its name and no
  // ownership lock taken: the predecessor may hand the pool over again.
  static absl::StatusOr<std::unique_ptr<Pool>> Adopt(PoolOptions options, int socket);
  // A block handed over to this pool (Adopt's `live`): waits until its chunk is registered, then
  // returns it with this pool's keys; free it as any block. The same Block each time until it is
  // freed. kNotFound when `handle` names no handed-over block that is still live. An adopted chunk
  // whose mapping or registration failed (after the start-up's own retries) is kept, file and all:
  // Claim of one of its blocks builds it again, and returns kUnavailable with the failure when
  // that fails too (its blocks are kept: Claim again once the cause is gone).
  absl::StatusOr<Block> Claim(const BlockHandle& handle);
  // The handles Adopt received, in the order sent (freed ones included).
  std::vector<BlockHandle> AdoptedBlocks() const;
  // The pool's identity (random at Create, kept across handovers).
  const PoolId& id() const noexcept;

  const PoolOptions& options() const noexcept;
  std::size_t chunk_size() const noexcept;
  // The largest size Allocate can serve: 7/8 of chunk_size (one block never spans two chunks).
  std::size_t max_block_size() const noexcept;

 private:
  friend class GrantLock;        // the public face of grants_ (pinpool/grant_lock.h)
  friend struct internal::CApi;  // the C API's pinpool_malloc (c_api.cc)

  // Create and Adopt over one build step (pool/build.cc): the options checked, every ceiling
  // checked, the parts made; nothing mapped yet. MapStartup then maps what Create maps itself.
  PINPOOL_NO_EXPORT static absl::StatusOr<std::unique_ptr<Pool>> Build(PoolOptions options,
                                                                       const PoolId& id);
  PINPOOL_NO_EXPORT Pool(PoolOptions options, std::unique_ptr<internal::Arena> arena,
                         std::unique_ptr<internal::PoolClasses> classes,
                         std::unique_ptr<internal::Heap> heap, const PoolId& id);
  PINPOOL_NO_EXPORT absl::Status MapStartup(std::chrono::steady_clock::time_point start);
  // What the inline paths call for everything else (exported: programs call them).
  Block AllocateSlow(std::size_t size, std::size_t alignment) noexcept;
  void DeallocateSlow(void* data, std::size_t size) noexcept;
  Block AllocateInClass(ClassId cls, std::size_t size, std::size_t alignment) noexcept;
  // The heap whose block p (in a mapped chunk) is: its chunk's class's.
  PINPOOL_NO_EXPORT internal::Heap& HeapOf(const void* p) const noexcept;
  // A block of an adopted chunk the application still holds (pool/sharing/sharing.h): the slow
  // paths ask before the heap, which never had it.
  PINPOOL_NO_EXPORT bool Reclaimed(const void* p, std::size_t* size = nullptr) const noexcept;

  // The ChunkInfo of p, any address in a mapped chunk of this pool: the chunk table entry
  // without its tag bit.
  PINPOOL_FAST_INLINE const ChunkInfo* ChunkAt(const void* p) const noexcept {
    const std::uintptr_t index =
        (reinterpret_cast<std::uintptr_t>(p) - head_.range_base) >> head_.chunk_shift;
    const std::uintptr_t entry = head_.chunk_table[index].load(std::memory_order_acquire);
    return reinterpret_cast<const ChunkInfo*>(entry & ~std::uintptr_t{1});
  }
  // The same for p, a block this thread was just handed: a plain load from the arena's records
  // (written when the chunk was published, which the block's own path through the heap's locks
  // orders before this read), so a caller that drops the Block's chunk drops the load too.
  PINPOOL_FAST_INLINE const ChunkInfo* BlockChunk(const void* p) const noexcept {
    return AtAddress<const ChunkInfo*>(head_.chunk_records_origin,
                                       reinterpret_cast<std::uintptr_t>(p), head_.chunk_shift);
  }
  // An array with one element per 2^shift bytes of the range, kept as its origin: where its
  // element 0 would lie if the range began at address 0 (an integer: it lies outside the array;
  // the range starts at a multiple of the chunk size). The element for address a is then one
  // shift of a away, with no subtraction of the range's base: in a pair of allocate and free
  // of one size, p comes from memory and its chain to the bin is the pair's latency.
  template <typename T>
  static std::uintptr_t OriginOf(const T* array, std::uintptr_t range_base,
                                 unsigned shift) noexcept {
    return reinterpret_cast<std::uintptr_t>(array) - (range_base >> shift) * sizeof(T);
  }
  template <typename T>
  PINPOOL_FAST_INLINE static const T& AtAddress(std::uintptr_t origin, std::uintptr_t a,
                                                unsigned shift) noexcept {
    return *reinterpret_cast<const T*>(origin + (a >> shift) * sizeof(T));
  }
  // The checks of every free, sized or by address, then the push onto the thread's cache: p in
  // the pool's range; then, from p's page map entry (one flat array over the range: one load),
  // no grant reaching a block that starts on the page (the entry's grant tag), p exactly a
  // block's start of the default heap (which also makes it 16-byte aligned: every class's size
  // and every span's start are multiples of 16) and `size` no larger than it (a sized free up
  // to 64 KiB: the entry names the size's class; entries of pages in chunks the heap does not
  // hold, unmapped ones included, are 0 and fail); not free already (the free mark). False when the
  // library must look: it holds granted blocks and aborts on misuse naming the rule. The entry's
  // address is taken from p alone (AtAddress), not from the range test's subtraction, so that it
  // waits for one shift of p.
  PINPOOL_FAST_INLINE bool TryFreeFast(void* data, std::size_t size) noexcept {
    const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(data);
    if (__builtin_expect(a - head_.range_base >= head_.range_size, 0)) return false;
    return fast::TryFree(head_.heap_id, head_.secret,
                         AtAddress<fast::PageEntry>(head_.page_map_origin, a, fast::kPageShift),
                         data, size);
  }
  // GiveBack of chunk `index` (pool/take_back.cc), and the background work's lease check.
  PINPOOL_NO_EXPORT absl::Status GiveBackChunk(std::uint32_t index, const char* reason,
                                               std::chrono::nanoseconds timeout);
  PINPOOL_NO_EXPORT void TakeBackBrokenLeases();
  // GetStats without the liveness check: for the metrics server's thread, which the destructor
  // stops after the pool is marked dead (pool/stats.cc).
  PINPOOL_NO_EXPORT PoolStats CollectStats() const;
  // Aborts, naming `what`, if the pool has been destroyed (and its memory not yet reused).
  PINPOOL_NO_EXPORT void CheckAlive(const char* what) const noexcept;
  // The background thread (low watermark, trim policy), as the options ask (pool/growth.cc).
  // `start`: when Create began (the start-up times are measured from it).
  // `adopting`: chunks queued for adoption are built first (Adopt). Fails when the thread cannot
  // be started.
  PINPOOL_NO_EXPORT absl::Status StartBackgroundWork(std::chrono::steady_clock::time_point start,
                                                     bool adopting = false);

  static constexpr std::uint64_t kAlive = 0x706f6f6c2d6c6976;      // "pool-liv"
  static constexpr std::uint64_t kDestroyed = 0x706f6f6c2d646561;  // "pool-dea"

  // First, in one line of the Pool: what the inline paths read (fast::PoolHead). The
  // destructor poisons it (a dead heap id, an empty range, no classes) so that a call through a
  // dangling pointer takes the slow path, which checks alive_.
  fast::PoolHead head_;
  std::uint64_t alive_ = kAlive;
  PoolOptions options_;  // as created with, the default domain filled in
  // Seconds from Create's start to its first chunk and to all of initial_size; -1 when it mapped
  // none, or not yet (the background start-up writes the second).
  double startup_first_chunk_ = -1;
  std::atomic<double> startup_initial_size_{-1};
  // The parts, each using only those declared before it, so that destruction (in reverse) takes
  // each down while what it uses still stands: the chunks; the named classes' ledger and heaps
  // (null without named classes), whose ledger the default heap takes chunks from; the default
  // heap; the grant registry, which tags pages in the heaps; arrays, over the arena, the ledger
  // and the registry; sharing and what was given back; the metrics (the server's thread reads
  // every part's figures); the background work last, whose thread uses all of them.
  std::unique_ptr<internal::Arena> arena_;
  std::unique_ptr<internal::PoolClasses> classes_;
  std::unique_ptr<internal::Heap> heap_;
  std::unique_ptr<internal::GrantRegistry> grants_;
  std::unique_ptr<internal::PoolArrays> arrays_;
  std::unique_ptr<internal::Sharing> sharing_;
  std::unique_ptr<internal::TakeBack> take_back_;
  std::unique_ptr<internal::PoolMetrics> metrics_;
  std::unique_ptr<internal::BackgroundWork> background_;  // null when the options ask for none
};

PINPOOL_ABI_END
}  // namespace pinpool

#endif  // PINPOOL_POOL_H_
