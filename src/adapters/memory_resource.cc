// MemoryResource: std::pmr::memory_resource over a Pool (see pinpool/memory_resource.h). Defined
// out of line so that its vtable and type_info live once, in libpinpool, and do_is_equal's
// dynamic_cast works across shared-object boundaries.
#include "pinpool/memory_resource.h"

#include <new>

#include "pinpool/block.h"

namespace pinpool {
PINPOOL_ABI_BEGIN

MemoryResource::~MemoryResource() = default;

void* MemoryResource::do_allocate(std::size_t bytes, std::size_t alignment) {
  const Block block = pool_->Allocate(bytes == 0 ? 1 : bytes, alignment);
  if (!block) throw std::bad_alloc();
  return block.data();
}

void MemoryResource::do_deallocate(void* p, std::size_t bytes, std::size_t /*alignment*/) {
  pool_->Deallocate(p, bytes == 0 ? 1 : bytes);
}

bool MemoryResource::do_is_equal(const std::pmr::memory_resource& other) const noexcept {
  if (this == &other) return true;
  const auto* that = dynamic_cast<const MemoryResource*>(&other);
  return that != nullptr && that->pool_ == pool_;
}

PINPOOL_ABI_END
}  // namespace pinpool
