// Array: `count` elements of one size and alignment, allocated and freed as one object that may
// span many chunks (Pool::AllocateArray), for the users whose memory is a paged cache of
// identical pages (KV caches, receive rings): one object instead of thousands of blocks, and a
// description whose size grows with the chunks it spans, not with its elements.
//
// Layout. Every element lies inside exactly one chunk (one registration): no element straddles a
// chunk boundary. Elements are `stride()` bytes apart (element_size rounded up to the
// alignment). An array that fits one block (count x stride <= Pool::max_block_size()) is one heap
// block; a larger one takes whole chunks and packs elements_per_chunk() = chunk_size / stride of
// them into each, from the chunk's start: the chunk's last chunk_size % stride bytes, and the
// room after the last element of the last chunk, stay unused while the array lives
// (docs/arrays.md has the trade-offs: buffer classes, trim, budgets, grants).
//
// Runs. The elements of one chunk (or of the one block) form a run: its base address, its chunk
// (the keys of every domain), its first element and how many. runs() lists them in element order;
// element i lies in run i / elements_per_chunk(), so Element(i) is a division, a multiplication
// and two loads: O(1), no lock.
//
// Slices. Elements [first, first + count) cut where the runs are, one slice per run they touch:
// what one grant or one descriptor run per chunk covers (VerbsRemoteAccess::GrantArray,
// FabricRemoteAccess::GrantArray, Describe).
//
// Ownership. An Array is a move-only handle; Pool::Deallocate(Array&&) frees it and every element
// at once. A run a remote grant can still reach is held, not reused, until the grant ends (as a
// granted block is: pinpool/grant_lock.h). Dropping a non-empty Array without freeing it leaks its
// memory until the pool is destroyed (as dropping a Block does; PoolStats::arrays counts the arrays
// alive). An Array means nothing after its pool is destroyed.
//
// Thread safety: a const Array may be read from any thread at once.
#ifndef PINPOOL_ARRAY_H_
#define PINPOOL_ARRAY_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "pinpool/abi.h"
#include "pinpool/block.h"
#include "pinpool/keys.h"

namespace pinpool {

namespace internal {
class PoolArrays;
}  // namespace internal

PINPOOL_ABI_BEGIN

class Pool;

// The elements of an array that lie in one chunk (or in its one block).
struct ArrayRun {
  void* base = nullptr;              // address of element `first`
  const ChunkInfo* chunk = nullptr;  // the chunk it lies in: keys per domain
  std::size_t first = 0;             // index of its first element
  std::size_t count = 0;             // elements in it (>= 1)
};

// The elements of a subrange that lie in one run.
struct ArraySlice {
  std::size_t run = 0;    // index in Array::runs()
  std::size_t first = 0;  // its first element (the array's numbering)
  std::size_t count = 0;  // elements (>= 1)
  // Bytes from the run's base to the slice's first element, and the slice's bytes
  // (count x stride): the range of Array::Run(run) a grant of the slice covers.
  std::size_t offset = 0;
  std::size_t length = 0;
};

class Array {
 public:
  Array() = default;  // empty: what a moved-from or freed Array is
  Array(Array&& other) noexcept { *this = static_cast<Array&&>(other); }
  Array& operator=(Array&& other) noexcept {
    if (this != &other) {
      runs_ = static_cast<std::vector<ArrayRun>&&>(other.runs_);
      owner_ = other.owner_;
      count_ = other.count_;
      element_size_ = other.element_size_;
      stride_ = other.stride_;
      per_run_ = other.per_run_;
      in_block_ = other.in_block_;
      other.Clear();
    }
    return *this;
  }
  Array(const Array&) = delete;
  Array& operator=(const Array&) = delete;

  explicit operator bool() const noexcept { return count_ != 0; }
  std::size_t size() const noexcept { return count_; }  // elements
  std::size_t element_size() const noexcept { return element_size_; }
  // Bytes from one element's start to the next one's in the same run.
  std::size_t stride() const noexcept { return stride_; }
  // Elements in every run but the last (all of them when the array is one block).
  std::size_t elements_per_chunk() const noexcept { return per_run_; }
  // True when the array is one heap block (small arrays), false when it holds whole chunks.
  bool in_block() const noexcept { return in_block_; }
  std::span<const ArrayRun> runs() const noexcept { return runs_; }

  // Element i as a Block (its address, element_size() bytes, its chunk's keys and its offset in
  // each registration); an empty Block when i >= size().
  Block Element(std::size_t i) const noexcept {
    if (i >= count_) return {};
    const ArrayRun& run = runs_[i / per_run_];
    return Block(static_cast<std::byte*>(run.base) + (i - run.first) * stride_, element_size_,
                 run.chunk);
  }
  Block operator[](std::size_t i) const noexcept { return Element(i); }
  // Run r's elements as one Block (count x stride bytes from its base, inside one chunk): what a
  // grant of the whole run covers (pinpool/verbs_remote_access.h, GrantArray), and what
  // GrantLock::CheckLive accepts as a live block while the array lives. Empty when r is out of
  // range.
  Block Run(std::size_t r) const noexcept {
    if (r >= runs_.size()) return {};
    return Block(runs_[r].base, runs_[r].count * stride_, runs_[r].chunk);
  }
  // Elements [first, first + count) (to the end when count is SIZE_MAX), one slice per run they
  // touch, in element order. Empty when the array is empty, or the subrange empty or out of
  // range: callers report that as their own kInvalidArgument.
  std::vector<ArraySlice> Slices(std::size_t first, std::size_t count = SIZE_MAX) const {
    std::vector<ArraySlice> slices;
    if (count == SIZE_MAX && first < count_) count = count_ - first;
    if (count == 0 || first >= count_ || count > count_ - first) return slices;
    const std::size_t end = first + count;
    for (std::size_t r = first / per_run_; r < runs_.size() && runs_[r].first < end; ++r) {
      const std::size_t from = std::max(first, runs_[r].first);
      const std::size_t to = std::min(end, runs_[r].first + runs_[r].count);
      slices.push_back({.run = r,
                        .first = from,
                        .count = to - from,
                        .offset = (from - runs_[r].first) * stride_,
                        .length = (to - from) * stride_});
    }
    return slices;
  }

 private:
  friend class internal::PoolArrays;
  void Clear() noexcept {
    runs_.clear();
    owner_ = nullptr;
    count_ = element_size_ = stride_ = 0;
    per_run_ = 1;
    in_block_ = false;
  }

  std::vector<ArrayRun> runs_;
  const void* owner_ = nullptr;  // the pool's array registry: a foreign free is caught
  std::size_t count_ = 0;
  std::size_t element_size_ = 0;
  std::size_t stride_ = 0;
  std::size_t per_run_ = 1;  // never 0: Element divides by it
  bool in_block_ = false;
};

PINPOOL_ABI_END
}  // namespace pinpool

#endif  // PINPOOL_ARRAY_H_
