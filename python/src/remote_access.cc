// pinpool.RemoteAccess: per-block and per-array grants to the peer of one RcQueuePair
// (pinpool/verbs_remote_access.h), their revocation, and describe_grants, the descriptor a peer
// decodes (pinpool_descriptor.py). The access holds its pool and its queue pair, so both outlive
// it, as the C++ contract asks; quiesce() needs every access closed first.
// Thread safety: with the GIL held; every call that posts, registers or deregisters releases it.
#include "remote_access.h"

#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "array.h"
#include "block.h"
#include "errors.h"
#include "fork.h"
#include "gil.h"
#include "pinpool/descriptor.h"
#include "pinpool/verbs_remote_access.h"
#include "pool.h"
#include "remote_access.h"
#include "sizes.h"
#include "verbs_qp.h"
#include "with.h"

namespace pinpool::python {

namespace {

struct RemoteAccessObject {
  RemoteAccessObject() = default;
  ~RemoteAccessObject() {
    if (Stale(generation)) {
      new std::shared_ptr<VerbsRemoteAccess>(std::move(access));  // the parent's: not to end
      new std::shared_ptr<PoolState>(std::move(pool));
      new py::object(std::move(qp_object));
      return;
    }
    // Revokes every grant at once: deregistrations and window deallocations.
    py::gil_scoped_release unlocked;
    access.reset();
  }
  RemoteAccessObject(const RemoteAccessObject&) = delete;
  RemoteAccessObject& operator=(const RemoteAccessObject&) = delete;

  // Revokes every grant (deregistrations, window deallocations) and ends the access; a call
  // still running on another thread (it holds its own reference) ends it when it returns.
  void Close() {
    CheckNotForked(generation, "remote access");
    WithoutGil([&] { access.reset(); });
  }

  // The access, held by the caller for the whole call (close() on another thread meanwhile
  // cannot destroy it under a call that released the GIL).
  std::shared_ptr<VerbsRemoteAccess> Open(const char* what) const {
    CheckNotForked(generation, "remote access");
    if (access == nullptr) ThrowFreed(absl::StrFormat("%s: the remote access is closed", what));
    return access;
  }

  std::shared_ptr<VerbsRemoteAccess> access;
  std::shared_ptr<PoolState> pool;
  py::object qp_object;
  QueuePairObject* qp = nullptr;
  std::uint64_t generation = 0;
};

RemoteRights Rights(bool read, bool write, bool atomic) {
  return RemoteRights{.read = read, .write = write, .atomic = atomic};
}

GrantMechanism ToMechanism(const std::string& name) {
  for (GrantMechanism m :
       {GrantMechanism::kAuto, GrantMechanism::kWindow, GrantMechanism::kRegion}) {
    if (name == GrantMechanismName(m)) return m;
  }
  Throw(absl::StatusCode::kInvalidArgument,
        absl::StrFormat("mechanism '%s': 'auto', 'window' or 'region'", name));
}

// `array` as an Array object (TypeError otherwise).
ArrayObject& ArrayOf(py::handle array, const char* what) {
  if (!py::isinstance<ArrayObject>(array)) {
    throw py::type_error(
        absl::StrFormat("%s: a pinpool.Array, not %s", what, Py_TYPE(array.ptr())->tp_name));
  }
  return array.cast<ArrayObject&>();
}

}  // namespace

void AddRemoteAccess(py::module_& m) {
  py::class_<RemoteGrant>(m, "Grant",
                          "What a grant gives the peer: `address`, `rkey` and `length` (send "
                          "them, or `remote`), and how it is enforced (`mechanism`: 'window' or "
                          "'region'; `range_enforced`: whether the device keeps the peer inside "
                          "the range).")
      .def_readonly("id", &RemoteGrant::id)
      .def_readonly("address", &RemoteGrant::address)
      .def_property_readonly("rkey", [](const RemoteGrant& g) { return ToUnderlying(g.rkey); })
      .def_readonly("length", &RemoteGrant::length)
      .def_property_readonly("mechanism",
                             [](const RemoteGrant& g) { return GrantMechanismName(g.mechanism); })
      .def_readonly("range_enforced", &RemoteGrant::range_enforced)
      .def_property_readonly(
          "remote",
          [](const RemoteGrant& g) {
            return py::make_tuple(g.address, ToUnderlying(g.rkey), g.length);
          },
          "(address, rkey, length): what the peer puts in its work request.")
      .def("__repr__", [](const RemoteGrant& g) {
        return absl::StrFormat("Grant(address=%#x, rkey=%#x, length=%u, mechanism='%s')", g.address,
                               ToUnderlying(g.rkey), g.length, GrantMechanismName(g.mechanism));
      });

  py::class_<RemoteAccessObject> access_class(
      m, "RemoteAccess",
      "RemoteAccess(pool, qp, *, domain=0, mechanism='auto', min_idle_windows=64)\n\n"
      "Per-block remote access for the peer of one connection (qp, an RcQueuePair on the PD of "
      "the pool's verbs domain number `domain`): grant() a block or grant_array() an array, "
      "revoke() it or free the memory (held, never reused, until the revocation completed). "
      "mechanism: 'window' (type 2 memory windows), 'region' (a memory region over exactly the "
      "range) or 'auto' (windows where the device enforces their bounds, else regions: rxe "
      "uses regions). With windows, call poll() to report the connection's completions. "
      "close() (or the object's end) revokes every grant; Pool.quiesce() needs every access "
      "closed.");
  access_class
      .def(py::init([](py::object pool_object, py::object qp_object, std::size_t domain,
                       const std::string& mechanism, std::uint32_t min_idle_windows) {
             PoolObject& p = pool_object.cast<PoolObject&>();
             const std::shared_ptr<PoolState> state = p.Open("RemoteAccess");
             if (!py::isinstance<QueuePairObject>(qp_object)) {
               throw py::type_error("RemoteAccess: qp is a pinpool.RcQueuePair");
             }
             auto& qp = qp_object.cast<QueuePairObject&>();
             CheckNotForked(qp.generation, "queue pair");
             VerbsRemoteAccessOptions options;
             options.domain = domain;
             options.mechanism = ToMechanism(mechanism);
             options.min_idle_windows = min_idle_windows;
             absl::StatusOr<std::unique_ptr<VerbsRemoteAccess>> access = WithoutGil(
                 [&] { return VerbsRemoteAccess::Create(*state->pool, qp.qp, options); });
             auto object = std::make_unique<RemoteAccessObject>();
             object->access = Take(std::move(access));
             object->pool = state;
             object->qp_object = qp_object;
             object->qp = &qp;
             object->generation = Generation();
             return object;
           }),
           py::arg("pool"), py::arg("qp"), py::kw_only(), py::arg("domain") = 0,
           py::arg("mechanism") = "auto", py::arg("min_idle_windows") = 64)
      .def(
          "grant",
          [](RemoteAccessObject& a, py::handle block, bool read, bool write, bool atomic,
             std::size_t offset, py::object length) {
            const std::shared_ptr<VerbsRemoteAccess> access = a.Open("grant");
            BlockObject& b = UsableBlock(block, "grant");
            const BlockHold hold(b);  // another thread's free() waits for the grant
            b.granted = true;         // from now on its free may revoke: without the GIL
            const Block target(b.data, b.size, b.chunk);
            const std::size_t n =
                length.is_none() ? b.size - std::min(offset, b.size) : ToCount(length, "length");
            const RemoteRights rights = Rights(read, write, atomic);
            absl::StatusOr<RemoteGrant> grant = WithoutGil([&] {
              return offset == 0 && length.is_none() ? access->Grant(target, rights)
                                                     : access->Grant(target, offset, n, rights);
            });
            return Take(std::move(grant));
          },
          py::arg("block"), py::kw_only(), py::arg("read") = false, py::arg("write") = false,
          py::arg("atomic") = false, py::arg("offset") = 0, py::arg("length") = py::none(),
          "grant(block, *, read=False, write=False, atomic=False, offset=0, length=None) -> "
          "Grant\n\nGrants the peer the rights on `block` (or [offset, offset + length) of it). "
          "InvalidArgumentError for no rights or a bad range, FailedPreconditionError for a "
          "freed block or a closed connection, ResourceExhaustedError when the send queue or "
          "the device's windows or regions ran out.")
      .def(
          "grant_array",
          [](RemoteAccessObject& a, py::handle array, bool read, bool write, bool atomic,
             std::size_t first, py::object count) {
            const std::shared_ptr<VerbsRemoteAccess> access = a.Open("grant_array");
            ArrayObject& object = ArrayOf(array, "grant_array");
            const ViewHold hold(object);  // another thread's free() waits for the grants
            const Array& target = object.Usable("grant_array");
            const std::size_t n = count.is_none() ? SIZE_MAX : ToCount(count, "count");
            const RemoteRights rights = Rights(read, write, atomic);
            absl::StatusOr<std::vector<RemoteGrant>> grants =
                WithoutGil([&] { return access->GrantArray(target, rights, first, n); });
            return Take(std::move(grants));
          },
          py::arg("array"), py::kw_only(), py::arg("read") = false, py::arg("write") = false,
          py::arg("atomic") = false, py::arg("first") = 0, py::arg("count") = py::none(),
          "grant_array(array, *, read=False, write=False, atomic=False, first=0, count=None) "
          "-> list[Grant]\n\nOne grant per chunk run that elements [first, first + count) "
          "touch, never one per element. describe_grants(array, grants) makes the descriptor "
          "for the peer. Freeing the array holds every granted run until its revocation "
          "completed.")
      .def(
          "revoke",
          [](RemoteAccessObject& a, const RemoteGrant& grant) {
            const std::shared_ptr<VerbsRemoteAccess> access = a.Open("revoke");
            Check(WithoutGil([&] { return access->Revoke(grant); }));
          },
          py::arg("grant"),
          "revoke(grant)\n\nA region is deregistered at once; a window's invalidation is "
          "posted and completes with its completion (poll()). Idempotent.")
      .def(
          "ended",
          [](RemoteAccessObject& a, const RemoteGrant& g) { return a.Open("ended")->Ended(g); },
          py::arg("grant"), "ended(grant) -> bool\n\nTrue once no peer can use the grant.")
      .def(
          "poll",
          [](RemoteAccessObject& a, int max_completions) {
            const std::shared_ptr<VerbsRemoteAccess> access = a.Open("poll");
            if (max_completions <= 0 || max_completions > 1024) {
              Throw(absl::StatusCode::kInvalidArgument, "poll: max_completions in 1 .. 1024");
            }
            std::vector<ibv_wc> wc(static_cast<std::size_t>(max_completions));
            int handled = 0;
            {
              py::gil_scoped_release unlocked;
              const int n = ibv_poll_cq(a.qp->cq, max_completions, wc.data());
              for (int i = 0; i < n; ++i) handled += access->OnCompletion(wc[i]) ? 1 : 0;
            }
            return handled;
          },
          py::arg("max_completions") = 64,
          "poll(max_completions=64) -> int\n\nPolls the connection's completion queue once and "
          "gives every completion to the grant bookkeeping (window binds and invalidations, "
          "the peer's SEND_WITH_INV); returns how many were pinpool's own.")
      .def(
          "revoke_all",
          [](RemoteAccessObject& a) {
            const std::shared_ptr<VerbsRemoteAccess> access = a.Open("revoke_all");
            WithoutGil([&] { access->RevokeAllNow(); });
          },
          "revoke_all()\n\nRevokes every grant of the connection synchronously; further "
          "grants fail.")
      .def_property_readonly("mechanism",
                             [](RemoteAccessObject& a) {
                               return GrantMechanismName(a.Open("mechanism")->mechanism());
                             })
      .def_property_readonly(
          "range_enforced",
          [](RemoteAccessObject& a) { return a.Open("range_enforced")->range_enforced(); })
      .def_property_readonly(
          "live_grants", [](RemoteAccessObject& a) { return a.Open("live_grants")->live_grants(); })
      .def_property_readonly("pending_revocations",
                             [](RemoteAccessObject& a) {
                               return a.Open("pending_revocations")->pending_revocations();
                             })
      .def("close", &RemoteAccessObject::Close,
           "close()\n\nRevokes every grant and ends the access (the GIL is released).");
  WithStatement(
      access_class, [](RemoteAccessObject& a) { a.Open("with"); },
      [](RemoteAccessObject& a) { a.Close(); });

  m.def(
      "describe_grants",
      [](py::handle array, const std::vector<RemoteGrant>& grants) {
        const Array& target = ArrayOf(array, "describe_grants").Usable("describe_grants");
        std::vector<std::byte> bytes = Take(DescribeGrants(target, grants));
        return py::bytes(reinterpret_cast<const char*>(bytes.data()), bytes.size());
      },
      py::arg("array"), py::arg("grants"),
      "describe_grants(array, grants) -> bytes\n\nThe compact descriptor of what grant_array "
      "granted on `array`: one run per grant with its rkey, elements renumbered from 0. The "
      "peer decodes it with pinpool.Descriptor (pinpool_descriptor, pure Python).");
}

}  // namespace pinpool::python
