// pinpool.Array: a pinpool::Array (Pool.allocate_array: equal elements over many chunks) as Python
// holds it, with element views (array[i]: a Block), a view of each chunk run, and descriptors.
//
// Lifetime, as a Block's (block.h): the array's memory goes back to the pool once free() (or the
// end of its `with`, or the object's own end) and no view of it lives. A view is an element or
// run Block, which holds the Array object; whatever holds a view (a numpy array, a tensor, a
// memoryview) keeps the view, and so the memory. The array is given back by the last of them.
// Thread safety: with the GIL held.
#ifndef PINPOOL_PYTHON_ARRAY_H_
#define PINPOOL_PYTHON_ARRAY_H_

#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "block.h"
#include "pinpool/array.h"

namespace pinpool::python {

namespace py = pybind11;

struct PoolState;

class ArrayObject final : public ViewParent {
 public:
  ArrayObject(std::shared_ptr<PoolState> pool, Array array);
  ~ArrayObject();
  ArrayObject(const ArrayObject&) = delete;
  ArrayObject& operator=(const ArrayObject&) = delete;

  void ViewAdded() noexcept override { ++views_; }
  void ViewGone() noexcept override;
  const PoolState* pool_state() const noexcept override { return pool_.get(); }

  // The array, still usable (FreedError, ForkedError otherwise).
  const Array& Usable(const char* what) const;
  void Free();
  bool freed() const noexcept { return state_ != State::kLive; }

 private:
  enum class State : std::uint8_t { kLive, kFreed, kReturned };
  void Return() noexcept;

  std::shared_ptr<PoolState> pool_;
  Array array_;
  std::uint64_t generation_;
  std::size_t views_ = 0;
  State state_ = State::kLive;
};

// A Python Array over `array` of `pool`.
py::object NewArrayObject(std::shared_ptr<PoolState> pool, Array array);

void AddArray(py::module_& m);

}  // namespace pinpool::python

#endif  // PINPOOL_PYTHON_ARRAY_H_
