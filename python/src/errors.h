// Python exceptions for pinpool's errors. Each absl::StatusCode has one class, a subclass of
// pinpool.PinpoolError and of the built-in exception Python code catches for that kind of
// failure (kInvalidArgument: ValueError, kResourceExhausted: MemoryError, kPermissionDenied:
// PermissionError, ...); its message is pinpool's, unchanged, so it still names the limit and
// the fix, and its class attribute `code` is the status code's name ("RESOURCE_EXHAUSTED"). The
// binding's own misuse errors: FreedError (a block, array or other object used after free() or
// close()) and ForkedError (an object used in a fork child: fork.h).
// Thread safety: the classes are made once at import, under the GIL, and never change; Throw*
// needs the GIL.
#ifndef PINPOOL_PYTHON_ERRORS_H_
#define PINPOOL_PYTHON_ERRORS_H_

#include <pybind11/pybind11.h>

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pinpool::python {

namespace py = pybind11;

// Makes the classes and adds them to `m`.
void AddErrors(py::module_& m);

// The class for a code that is not kOk.
PyObject* ErrorClass(absl::StatusCode code);
PyObject* FreedErrorClass();

// Sets the Python error (for raw C API functions, which then return null or -1).
void SetError(absl::StatusCode code, const std::string& message);
inline void SetError(const absl::Status& status) {
  SetError(status.code(), std::string(status.message()));
}
void SetFreedError(const std::string& message);
void SetForkedError(const std::string& message);

// Raises from a bound function (pybind11 turns error_already_set back into the Python error).
[[noreturn]] void Throw(absl::StatusCode code, const std::string& message);
[[noreturn]] inline void Throw(const absl::Status& status) {
  Throw(status.code(), std::string(status.message()));
}
[[noreturn]] void ThrowFreed(const std::string& message);
[[noreturn]] void ThrowForked(const std::string& message);

inline void Check(const absl::Status& status) {
  if (!status.ok()) Throw(status);
}
template <typename T>
T Take(absl::StatusOr<T>&& value) {
  if (!value.ok()) Throw(value.status());
  return *std::move(value);
}

}  // namespace pinpool::python

#endif  // PINPOOL_PYTHON_ERRORS_H_
