// Connecting one RC queue pair to its peer: the RESET -> INIT -> RTR -> RTS steps, and the GID a
// RoCE port is addressed by. Shared by RcPair (two loopback QPs of one process: the tests,
// examples and benchmarks) and the Python package's RcQueuePair (python/src/verbs_qp.cc: a QP
// whose peer is in another process, which learns these numbers over its own channel). Not part of
// the library; uses only rdma-core and Abseil.
//
// Addressing: RoCE needs a global route header. The port's IPv4-mapped RoCE v2 GID
// (::ffff:a.b.c.d) works between processes and for loopback on rxe over any netdev, lo included
// (the link-local GID does not work over lo).
// Thread safety: plain functions of their arguments; a QP is modified by one thread at a time.
#ifndef PINPOOL_SUPPORT_RC_CONNECT_H_
#define PINPOOL_SUPPORT_RC_CONNECT_H_

#include <infiniband/verbs.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pinpool::support {

// kInternal naming the verbs call and errno's text.
absl::Status VerbsCallError(const char* what, int err);

// The GID table index of `port`'s IPv4-mapped RoCE v2 entry. kNotFound when the port has none
// (no IPv4 address on the device's netdev yet: the table fills asynchronously).
absl::StatusOr<int> FindIpv4MappedGid(ibv_context* context, std::uint8_t port);

// The other end of a connection, as it describes itself.
struct RcPeer {
  std::uint32_t qp_num = 0;
  std::uint32_t psn = 0;  // the first packet sequence number it sends
  ibv_gid gid{};
};

// This end's side of the path.
struct RcPath {
  std::uint8_t port = 1;
  ibv_mtu mtu = IBV_MTU_1024;
  int gid_index = 0;  // of the local GID the packets leave from
  // Local ACK timeout, 4.096 us * 2^timeout: 18 (~1 s) rides out an emulated CPU under load (a
  // spurious retry only costs time); perftest uses 14.
  std::uint8_t timeout = 18;
  std::uint32_t psn = 0;  // the first packet sequence number this end sends
  // RDMA READs and atomics in flight, each way (the device's max_qp_rd_atom bounds it).
  std::uint8_t rd_atomic = 1;
};

// Moves `qp` (in RESET) to INIT, RTR and RTS with `peer` as the other end. The QP accepts every
// remote operation: whether one is allowed is then decided by the memory's own registration
// (a region's or a window's rights) alone.
absl::Status ConnectQp(ibv_qp* qp, const RcPeer& peer, const RcPath& path);

}  // namespace pinpool::support

#endif  // PINPOOL_SUPPORT_RC_CONNECT_H_
