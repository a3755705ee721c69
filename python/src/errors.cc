// The exception classes (errors.h).
#include "errors.h"

#include <array>
#include <cstddef>

namespace pinpool::python {

namespace {

struct ErrorSpec {
  absl::StatusCode code;
  const char* name;
  PyObject* builtin;  // the second base; set in AddErrors (the built-ins are not constants)
  const char* doc;
};

// Indexed by the status code's value (0 .. 16); kOk has no class.
std::array<PyObject*, 17> classes{};
PyObject* base_class = nullptr;
PyObject* freed_class = nullptr;
PyObject* forked_class = nullptr;

PyObject* MakeClass(py::module_& m, const char* name, PyObject* bases, const char* doc,
                    const char* code) {
  const std::string qualified = std::string("pinpool.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  if (cls == nullptr) throw py::error_already_set();
  if (PyObject_SetAttrString(cls, "code", py::str(code).ptr()) != 0) {
    throw py::error_already_set();
  }
  m.add_object(name, py::handle(cls));
  return cls;
}

}  // namespace

void AddErrors(py::module_& m) {
  base_class = MakeClass(m, "PinpoolError", PyExc_Exception,
                         "Every error pinpool raises. `code` names the kind (an absl status code, "
                         "as the C++ library returns it); the message is the library's, with "
                         "its fix.",
                         "UNKNOWN");
  const ErrorSpec specs[] = {
      {absl::StatusCode::kInvalidArgument, "InvalidArgumentError", PyExc_ValueError,
       "A bad argument or option: the message names it and what is allowed."},
      {absl::StatusCode::kOutOfRange, "OutOfRangeError", PyExc_ValueError,
       "An index or range outside the object it names."},
      {absl::StatusCode::kNotFound, "NotFoundError", PyExc_LookupError,
       "Nothing by that name or handle: a device, a class, a block handle."},
      {absl::StatusCode::kAlreadyExists, "AlreadyExistsError", PyExc_FileExistsError,
       "Something is already there (a metrics socket's path)."},
      {absl::StatusCode::kPermissionDenied, "PermissionDeniedError", PyExc_PermissionError,
       "Not allowed here (io_uring disabled, /dev/infiniband not accessible): the message says "
       "what to change."},
      {absl::StatusCode::kResourceExhausted, "ResourceExhaustedError", PyExc_MemoryError,
       "A limit was reached: the budget, RLIMIT_MEMLOCK, the memory cgroup, a class's cap, "
       "device resources. The message names the limit, the numbers and the fix."},
      {absl::StatusCode::kFailedPrecondition, "FailedPreconditionError", PyExc_RuntimeError,
       "The object is not in a state that allows the call (a quiesced pool, an anonymous pool "
       "asked to share, missing huge pages)."},
      {absl::StatusCode::kUnavailable, "UnavailableError", PyExc_ConnectionError,
       "The other process is gone (sharing, handover)."},
      {absl::StatusCode::kDeadlineExceeded, "DeadlineExceededError", PyExc_TimeoutError,
       "The time ran out first."},
      {absl::StatusCode::kUnimplemented, "UnimplementedError", PyExc_NotImplementedError,
       "The kernel or device cannot do it (an old kernel, no memory windows, an unknown "
       "descriptor version)."},
      {absl::StatusCode::kInternal, "InternalError", PyExc_RuntimeError,
       "A system call or device failed in a way pinpool does not classify."},
  };
  for (const ErrorSpec& s : specs) {
    py::tuple bases = py::make_tuple(py::handle(base_class), py::handle(s.builtin));
    classes[static_cast<std::size_t>(s.code)] =
        MakeClass(m, s.name, bases.ptr(), s.doc, absl::StatusCodeToString(s.code).c_str());
  }
  // The codes no call of the public API documents share InternalError.
  for (absl::StatusCode c :
       {absl::StatusCode::kCancelled, absl::StatusCode::kUnknown, absl::StatusCode::kAborted,
        absl::StatusCode::kDataLoss, absl::StatusCode::kUnauthenticated}) {
    classes[static_cast<std::size_t>(c)] =
        classes[static_cast<std::size_t>(absl::StatusCode::kInternal)];
  }
  py::tuple freed_bases = py::make_tuple(py::handle(base_class), py::handle(PyExc_ValueError));
  freed_class = MakeClass(m, "FreedError", freed_bases.ptr(),
                          "A block or array used after free(), or a pool, attachment or remote "
                          "access used after close(): the object no longer reaches memory.",
                          "FAILED_PRECONDITION");
  py::tuple forked_bases = py::make_tuple(py::handle(base_class), py::handle(PyExc_RuntimeError));
  forked_class = MakeClass(m, "ForkedError", forked_bases.ptr(),
                           "An object of the parent process used in a fork() child, which has "
                           "no mapping of the pool's memory: attach in the child instead.",
                           "FAILED_PRECONDITION");
}

PyObject* ErrorClass(absl::StatusCode code) {
  const auto i = static_cast<std::size_t>(code);
  PyObject* cls = i < classes.size() ? classes[i] : nullptr;
  return cls != nullptr ? cls : base_class;
}

PyObject* FreedErrorClass() { return freed_class; }

void SetError(absl::StatusCode code, const std::string& message) {
  PyErr_SetString(ErrorClass(code), message.c_str());
}

void SetFreedError(const std::string& message) { PyErr_SetString(freed_class, message.c_str()); }

void SetForkedError(const std::string& message) { PyErr_SetString(forked_class, message.c_str()); }

void Throw(absl::StatusCode code, const std::string& message) {
  SetError(code, message);
  throw py::error_already_set();
}

void ThrowFreed(const std::string& message) {
  SetFreedError(message);
  throw py::error_already_set();
}

void ThrowForked(const std::string& message) {
  SetForkedError(message);
  throw py::error_already_set();
}

}  // namespace pinpool::python
