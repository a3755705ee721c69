// WithoutGil: runs a call that can wait (a system call, a registration, another process, a chunk
// being built) with the GIL released, so that other Python threads run meanwhile, and returns
// what the call returns once the GIL is held again. The call must not touch Python objects.
// Thread safety: called with the GIL held.
#ifndef PINPOOL_PYTHON_GIL_H_
#define PINPOOL_PYTHON_GIL_H_

#include <pybind11/pybind11.h>

#include <utility>

namespace pinpool::python {

template <typename Call>
auto WithoutGil(Call&& call) -> decltype(call()) {
  pybind11::gil_scoped_release unlocked;
  return std::forward<Call>(call)();
}

}  // namespace pinpool::python

#endif  // PINPOOL_PYTHON_GIL_H_
