// Zero-copy sends that hold their blocks (pinpool/io_uring_zero_copy.h), on the real kernel over
// loopback TCP: a block freed after its send's first completion is not reused until the
// notification; 10^5 messages sent that way while other threads allocate and overwrite freed
// blocks as fast as they can arrive byte-exact, and the same run with the hold switched off (a
// test-only switch) sees corruption, which is what the hold prevents. Then the hold's guarantees
// as grants have them (double free, resizing, the pool's lifetime), several rings of one domain,
// a ring torn down with sends in flight, and misuse. Runs on the host and in the soft-RoCE guest
// (Linux 6.1: rdma.io_uring_rings_in_guest runs this program too).
#include "pinpool/io_uring_zero_copy.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "os/fd_passing.h"
#include "pinpool/grant_lock.h"
#include "pinpool/io_uring.h"
#include "pinpool/pool.h"
#include "providers/io_uring/zero_copy_testing.h"
#include "support/counting_domain.h"
#include "support/sanitizers.h"
#include "support/wait_until.h"

namespace pinpool {
namespace {

using internal::os::UniqueFd;
using ::testing::HasSubstr;
using testing::WaitUntil;
using F = IoUringZeroCopyFigures;

// A connected TCP pair on loopback: `sender` and `receiver`.
struct TcpPair {
  UniqueFd sender, receiver;
  TcpPair() {
    UniqueFd listener(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    EXPECT_EQ(bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), len), 0);
    EXPECT_EQ(listen(listener.get(), 1), 0);
    EXPECT_EQ(getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len), 0);
    sender = UniqueFd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    EXPECT_EQ(connect(sender.get(), reinterpret_cast<sockaddr*>(&addr), len), 0);
    receiver = UniqueFd(accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    EXPECT_GE(receiver.get(), 0);
  }
};

// Reads exactly `n` bytes.
bool ReadAll(int fd, void* to, std::size_t n) {
  auto* p = static_cast<char*>(to);
  while (n > 0) {
    const ssize_t got = read(fd, p, n);
    if (got <= 0) return false;
    p += got;
    n -= static_cast<std::size_t>(got);
  }
  return true;
}

struct SendingPool {
  std::shared_ptr<IoUringDomain> domain;
  std::unique_ptr<Pool> pool;
  std::unique_ptr<IoUringZeroCopy> zc;
  // 4 KiB pages: the single sends here must complete before their receiver reads, and a 256 KiB
  // zero-copy send from transparent huge pages to a loopback receiver that has not read waits
  // for it (its receive window closes), where one from 4 KiB pages completes.
  explicit SendingPool(PageSize page_size = PageSize::k4K) {
    domain = IoUringDomain::Create(64).value();
    PoolOptions o;
    o.chunk_size = 16 * kMiB;
    o.budget = 256 * kMiB;
    o.page_size = page_size;
    o.domains = {domain};
    pool = Pool::Create(std::move(o)).value();
    zc = IoUringZeroCopy::Create(*pool).value();
  }
  ~SendingPool() {
    zc.reset();
    pool.reset();
  }
  io_uring* ring() const { return domain->ring(); }
  std::uint64_t GrantFigure(std::string_view name) const {
    return FigureValue(pool->GetStats().grants.figures, name).value_or(0);
  }
};

// Submits what was prepared and waits for one completion; returns it (copied) and marks it seen.
io_uring_cqe SubmitAndWait(io_uring* ring) {
  io_uring_submit(ring);
  io_uring_cqe* cqe = nullptr;
  EXPECT_EQ(io_uring_wait_cqe(ring, &cqe), 0);
  const io_uring_cqe copy = *cqe;
  io_uring_cqe_seen(ring, cqe);
  return copy;
}

void Pattern(const Block& b, unsigned char seed) { std::memset(b.data(), seed, b.size()); }

// The unsafe reuse a zero-copy send invites, with the hold: 64 KiB sent to a receiver that has
// not read yet; the first completion reports it all sent; the block is freed and every allocation
// of its size misses it; the receiver then reads the original bytes; the notification gives the
// block back.
TEST(ZeroCopyTest, ABlockFreedAfterTheFirstCompletionIsHeldUntilTheNotification) {
  SendingPool s;
  TcpPair tcp;
  const Block b = s.pool->Allocate(64 * kKiB);
  Pattern(b, 'A');
  ASSERT_TRUE(s.zc->PrepareSend(s.ring(), io_uring_get_sqe(s.ring()), tcp.sender.get(), b, 0,
                                b.size(), MSG_WAITALL, 42)
                  .ok());
  const io_uring_cqe first = SubmitAndWait(s.ring());
  EXPECT_EQ(first.res, static_cast<int>(b.size()));
  EXPECT_EQ(s.zc->OnCompletion(s.ring(), first), ZeroCopyCompletion::kSent);
  EXPECT_EQ(s.zc->in_flight(), 1u);
  EXPECT_EQ(FigureValue(s.domain->figures(), IoUringDomainFigures::kZeroCopyInFlight), 1u);

  s.pool->Deallocate(b);  // as soon as the first completion came
  {
    GrantLock lock(*s.pool);
    EXPECT_TRUE(lock.Held(b.data()));
  }
  EXPECT_EQ(s.pool->GetStats().grants.held_blocks, 1u);
  EXPECT_EQ(s.GrantFigure(F::kDeferredFrees), 1u);
  std::vector<Block> others;
  for (int i = 0; i < 64; ++i) {
    others.push_back(s.pool->Allocate(64 * kKiB));
    ASSERT_NE(others.back().data(), b.data()) << "a block the kernel still reads was reused";
    Pattern(others.back(), 'X');
  }
  std::vector<unsigned char> got(b.size());
  ASSERT_TRUE(ReadAll(tcp.receiver.get(), got.data(), got.size()));
  EXPECT_EQ(got, std::vector<unsigned char>(b.size(), 'A')) << "the bytes on the wire changed";

  for (const Block& o : others) s.pool->Deallocate(o);
  io_uring_cqe* cqe = nullptr;
  ASSERT_EQ(io_uring_wait_cqe(s.ring(), &cqe), 0);
  const io_uring_cqe notification = *cqe;
  io_uring_cqe_seen(s.ring(), cqe);
  EXPECT_NE(notification.flags & IORING_CQE_F_NOTIF, 0u);
  EXPECT_EQ(s.zc->OnCompletion(s.ring(), notification), ZeroCopyCompletion::kNotified);
  EXPECT_EQ(s.zc->in_flight(), 0u);
  const PoolStats stats = s.pool->GetStats();
  EXPECT_EQ(stats.grants.held_blocks, 0u);
  EXPECT_EQ(FigureValue(stats.grants.figures, F::kNotifications), 1u);
  ASSERT_EQ(stats.grants.histograms.size(), 1u);
  EXPECT_EQ(stats.grants.histograms[0].name, F::kNotificationSeconds);
  EXPECT_EQ(stats.grants.histograms[0].histogram.count, 1u);
  EXPECT_EQ(FigureValue(s.domain->figures(), IoUringDomainFigures::kZeroCopyInFlight), 0u);
  const Block again = s.pool->Allocate(64 * kKiB);
  EXPECT_EQ(again.data(), b.data()) << "given back at the notification (this thread's cache)";
  s.pool->Deallocate(again);
}

// --- the stress test: 10^5 messages, freed blocks overwritten --------------------------------

std::size_t MessageSize(std::uint64_t seq) {
  return 256 + (seq * 2654435761u) % (16 * 1024);  // 256 B .. 16.25 KiB, a spread of size classes
}
unsigned char MessageByte(std::uint64_t seq, std::size_t i) {
  return static_cast<unsigned char>(seq * 131 + i * 7 + (i >> 9));
}

struct StressResult {
  std::uint64_t sent = 0;
  std::uint64_t received = 0;
  std::uint64_t corrupt_messages = 0;
  std::uint64_t first_corrupt = 0;
  std::string error;
};

// One sender (this thread) sends `messages` blocks with SEND_ZC, in linked batches of 16, and
// frees each at its first completion; two threads allocate blocks of the same sizes and overwrite
// them as fast as they can; the receiver checks every byte. Stops early after `stop_after_corrupt`
// corrupt messages.
StressResult RunStress(SendingPool& s, std::uint64_t messages, std::uint64_t stop_after_corrupt) {
  TcpPair tcp;
  StressResult r;
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> corrupt{0};
  std::thread receiver([&] {
    std::vector<unsigned char> buf(64 * 1024);
    for (std::uint64_t seq = 0; seq < messages && !stop.load(); ++seq) {
      const std::size_t size = MessageSize(seq);
      if (!ReadAll(tcp.receiver.get(), buf.data(), size)) break;
      bool ok = true;
      for (std::size_t i = 0; i < size && ok; ++i) ok = buf[i] == MessageByte(seq, i);
      if (!ok && corrupt.fetch_add(1) == 0) r.first_corrupt = seq;
      r.received = seq + 1;
      if (corrupt.load() >= stop_after_corrupt) stop = true;
    }
    // Done or stopped early: a send still waiting for room in the socket fails instead of
    // waiting for a reader that is gone.
    shutdown(tcp.receiver.get(), SHUT_RDWR);
  });
  std::vector<std::thread> overwriters;
  for (int t = 0; t < 2; ++t) {
    overwriters.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      std::vector<Block> mine;
      while (!stop.load(std::memory_order_relaxed)) {
        Block b = s.pool->Allocate(MessageSize(rng()));
        if (b) {
          std::memset(b.data(), 0xee, b.size());
          mine.push_back(b);
        }
        if (mine.size() > 8 || (!b && !mine.empty())) {
          s.pool->Deallocate(mine.front());
          mine.erase(mine.begin());
        }
      }
      for (const Block& b : mine) s.pool->Deallocate(b);
    });
  }

  io_uring* ring = s.ring();
  std::map<std::uint64_t, Block> awaiting_result;  // by user_data (the sequence number)
  std::uint64_t next = 0;
  auto reap = [&](bool wait) {
    io_uring_cqe* cqe = nullptr;
    if ((wait ? io_uring_wait_cqe(ring, &cqe) : io_uring_peek_cqe(ring, &cqe)) != 0) return false;
    const io_uring_cqe c = *cqe;
    io_uring_cqe_seen(ring, cqe);
    switch (s.zc->OnCompletion(ring, c)) {
      case ZeroCopyCompletion::kSent:
      case ZeroCopyCompletion::kDone: {
        auto it = awaiting_result.find(c.user_data);
        if (c.res != static_cast<int>(MessageSize(c.user_data)) && r.error.empty()) {
          r.error = "send " + std::to_string(c.user_data) + ": " + std::to_string(c.res);
        }
        s.pool->Deallocate(it->second);  // at once: the hold keeps it until the notification
        awaiting_result.erase(it);
        break;
      }
      case ZeroCopyCompletion::kNotified:
        break;
      case ZeroCopyCompletion::kNotTracked:
        if (r.error.empty()) r.error = "a completion the tracker did not know";
        break;
    }
    return true;
  };
  // Batches of 16 sends, linked (IOSQE_IO_LINK) so that the kernel sends them in order (sends
  // in flight on one stream socket are otherwise free to interleave); a batch goes once the one
  // before has all its results. Notifications come when they come.
  while (next < messages && !stop.load() && r.error.empty()) {
    const std::uint64_t batch_end = std::min<std::uint64_t>(next + 16, messages);
    for (; next < batch_end; ++next) {
      const Block b = s.pool->Allocate(MessageSize(next));
      if (!b) {
        r.error = "allocation failed";
        break;
      }
      auto* p = static_cast<unsigned char*>(b.data());
      for (std::size_t i = 0; i < b.size(); ++i) p[i] = MessageByte(next, i);
      io_uring_sqe* sqe = io_uring_get_sqe(ring);
      const absl::Status st =
          s.zc->PrepareSend(ring, sqe, tcp.sender.get(), b, 0, b.size(), MSG_WAITALL, next);
      if (!st.ok()) {
        r.error = st.ToString();
        break;
      }
      if (next + 1 < batch_end) sqe->flags |= IOSQE_IO_LINK;
      awaiting_result.emplace(next, b);
    }
    io_uring_submit(ring);
    while (!awaiting_result.empty() && r.error.empty()) reap(true);
  }
  r.sent = next;
  // The end of the stream: a receiver still waiting for messages the sender gave up on stops.
  shutdown(tcp.sender.get(), SHUT_WR);
  receiver.join();
  stop = true;
  for (std::thread& t : overwriters) t.join();
  // The sends' notifications follow the receiver's reads (or its end's shutdown, which frees
  // what it had not read); results still due come first.
  while (!awaiting_result.empty()) reap(true);
  if (!s.zc->Drain(ring, std::chrono::seconds(10)).ok() && r.error.empty()) r.error = "drain";
  r.corrupt_messages = corrupt.load();
  return r;
}

// 10^5 messages; 10^4 in the soft-RoCE guest (PINPOOL_SOFTROCE=1), whose emulated CPUs run 10 to
// 50 times slower, and under a sanitizer, which checks every byte the test writes and compares;
// PINPOOL_ZC_MESSAGES sets another count.
std::uint64_t StressMessages() {
  if (const char* env = std::getenv("PINPOOL_ZC_MESSAGES")) return std::strtoull(env, nullptr, 10);
  const char* guest = std::getenv("PINPOOL_SOFTROCE");
  const bool slow =
      (guest != nullptr && std::string(guest) == "1") || testing::kAsan || testing::kTsan;
  return slow ? 10'000 : 100'000;
}

TEST(ZeroCopyStressTest, HundredThousandMessagesArriveByteExactWhileFreedBlocksAreOverwritten) {
  SendingPool s;
  const std::uint64_t messages = StressMessages();
  const auto t0 = std::chrono::steady_clock::now();
  const StressResult r = RunStress(s, messages, 1);
  std::fprintf(stderr, "sent %llu, received %llu, corrupt %llu, in %.1f s; deferred frees %llu\n",
               static_cast<unsigned long long>(r.sent), static_cast<unsigned long long>(r.received),
               static_cast<unsigned long long>(r.corrupt_messages),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
               static_cast<unsigned long long>(s.GrantFigure(F::kDeferredFrees)));
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.sent, messages);
  EXPECT_EQ(r.received, messages);
  EXPECT_EQ(r.corrupt_messages, 0u) << "first at message " << r.first_corrupt;
  EXPECT_GT(s.GrantFigure(F::kDeferredFrees), 0u) << "frees came before notifications";
  EXPECT_EQ(s.zc->in_flight(), 0u);
  EXPECT_EQ(s.pool->GetStats().grants.held_blocks, 0u);
}

// The same with the hold switched off: blocks are reused while the kernel still reads them, and
// the receiver sees other bytes than were sent. What the test above would see without the hold.
TEST(ZeroCopyStressTest, WithoutTheHoldTheReceiverSeesCorruption) {
  SendingPool s;
  internal::SetZeroCopyHoldForTesting(false);
  const StressResult r = RunStress(s, StressMessages(), 20);
  internal::SetZeroCopyHoldForTesting(true);
  std::fprintf(stderr, "without the hold: %llu of %llu messages corrupt (first: %llu)\n",
               static_cast<unsigned long long>(r.corrupt_messages),
               static_cast<unsigned long long>(r.received),
               static_cast<unsigned long long>(r.first_corrupt));
  EXPECT_GT(r.corrupt_messages, 0u) << "the hold would protect nothing";
}

// --- the hold's guarantees, as grants have them ------------------------------------------------

// A send to a receiver that does not read yet: its first completion, not its notification.
io_uring_cqe SendAndGetResult(SendingPool& s, const TcpPair& tcp, const Block& b, std::uint64_t id,
                              io_uring* ring = nullptr) {
  if (ring == nullptr) ring = s.ring();
  EXPECT_TRUE(s.zc->PrepareSend(ring, io_uring_get_sqe(ring), tcp.sender.get(), b, 0, b.size(),
                                MSG_WAITALL, id)
                  .ok());
  const io_uring_cqe c = SubmitAndWait(ring);
  EXPECT_EQ(s.zc->OnCompletion(ring, c), ZeroCopyCompletion::kSent);
  return c;
}

TEST(ZeroCopyDeathTest, MisuseOfHeldBlocksAndPoolsIsRefused) {
  SendingPool s;
  TcpPair tcp;
  const Block b = s.pool->Allocate(64 * kKiB);
  SendAndGetResult(s, tcp, b, 1);
  EXPECT_FALSE(s.pool->Reallocate(b, 128 * kKiB)) << "a block the kernel reads is never moved";
  s.pool->Deallocate(b);
  EXPECT_DEATH(s.pool->Deallocate(b), "still held");
  EXPECT_DEATH(s.pool.reset(), "grant holders");
  std::vector<unsigned char> got(b.size());
  ASSERT_TRUE(ReadAll(tcp.receiver.get(), got.data(), got.size()));
  ASSERT_TRUE(s.zc->Drain(s.ring(), std::chrono::seconds(10)).ok());
  EXPECT_EQ(s.pool->GetStats().grants.held_blocks, 0u);
}

TEST(ZeroCopyTest, BadSendsAreRefusedAndHoldNothing) {
  SendingPool s;
  TcpPair tcp;
  io_uring_sqe* sqe = io_uring_get_sqe(s.ring());
  const io_uring_sqe untouched = *sqe;
  const Block b = s.pool->Allocate(4096);
  const auto send = [&](io_uring* ring, const Block& block, std::size_t offset, std::size_t len,
                        std::uint64_t id) {
    return s.zc->PrepareSend(ring, sqe, tcp.sender.get(), block, offset, len, 0, id);
  };
  EXPECT_EQ(send(s.ring(), b, 0, 0, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(send(s.ring(), b, 4000, 200, 1).code(), absl::StatusCode::kInvalidArgument);
  const Block interior(static_cast<char*>(b.data()) + 64, 64, &b.chunk());
  EXPECT_EQ(send(s.ring(), interior, 0, 64, 1).code(), absl::StatusCode::kInvalidArgument);
  io_uring other;
  ASSERT_EQ(io_uring_queue_init(4, &other, 0), 0);
  const absl::Status foreign = send(&other, b, 0, 4096, 1);
  EXPECT_EQ(foreign.code(), absl::StatusCode::kFailedPrecondition) << foreign;
  EXPECT_THAT(std::string(foreign.message()), HasSubstr("AddRing"));
  io_uring_queue_exit(&other);
  const Block freed = s.pool->Allocate(4096);
  s.pool->Deallocate(freed);
  EXPECT_EQ(send(s.ring(), freed, 0, 4096, 1).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(std::memcmp(sqe, &untouched, sizeof(*sqe)), 0) << "the sqe was left alone";
  EXPECT_EQ(s.zc->in_flight(), 0u);

  // One in flight with user_data 7: another with 7 on the same ring is refused; Cancel ends it.
  ASSERT_TRUE(s.zc->Track(s.ring(), b, 7).ok());
  EXPECT_EQ(s.zc->Track(s.ring(), b, 7).code(), absl::StatusCode::kAlreadyExists);
  s.zc->Cancel(s.ring(), 7);
  EXPECT_EQ(s.zc->in_flight(), 0u);
  s.pool->Deallocate(b);
  EXPECT_EQ(s.pool->GetStats().grants.held_blocks, 0u) << "a cancelled send holds nothing";
}

TEST(ZeroCopyTest, CreateNeedsAnIoUringDomain) {
  PoolOptions o;
  o.chunk_size = 2 * kMiB;
  o.budget = 8 * kMiB;
  o.domains = {std::make_shared<testing::CountingDomain>()};
  auto pool = Pool::Create(std::move(o)).value();
  EXPECT_EQ(IoUringZeroCopy::Create(*pool).status().code(), absl::StatusCode::kInvalidArgument);
  IoUringZeroCopyOptions zo;
  zo.domain = 0;
  EXPECT_EQ(IoUringZeroCopy::Create(*pool, zo).status().code(), absl::StatusCode::kInvalidArgument);
}

// One block sent on three rings of one domain (its own and two that joined), freed after the three
// first completions: held until the third notification.
TEST(ZeroCopyTest, ABlockSentOnSeveralRingsIsHeldUntilItsLastNotification) {
  SendingPool s;
  io_uring a, b;
  ASSERT_EQ(io_uring_queue_init(8, &a, 0), 0);
  ASSERT_EQ(io_uring_queue_init(8, &b, 0), 0);
  ASSERT_TRUE(s.domain->AddRing(&a).ok());
  ASSERT_TRUE(s.domain->AddRing(&b).ok());
  std::vector<std::unique_ptr<TcpPair>> tcp;
  const Block block = s.pool->Allocate(128 * kKiB);
  Pattern(block, 'M');
  io_uring* rings[] = {s.ring(), &a, &b};
  for (io_uring* r : rings) {
    tcp.push_back(std::make_unique<TcpPair>());
    SendAndGetResult(s, *tcp.back(), block, 9, r);  // the same user_data on each ring is fine
  }
  s.pool->Deallocate(block);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(s.pool->GetStats().grants.held_blocks, 1u) << "before notification " << i;
    std::vector<unsigned char> got(block.size());
    ASSERT_TRUE(ReadAll(tcp[i]->receiver.get(), got.data(), got.size()));
    EXPECT_EQ(got, std::vector<unsigned char>(block.size(), 'M')) << "ring " << i;
    ASSERT_TRUE(s.zc->Drain(rings[i], std::chrono::seconds(10)).ok());
  }
  EXPECT_EQ(s.pool->GetStats().grants.held_blocks, 0u);
  EXPECT_TRUE(s.domain->RemoveRing(&a).ok());
  EXPECT_TRUE(s.domain->RemoveRing(&b).ok());
  io_uring_queue_exit(&a);
  io_uring_queue_exit(&b);
}

// The application closes a ring with a send in flight (without Drain): the block stays held until
// pinpool, reading the ring through its own reference, sees the send's notification; then it is
// given back. (When the notification comes is the kernel's business: Linux 6.1 sometimes posts
// it before the loopback receiver has read.)
TEST(ZeroCopyTest, ARingClosedWithSendsInFlightNeitherLeaksNorReusesTheirBlocks) {
  SendingPool s;
  TcpPair tcp;
  auto* ring = new io_uring;
  ASSERT_EQ(io_uring_queue_init(8, ring, 0), 0);
  ASSERT_TRUE(s.domain->AddRing(ring).ok());
  const Block b = s.pool->Allocate(64 * kKiB);
  Pattern(b, 'C');
  SendAndGetResult(s, tcp, b, 5, ring);
  s.pool->Deallocate(b);
  io_uring_queue_exit(ring);  // torn down with the send in flight
  // A new ring in the same struct, joined: a completion of its own with the old send's user_data
  // (even one that looks like a notification) must not end the old send's hold.
  ASSERT_EQ(io_uring_queue_init(8, ring, 0), 0);
  ASSERT_TRUE(s.domain->AddRing(ring).ok());
  io_uring_cqe lookalike{};
  lookalike.user_data = 5;
  lookalike.flags = IORING_CQE_F_NOTIF;
  EXPECT_EQ(s.zc->OnCompletion(ring, lookalike), ZeroCopyCompletion::kNotTracked);
  EXPECT_EQ(s.pool->GetStats().grants.held_blocks, 1u);
  ASSERT_TRUE(s.domain->RemoveRing(ring).ok());
  io_uring_queue_exit(ring);
  delete ring;
  // Until pinpool has read the old ring's notification (Poll), the block stays held.
  std::vector<Block> others;
  for (int i = 0; i < 64; ++i) {
    others.push_back(s.pool->Allocate(64 * kKiB));
    ASSERT_NE(others.back().data(), b.data()) << "reused before its notification was read";
    Pattern(others.back(), 'X');
  }
  EXPECT_EQ(s.pool->GetStats().grants.held_blocks, 1u);
  std::vector<unsigned char> got(b.size());
  ASSERT_TRUE(ReadAll(tcp.receiver.get(), got.data(), got.size()));
  EXPECT_EQ(got, std::vector<unsigned char>(b.size(), 'C'));
  EXPECT_TRUE(WaitUntil([&] { return s.zc->Poll() == 0; }, std::chrono::milliseconds(10000)))
      << "the notification of the closed ring was read";
  EXPECT_EQ(s.pool->GetStats().grants.held_blocks, 0u) << "and the block given back";
  EXPECT_EQ(s.GrantFigure(F::kNotifications), 1u);
  EXPECT_EQ(s.domain->rings(), 1u) << "the domain let the closed ring go";
  for (const Block& o : others) s.pool->Deallocate(o);
}

// A send whose notification never comes before the tracker goes (the receiver never reads): it is
// abandoned, its block stays held, never reused, and the pool can still be destroyed.
TEST(ZeroCopyTest, ASendAbandonedAtTeardownKeepsItsBlockHeld) {
  SendingPool s;
  TcpPair tcp;
  const Block b = s.pool->Allocate(64 * kKiB);
  SendAndGetResult(s, tcp, b, 1);
  s.pool->Deallocate(b);
  s.zc.reset();
  const PoolStats stats = s.pool->GetStats();
  EXPECT_EQ(FigureValue(stats.grants.figures, F::kAbandoned), 1u);
  EXPECT_EQ(stats.grants.held_blocks, 1u) << "held until the pool is destroyed";
  for (int i = 0; i < 64; ++i) {
    const Block other = s.pool->Allocate(64 * kKiB);
    ASSERT_NE(other.data(), b.data());
  }
}

}  // namespace
}  // namespace pinpool
