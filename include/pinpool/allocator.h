// Allocator<T>: a standard allocator that places a container's storage in a pinpool Pool, so
// `std::vector<T, pinpool::Allocator<T>>` holds registered memory whose keys Pool::Lookup finds.
//
// An Allocator is a non-owning handle to a Pool: copying it is free, every rebound copy refers to
// the same pool, and the pool must outlive every container (and every piece of storage) that uses
// it. Two allocators compare equal exactly when they name the same pool, since only then may one
// free what the other allocated.
//
// Propagation: propagate_on_container_copy_assignment, _move_assignment and _swap are all
// true_type. Storage belongs to the pool that made it; when a container is assigned or swapped,
// its allocator goes with its contents, so a container never ends up holding memory from one pool
// while its allocator frees into another, and move assignment and swap never copy elements
// element by element. (The price: after `a = b`, `a` allocates from b's pool.) Copy construction
// keeps the source's pool (select_on_container_copy_construction returns the same allocator).
//
// Errors: unlike Pool::Allocate, allocate() throws, because that is the only way standard
// containers can learn of failure: std::bad_array_new_length when n * sizeof(T) overflows,
// std::bad_alloc when the pool cannot provide the block (budget spent, or larger than
// Pool::max_block_size()). max_size() is the most elements one block can hold, so containers
// report an oversized request as std::length_error before asking.
//
// There is no default constructor: an allocator without a pool could only fail. Containers whose
// default constructor needs one (std::map m;) must be given an allocator (std::map m(alloc);).
// Nested containers (a vector of pinpool::string) need std::scoped_allocator_adaptor so the inner
// containers receive the allocator too.
//
// Beware the small-string optimisation: a short pinpool::string keeps its characters inside the
// string object, wherever that lives, not in the pool. Reserve past the inline capacity (15 chars
// in libstdc++) before handing s.data() to a device.
//
// Thread safety: as Pool's allocate/free: any thread, concurrently.
#ifndef PINPOOL_ALLOCATOR_H_
#define PINPOOL_ALLOCATOR_H_

#include <cassert>
#include <cstddef>
#include <limits>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "pinpool/abi.h"
#include "pinpool/block.h"
#include "pinpool/pool.h"

namespace pinpool {
PINPOOL_ABI_BEGIN

template <typename T>
class Allocator {
 public:
  using value_type = T;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using propagate_on_container_copy_assignment = std::true_type;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;
  using is_always_equal = std::false_type;

  // `pool` must not be null and must outlive every use of this allocator and its copies.
  explicit Allocator(Pool* pool) noexcept : pool_(pool) { assert(pool != nullptr); }
  explicit Allocator(Pool& pool) noexcept : pool_(&pool) {}
  // Rebinding: the same pool, for another element type.
  template <typename U>
  Allocator(const Allocator<U>& other) noexcept : pool_(other.pool()) {}  // NOLINT: implicit

  [[nodiscard]] T* allocate(std::size_t n) const {
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) {
      throw std::bad_array_new_length();
    }
    // The pool refuses size 0; give such requests a real (1-byte) block so that every pointer
    // allocate() returns can be passed to deallocate() and looked up like any other.
    const std::size_t bytes = n == 0 ? 1 : n * sizeof(T);
    const Block block = pool_->Allocate(bytes, alignof(T));
    if (!block) throw std::bad_alloc();
    return static_cast<T*>(block.data());
  }

  void deallocate(T* p, std::size_t n) const noexcept {
    pool_->Deallocate(static_cast<void*>(p), n == 0 ? 1 : n * sizeof(T));
  }

  // Largest n for which allocate(n) can succeed (Pool::max_block_size(), 7/8 of a chunk: one
  // block never spans two registrations).
  std::size_t max_size() const noexcept { return pool_->max_block_size() / sizeof(T); }

  Allocator select_on_container_copy_construction() const noexcept { return *this; }

  Pool* pool() const noexcept { return pool_; }

  // The chunk and keys of any address this allocator's pool handed out (e.g. v.data(), &*it).
  std::optional<Location> Lookup(const void* address) const noexcept {
    return pool_->Lookup(address);
  }

 private:
  Pool* pool_;
};

// Equal exactly when both name the same pool (then either may free what the other allocated).
template <typename T, typename U>
bool operator==(const Allocator<T>& a, const Allocator<U>& b) noexcept {
  return a.pool() == b.pool();
}

// Containers and strings in a pool, for convenience.
template <typename T>
using vector = std::vector<T, Allocator<T>>;
template <typename CharT, typename Traits = std::char_traits<CharT>>
using basic_string = std::basic_string<CharT, Traits, Allocator<CharT>>;
using string = basic_string<char>;

PINPOOL_ABI_END
}  // namespace pinpool

#endif  // PINPOOL_ALLOCATOR_H_
