// RcPair: two loopback RC queue pairs (see rc_pair.h for the contract). The connection steps are
// rc_connect.h's, with each QP's peer being the other one.
#include "rc_pair.h"

#include <cerrno>
#include <cstring>
#include <ctime>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace pinpool::testing {

using support::VerbsCallError;

absl::StatusOr<std::unique_ptr<RcPair>> RcPair::Connect(ibv_pd* pd_a, ibv_pd* pd_b,
                                                        const Options& options) {
  const std::uint8_t port = options.port;
  if (pd_a == nullptr || pd_b == nullptr) {
    return absl::InvalidArgumentError("RcPair::Connect needs two protection domains");
  }
  ibv_port_attr port_attr{};
  if (const int err = ibv_query_port(pd_a->context, port, &port_attr); err != 0) {
    return VerbsCallError("ibv_query_port", err);
  }
  if (port_attr.state != IBV_PORT_ACTIVE) {
    return absl::UnavailableError(absl::StrFormat("%s port %d is %s, not ACTIVE",
                                                  ibv_get_device_name(pd_a->context->device), port,
                                                  ibv_port_state_str(port_attr.state)));
  }
  absl::StatusOr<int> gid_index = FindIpv4MappedGid(pd_a->context, port);
  if (!gid_index.ok()) return gid_index.status();
  std::unique_ptr<RcPair> pair(new RcPair());
  if (const int err = ibv_query_gid(pd_a->context, port, *gid_index, &pair->gid_); err != 0) {
    return VerbsCallError("ibv_query_gid", err);
  }
  pair->gid_index_ = *gid_index;
  pair->options_ = options;
  pair->mtu_ = port_attr.active_mtu;
  ibv_pd* pds[2] = {pd_a, pd_b};
  for (int i = 0; i < 2; ++i) {
    Endpoint& e = pair->ends_[i];
    e.cq = ibv_create_cq(pds[i]->context,
                         static_cast<int>(2 * (options.max_send_wr + options.max_recv_wr)), nullptr,
                         nullptr, 0);
    if (e.cq == nullptr) return VerbsCallError("ibv_create_cq", errno);
    ibv_qp_init_attr init{};
    init.send_cq = e.cq;
    init.recv_cq = e.cq;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = options.max_send_wr;
    init.cap.max_recv_wr = options.max_recv_wr;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    e.qp = ibv_create_qp(pds[i], &init);
    if (e.qp == nullptr) return VerbsCallError("ibv_create_qp", errno);
  }
  if (absl::Status s = pair->Reconnect(); !s.ok()) return s;
  return pair;
}

absl::Status RcPair::Reconnect() {
  for (Endpoint& e : ends_) {
    ibv_qp_attr reset{};
    reset.qp_state = IBV_QPS_RESET;
    if (const int err = ibv_modify_qp(e.qp, &reset, IBV_QP_STATE); err != 0) {
      return VerbsCallError("ibv_modify_qp(RESET)", err);
    }
    // Completions of the old connection (flushed work requests) are not this one's.
    for (ibv_wc wc; ibv_poll_cq(e.cq, 1, &wc) > 0;) {
    }
    e.receives.clear();
  }
  for (int i = 0; i < 2; ++i) {
    absl::Status s = support::ConnectQp(
        ends_[i].qp, support::RcPeer{.qp_num = ends_[1 - i].qp->qp_num, .psn = 0, .gid = gid_},
        support::RcPath{.port = options_.port,
                        .mtu = mtu_,
                        .gid_index = gid_index_,
                        .timeout = options_.timeout,
                        .psn = 0,
                        .rd_atomic = 1});
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

RcPair::~RcPair() {
  for (Endpoint& e : ends_) {
    if (e.qp != nullptr) ibv_destroy_qp(e.qp);
    if (e.cq != nullptr) ibv_destroy_cq(e.cq);
  }
}

void RcPair::SetCompletionHook(Side side, CompletionHook hook) { End(side).hook = std::move(hook); }

namespace {

ibv_send_wr RdmaWr(ibv_wr_opcode opcode, ibv_sge* sge, const RemoteBuffer& remote) {
  ibv_send_wr wr{};
  wr.sg_list = sge;
  wr.num_sge = 1;
  wr.opcode = opcode;
  wr.wr.rdma.remote_addr = remote.address;
  wr.wr.rdma.rkey = ToUnderlying(remote.rkey);
  return wr;
}

absl::Status CheckLength(const ibv_sge& local, const RemoteBuffer& remote) {
  if (local.length <= remote.length) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrFormat("local buffer (%u bytes) longer than the remote one (%u bytes)", local.length,
                      remote.length));
}

}  // namespace

absl::StatusOr<ibv_wc_status> RcPair::Write(Side from, const ibv_sge& local,
                                            const RemoteBuffer& remote) {
  if (absl::Status s = CheckLength(local, remote); !s.ok()) return s;
  ibv_sge sge = local;
  ibv_send_wr wr = RdmaWr(IBV_WR_RDMA_WRITE, &sge, remote);
  return PostAndWait(from, wr, "RDMA WRITE");
}

absl::StatusOr<ibv_wc_status> RcPair::Read(Side from, const ibv_sge& local,
                                           const RemoteBuffer& remote) {
  if (absl::Status s = CheckLength(local, remote); !s.ok()) return s;
  ibv_sge sge = local;
  ibv_send_wr wr = RdmaWr(IBV_WR_RDMA_READ, &sge, remote);
  return PostAndWait(from, wr, "RDMA READ");
}

absl::StatusOr<ibv_wc_status> RcPair::FetchAdd(Side from, const ibv_sge& local,
                                               const RemoteBuffer& remote, std::uint64_t add) {
  ibv_sge sge = local;
  sge.length = 8;
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
  wr.wr.atomic.remote_addr = remote.address;
  wr.wr.atomic.rkey = ToUnderlying(remote.rkey);
  wr.wr.atomic.compare_add = add;
  return PostAndWait(from, wr, "atomic fetch-and-add");
}

absl::Status RcPair::PostRecv(Side side, const ibv_sge& local) {
  ibv_sge sge = local;
  ibv_recv_wr wr{};
  wr.wr_id = next_wr_id_++;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (const int err = ibv_post_recv(End(side).qp, &wr, &bad); err != 0) {
    return VerbsCallError("ibv_post_recv", err);
  }
  return absl::OkStatus();
}

absl::StatusOr<ibv_wc_status> RcPair::Send(Side from, const ibv_sge& local,
                                           std::optional<std::uint32_t> invalidate_rkey,
                                           unsigned send_flags) {
  ibv_sge sge = local;
  ibv_send_wr wr{};
  wr.send_flags = send_flags;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = invalidate_rkey ? IBV_WR_SEND_WITH_INV : IBV_WR_SEND;
  if (invalidate_rkey) wr.invalidate_rkey = *invalidate_rkey;
  return PostAndWait(from, wr, invalidate_rkey ? "SEND_WITH_INV" : "SEND");
}

absl::StatusOr<std::optional<ibv_wc>> RcPair::PollOne(Side side) {
  ibv_wc wc{};
  const int n = ibv_poll_cq(End(side).cq, 1, &wc);
  if (n < 0) return absl::InternalError("ibv_poll_cq failed");
  if (n == 0) return std::optional<ibv_wc>();
  return std::optional<ibv_wc>(wc);
}

absl::Status RcPair::Route(Side side, const ibv_wc& wc) {
  Endpoint& e = End(side);
  if (awaited_wr_id_ != 0 && wc.wr_id == awaited_wr_id_ && (wc.opcode & IBV_WC_RECV) == 0) {
    awaited_status_ = wc.status;
    return absl::OkStatus();
  }
  if (e.hook && e.hook(wc)) return absl::OkStatus();
  if ((wc.opcode & IBV_WC_RECV) != 0 || wc.status == IBV_WC_WR_FLUSH_ERR) {
    e.receives.push_back(wc);  // flushed receives come back with an undefined opcode
    return absl::OkStatus();
  }
  return absl::InternalError(absl::StrFormat("unexpected completion for work request %#x (%s)",
                                             wc.wr_id, ibv_wc_status_str(wc.status)));
}

absl::Status RcPair::PollUntil(Side side, const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + kTimeout;
  for (unsigned polls = 0; !done(); ++polls) {
    absl::StatusOr<std::optional<ibv_wc>> wc = PollOne(side);
    if (!wc.ok()) return wc.status();
    if (wc->has_value()) {
      if (absl::Status s = Route(side, **wc); !s.ok()) return s;
      continue;
    }
    // The device's work runs in the kernel (softirq, workqueue) on the same few CPUs: after a
    // short spin, sleep a little so it gets them.
    if (polls > 1000) {
      if (std::chrono::steady_clock::now() > deadline) {
        return absl::DeadlineExceededError(
            absl::StrFormat("no expected completion within %d s", kTimeout.count()));
      }
      const timespec pause{0, 20'000};
      nanosleep(&pause, nullptr);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ibv_wc> RcPair::WaitRecv(Side side) {
  Endpoint& e = End(side);
  if (absl::Status s = PollUntil(side, [&] { return !e.receives.empty(); }); !s.ok()) return s;
  const ibv_wc wc = e.receives.front();
  e.receives.pop_front();
  return wc;
}

absl::StatusOr<ibv_wc_status> RcPair::PostAndWait(Side from, ibv_send_wr& wr, const char* what) {
  wr.wr_id = next_wr_id_++;
  wr.send_flags |= IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  if (const int err = ibv_post_send(End(from).qp, &wr, &bad); err != 0) {
    return VerbsCallError("ibv_post_send", err);
  }
  awaited_wr_id_ = wr.wr_id;
  awaited_status_.reset();
  absl::Status s = PollUntil(from, [&] { return awaited_status_.has_value(); });
  awaited_wr_id_ = 0;
  if (!s.ok()) {
    return absl::Status(s.code(),
                        absl::StrFormat("%s of %u bytes: %s", what,
                                        wr.num_sge > 0 ? wr.sg_list[0].length : 0, s.message()));
  }
  return *awaited_status_;
}

}  // namespace pinpool::testing
