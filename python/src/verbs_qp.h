// pinpool.RcQueuePair: one RC queue pair on a VerbsDomain's protection domain, with its own
// completion queue, connected to a peer in another process or on another host by exchanging
// endpoints (QP number, first PSN, GID) over the application's own channel. Connecting queue pairs
// is the application's business in C++; Python has no way to hand a pyverbs QP to pinpool
// (pyverbs does not expose its C objects), so a Python server that grants memory to peers makes
// its connection here (the steps are support/rc_connect.h's). Grants are per connection:
// pinpool.RemoteAccess(pool, qp).
// Thread safety: with the GIL held; the object owns its QP and CQ and destroys them last.
#ifndef PINPOOL_PYTHON_VERBS_QP_H_
#define PINPOOL_PYTHON_VERBS_QP_H_

#include <infiniband/verbs.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>

#include "pinpool/verbs.h"

namespace pinpool::python {

namespace py = pybind11;

struct QueuePairObject {
  QueuePairObject() = default;
  ~QueuePairObject();  // a fork child leaks the QP and CQ (fork.h)
  QueuePairObject(const QueuePairObject&) = delete;
  QueuePairObject& operator=(const QueuePairObject&) = delete;

  py::object domain_object;  // the VerbsDomain, which owns the PD
  std::shared_ptr<VerbsDomain> domain;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  std::uint8_t port = 1;
  int gid_index = 0;
  ibv_gid gid{};
  ibv_mtu mtu = IBV_MTU_1024;
  std::uint32_t psn = 0;
  std::uint8_t rd_atomic = 1;
  std::uint8_t timeout = 18;
  bool connected = false;
  std::uint64_t generation = 0;
};

void AddQueuePair(py::module_& m);

}  // namespace pinpool::python

#endif  // PINPOOL_PYTHON_VERBS_QP_H_
