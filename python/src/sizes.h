// Sizes as Python code writes them: an int (or anything with __index__, such as a numpy
// integer), or a string with a binary unit: "4096", "64KiB", "1 GiB", "1.5GiB", "2M" (K, M, G, T
// and KiB, MiB, GiB, TiB are powers of 1024; B is bytes). Refused, with the accepted forms in the
// message: bool and float (TypeError), negative numbers and strings that are not a size
// (InvalidArgumentError, a ValueError), "GB"-style units (ambiguous between 10^9 and 2^30), a
// fraction that is not a whole number of bytes, and anything above 2^64 - 1.
// Thread safety: pure functions; they need the GIL (they read Python objects).
#ifndef PINPOOL_PYTHON_SIZES_H_
#define PINPOOL_PYTHON_SIZES_H_

#include <pybind11/pybind11.h>

#include <cstddef>
#include <string_view>

#include "absl/status/statusor.h"

namespace pinpool::python {

// The size a string names; kInvalidArgument saying why not.
absl::StatusOr<std::size_t> ParseSizeString(std::string_view text);

// `value` as a size, for the argument `what`. False with the Python error set (raw C API
// callers).
bool ToSize(PyObject* value, const char* what, std::size_t* out);
// The same for pybind11 callers: raises.
std::size_t ToSize(pybind11::handle value, const char* what);

// A count or index: an int (or __index__), not negative; TypeError for anything else (a string
// included), InvalidArgumentError below 0.
std::size_t ToCount(pybind11::handle value, const char* what);

}  // namespace pinpool::python

#endif  // PINPOOL_PYTHON_SIZES_H_
