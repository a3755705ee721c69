// Arena: the chunks of one pool, and the only code that calls into domains.
//
// At creation it reserves one virtual range of budget bytes aligned to the chunk size, so that
// `address -> chunk -> keys` is a subtraction, a shift and one acquire load (ChunkOf), with no
// lock. It grows a whole chunk at a time: map (os layer), register with every domain in order,
// then publish the ChunkInfo; a failure at any step undoes the earlier ones, so no chunk is ever
// half-registered. Chunks stay mapped and registered until the arena is destroyed. It knows its
// own configuration (ArenaConfig) and reports its own figures (ArenaStats); the pool validates
// the user's options and turns these into its public types.
//
// The heap asks for space with Carve(): first fit over the unused tails of the chunks, growing
// when none fits. Carved space is never taken back, so it is always fresh (zero) memory.
//
// The chunk table's entries are the ChunkInfo's address, with bit 0 (kSlowFreeTag) set while the
// pool has remotely granted blocks in the chunk; an unmapped chunk's entry is the tag alone. So
// the pool's fast free path needs only the entry it loads anyway, and one bit test, to send
// every free that needs more (foreign memory, granted blocks: pool/grant_registry.h) to its
// slow path.
//
// Thread safety: ChunkOf/SameChunk/Carved are lock-free and may race with growth. Carve, Reserve
// and the stats take `mu_`. Published ChunkInfo records are immutable. SetGranted is called
// under the pool's grant lock.
#ifndef PINPOOL_ARENA_ARENA_H_
#define PINPOOL_ARENA_ARENA_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "os/os.h"
#include "pinpool/domain.h"
#include "pinpool/keys.h"
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
};

// An arena's figures, read under its lock.
struct ArenaStats {
  struct DomainCounters {
    std::string name;
    DomainKind kind = DomainKind::kCustom;
    Pinning pinning = Pinning::kNone;
    std::uint64_t registrations = 0;     // successful Register() calls, ever
    std::uint64_t registered_bytes = 0;  // bytes registered now
    double seconds = 0;                  // total time in Register()
    double max_seconds = 0;              // slowest Register()
  };
  std::size_t reserved_bytes = 0;
  std::size_t chunk_size = 0;
  std::size_t max_chunks = 0;
  std::uint64_t growth_failures = 0;
  std::size_t pinned_bytes = 0;  // chunks held by a long-term pinning domain
  std::size_t locked_bytes = 0;  // chunks held by an mlocking domain
  std::vector<ChunkInfo> chunks;
  std::vector<DomainCounters> domains;
};

class Arena {
 public:
  // Reserves the range (kResourceExhausted when the address space is not there).
  static absl::StatusOr<std::unique_ptr<Arena>> Create(ArenaConfig config);
  ~Arena();
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

  bool SameChunk(const void* a, const void* b) const noexcept {
    return ((reinterpret_cast<std::uintptr_t>(a) - base_) >> chunk_shift_) ==
           ((reinterpret_cast<std::uintptr_t>(b) - base_) >> chunk_shift_);
  }

  // True when `p` lies in space of its chunk that Carve has handed out (so the heap has
  // pages there). `p` must lie in a mapped chunk (ChunkOf(p) != null). Lock-free.
  bool Carved(const void* p) const noexcept {
    const std::uintptr_t off = reinterpret_cast<std::uintptr_t>(p) - base_;
    return (off & (config_.chunk_size - 1)) <
           carved_end_[off >> chunk_shift_].load(std::memory_order_acquire);
  }

  // `size` bytes aligned to `alignment` inside one chunk, growing if needed; null when it cannot
  // (then last_growth_error() says why). Never returns the same bytes twice.
  void* Carve(std::size_t size, std::size_t alignment);

  // Grows until at least `bytes` are mapped.
  absl::Status Reserve(std::size_t bytes);
  absl::Status last_growth_error() const;

  std::size_t chunk_size() const noexcept { return config_.chunk_size; }
  const std::vector<std::shared_ptr<Domain>>& domains() const noexcept { return config_.domains; }

  ArenaStats Stats() const;

 private:
  Arena(ArenaConfig config, os::Range range);

  absl::Status GrowLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RegisterLocked(ChunkInfo& chunk) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // How many of the pool's domains pin (or lock) chunks that way.
  std::size_t DomainsThatPin(Pinning kind) const noexcept;

  const ArenaConfig config_;
  const os::Range range_;
  const std::uintptr_t base_;
  const unsigned chunk_shift_;
  const std::size_t max_chunks_;
  const std::unique_ptr<std::atomic<std::uintptr_t>[]> table_;
  // carved_ again, readable without the lock (written under it).
  const std::unique_ptr<std::atomic<std::size_t>[]> carved_end_;

  mutable Mutex mu_;
  std::vector<std::unique_ptr<ChunkInfo>> chunks_ ABSL_GUARDED_BY(mu_);
  std::vector<std::size_t> carved_ ABSL_GUARDED_BY(mu_);  // bytes used from the front of chunk i
  std::vector<ArenaStats::DomainCounters> domain_counters_ ABSL_GUARDED_BY(mu_);
  std::uint64_t growth_failures_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status last_growth_error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pinpool::internal

#endif  // PINPOOL_ARENA_ARENA_H_
