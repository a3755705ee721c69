// The extension module pinpool._pinpool: the binding of pinpool's public API (docs/python.md).
// The package pinpool (python/pinpool/__init__.py) re-exports it with the pure-Python parts.
//
// Layering: the binding sits above the public API; it includes only include/pinpool/ headers (and
// support/rc_connect.h, which uses rdma-core alone), and links libpinpool.so.
#include <pybind11/pybind11.h>

#include <string>

#include "array.h"
#include "block.h"
#include "domains.h"
#include "errors.h"
#include "fork.h"
#include "pinpool/version.h"
#include "pool.h"
#include "remote_access.h"
#include "sharing.h"
#include "sizes.h"
#include "verbs_qp.h"

PYBIND11_MODULE(_pinpool, m) {
  using namespace pinpool::python;
  m.doc() =
      "pinpool's C++ library bound for Python: registered memory pools whose blocks are "
      "zero-copy numpy arrays and torch tensors. Import `pinpool`, not this module.";
  m.attr("__version__") = PINPOOL_VERSION_STRING;
  // Every docstring opens with the call's signature in Python's own terms (sizes as int or str),
  // which pybind11's generated ones (C++ types) would repeat less readably.
  pybind11::options options;
  options.disable_function_signatures();
  WatchForks();
  AddErrors(m);
  AddBlock(m);
  AddDomains(m);
  AddPool(m);
  AddArray(m);
  AddSharing(m);
  AddQueuePair(m);
  AddRemoteAccess(m);
  m.def(
      "parse_size", [](pybind11::handle size) { return ToSize(size, "size"); },
      pybind11::arg("size"),
      "parse_size(size) -> int\n\nBytes of a size as pinpool's options take it: an int, or a "
      "string such as '4096', '64KiB', '1GiB', '1.5GiB', '2M' (K, M, G, T are powers of 1024). "
      "InvalidArgumentError (a ValueError) for a negative size, an unknown or ambiguous unit "
      "('GB'), a fraction of a byte; TypeError for a float or a bool.");
  // The classes are pinpool's: help() and repr() name them so.
  for (auto item : m.attr("__dict__").cast<pybind11::dict>()) {
    if (PyType_Check(item.second.ptr()) &&
        PyType_HasFeature(reinterpret_cast<PyTypeObject*>(item.second.ptr()),
                          Py_TPFLAGS_HEAPTYPE)) {
      pybind11::setattr(item.second, "__module__", pybind11::str("pinpool"));
    }
  }
}
