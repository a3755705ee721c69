// RcPair: two RC queue pairs connected to each other through one port of one RDMA device
// (loopback), each with its own completion queue. The smallest setup in which one process moves
// data between its own registered buffers with RDMA WRITE and READ exactly as two hosts would:
// the device checks every lkey against the sending QP's PD and every rkey against the peer QP's
// PD. Test support for pinpool's RDMA tests and its rdma_loopback example; not part of the
// library.
//
// Addressing: RoCE needs a global route header. The pair uses the port's IPv4-mapped RoCE v2 GID
// (::ffff:a.b.c.d) as both source and destination, which works for loopback on rxe over any
// netdev, lo included (the link-local GID does not work over lo).
//
// Each operation is one signaled work request whose completion is awaited before returning. An
// error completion (a refused key, say) moves the QPs to the error state: use a new pair after
// one. Thread safety: none; one thread drives a pair.
#ifndef PINPOOL_TESTS_RDMA_RC_PAIR_H_
#define PINPOOL_TESTS_RDMA_RC_PAIR_H_

#include <infiniband/verbs.h>

#include <chrono>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "pinpool/verbs.h"

namespace pinpool::testing {

// The GID table index of `port`'s IPv4-mapped RoCE v2 entry. kNotFound when the port has none
// (no IPv4 address on the device's netdev yet: the table fills asynchronously).
absl::StatusOr<int> FindIpv4MappedGid(ibv_context* context, std::uint8_t port);

class RcPair {
 public:
  enum class Side { kA, kB };

  // QP A on `pd_a`, QP B on `pd_b` (the same PD, or PDs of two contexts of the same device),
  // connected through `port`, which must be ACTIVE.
  static absl::StatusOr<std::unique_ptr<RcPair>> Connect(ibv_pd* pd_a, ibv_pd* pd_b,
                                                         std::uint8_t port = 1);
  ~RcPair();
  RcPair(const RcPair&) = delete;
  RcPair& operator=(const RcPair&) = delete;

  // RDMA WRITE from `local` (on side `from`, its lkey checked against that side's PD) to
  // `remote` (memory of the other side, its rkey checked against the other side's PD). Returns
  // the completion status, IBV_WC_SUCCESS or what the device reported (IBV_WC_REM_ACCESS_ERR,
  // IBV_WC_LOC_PROT_ERR, ...); a Status error only if posting or polling failed or timed out,
  // or local is longer than remote.
  absl::StatusOr<ibv_wc_status> Write(Side from, const ibv_sge& local, const RemoteBuffer& remote);
  // RDMA READ of `remote` (the other side's memory) into `local`. As Write otherwise.
  absl::StatusOr<ibv_wc_status> Read(Side from, const ibv_sge& local, const RemoteBuffer& remote);

  int gid_index() const noexcept { return gid_index_; }

  // How long an operation may take before it is reported as timed out. Generous: a soft-RoCE
  // device under an emulated CPU moves a few tens of MB/s.
  static constexpr std::chrono::seconds kTimeout{60};

 private:
  struct Endpoint {
    ibv_cq* cq = nullptr;
    ibv_qp* qp = nullptr;
  };

  RcPair() = default;
  absl::StatusOr<ibv_wc_status> Post(Side from, ibv_wr_opcode opcode, const ibv_sge& local,
                                     const RemoteBuffer& remote);

  Endpoint ends_[2];
  int gid_index_ = -1;
  std::uint64_t next_wr_id_ = 1;
};

// The name of a completion status, for test messages ("remote access error", ...).
inline const char* StatusName(ibv_wc_status s) { return ibv_wc_status_str(s); }

}  // namespace pinpool::testing

#endif  // PINPOOL_TESTS_RDMA_RC_PAIR_H_
