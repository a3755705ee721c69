// CentralCache's implementation (central_cache.h has the contract): per class, the transfer
// stack and the list of slabs with free blocks, each under the class's own lock; what the stack
// cannot take goes back to its slab or, a large block, to the page heap.
#include "heap/central_cache.h"

#include <algorithm>
#include <cstring>

#include "heap/free_mark.h"
#include "util/check.h"

namespace pinpool::internal {

CentralCache::CentralCache(PageHeap* pages, MetadataArena* metadata, std::uint64_t secret,
                           std::size_t transfer_limit, bool zero_new_spans)
    : pages_(pages),
      metadata_(metadata),
      secret_(secret),
      zero_new_spans_(zero_new_spans),
      transfer_limit_(transfer_limit),
      classes_(new PerClass[kNumClasses]) {}

CentralCache::~CentralCache() = default;

void CentralCache::Link(PerClass& k, Span* s) {
  s->prev = nullptr;
  s->next = k.partial;
  if (s->next != nullptr) s->next->prev = s;
  k.partial = s;
}

void CentralCache::Unlink(PerClass& k, Span* s) {
  if (s->prev != nullptr) {
    s->prev->next = s->next;
  } else {
    k.partial = s->next;
  }
  if (s->next != nullptr) s->next->prev = s->prev;
  s->prev = s->next = nullptr;
}

std::size_t CentralCache::Take(unsigned c, void** out, std::size_t n, bool grow) {
  const ClassInfo& info = Class(c);
  PerClass& k = classes_[c];
  SpinLockHolder lock(&k.mu);
  std::size_t got = std::min(n, k.count);
  if (got != 0) {
    k.count -= got;
    std::memcpy(out, k.stack + k.count, got * sizeof(void*));
    transfer_bytes_.fetch_sub(got * info.size, std::memory_order_relaxed);
  }
  if (IsSlabClass(c)) {
    while (got < n) {
      Span* s = k.partial;
      if (s == nullptr) {
        // Only the first block may make the pool grow: the rest of a batch is never worth
        // mapping and registering a chunk for.
        s = pages_->Allocate(info.pages, c, kPageSize, grow && got == 0);
        if (s == nullptr) break;
        s->InitSlab();
        if (zero_new_spans_)
          std::memset(reinterpret_cast<void*>(s->start), 0, s->pages * kPageSize);
        // Every block of a new slab is free: it carries the mark, so that a free of a block
        // never handed out is caught like a double free.
        for (unsigned i = 0; i < info.objects; ++i) {
          void* b = reinterpret_cast<void*>(s->start + std::uintptr_t{i} * info.size);
          MarkFree(secret_, b, c);
        }
        Link(k, s);
        ++k.slabs;
      }
      while (got < n && s->free_blocks != 0) out[got++] = reinterpret_cast<void*>(s->TakeBlock());
      if (s->free_blocks == 0) Unlink(k, s);
    }
  } else {
    while (got < n) {
      Span* s = pages_->Allocate(info.pages, c, kPageSize, grow && got == 0);
      if (s == nullptr) break;
      void* b = reinterpret_cast<void*>(s->start);
      if (zero_new_spans_) std::memset(b, 0, s->pages * kPageSize);
      MarkFree(secret_, b, c);
      out[got++] = b;
    }
  }
  k.out += got;
  return got;
}

void* CentralCache::TakeAligned(unsigned c, std::size_t alignment, bool grow) {
  PINPOOL_DCHECK(!IsSlabClass(c) && alignment > kPageSize);
  PerClass& k = classes_[c];
  Span* s = pages_->Allocate(Class(c).pages, c, alignment, grow);
  if (s == nullptr) return nullptr;
  void* b = reinterpret_cast<void*>(s->start);
  if (zero_new_spans_) std::memset(b, 0, s->pages * kPageSize);
  MarkFree(secret_, b, c);
  SpinLockHolder lock(&k.mu);
  ++k.out;
  return b;
}

void CentralCache::ReturnLocked(PerClass& k, unsigned c, void* p) {
  const auto b = reinterpret_cast<std::uintptr_t>(p);
  if (!IsSlabClass(c)) {
    pages_->FreeLarge(b);
    return;
  }
  Span* s = pages_->SlabOf(b);
  PINPOOL_DCHECK(s != nullptr && s->state == Span::State::kSlab && s->cls == c);
  PINPOOL_DCHECK(!s->IsFreeHere(b));
  const bool was_full = s->free_blocks == 0;
  s->ReturnBlock(b);
  if (s->free_blocks == Class(c).objects) {
    if (!was_full) Unlink(k, s);
    --k.slabs;
    pages_->Free(s);
  } else if (was_full) {
    Link(k, s);
  }
}

void CentralCache::Put(unsigned c, void* const* blocks, std::size_t n) {
  const ClassInfo& info = Class(c);
  PerClass& k = classes_[c];
  SpinLockHolder lock(&k.mu);
  k.out -= n;
  std::size_t pushed = 0;
  const std::size_t held = transfer_bytes_.load(std::memory_order_relaxed);
  if (held < transfer_limit_) {
    if (k.stack == nullptr) k.stack = metadata_->AllocateArray<void*>(info.transfer_cap);
    if (k.stack != nullptr) {
      pushed = std::min(
          {n, std::size_t{info.transfer_cap} - k.count, (transfer_limit_ - held) / info.size});
      std::memcpy(k.stack + k.count, blocks, pushed * sizeof(void*));
      k.count += pushed;
      transfer_bytes_.fetch_add(pushed * info.size, std::memory_order_relaxed);
    }
  }
  for (std::size_t i = pushed; i < n; ++i) ReturnLocked(k, c, blocks[i]);
}

std::size_t CentralCache::DrainTransfer() {
  std::size_t bytes = 0;
  for (unsigned c = 0; c < kNumClasses; ++c) {
    PerClass& k = classes_[c];
    SpinLockHolder lock(&k.mu);
    for (std::size_t i = 0; i < k.count; ++i) ReturnLocked(k, c, k.stack[i]);
    bytes += k.count * ClassSize(c);
    transfer_bytes_.fetch_sub(k.count * ClassSize(c), std::memory_order_relaxed);
    k.count = 0;
  }
  return bytes;
}

CentralCache::Counts CentralCache::GetCounts() const {
  Counts counts;
  for (unsigned c = 0; c < kNumClasses; ++c) {
    PerClass& k = classes_[c];
    SpinLockHolder lock(&k.mu);
    counts.out_bytes += k.out * ClassSize(c);
    counts.transfer_bytes += k.count * ClassSize(c);
    counts.slabs += k.slabs;
  }
  return counts;
}

}  // namespace pinpool::internal
