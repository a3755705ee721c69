// PoolClasses: a pool's named buffer classes (PoolOptions::classes; docs/classes.md): one Heap
// per named class, and the ledger of which class holds which chunk.
//
// Classes are accounted in whole chunks. A class holds the chunks its heap has taken from the
// arena (ChunkSource::NewChunk) and not given back (ReturnChunk, on Trim). The ledger admits a
// chunk for class c only when c holds fewer than its cap and either fewer than its reservation
// or the pool has a chunk that no reservation keeps: with R_i the reservations, H_i the chunks
// held and N the budget in chunks, sum_i max(H_i, R_i) <= N always holds (Validate made
// sum_i R_i <= N), so a class below its reservation can always have another chunk. The default
// class (Allocate without a class, the pool's own heap) is class 0: no reservation, the budget
// as its cap; it goes through the ledger only when there are named classes.
//
// Which class holds a chunk is the arena's owner record (Arena::OwnerOf: kHeap and the class),
// read lock-free by a free (Pool::HeapOf): Take has the arena carve the chunk for that class, so
// the record is written before the class's heap hands out any block of it.
//
// Scrubbing (BufferClass::scrub): a block of a kOnReuse class is zeroed on its free (Pool, before
// the heap has it again); a chunk that last belonged to another class is zeroed whole when a
// class takes it, if either class scrubs, so nothing of one class is ever seen by another.
//
// Thread safety: everything from any thread; the ledger's counts under one mutex, taken only
// when a heap takes or gives back a whole chunk (never on the allocation fast path).
#ifndef PINPOOL_POOL_CLASSES_H_
#define PINPOOL_POOL_CLASSES_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "arena/arena.h"
#include "heap/heap.h"
#include "heap/page_heap.h"
#include "pinpool/options.h"
#include "pinpool/stats.h"
#include "util/mutex.h"

namespace pinpool::internal {

class PoolClasses {
 public:
  // The ledger and one heap per named class. `options` were validated (ValidateClasses) and name
  // at least one class.
  static absl::StatusOr<std::unique_ptr<PoolClasses>> Create(Arena* arena,
                                                             const PoolOptions& options);
  ~PoolClasses();
  PoolClasses(const PoolClasses&) = delete;
  PoolClasses& operator=(const PoolClasses&) = delete;

  // Where the default class's heap takes its chunks; then Attach that heap as class 0.
  ChunkSource* default_source() noexcept { return &classes_[0]->source; }
  void AttachDefault(Heap* heap);

  // Classes, the default one included.
  std::uint32_t count() const noexcept { return static_cast<std::uint32_t>(classes_.size()); }
  Heap& heap(std::uint32_t c) const noexcept { return *classes_[c]->heap; }
  // count() heap ids, class order: what the inline class path reads. Set to Heap::kDeadId by the
  // pool's destructor.
  std::uint64_t* heap_ids() noexcept { return heap_ids_.get(); }
  Scrub scrub(std::uint32_t c) const noexcept { return classes_[c]->scrub; }
  // Counts bytes a free zeroed.
  void CountScrubbed(std::uint32_t c, std::size_t bytes) noexcept {
    classes_[c]->scrubbed.fetch_add(bytes, std::memory_order_relaxed);
  }

  absl::StatusOr<std::uint32_t> Find(std::string_view name) const;
  const std::string& name(std::uint32_t c) const noexcept { return classes_[c]->name; }
  absl::Status error(std::uint32_t c) const;
  // Per class, default first; live and cached bytes from each heap's counts, less `held_bytes`
  // (grants) for the default class.
  std::vector<ClassStats> Stats() const;
  // Every named class's heap gives its idle chunks back (Heap::ReleaseIdleChunks); returns how
  // many.
  std::size_t ReleaseIdleChunks();
  // A whole chunk for class `c`, carved for `as` (its heap, or an array of the default class):
  // null when the ledger or the arena refuses (error(c) says why). Given back through
  // default_source() or the class's heap.
  void* Take(std::uint32_t c, ChunkOwner as);

 private:
  struct Class;
  // The ChunkSource each class's heap takes its chunks from: the ledger, for that class.
  class Source : public ChunkSource {
   public:
    Source(PoolClasses* owner, std::uint32_t cls) : owner_(owner), cls_(cls) {}
    void* NewChunk() override {
      return owner_->Take(cls_, ChunkOwner::Heap(static_cast<std::uint8_t>(cls_)));
    }
    void ReturnChunk(void* chunk) override { owner_->Give(cls_, chunk); }

   private:
    PoolClasses* const owner_;
    const std::uint32_t cls_;
  };
  struct Class {
    Class(PoolClasses* owner, std::uint32_t index) : source(owner, index) {}
    std::string name;
    std::size_t reserved = 0;  // chunks
    std::size_t cap = 0;       // chunks
    Scrub scrub = Scrub::kNone;
    Source source;
    std::unique_ptr<Heap> heap_owned;  // null for the default class (the pool owns its heap)
    Heap* heap = nullptr;
    // Under the ledger's mu_:
    std::size_t held = 0;  // chunks, counting one being carved
    std::uint64_t refusals = 0;
    absl::Status error;
    std::atomic<std::uint64_t> scrubbed{0};
  };
  static constexpr std::uint8_t kNever = 0xff;  // last_owner_: no class has held the chunk

  PoolClasses(Arena* arena, std::size_t budget_chunks);
  void Give(std::uint32_t c, void* chunk);
  // Chunks no reservation keeps and nobody holds: N - sum max(H_i, R_i).
  std::size_t FreeUnreservedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Refuse(Class& k, absl::Status why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string Numbers(const Class& k) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Arena* const arena_;
  const std::size_t chunk_size_;
  const unsigned chunk_shift_;
  const std::uintptr_t base_;
  const std::size_t budget_chunks_;
  std::vector<std::unique_ptr<Class>> classes_;
  std::unique_ptr<std::uint64_t[]> heap_ids_;
  mutable Mutex mu_;  // the ledger: every class's held, refusals and error, last_owner_
  std::unique_ptr<std::uint8_t[]> last_owner_ ABSL_GUARDED_BY(mu_);  // per chunk, or kNever
};

}  // namespace pinpool::internal

#endif  // PINPOOL_POOL_CLASSES_H_
