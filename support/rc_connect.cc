// Connecting an RC queue pair (rc_connect.h).
#include "rc_connect.h"

#include <cstring>

#include "absl/strings/str_format.h"

namespace pinpool::support {

namespace {

bool IsIpv4Mapped(const ibv_gid& gid) {
  static constexpr std::uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(gid.raw, kPrefix, sizeof(kPrefix)) == 0;
}

}  // namespace

absl::Status VerbsCallError(const char* what, int err) {
  return absl::InternalError(absl::StrFormat("%s failed: %s", what, std::strerror(err)));
}

absl::StatusOr<int> FindIpv4MappedGid(ibv_context* context, std::uint8_t port) {
  ibv_port_attr attr{};
  if (const int err = ibv_query_port(context, port, &attr); err != 0) {
    return VerbsCallError("ibv_query_port", err);
  }
  for (int i = 0; i < attr.gid_tbl_len; ++i) {
    ibv_gid_entry entry{};
    // ENODATA marks an empty slot; the table may have holes.
    if (ibv_query_gid_ex(context, port, static_cast<std::uint32_t>(i), &entry, 0) != 0) continue;
    if (entry.gid_type != IBV_GID_TYPE_ROCE_V2) continue;
    ibv_gid gid;
    std::memcpy(gid.raw, entry.gid.raw, sizeof(gid.raw));
    if (IsIpv4Mapped(gid)) return i;
  }
  return absl::NotFoundError(absl::StrFormat(
      "%s port %d has no IPv4-mapped RoCE v2 GID (give its netdev an IPv4 address and wait for "
      "the GID table to fill)",
      ibv_get_device_name(context->device), port));
}

absl::Status ConnectQp(ibv_qp* qp, const RcPeer& peer, const RcPath& path) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = path.port;
  a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE |
                      IBV_ACCESS_REMOTE_ATOMIC;
  if (const int err = ibv_modify_qp(
          qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
      err != 0) {
    return VerbsCallError("ibv_modify_qp(INIT)", err);
  }

  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = path.mtu;
  a.dest_qp_num = peer.qp_num;
  a.rq_psn = peer.psn;
  a.max_dest_rd_atomic = path.rd_atomic;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;  // RoCE: every packet carries a GRH
  a.ah_attr.grh.dgid = peer.gid;
  a.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(path.gid_index);
  a.ah_attr.grh.hop_limit = 1;
  a.ah_attr.port_num = path.port;
  if (const int err =
          ibv_modify_qp(qp, &a,
                        IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                            IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
      err != 0) {
    return VerbsCallError("ibv_modify_qp(RTR)", err);
  }

  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = path.timeout;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.sq_psn = path.psn;
  a.max_rd_atomic = path.rd_atomic;
  if (const int err = ibv_modify_qp(qp, &a,
                                    IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                        IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
      err != 0) {
    return VerbsCallError("ibv_modify_qp(RTS)", err);
  }
  return absl::OkStatus();
}

}  // namespace pinpool::support
