// pinpool.RcQueuePair (verbs_qp.h).
#include "verbs_qp.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <string>

#include "absl/strings/str_format.h"
#include "domains.h"
#include "errors.h"
#include "fork.h"
#include "gil.h"
#include "rc_connect.h"
#include "sizes.h"

namespace pinpool::python {

QueuePairObject::~QueuePairObject() {
  if (Stale(generation)) {
    new py::object(std::move(domain_object));  // leaked with the QP: the parent's
    new std::shared_ptr<VerbsDomain>(std::move(domain));
    return;
  }
  if (qp != nullptr) ibv_destroy_qp(qp);
  if (cq != nullptr) ibv_destroy_cq(cq);
}

namespace {

std::unique_ptr<QueuePairObject> Create(py::object domain_object, std::uint8_t port,
                                        std::uint32_t max_send_wr, std::uint32_t max_recv_wr,
                                        std::uint8_t timeout) {
  if (!py::isinstance<VerbsDomainObject>(domain_object)) {
    throw py::type_error("RcQueuePair: a pinpool.VerbsDomain");
  }
  auto& d = domain_object.cast<VerbsDomainObject&>();
  CheckNotForked(d.generation, "domain");
  auto q = std::make_unique<QueuePairObject>();
  q->generation = Generation();
  q->domain_object = domain_object;
  q->domain = std::static_pointer_cast<VerbsDomain>(d.domain);
  q->port = port;
  q->timeout = timeout;
  ibv_context* context = q->domain->context();
  Check(WithoutGil([&]() -> absl::Status {
    ibv_port_attr port_attr{};
    if (const int err = ibv_query_port(context, port, &port_attr); err != 0) {
      return support::VerbsCallError("ibv_query_port", err);
    }
    if (port_attr.state != IBV_PORT_ACTIVE) {
      return absl::UnavailableError(absl::StrFormat("%s port %d is %s, not ACTIVE",
                                                    q->domain->device_name(), port,
                                                    ibv_port_state_str(port_attr.state)));
    }
    q->mtu = port_attr.active_mtu;
    absl::StatusOr<int> gid_index = support::FindIpv4MappedGid(context, port);
    if (!gid_index.ok()) return gid_index.status();
    q->gid_index = *gid_index;
    if (const int err = ibv_query_gid(context, port, q->gid_index, &q->gid); err != 0) {
      return support::VerbsCallError("ibv_query_gid", err);
    }
    ibv_device_attr device{};
    if (const int err = ibv_query_device(context, &device); err != 0) {
      return support::VerbsCallError("ibv_query_device", err);
    }
    // As many READs in flight as the device allows each way, up to 16.
    q->rd_atomic = static_cast<std::uint8_t>(
        std::clamp(std::min(device.max_qp_rd_atom, device.max_qp_init_rd_atom), 1, 16));
    q->cq = ibv_create_cq(context, static_cast<int>(2 * (max_send_wr + max_recv_wr)), nullptr,
                          nullptr, 0);
    if (q->cq == nullptr) return support::VerbsCallError("ibv_create_cq", errno);
    ibv_qp_init_attr init{};
    init.send_cq = q->cq;
    init.recv_cq = q->cq;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = max_send_wr;
    init.cap.max_recv_wr = max_recv_wr;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    q->qp = ibv_create_qp(q->domain->pd(), &init);
    if (q->qp == nullptr) return support::VerbsCallError("ibv_create_qp", errno);
    return absl::OkStatus();
  }));
  q->psn = std::random_device{}() & 0xffffff;
  return q;
}

py::bytes GidBytes(const ibv_gid& gid) {
  return py::bytes(reinterpret_cast<const char*>(gid.raw), sizeof(gid.raw));
}

}  // namespace

void AddQueuePair(py::module_& m) {
  py::class_<QueuePairObject>(
      m, "RcQueuePair",
      "RcQueuePair(domain, *, port=1, max_send_wr=128, max_recv_wr=16, timeout=18)\n\n"
      "One RC queue pair on `domain`'s protection domain (a VerbsDomain), with its own "
      "completion queue: the connection a RemoteAccess grants memory on. Send `endpoint` to the "
      "peer over your own channel and connect() with the peer's; a pyverbs peer builds its "
      "endpoint from its QP's qp_num, its first PSN and its port's IPv4-mapped RoCE v2 GID.")
      .def(py::init([](py::object domain, py::object port, py::object max_send_wr,
                       py::object max_recv_wr, py::object timeout) {
             return Create(domain, static_cast<std::uint8_t>(ToCount(port, "port")),
                           static_cast<std::uint32_t>(ToCount(max_send_wr, "max_send_wr")),
                           static_cast<std::uint32_t>(ToCount(max_recv_wr, "max_recv_wr")),
                           static_cast<std::uint8_t>(ToCount(timeout, "timeout")));
           }),
           py::arg("domain"), py::kw_only(), py::arg("port") = 1, py::arg("max_send_wr") = 128,
           py::arg("max_recv_wr") = 16, py::arg("timeout") = 18)
      .def_property_readonly(
          "endpoint",
          [](const QueuePairObject& q) {
            CheckNotForked(q.generation, "queue pair");
            py::dict e;
            e["qp_num"] = q.qp->qp_num;
            e["psn"] = q.psn;
            e["gid"] = GidBytes(q.gid);
            e["mtu"] = static_cast<int>(q.mtu);
            e["rd_atomic"] = q.rd_atomic;
            return e;
          },
          "What the peer needs to connect to this QP: {'qp_num', 'psn', 'gid' (16 bytes), "
          "'mtu' (an ibv_mtu value), 'rd_atomic' (READs in flight it may send)}.")
      .def(
          "connect",
          [](QueuePairObject& q, py::dict peer) {
            CheckNotForked(q.generation, "queue pair");
            if (q.connected) {
              Throw(absl::StatusCode::kFailedPrecondition, "connect: already connected");
            }
            const std::string gid = peer["gid"].cast<std::string>();
            if (gid.size() != sizeof(ibv_gid)) {
              Throw(absl::StatusCode::kInvalidArgument, "connect: the peer's gid is 16 bytes");
            }
            support::RcPeer remote{.qp_num = peer["qp_num"].cast<std::uint32_t>(),
                                   .psn = peer["psn"].cast<std::uint32_t>() & 0xffffff,
                                   .gid = {}};
            std::memcpy(remote.gid.raw, gid.data(), sizeof(remote.gid.raw));
            ibv_mtu mtu = q.mtu;
            if (peer.contains("mtu")) {
              mtu = std::min(mtu, static_cast<ibv_mtu>(peer["mtu"].cast<int>()));
            }
            std::uint8_t rd_atomic = q.rd_atomic;
            if (peer.contains("rd_atomic")) {
              rd_atomic = std::min<std::uint8_t>(rd_atomic, peer["rd_atomic"].cast<std::uint8_t>());
            }
            Check(WithoutGil([&] {
              return support::ConnectQp(q.qp, remote,
                                        support::RcPath{.port = q.port,
                                                        .mtu = mtu,
                                                        .gid_index = q.gid_index,
                                                        .timeout = q.timeout,
                                                        .psn = q.psn,
                                                        .rd_atomic = rd_atomic});
            }));
            q.connected = true;
          },
          py::arg("peer"),
          "connect(peer)\n\nConnects to the peer's endpoint ({'qp_num', 'psn', 'gid', and "
          "optionally 'mtu' and 'rd_atomic'}): INIT, RTR, RTS.")
      .def_property_readonly("qp_num", [](const QueuePairObject& q) { return q.qp->qp_num; })
      .def_property_readonly("connected", [](const QueuePairObject& q) { return q.connected; });
}

}  // namespace pinpool::python
