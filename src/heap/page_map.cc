// PageMap's implementation (page_map.h has the contract): a chunk's arrays are made before the
// page heap takes the chunk (Prepare, from the heap's metadata), so that taking it cannot fail
// half-way, and published with a release store (AddChunk); a chunk given back keeps them.
#include "heap/page_map.h"

namespace pinpool::internal {

// Metadata memory is zeroed: null pointers and entries of 0 without a store.
PageMap::PageMap(std::uintptr_t base, unsigned chunk_shift, std::size_t max_chunks,
                 MetadataArena* metadata)
    : base_(base),
      chunk_shift_(chunk_shift),
      max_chunks_(max_chunks),
      metadata_(metadata),
      entries_(metadata->AllocateArray<std::atomic<PageEntry*>>(max_chunks)),
      spans_(metadata->AllocateArray<std::atomic<Span*>*>(max_chunks)) {}

bool PageMap::Prepare() noexcept {
  if (spare_entries_ == nullptr)
    spare_entries_ = metadata_->AllocateArray<PageEntry>(pages_per_chunk());
  if (spare_spans_ == nullptr)
    spare_spans_ = metadata_->AllocateArray<std::atomic<Span*>>(pages_per_chunk());
  return spare_entries_ != nullptr && spare_spans_ != nullptr;
}

void PageMap::AddChunk(std::size_t index) noexcept {
  spans_[index] = spare_spans_;
  entries_[index].store(spare_entries_, std::memory_order_release);
  spare_entries_ = nullptr;
  spare_spans_ = nullptr;
  ++chunks_;
}

void PageMap::SetSlab(std::uintptr_t start, std::size_t pages, unsigned cls) noexcept {
  static_assert(Class(kFirstLargeClass - 1).pages <= kMaxDelta + 1);
  static_assert(kMaxSlabSize < (1 << 16));
  PageEntry* e = Entries(start) + PageIndex(start);
  for (std::size_t i = 0; i < pages; ++i) e[i].store(Encode(cls, i), std::memory_order_relaxed);
}

void PageMap::SetLarge(std::uintptr_t start, unsigned cls) noexcept {
  Entries(start)[PageIndex(start)].store(Encode(cls, 0), std::memory_order_relaxed);
}

void PageMap::Clear(std::uintptr_t start, std::size_t pages) noexcept {
  PageEntry* e = Entries(start) + PageIndex(start);
  for (std::size_t i = 0; i < pages; ++i) e[i].store(0, std::memory_order_relaxed);
}

std::size_t PageMap::metadata_bytes() const noexcept {
  return max_chunks_ * (sizeof(std::atomic<PageEntry*>) + sizeof(std::atomic<Span*>*)) +
         chunks_ * pages_per_chunk() * (sizeof(PageEntry) + sizeof(std::atomic<Span*>));
}

}  // namespace pinpool::internal
