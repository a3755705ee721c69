// MemoryResource: a std::pmr::memory_resource over a pinpool Pool, so that std::pmr containers
// (and anything else written against memory_resource) allocate registered memory.
//
// A MemoryResource is a non-owning view of one Pool, which must outlive the resource and all
// storage obtained through it. Two resources are equal exactly when both are MemoryResources over
// the same pool: memory from one may then be freed through the other.
//
// Errors: do_allocate throws std::bad_alloc when the pool cannot provide the block (budget spent,
// larger than Pool::max_block_size(), or an alignment above the chunk size), as memory_resource
// requires; the Pool itself never throws. A request for 0 bytes gets a real 1-byte block.
//
// Thread safety: as Pool's allocate/free: any thread, concurrently. Unlike
// std::pmr::unsynchronized_pool_resource, no external locking is needed.
#ifndef PINPOOL_MEMORY_RESOURCE_H_
#define PINPOOL_MEMORY_RESOURCE_H_

#include <cstddef>
#include <memory_resource>

#include "pinpool/abi.h"
#include "pinpool/export.h"
#include "pinpool/pool.h"

namespace pinpool {
PINPOOL_ABI_BEGIN

class PINPOOL_EXPORT MemoryResource : public std::pmr::memory_resource {
 public:
  explicit MemoryResource(Pool& pool) noexcept : pool_(&pool) {}
  ~MemoryResource() override;

  Pool& pool() const noexcept { return *pool_; }

 protected:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override;
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override;
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override;

 private:
  Pool* pool_;
};

PINPOOL_ABI_END
}  // namespace pinpool

#endif  // PINPOOL_MEMORY_RESOURCE_H_
