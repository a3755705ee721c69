// Forgetting one chunk, for giving it back (Heap::ForgetChunk in heap.h has the contract; the
// pool calls it when a chunk's backing must go: docs/backing.md, "Taking memory back").
//
// A chunk's free blocks may be anywhere in the heap: in thread caches, on the transfer stacks,
// in slabs' free sets, in free spans of the page heap; and its live blocks are known only as
// "not free" in those places. So the heap is stopped for the moment it takes to look: the drain
// handshake empties every cache and keeps it held (its owner waits on the heap's mutex), every
// class of the central layer is locked (in class order, the only place that holds two: nothing
// else nests them), then the page heap's lock. With nothing moving, the transfer stacks lose the
// chunk's blocks, each slab of the chunk reports its blocks not in its free set as live, each large
// block of it is live, and the page heap forgets its spans. Nothing in the chunk is read or
// written: all of this is the heap's own metadata, so the chunk may already have lost its pages.
//
// Thread safety: as Heap; the caller guarantees the arena carves nothing more from the chunk and
// that frees of its blocks no longer reach this heap (the pool checks Arena::Withdrawn first).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "heap/heap.h"
#include "util/check.h"

namespace pinpool::internal {

void PageHeap::ForgetChunk(std::uintptr_t chunk, absl::FunctionRef<void(const Span&)> used) {
  SpinLockHolder lock(&mu_);
  const std::size_t index = (chunk - map_.base()) >> map_.chunk_shift();
  if (index >= map_.max_chunks() || !map_.HasChunk(index) || map_.SpanAt(chunk) == nullptr) {
    return;  // never taken, or released (ReleaseIdleChunks): nothing of it is here
  }
  const std::uintptr_t end = chunk + chunk_size_;
  for (std::uintptr_t q = chunk; q < end;) {
    Span* s = map_.SpanAt(q);
    PINPOOL_CHECK(s != nullptr && s->start == q, "internal: no span at %#lx in a forgotten chunk",
                  static_cast<unsigned long>(q));
    q = s->end();
    if (s->state == Span::State::kFree) {
      RemoveFreeLocked(s);
    } else {
      used(*s);
      map_.Clear(s->start, s->state == Span::State::kSlab ? s->pages : 1);
      used_pages_ -= s->pages;
    }
    map_.SetSpanAt(s->start, nullptr);
    map_.SetSpanAt(s->last_page(), nullptr);
    spans_.Put(s);
  }
  --chunks_;
  ++released_;  // as a released chunk: its arrays stay, every entry 0 (Verify checks it)
}

void CentralCache::ForgetChunk(std::uintptr_t chunk, std::size_t chunk_size,
                               absl::FunctionRef<void(std::uintptr_t, std::size_t)> live) {
  const auto inside = [&](const void* p) {
    return reinterpret_cast<std::uintptr_t>(p) - chunk < chunk_size;
  };
  for (unsigned c = 0; c < kNumClasses; ++c) classes_[c].mu.Lock();
  // Free blocks of the chunk on the transfer stacks: out of the stacks, and remembered as free
  // (their slab's free set does not have them).
  std::vector<std::uintptr_t> stacked;
  for (unsigned c = 0; c < kNumClasses; ++c) {
    PerClass& k = classes_[c];
    const auto kept =
        std::stable_partition(k.stack, k.stack + k.count, [&](void* p) { return !inside(p); });
    const auto dropped = static_cast<std::size_t>(k.stack + k.count - kept);
    for (void** p = kept; p != k.stack + k.count; ++p) {
      stacked.push_back(reinterpret_cast<std::uintptr_t>(*p));
    }
    k.count -= dropped;
    transfer_bytes_.fetch_sub(dropped * ClassSize(c), std::memory_order_relaxed);
  }
  std::sort(stacked.begin(), stacked.end());
  const auto on_stack = [&](std::uintptr_t p) {
    return std::binary_search(stacked.begin(), stacked.end(), p);
  };
  pages_->ForgetChunk(chunk, [&](const Span& s) {
    PerClass& k = classes_[s.cls];
    const std::size_t size = ClassSize(s.cls);
    if (s.state == Span::State::kLarge) {
      --k.out;
      if (!on_stack(s.start)) live(s.start, size);
      return;
    }
    if (s.free_blocks != 0) Unlink(k, const_cast<Span*>(&s));  // it was on the partial list
    --k.slabs;
    for (unsigned i = 0; i < Class(s.cls).objects; ++i) {
      const std::uintptr_t b = s.start + i * std::uintptr_t{size};
      if (s.IsFreeHere(b)) continue;
      --k.out;
      if (!on_stack(b)) live(b, size);
    }
  });
  // The transfer stacks' blocks were counted out of `out` when they were put there.
  for (unsigned c = kNumClasses; c-- > 0;) classes_[c].mu.Unlock();
}

absl::StatusOr<std::vector<Heap::LostBlock>> Heap::ForgetChunk(std::uintptr_t chunk_base) {
  ThreadCache* own = OwnCache();
  MutexLock lock(&mu_);
  bool every_cache = false;
  DrainLocked(own, /*hold=*/true, &every_cache);
  const auto release = [&] {
    for (ThreadCache* c : caches_) {
      if (every_cache || c == own) c->drain.store(0, std::memory_order_release);
    }
  };
  if (!every_cache) {
    release();  // the others' requests stay pending, honoured by their owners as usual
    return absl::FailedPreconditionError(
        "cannot forget a chunk: other threads' caches of the pool cannot be emptied now "
        "(membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) is unavailable)");
  }
  std::vector<LostBlock> lost;
  const std::size_t chunk_size = arena_->chunk_size();
  central_.ForgetChunk(chunk_base, chunk_size, [&](std::uintptr_t p, std::size_t size) {
    lost.push_back({reinterpret_cast<void*>(p), size});
  });
  if (debug_) {
    std::erase_if(live_, [&](const auto& e) { return e.first - chunk_base < chunk_size; });
  }
  release();
  std::sort(lost.begin(), lost.end(),
            [](const LostBlock& a, const LostBlock& b) { return a.data < b.data; });
  return lost;
}

}  // namespace pinpool::internal
