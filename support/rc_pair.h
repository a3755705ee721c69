// RcPair: two RC queue pairs connected to each other through one port of one RDMA device
// (loopback), each with its own completion queue. The smallest setup in which one process moves
// data between its own registered buffers with RDMA WRITE and READ exactly as two hosts would:
// the device checks every lkey against the sending QP's PD and every rkey against the peer QP's
// PD. The one RC QP set-up of pinpool's RDMA tests, examples and benchmarks (target
// pinpool_rc_pair); not part of the library: connecting QPs is the application's business.
//
// Addressing: RoCE needs a global route header. The pair uses the port's IPv4-mapped RoCE v2 GID
// (::ffff:a.b.c.d) as both source and destination, which works for loopback on rxe over any
// netdev, lo included (the link-local GID does not work over lo).
//
// Each operation is one signaled work request whose completion is awaited before returning. An
// error completion (a refused key, say) moves the QPs to the error state: Reconnect() brings
// both back. Completions that are not the awaited one go to the side's completion hook (e.g.
// VerbsRemoteAccess::OnCompletion, for the work requests pinpool posts on the QP); receive
// completions the hook does not claim wait for WaitRecv. Thread safety: none; one thread drives
// a pair.
#ifndef PINPOOL_SUPPORT_RC_PAIR_H_
#define PINPOOL_SUPPORT_RC_PAIR_H_

#include <infiniband/verbs.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "pinpool/verbs.h"
#include "rc_connect.h"

namespace pinpool::testing {

using support::FindIpv4MappedGid;

class RcPair {
 public:
  enum class Side { kA, kB };

  struct Options {
    std::uint8_t port = 1;            // must be ACTIVE
    std::uint32_t max_send_wr = 128;  // the application's own plus two per concurrent grant
    std::uint32_t max_recv_wr = 16;
    // Local ACK timeout, 4.096 us * 2^timeout: 18 (~1 s) rides out an emulated CPU under load
    // (a spurious retry only costs time); perftest uses 14.
    std::uint8_t timeout = 18;
  };

  // QP A on `pd_a`, QP B on `pd_b` (the same PD, or PDs of two contexts of the same device),
  // connected through options.port.
  static absl::StatusOr<std::unique_ptr<RcPair>> Connect(ibv_pd* pd_a, ibv_pd* pd_b,
                                                         const Options& options);
  static absl::StatusOr<std::unique_ptr<RcPair>> Connect(ibv_pd* pd_a, ibv_pd* pd_b) {
    return Connect(pd_a, pd_b, Options{});
  }
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
  // Atomic fetch-and-add of `add` on the 8 bytes at remote.address; the old value lands in
  // `local` (8 bytes). As Write otherwise.
  absl::StatusOr<ibv_wc_status> FetchAdd(Side from, const ibv_sge& local,
                                         const RemoteBuffer& remote, std::uint64_t add);

  // A receive of up to local.length bytes into `local` on `side`.
  absl::Status PostRecv(Side side, const ibv_sge& local);
  // A SEND of `local` from `from` (SEND_WITH_INV of `invalidate_rkey` when given), awaited. The
  // other side needs a posted receive. `send_flags` adds IBV_SEND_* flags (IBV_SEND_FENCE).
  absl::StatusOr<ibv_wc_status> Send(Side from, const ibv_sge& local,
                                     std::optional<std::uint32_t> invalidate_rkey = {},
                                     unsigned send_flags = 0);
  // The next receive completion on `side` (polling, offering other completions to the hook).
  absl::StatusOr<ibv_wc> WaitRecv(Side side);
  // Polls `side`'s completions (each offered to the hook, receives kept for WaitRecv) until
  // `done()` is true. kDeadlineExceeded after kTimeout.
  absl::Status PollUntil(Side side, const std::function<bool()>& done);

  // Completions on `side` other than the awaited one are offered to `hook` first; it returns
  // true when it consumed one. Unclaimed send completions are an error.
  using CompletionHook = std::function<bool(const ibv_wc&)>;
  void SetCompletionHook(Side side, CompletionHook hook);

  // Both QPs through RESET back to RTS, for a fresh connection after an error completion.
  absl::Status Reconnect();

  ibv_qp* qp(Side side) const noexcept { return End(side).qp; }
  ibv_cq* cq(Side side) const noexcept { return End(side).cq; }

  int gid_index() const noexcept { return gid_index_; }

  // How long an operation may take before it is reported as timed out. Generous: a soft-RoCE
  // device under an emulated CPU moves a few tens of MB/s.
  static constexpr std::chrono::seconds kTimeout{60};

 private:
  struct Endpoint {
    ibv_cq* cq = nullptr;
    ibv_qp* qp = nullptr;
    CompletionHook hook;
    std::deque<ibv_wc> receives;  // receive completions not yet taken by WaitRecv
  };

  RcPair() = default;
  const Endpoint& End(Side side) const noexcept { return ends_[side == Side::kA ? 0 : 1]; }
  Endpoint& End(Side side) noexcept { return ends_[side == Side::kA ? 0 : 1]; }
  // Posts `wr` (signaled, with a fresh wr_id) and waits for its completion.
  absl::StatusOr<ibv_wc_status> PostAndWait(Side from, ibv_send_wr& wr, const char* what);
  // One completion from `side`'s CQ, if any: nullopt when empty.
  absl::StatusOr<std::optional<ibv_wc>> PollOne(Side side);
  // Routes a completion that is not awaited: hook, receive queue, or an error.
  absl::Status Route(Side side, const ibv_wc& wc);

  Endpoint ends_[2];
  int gid_index_ = -1;
  Options options_;
  ibv_mtu mtu_ = IBV_MTU_1024;
  ibv_gid gid_{};
  std::uint64_t next_wr_id_ = 1;
  std::uint64_t awaited_wr_id_ = 0;  // the send PostAndWait waits for
  std::optional<ibv_wc_status> awaited_status_;
};

// The name of a completion status, for test messages ("remote access error", ...).
inline const char* StatusName(ibv_wc_status s) { return ibv_wc_status_str(s); }

}  // namespace pinpool::testing

#endif  // PINPOOL_SUPPORT_RC_PAIR_H_
