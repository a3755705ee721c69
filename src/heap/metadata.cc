// MetadataArena's implementation (metadata.h has the contract): bump allocation under its lock from
// regions os::MapMetadata maps; a request too large for a region gets one of its own. Everything is
// unmapped together by the destructor.
#include "heap/metadata.h"

#include "os/os.h"

namespace pinpool::internal {

MetadataArena::~MetadataArena() {
  MutexLock lock(&mu_);
  for (Region* r = regions_; r != nullptr;) {
    Region* next = r->next;
    os::UnmapMetadata(r, r->length);
    r = next;
  }
}

void* MetadataArena::Allocate(std::size_t bytes) noexcept {
  bytes = (bytes + 63) & ~std::size_t{63};
  MutexLock lock(&mu_);
  if (bytes > end_ - next_) {
    // A new region: the usual size, or one made to measure for a large request (then the rest of
    // the current region stays in use for later small ones).
    const std::size_t header = 64;
    const std::size_t length = bytes + header > kRegion
                                   ? (bytes + header + os::kBasePage - 1) & ~(os::kBasePage - 1)
                                   : kRegion;
    auto* r = static_cast<Region*>(os::MapMetadata(length));
    if (r == nullptr) return nullptr;
    r->next = regions_;
    r->length = length;
    regions_ = r;
    mapped_ += length;
    const auto start = reinterpret_cast<std::uintptr_t>(r) + header;
    if (length != kRegion) return reinterpret_cast<void*>(start);
    next_ = start;
    end_ = reinterpret_cast<std::uintptr_t>(r) + length;
  }
  void* p = reinterpret_cast<void*>(next_);
  next_ += bytes;
  return p;
}

std::size_t MetadataArena::mapped_bytes() const noexcept {
  MutexLock lock(&mu_);
  return mapped_;
}

}  // namespace pinpool::internal
