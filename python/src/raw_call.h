// Guard: runs the body of a raw CPython function (the Block type, the allocation fast path) and
// turns a C++ exception from pybind11 code inside it into the Python error, as pybind11 does for
// the functions it binds.
// Thread safety: needs the GIL (it sets the Python error).
#ifndef PINPOOL_PYTHON_RAW_CALL_H_
#define PINPOOL_PYTHON_RAW_CALL_H_

#include <pybind11/pybind11.h>

#include <exception>

namespace pinpool::python {

template <typename Result, typename Body>
Result Guard(Result on_error, Body&& body) noexcept {
  try {
    return body();
  } catch (pybind11::error_already_set& e) {
    e.restore();
  } catch (pybind11::builtin_exception& e) {
    e.set_error();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return on_error;
}

}  // namespace pinpool::python

#endif  // PINPOOL_PYTHON_RAW_CALL_H_
