// pinpool.RemoteAccess, pinpool.Grant and describe_grants (remote_access.cc).
#ifndef PINPOOL_PYTHON_REMOTE_ACCESS_H_
#define PINPOOL_PYTHON_REMOTE_ACCESS_H_

#include <pybind11/pybind11.h>

namespace pinpool::python {

void AddRemoteAccess(pybind11::module_& m);

}  // namespace pinpool::python

#endif  // PINPOOL_PYTHON_REMOTE_ACCESS_H_
