// PageMap's implementation (page_map.h has the contract): the entries over the whole range are
// made with the map; a chunk's span array is made before the page heap takes the chunk (Prepare,
// from the heap's metadata), so that taking it cannot fail half-way; a chunk given back keeps it.
#include "heap/page_map.h"

namespace pinpool::internal {

// Metadata memory is zeroed: null pointers and entries of 0 without a store.
PageMap::PageMap(std::uintptr_t base, unsigned chunk_shift, std::size_t max_chunks,
                 MetadataArena* metadata)
    : base_(base),
      chunk_shift_(chunk_shift),
      max_chunks_(max_chunks),
      metadata_(metadata),
      entries_(metadata->AllocateArray<PageEntry>(max_chunks << (chunk_shift - kPageShift))),
      spans_(metadata->AllocateArray<std::atomic<Span*>*>(max_chunks)) {}

bool PageMap::Prepare() noexcept {
  if (spare_spans_ == nullptr)
    spare_spans_ = metadata_->AllocateArray<std::atomic<Span*>>(pages_per_chunk());
  return spare_spans_ != nullptr;
}

void PageMap::AddChunk(std::size_t index) noexcept {
  spans_[index] = spare_spans_;
  spare_spans_ = nullptr;
  ++chunks_;
}

void PageMap::SetSlab(std::uintptr_t start, std::size_t pages, unsigned cls) noexcept {
  static_assert(Class(kFirstLargeClass - 1).pages <= kMaxDelta + 1);
  // PageOffset stays below 2^16: rest is at most kMaxDelta pages.
  static_assert((kMaxDelta + 1) << kPageShift <= (1 << 16));
  static_assert(kNumClasses < 0x7f);  // the class + 1 fits the entry's 7 bits
  PageEntry* e = EntryOf(start);
  for (std::size_t i = 0; i < pages; ++i) {
    e[i].store(Encode(cls, i, start + (i << kPageShift)), std::memory_order_relaxed);
  }
}

void PageMap::SetLarge(std::uintptr_t start, unsigned cls) noexcept {
  EntryOf(start)->store(Encode(cls, 0, start), std::memory_order_relaxed);
}

void PageMap::Clear(std::uintptr_t start, std::size_t pages) noexcept {
  PageEntry* e = EntryOf(start);
  for (std::size_t i = 0; i < pages; ++i) e[i].store(0, std::memory_order_relaxed);
}

std::size_t PageMap::metadata_bytes() const noexcept {
  return max_chunks_ * (pages_per_chunk() * sizeof(PageEntry) + sizeof(std::atomic<Span*>*)) +
         chunks_ * pages_per_chunk() * sizeof(std::atomic<Span*>);
}

}  // namespace pinpool::internal
