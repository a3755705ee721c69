// IoUringZeroCopy (see pinpool/io_uring_zero_copy.h): each zero-copy send is a grant on its block
// (pinpool/grant_lock.h) that ends at the send's notification. The pool's grant bookkeeping does
// the rest: a free of the block while a send is in flight reaches the library through the grant
// tag, holds the block and calls RevokeForFree, which has nothing to revoke (a send cannot be
// called back) and only counts the deferred free; End at the notification gives the block back.
//
// Owns (in State, under the pool's grant lock): the sends in flight by (ring, user_data), and a
// record of every ring it has sent on: pinpool's own descriptor of it (domain/io_uring_ring_ref.h,
// which keeps the kernel's ring alive after the application closed its own), the ring's layout
// (to map its completion queue once the application's mapping is gone: ring_view.h), and its
// sends in flight. A record outlives the application's ring while sends on it wait.
//
// Lock order: the pool's grant lock, then the domain's own (IoUringDomain::Serves), a leaf.
#include <liburing.h>

#include <atomic>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "domain/io_uring_domain_internal.h"
#include "domain/io_uring_ring_ref.h"
#include "pinpool/grant_lock.h"
#include "pinpool/io_uring.h"
#include "pinpool/io_uring_zero_copy.h"
#include "pinpool/pool.h"
#include "providers/io_uring/ring_view.h"
#include "providers/io_uring/zero_copy_testing.h"
#include "util/status_macros.h"

namespace pinpool {
PINPOOL_ABI_BEGIN
namespace {

std::atomic<bool> hold_blocks{true};  // false only in the test that shows why it is needed

using Clock = std::chrono::steady_clock;
using F = IoUringZeroCopyFigures;

constexpr const char* kSendsHelp = "zero-copy sends tracked (IoUringZeroCopy)";
constexpr const char* kNotificationsHelp =
    "zero-copy send notifications seen: the kernel let go of the block";
constexpr const char* kDeferredHelp =
    "frees of a block with a zero-copy send in flight, held until its notification";
constexpr const char* kAbandonedHelp =
    "zero-copy sends given up on at teardown: their blocks stay held until the pool goes";
constexpr const char* kLatencyHelp =
    "a zero-copy send, from PrepareSend or Track to its notification (how long a freed block "
    "can stay held)";

}  // namespace

PINPOOL_ABI_END
namespace internal {
void SetZeroCopyHoldForTesting(bool hold) { hold_blocks = hold; }
}  // namespace internal
PINPOOL_ABI_BEGIN

struct PINPOOL_NO_EXPORT IoUringZeroCopy::State final : GrantHolder {
  struct Ring {
    io_uring* app = nullptr;  // the application's ring while it is open; null once closed
    internal::RingRef ref;
    internal::RingShape shape;
    std::unique_ptr<internal::RingView> view;  // mapped once the application closed the ring
    std::size_t in_flight = 0;
  };
  struct Send {
    void* block = nullptr;
    std::uint64_t grant = 0;  // the grant's id; 0 when the hold was disabled (tests)
    Clock::time_point start;
    bool result_seen = false;  // the first completion came
    bool notified = false;     // the notification came (or none will): the hold has ended
  };
  struct Key {
    std::uint64_t ring;
    std::uint64_t user_data;
    friend bool operator==(const Key&, const Key&) = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const noexcept {
      return std::hash<std::uint64_t>()(k.user_data * 0x9e3779b97f4a7c15ULL ^ k.ring);
    }
  };

  State(Pool& p, std::shared_ptr<IoUringDomain> d, std::size_t index, IoUringZeroCopyOptions o)
      : pool(p), domain(std::move(d)), domain_index(index), options(o) {}

  // The application freed a block with a send in flight: nothing can call the send back, the
  // block waits for the notification.
  void RevokeForFree(GrantLock& lock, std::uint64_t) override {
    lock.Count(F::kDeferredFrees, kDeferredHelp);
  }

  // The record of `app`, made at its first send (when the domain serves it). A record whose
  // ring the application has replaced at the same address is closed first.
  absl::StatusOr<Ring*> RingForSend(io_uring* app) {
    if (auto it = live.find(app); it != live.end()) {
      Ring& r = rings.at(it->second);
      if (r.ref.Names(app->ring_fd)) return &r;
      CloseRing(it->second);
    }
    if (!domain->Serves(app)) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "ring fd %d is not served by the pool's io_uring domain %s: add it first "
          "(IoUringDomain::AddRing); a block's buffer index is valid only on the domain's rings",
          app->ring_fd, domain->name()));
    }
    PINPOOL_ASSIGN_OR_RETURN(internal::RingRef ref, internal::RingRef::Take(app->ring_fd));
    const std::uint64_t id = ++next_ring;
    Ring& r = rings[id];
    r.app = app;
    r.ref = std::move(ref);
    r.shape = internal::ShapeOf(*app);
    live[app] = id;
    return &r;
  }

  // The application's ring is gone: its record waits for its sends, or goes.
  void CloseRing(std::uint64_t id) {
    Ring& r = rings.at(id);
    if (r.app != nullptr) live.erase(r.app);
    r.app = nullptr;
    if (r.in_flight == 0) rings.erase(id);
  }

  absl::Status Track(GrantLock& lock, io_uring* app, const Block& block, std::uint64_t user_data) {
    if (app == nullptr) return absl::InvalidArgumentError("IoUringZeroCopy: null ring");
    PINPOOL_ASSIGN_OR_RETURN(Ring * r, RingForSend(app));
    const std::uint64_t ring_id = live.at(app);
    if (sends.contains({ring_id, user_data})) {
      return absl::AlreadyExistsError(absl::StrFormat(
          "IoUringZeroCopy: a send with user_data %#x is in flight on ring fd %d already: "
          "user_data must tell sends in flight apart",
          user_data, app->ring_fd));
    }
    PINPOOL_RETURN_IF_ERROR(lock.CheckLive(block));
    Send s;
    s.block = block.data();
    s.start = Clock::now();
    if (hold_blocks.load(std::memory_order_relaxed)) {
      s.grant = ++next_grant;
      lock.Begin(block, *this, s.grant);
    }
    sends.emplace(Key{ring_id, user_data}, s);
    ++r->in_flight;
    ++in_flight;
    internal::CountZeroCopyInFlight(*domain, 1);
    lock.Count(F::kSends, kSendsHelp);
    return absl::OkStatus();
  }

  // The hold of `s` ends: the kernel let go of its block (`notified`), or never took it.
  void End(GrantLock& lock, Ring& r, Send& s, bool notified) {
    if (s.notified) return;
    s.notified = true;
    if (s.grant != 0) lock.End(s.block, *this, s.grant);
    --r.in_flight;
    --in_flight;
    internal::CountZeroCopyInFlight(*domain, -1);
    if (notified) {
      lock.Count(F::kNotifications, kNotificationsHelp);
      lock.Record(F::kNotificationSeconds, kLatencyHelp,
                  std::chrono::duration<double>(Clock::now() - s.start).count());
    }
  }

  // A completion on the ring of record `ring_id`. Never erases the ring's record (Poll does).
  ZeroCopyCompletion Complete(GrantLock& lock, std::uint64_t ring_id, const io_uring_cqe& cqe) {
    auto it = sends.find({ring_id, cqe.user_data});
    if (it == sends.end()) return ZeroCopyCompletion::kNotTracked;
    Ring& r = rings.at(ring_id);
    Send& s = it->second;
    ZeroCopyCompletion what = ZeroCopyCompletion::kSent;
    if ((cqe.flags & IORING_CQE_F_NOTIF) != 0) {
      End(lock, r, s, /*notified=*/true);
      what = ZeroCopyCompletion::kNotified;
    } else {
      s.result_seen = true;
      if ((cqe.flags & IORING_CQE_F_MORE) == 0) {  // no notification follows
        End(lock, r, s, /*notified=*/false);
        what = ZeroCopyCompletion::kDone;
      }
    }
    if (s.result_seen && s.notified) sends.erase(it);
    return what;
  }

  // Reads what the kernel posted on rings the application closed; returns their sends in flight.
  std::size_t Poll(GrantLock& lock) {
    for (auto it = live.begin(); it != live.end();) {
      const std::uint64_t id = it->second;
      ++it;  // CloseRing erases the entry
      if (rings.at(id).ref.ClosedByApplication()) CloseRing(id);
    }
    std::size_t left = 0;
    std::vector<std::uint64_t> done;
    for (auto& [id, r] : rings) {
      if (r.app != nullptr) continue;
      if (r.in_flight > 0 && r.shape.mappable) {
        if (!r.view) {
          absl::StatusOr<std::unique_ptr<internal::RingView>> view =
              internal::RingView::Map(r.ref.fd(), r.shape);
          if (view.ok()) r.view = *std::move(view);
        }
        if (r.view) {
          const std::uint64_t ring_id = id;
          r.view->Reap([&](const io_uring_cqe& cqe) { Complete(lock, ring_id, cqe); });
        }
      }
      if (r.in_flight == 0) {
        done.push_back(id);
      } else {
        left += r.in_flight;
      }
    }
    for (std::uint64_t id : done) {
      std::erase_if(sends, [&](const auto& e) { return e.first.ring == id; });
      rings.erase(id);
    }
    return left;
  }

  Pool& pool;
  std::shared_ptr<IoUringDomain> domain;  // let go when the State outlives its object
  const std::size_t domain_index;
  const IoUringZeroCopyOptions options;
  std::map<std::uint64_t, Ring> rings;                // by record id
  std::unordered_map<io_uring*, std::uint64_t> live;  // the application's open rings' records
  std::unordered_map<Key, Send, KeyHash> sends;
  std::uint64_t next_ring = 0;
  std::uint64_t next_grant = 0;
  std::atomic<std::size_t> in_flight{0};  // read without the lock by in_flight()
};

absl::StatusOr<std::unique_ptr<IoUringZeroCopy>> IoUringZeroCopy::Create(
    Pool& pool, IoUringZeroCopyOptions options) {
  const std::vector<std::shared_ptr<Domain>>& domains = pool.options().domains;
  std::size_t index = options.domain;
  if (index == SIZE_MAX) {
    for (index = 0; index < domains.size(); ++index) {
      if (domains[index]->kind() == DomainKind::kIoUring) break;
    }
  }
  std::shared_ptr<IoUringDomain> domain =
      index < domains.size() ? std::dynamic_pointer_cast<IoUringDomain>(domains[index]) : nullptr;
  if (domain == nullptr) {
    return absl::InvalidArgumentError(
        options.domain == SIZE_MAX
            ? std::string("IoUringZeroCopy: the pool has no IoUringDomain to send from")
            : absl::StrFormat("IoUringZeroCopy: the pool's domain %d is not an IoUringDomain",
                              options.domain));
  }
  auto state = std::make_unique<State>(pool, std::move(domain), index, options);
  {
    GrantLock lock(pool);
    lock.AddHolder();
  }
  return std::unique_ptr<IoUringZeroCopy>(new IoUringZeroCopy(std::move(state)));
}

IoUringZeroCopy::IoUringZeroCopy(std::unique_ptr<State> state) : state_(std::move(state)) {}

IoUringZeroCopy::~IoUringZeroCopy() {
  const auto deadline = Clock::now() + state_->options.teardown_wait;
  while (Poll() != 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  bool abandoned = false;
  {
    GrantLock lock(state_->pool);
    for (auto& [key, s] : state_->sends) {
      if (s.notified) continue;
      // Not ended: the grant stays, and with it the hold, until the pool is destroyed.
      abandoned = true;
      lock.Count(F::kAbandoned, kAbandonedHelp);
      internal::CountZeroCopyInFlight(*state_->domain, -1);
    }
    state_->sends.clear();
    state_->rings.clear();  // pinpool's descriptors of the rings: the kernel may tear them down
    state_->live.clear();
    lock.RemoveHolder();
  }
  // The pool's grant records of abandoned sends name the State as their holder, and call it if
  // the application frees such a block later: it stays, emptied and reachable, for the
  // process's life.
  if (abandoned) {
    state_->domain.reset();
    static auto* const mu = new std::mutex;
    static auto* const kept = new std::vector<std::unique_ptr<State>>;
    std::lock_guard<std::mutex> keep(*mu);
    kept->push_back(std::move(state_));
  }
}

absl::Status IoUringZeroCopy::PrepareSend(io_uring* ring, io_uring_sqe* sqe, int sockfd,
                                          const Block& block, std::size_t offset,
                                          std::size_t length, int msg_flags,
                                          std::uint64_t user_data) {
  if (sqe == nullptr) return absl::InvalidArgumentError("IoUringZeroCopy::PrepareSend: null sqe");
  if (length == 0 || offset > block.size() || length > block.size() - offset ||
      length > UINT32_MAX) {
    return absl::InvalidArgumentError(
        absl::StrFormat("IoUringZeroCopy::PrepareSend: bytes [%d, +%d) of a block of %d", offset,
                        length, block.size()));
  }
  {
    GrantLock lock(state_->pool);
    PINPOOL_RETURN_IF_ERROR(state_->Track(lock, ring, block, user_data));
  }
  io_uring_prep_send_zc_fixed(
      sqe, sockfd, static_cast<char*>(block.data()) + offset, length, msg_flags, 0,
      static_cast<unsigned>(ToUnderlying(block.buffer_index(state_->domain_index))));
  io_uring_sqe_set_data64(sqe, user_data);
  return absl::OkStatus();
}

absl::Status IoUringZeroCopy::Track(io_uring* ring, const Block& block, std::uint64_t user_data) {
  GrantLock lock(state_->pool);
  return state_->Track(lock, ring, block, user_data);
}

void IoUringZeroCopy::Cancel(io_uring* ring, std::uint64_t user_data) {
  GrantLock lock(state_->pool);
  auto ring_it = state_->live.find(ring);
  if (ring_it == state_->live.end()) return;
  auto it = state_->sends.find({ring_it->second, user_data});
  if (it == state_->sends.end()) return;
  state_->End(lock, state_->rings.at(ring_it->second), it->second, /*notified=*/false);
  state_->sends.erase(it);
}

ZeroCopyCompletion IoUringZeroCopy::OnCompletion(io_uring* ring, const io_uring_cqe& cqe) {
  GrantLock lock(state_->pool);
  auto it = state_->live.find(ring);
  if (it == state_->live.end()) return ZeroCopyCompletion::kNotTracked;
  const std::uint64_t id = it->second;
  if (!state_->sends.contains({id, cqe.user_data})) return ZeroCopyCompletion::kNotTracked;
  // A send of this user_data is in flight on the ring recorded for `ring`: is `ring` still that
  // ring? (The application may have closed it and set another up in the same struct: the old
  // ring's sends wait for Poll, and must not end on the new ring's completions.)
  if (!state_->rings.at(id).ref.Names(ring->ring_fd)) {
    state_->CloseRing(id);
    return ZeroCopyCompletion::kNotTracked;
  }
  return state_->Complete(lock, id, cqe);
}

absl::Status IoUringZeroCopy::Drain(io_uring* ring, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    std::size_t waiting = 0;
    {
      GrantLock lock(state_->pool);
      if (auto it = state_->live.find(ring); it != state_->live.end()) {
        waiting = state_->rings.at(it->second).in_flight;
      }
    }
    if (waiting == 0) return absl::OkStatus();
    const auto left = deadline - Clock::now();
    if (left <= Clock::duration::zero()) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "IoUringZeroCopy::Drain: %d zero-copy sends on ring fd %d are still waiting for their "
          "notification (their blocks stay held)",
          waiting, ring->ring_fd));
    }
    const auto slice = std::min<Clock::duration>(left, std::chrono::milliseconds(50));
    __kernel_timespec ts{};
    ts.tv_nsec = std::chrono::duration_cast<std::chrono::nanoseconds>(slice).count();
    io_uring_cqe* cqe = nullptr;
    const int ret = io_uring_wait_cqe_timeout(ring, &cqe, &ts);
    if (ret == 0 && cqe != nullptr) {
      const io_uring_cqe copy = *cqe;
      io_uring_cqe_seen(ring, cqe);
      OnCompletion(ring, copy);
    } else if (ret != -ETIME && ret != -EINTR && ret != -EAGAIN) {
      return absl::InternalError(
          absl::StrFormat("IoUringZeroCopy::Drain: waiting on ring fd %d failed: %s", ring->ring_fd,
                          std::strerror(-ret)));
    }
  }
}

std::size_t IoUringZeroCopy::Poll() {
  GrantLock lock(state_->pool);
  return state_->Poll(lock);
}

std::size_t IoUringZeroCopy::in_flight() const { return state_->in_flight.load(); }

PINPOOL_ABI_END
}  // namespace pinpool
