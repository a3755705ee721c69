// Domains from Python: where a pool's chunks are registered. pinpool.Domain holds one
// pinpool::Domain; pinpool.VerbsDomain (an RDMA protection domain: rxe0 in the soft-RoCE guest)
// and pinpool.IoUringDomain (an io_uring fixed-buffer table) are its subclasses, and
// long_term_pin_domain() and resident_domain() make the host-memory ones. A Pool takes them in
// its `domains` option; the C++ pool shares each domain (shared_ptr), so a domain lives as long as
// any pool using it.
// Thread safety: the objects are immutable after construction; calls need the GIL.
#ifndef PINPOOL_PYTHON_DOMAINS_H_
#define PINPOOL_PYTHON_DOMAINS_H_

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>

#include "pinpool/domain.h"

namespace pinpool::python {

namespace py = pybind11;

struct DomainObject {
  explicit DomainObject(std::shared_ptr<Domain> d);
  // In a fork child the domain is leaked, not destroyed: its destructor would close the parent's
  // device context or ring through descriptors the child inherited (fork.h).
  virtual ~DomainObject();
  DomainObject(const DomainObject&) = delete;
  DomainObject& operator=(const DomainObject&) = delete;

  std::shared_ptr<Domain> domain;
  std::uint64_t generation;
};

// pinpool.VerbsDomain and pinpool.IoUringDomain (their own C++ types, for pybind11's classes).
struct VerbsDomainObject : DomainObject {
  using DomainObject::DomainObject;
};
struct IoUringDomainObject : DomainObject {
  using DomainObject::DomainObject;
};

void AddDomains(py::module_& m);

}  // namespace pinpool::python

#endif  // PINPOOL_PYTHON_DOMAINS_H_
