// A block server and its client on two hosts, connected with rdma_cm: every request is served
// from a pool block that the client reaches through its own grant, revoked as soon as the
// request is over. The pattern to copy for storage and RPC servers whose clients RDMA WRITE
// payloads into, or RDMA READ results out of, server memory:
//
//   client -> server  REQUEST {id, PUT or GET, length, seed}            (SEND)
//   server            allocates a pool block (GET: fills it), grants the client write (PUT) or
//                     read (GET) access to exactly `length` bytes of it
//   server -> client  GRANT {id, address, rkey, length}                 (SEND, fenced)
//   client            RDMA WRITEs the payload from its own pool block, or RDMA READs the block
//                     into one and checks every byte
//   client -> server  DONE {id}                                         (SEND)
//   server            PUT: checks every byte; revokes the grant; frees the block
//   server -> client  ACK {id, status}                                  (SEND)
//
// Requests overlap (--depth at a time). The server's chunks are local-only (VerbsDomain::Wrap
// with no remote rights): a client reaches nothing but its current grant. To show that, the
// client's last request is a canary: once the server has acknowledged it (revoked its grant and
// kept the block with known bytes), the client writes through the stale grant; the device must
// refuse it (remote access error, which ends the connection, as verbs define it), and the server
// checks the block still holds its bytes.
//
// Soft-RoCE (rxe) does not keep a peer inside a memory window's bounds, so there grants are range
// regions (GrantMechanism::kAuto decides; docs/remote-access.md).
//
//   server: pinpool_rdma_cm_block_server server ADDRESS [--port P] [--clients N]
//   client: pinpool_rdma_cm_block_server client ADDRESS [--port P] [--requests N] [--depth D]
//                                        [--max-size BYTES] [--seed S] [--connect-seconds S]
//
// Both print one "OK" line with their counts and exit 0 when every byte and every check held; 1
// otherwise. In two soft-RoCE guests: tests/providers/two-hosts.sh.
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rdma_cma.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "pinpool/pinpool.h"
#include "pinpool/verbs.h"
#include "pinpool/verbs_remote_access.h"

namespace {

using pinpool::Block;

// --- the protocol ---------------------------------------------------------------------------

enum class Kind : std::uint32_t { kPut = 1, kGet, kGrant, kDone, kAck };
constexpr std::uint32_t kCanary = 1;  // Message::flags: the client's last, stale-write request

struct Message {
  Kind kind = Kind::kPut;
  std::uint32_t id = 0;
  std::uint64_t address = 0;
  std::uint32_t rkey = 0;
  std::uint32_t length = 0;
  std::uint32_t seed = 0;
  std::uint32_t flags = 0;
  std::uint32_t status = 0;  // ACK: 0 when the server found every byte right
  std::uint32_t pad = 0;
};
static_assert(sizeof(Message) == 40);

std::uint8_t PayloadByte(std::uint32_t seed, std::size_t i) {
  return static_cast<std::uint8_t>(seed * 2654435761u + i * 7 + (i >> 9) + 1);
}
void FillPayload(void* p, std::uint32_t seed, std::size_t n) {
  auto* b = static_cast<std::uint8_t*>(p);
  for (std::size_t i = 0; i < n; ++i) b[i] = PayloadByte(seed, i);
}
bool CheckPayload(const void* p, std::uint32_t seed, std::size_t n, std::size_t* first_bad) {
  const auto* b = static_cast<const std::uint8_t*>(p);
  for (std::size_t i = 0; i < n; ++i) {
    if (b[i] != PayloadByte(seed, i)) {
      *first_bad = i;
      return false;
    }
  }
  return true;
}

// --- small helpers -------------------------------------------------------------------------------

[[noreturn]] void Die(const char* role, const std::string& why) {
  std::fprintf(stderr, "rdma_cm_block_server %s: FAILED: %s\n", role, why.c_str());
  std::exit(1);
}

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// The next rdma_cm event of `channel`, waiting at most `seconds`.
rdma_cm_event* NextEvent(rdma_event_channel* channel, int seconds) {
  pollfd p{channel->fd, POLLIN, 0};
  if (poll(&p, 1, seconds * 1000) != 1) return nullptr;
  rdma_cm_event* event = nullptr;
  return rdma_get_cm_event(channel, &event) == 0 ? event : nullptr;
}

std::unique_ptr<pinpool::Pool> MakePool(ibv_pd* pd, const char* role) {
  // Local access only: peers get in through grants alone.
  auto domain = pinpool::VerbsDomain::Wrap(pd);
  if (!domain.ok()) Die(role, domain.status().ToString());
  pinpool::PoolOptions o;
  o.chunk_size = 8 * pinpool::kMiB;
  o.budget = 128 * pinpool::kMiB;
  o.initial_size = 16 * pinpool::kMiB;
  o.page_size = pinpool::PageSize::kTransparent;
  o.domains = {*domain};
  auto pool = pinpool::Pool::Create(o);
  if (!pool.ok()) Die(role, pool.status().ToString());
  return *std::move(pool);
}

// One side of a connection: a CQ, the QP rdma_cm created, receive buffers, send buffers. All
// message buffers are pool blocks too (their lkeys come with them).
class Connection {
 public:
  Connection(const char* role, rdma_cm_id* id, ibv_pd* pd, pinpool::Pool& pool, int depth)
      : role_(role), id_(id), pool_(pool), slots_(4 * depth + 8) {
    cq_ = ibv_create_cq(id->verbs, 4 * slots_, nullptr, nullptr, 0);
    if (cq_ == nullptr) Die(role, Errno("ibv_create_cq"));
    ibv_qp_init_attr attr{};
    attr.send_cq = cq_;
    attr.recv_cq = cq_;
    attr.qp_type = IBV_QPT_RC;
    attr.cap.max_send_wr = 2 * slots_;  // SENDs, WRITEs/READs (and pinpool's binds/invalidations)
    attr.cap.max_recv_wr = slots_;
    attr.cap.max_send_sge = 1;
    attr.cap.max_recv_sge = 1;
    if (rdma_create_qp(id, pd, &attr) != 0) Die(role, Errno("rdma_create_qp"));
    for (int i = 0; i < slots_; ++i) {
      recv_.push_back(pool.Allocate(sizeof(Message)));
      send_.push_back(pool.Allocate(sizeof(Message)));
      if (!recv_.back() || !send_.back()) Die(role, "no message buffers");
      free_send_.push_back(i);
      PostRecv(i);
    }
  }

  ~Connection() {
    if (id_->qp != nullptr) rdma_destroy_qp(id_);
    if (cq_ != nullptr) ibv_destroy_cq(cq_);
    for (const Block& b : recv_) pool_.Deallocate(b);
    for (const Block& b : send_) pool_.Deallocate(b);
  }

  ibv_qp* qp() const { return id_->qp; }
  ibv_cq* cq() const { return cq_; }

  void PostRecv(int slot) {
    ibv_sge sge = pinpool::ToSge(recv_[slot]);
    ibv_recv_wr wr{};
    wr.wr_id = kRecvTag | static_cast<std::uint64_t>(slot);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    if (ibv_post_recv(id_->qp, &wr, &bad) != 0) Die(role_, Errno("ibv_post_recv"));
  }

  // Sends `m` (signaled, so that its buffer is known to be free again). `fence` orders it after
  // work requests posted before it (a window bind: the peer must not use the rkey first).
  void Send(const Message& m, bool fence = false) {
    if (free_send_.empty()) Die(role_, "out of send buffers");
    const int slot = free_send_.front();
    free_send_.pop_front();
    std::memcpy(send_[slot].data(), &m, sizeof(m));
    ibv_sge sge = pinpool::ToSge(send_[slot]);
    sge.length = sizeof(Message);
    ibv_send_wr wr{};
    wr.wr_id = kSendTag | static_cast<std::uint64_t>(slot);
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED | (fence ? IBV_SEND_FENCE : 0);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_send_wr* bad = nullptr;
    if (ibv_post_send(id_->qp, &wr, &bad) != 0) Die(role_, Errno("ibv_post_send (SEND)"));
  }

  // RDMA WRITE (or READ) of `length` bytes between `local` and the peer's grant; `tag` comes
  // back in the completion's wr_id.
  void Rdma(ibv_wr_opcode op, const Block& local, std::uint32_t length, std::uint64_t address,
            std::uint32_t rkey, std::uint64_t tag) {
    ibv_sge sge = pinpool::ToSge(local);
    sge.length = length;
    ibv_send_wr wr{};
    wr.wr_id = kRdmaTag | tag;
    wr.opcode = op;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = address;
    wr.wr.rdma.rkey = rkey;
    ibv_send_wr* bad = nullptr;
    if (ibv_post_send(id_->qp, &wr, &bad) != 0) Die(role_, Errno("ibv_post_send (RDMA)"));
  }

  // What a completion means to the caller once the connection's own bookkeeping is done.
  struct Event {
    enum What { kNone, kMessage, kRdmaDone, kError } what = kNone;
    Message message{};
    std::uint64_t tag = 0;
    ibv_wc_status status = IBV_WC_SUCCESS;
  };

  // Polls one completion (after `hook`, e.g. VerbsRemoteAccess::OnCompletion, declined it).
  template <typename Hook>
  Event Poll(Hook&& hook) {
    ibv_wc wc{};
    const int n = ibv_poll_cq(cq_, 1, &wc);
    if (n < 0) Die(role_, "ibv_poll_cq failed");
    if (n == 0) return {};
    if (hook(wc)) return {};
    const std::uint64_t tag = wc.wr_id & kTagMask;
    const int slot = static_cast<int>(wc.wr_id & ~kTagMask);
    if (wc.status != IBV_WC_SUCCESS) {
      return {.what = Event::kError, .tag = wc.wr_id, .status = wc.status};
    }
    if (tag == kSendTag) {
      free_send_.push_back(slot);
      return {};
    }
    if (tag == kRecvTag) {
      Event e{.what = Event::kMessage};
      std::memcpy(&e.message, recv_[slot].data(), sizeof(Message));
      PostRecv(slot);
      return e;
    }
    return {.what = Event::kRdmaDone, .tag = wc.wr_id & ~kTagMask};
  }

 private:
  static constexpr std::uint64_t kTagMask = std::uint64_t{0xff} << 48;
  static constexpr std::uint64_t kRecvTag = std::uint64_t{1} << 48;
  static constexpr std::uint64_t kSendTag = std::uint64_t{2} << 48;
  static constexpr std::uint64_t kRdmaTag = std::uint64_t{3} << 48;

  const char* role_;
  rdma_cm_id* id_;
  pinpool::Pool& pool_;
  const int slots_;
  ibv_cq* cq_ = nullptr;
  std::vector<Block> recv_, send_;
  std::deque<int> free_send_;
};

struct Args {
  std::string role, address;
  std::uint16_t port = 7471;
  int clients = 1;
  int requests = 1000;
  int depth = 8;
  std::size_t max_size = 64 * 1024;
  std::uint32_t seed = 15;
  int connect_seconds = 120;
};

// --- server -------------------------------------------------------------------------------

int Serve(const Args& args) {
  const char* role = "server";
  rdma_event_channel* channel = rdma_create_event_channel();
  if (channel == nullptr) Die(role, Errno("rdma_create_event_channel"));
  rdma_cm_id* listener = nullptr;
  if (rdma_create_id(channel, &listener, nullptr, RDMA_PS_TCP) != 0)
    Die(role, Errno("rdma_create_id"));
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(args.port);
  if (inet_pton(AF_INET, args.address.c_str(), &sin.sin_addr) != 1) Die(role, "bad address");
  if (rdma_bind_addr(listener, reinterpret_cast<sockaddr*>(&sin)) != 0) {
    Die(role, Errno("rdma_bind_addr"));
  }
  if (listener->verbs == nullptr) Die(role, "no RDMA device has " + args.address);
  if (rdma_listen(listener, 4) != 0) Die(role, Errno("rdma_listen"));
  // One PD and one pool for every connection; each connection gets its own VerbsRemoteAccess.
  ibv_pd* pd = ibv_alloc_pd(listener->verbs);
  if (pd == nullptr) Die(role, Errno("ibv_alloc_pd"));
  std::unique_ptr<pinpool::Pool> pool = MakePool(pd, role);
  std::printf("server: listening on %s:%u (%s)\n", args.address.c_str(), args.port,
              ibv_get_device_name(listener->verbs->device));
  std::fflush(stdout);

  for (int client = 0; client < args.clients; ++client) {
    rdma_cm_event* event = NextEvent(channel, 600);
    if (event == nullptr) Die(role, "no client connected within 600 s");
    if (event->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
      Die(role, std::string("unexpected event ") + rdma_event_str(event->event));
    }
    rdma_cm_id* id = event->id;
    // rdma_cm reports the peer's parameters from this side's point of view: the client's RDMA
    // READs in flight (its initiator depth) are our responder resources. Accepting fewer than it
    // asked caps its QP; accepting none would stall its every READ.
    const std::uint8_t reads = event->param.conn.responder_resources;
    rdma_ack_cm_event(event);
    if (id->verbs != listener->verbs) Die(role, "the connection arrived on another device");
    auto conn = std::make_unique<Connection>(role, id, pd, *pool, 64);
    auto access = pinpool::VerbsRemoteAccess::Create(*pool, conn->qp());
    if (!access.ok()) Die(role, access.status().ToString());
    rdma_conn_param accept{};
    accept.responder_resources = reads;  // the client's RDMA READs in flight
    accept.initiator_depth = 0;
    if (rdma_accept(id, &accept) != 0) Die(role, Errno("rdma_accept"));
    event = NextEvent(channel, 60);
    if (event == nullptr || event->event != RDMA_CM_EVENT_ESTABLISHED) {
      Die(role, "the connection was not established");
    }
    rdma_ack_cm_event(event);
    char peer[INET6_ADDRSTRLEN] = "?";
    const sockaddr* from = rdma_get_peer_addr(id);
    if (from->sa_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(from)->sin_addr, peer, sizeof(peer));
    }
    std::printf("server: client %d connected from %s; grants are %s (range %s)\n", client, peer,
                pinpool::GrantMechanismName((*access)->mechanism()),
                (*access)->range_enforced() ? "enforced" : "NOT enforced by this device");

    struct Request {
      Block block;
      pinpool::RemoteGrant grant;
      Message m;
    };
    std::map<std::uint32_t, Request> requests;
    std::uint64_t served = 0, bytes = 0, bad = 0, revoked = 0;
    Block canary;
    auto hook = [&](const ibv_wc& wc) { return (*access)->OnCompletion(wc); };
    bool over = false;
    auto last = std::chrono::steady_clock::now();
    while (!over) {
      Connection::Event e = conn->Poll(hook);
      if (e.what == Connection::Event::kNone) {
        if (std::chrono::steady_clock::now() - last > std::chrono::seconds(300)) {
          Die(role, "no completion for 300 s");
        }
        continue;
      }
      last = std::chrono::steady_clock::now();
      if (e.what == Connection::Event::kError) {
        // The client's stale write (or its disconnect) failed the connection: our receives are
        // flushed. That is the end of this client.
        over = true;
        break;
      }
      if (e.what != Connection::Event::kMessage) continue;
      const Message& m = e.message;
      if (m.kind == Kind::kPut || m.kind == Kind::kGet) {
        Request r{.block = pool->Allocate(m.length), .grant = {}, .m = m};
        if (!r.block) Die(role, "pool exhausted");
        if (m.kind == Kind::kGet) FillPayload(r.block.data(), m.seed, m.length);
        if (m.flags & kCanary) std::memset(r.block.data(), 0xc5, r.block.size());
        auto grant = (*access)->Grant(r.block, 0, m.length,
                                      m.kind == Kind::kPut ? pinpool::RemoteRights{.write = true}
                                                           : pinpool::RemoteRights{.read = true});
        if (!grant.ok()) Die(role, grant.status().ToString());
        r.grant = *grant;
        conn->Send({.kind = Kind::kGrant,
                    .id = m.id,
                    .address = grant->address,
                    .rkey = pinpool::ToUnderlying(grant->rkey),
                    .length = grant->length},
                   /*fence=*/true);
        requests[m.id] = r;
      } else if (m.kind == Kind::kDone) {
        auto it = requests.find(m.id);
        if (it == requests.end()) Die(role, "DONE for an unknown request");
        Request& r = it->second;
        std::uint32_t status = 0;
        std::size_t first_bad = 0;
        if (r.m.flags & kCanary) {
          // Keep the block and its bytes: the client will try to write through the revoked
          // grant.
          canary = r.block;
        } else if (r.m.kind == Kind::kPut &&
                   !CheckPayload(r.block.data(), r.m.seed, r.m.length, &first_bad)) {
          std::fprintf(stderr, "server: request %u: byte %zu of %u is wrong\n", m.id, first_bad,
                       r.m.length);
          status = 1;
          ++bad;
        }
        if (absl::Status s = (*access)->Revoke(r.grant); !s.ok()) Die(role, s.ToString());
        if (!(*access)->Ended(r.grant)) Die(role, "a revoked grant did not end");
        ++revoked;
        if (!(r.m.flags & kCanary)) {
          pool->Deallocate(r.block);
          ++served;
          bytes += r.m.length;
        }
        conn->Send({.kind = Kind::kAck, .id = m.id, .status = status});
        requests.erase(it);
      }
    }
    const bool canary_ok = canary && [&] {
      const auto* p = static_cast<const std::uint8_t*>(canary.data());
      for (std::size_t i = 0; i < canary.size(); ++i) {
        if (p[i] != 0xc5) return false;
      }
      return true;
    }();
    const std::size_t live = (*access)->live_grants();
    const pinpool::GrantStats g = pool->GetStats().grants;
    std::printf("server: client %d: %" PRIu64 " requests served, %" PRIu64 " bytes, %" PRIu64
                " with wrong bytes; %" PRIu64 " grants made, %" PRIu64
                " revoked, %zu live; canary block %s after the client's stale write\n",
                client, served, bytes, bad, g.grants, revoked, live,
                !canary     ? "missing"
                : canary_ok ? "untouched"
                            : "CHANGED");
    access->reset();
    if (canary) pool->Deallocate(canary);
    conn.reset();
    rdma_disconnect(id);
    // Drain the DISCONNECTED event (the client may have disconnected first).
    if ((event = NextEvent(channel, 10)) != nullptr) rdma_ack_cm_event(event);
    rdma_destroy_id(id);
    if (bad != 0 || !canary_ok || live != 0 || served == 0) Die(role, "see above");
    std::printf("server: OK: client %d\n", client);
    std::fflush(stdout);
  }
  pool.reset();
  ibv_dealloc_pd(pd);
  rdma_destroy_id(listener);
  rdma_destroy_event_channel(channel);
  return 0;
}

// --- client -----------------------------------------------------------------------------------

// Connects to the server, retrying while it does not listen yet (REJECTED / UNREACHABLE).
rdma_cm_id* ConnectToServer(const Args& args, rdma_event_channel* channel, ibv_pd** pd,
                            std::unique_ptr<pinpool::Pool>* pool, std::unique_ptr<Connection>* conn,
                            int depth) {
  const char* role = "client";
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(args.connect_seconds);
  addrinfo* dst = nullptr;
  if (getaddrinfo(args.address.c_str(), std::to_string(args.port).c_str(), nullptr, &dst) != 0) {
    Die(role, "cannot resolve " + args.address);
  }
  for (int attempt = 1;; ++attempt) {
    rdma_cm_id* id = nullptr;
    if (rdma_create_id(channel, &id, nullptr, RDMA_PS_TCP) != 0) Die(role, Errno("rdma_create_id"));
    std::string why;
    if (rdma_resolve_addr(id, nullptr, dst->ai_addr, 5000) == 0) {
      rdma_cm_event* e = NextEvent(channel, 30);
      const bool ok = e != nullptr && e->event == RDMA_CM_EVENT_ADDR_RESOLVED;
      why = e ? rdma_event_str(e->event) : "no event";
      if (e) rdma_ack_cm_event(e);
      if (ok) {
        if (*pd == nullptr) {  // the device is known once the address is resolved
          *pd = ibv_alloc_pd(id->verbs);
          if (*pd == nullptr) Die(role, Errno("ibv_alloc_pd"));
          *pool = MakePool(*pd, role);
        }
        if (rdma_resolve_route(id, 5000) == 0 && (e = NextEvent(channel, 30)) != nullptr) {
          const bool routed = e->event == RDMA_CM_EVENT_ROUTE_RESOLVED;
          why = rdma_event_str(e->event);
          rdma_ack_cm_event(e);
          if (routed) {
            *conn = std::make_unique<Connection>(role, id, *pd, **pool, depth);
            rdma_conn_param param{};
            param.initiator_depth = static_cast<std::uint8_t>(std::min(depth, 16));
            param.responder_resources = 0;
            param.retry_count = 7;
            param.rnr_retry_count = 7;
            if (rdma_connect(id, &param) == 0 && (e = NextEvent(channel, 60)) != nullptr) {
              const bool established = e->event == RDMA_CM_EVENT_ESTABLISHED;
              why = rdma_event_str(e->event);
              rdma_ack_cm_event(e);
              if (established) {
                freeaddrinfo(dst);
                std::printf("client: connected to %s:%u after %d attempt(s)\n",
                            args.address.c_str(), args.port, attempt);
                return id;
              }
            }
            conn->reset();
          }
        }
      }
    } else {
      why = Errno("rdma_resolve_addr");
    }
    rdma_destroy_id(id);
    if (std::chrono::steady_clock::now() > deadline) {
      Die(role,
          "could not connect within " + std::to_string(args.connect_seconds) + " s; last: " + why);
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

int Client(const Args& args) {
  const char* role = "client";
  rdma_event_channel* channel = rdma_create_event_channel();
  if (channel == nullptr) Die(role, Errno("rdma_create_event_channel"));
  ibv_pd* pd = nullptr;
  std::unique_ptr<pinpool::Pool> pool;
  std::unique_ptr<Connection> conn;
  rdma_cm_id* id = ConnectToServer(args, channel, &pd, &pool, &conn, args.depth);

  // Mixed sizes: log-uniform from 1 byte to max_size, PUTs and GETs at random.
  std::mt19937 rng(args.seed);
  struct Pending {
    Message request;
    Block local;
    Message grant{};
  };
  std::map<std::uint32_t, Pending> pending;
  std::uint32_t next = 0, acked = 0;
  std::uint64_t bytes = 0, puts = 0, gets = 0;
  const int total = args.requests + 1;  // the last one is the canary
  Message canary_grant{};
  const auto issue = [&] {
    const std::uint32_t id = next++;
    const bool canary = static_cast<int>(id) == total - 1;
    const double span = std::log2(static_cast<double>(args.max_size));
    auto length =
        static_cast<std::uint32_t>(std::exp2(std::uniform_real_distribution<double>(0, span)(rng)));
    length = std::max<std::uint32_t>(1, std::min<std::uint32_t>(length, args.max_size));
    const Kind kind = canary || (rng() & 1) ? Kind::kPut : Kind::kGet;
    Message m{.kind = kind,
              .id = id,
              .length = length,
              .seed = static_cast<std::uint32_t>(rng()),
              .flags = canary ? kCanary : 0u};
    pending[id] = Pending{.request = m, .local = {}};
    conn->Send(m);
  };
  while (static_cast<int>(next) < std::min(args.depth, total - 1)) issue();

  auto last = std::chrono::steady_clock::now();
  const auto no_hook = [](const ibv_wc&) { return false; };
  while (static_cast<int>(acked) < total) {
    Connection::Event e = conn->Poll(no_hook);
    if (e.what == Connection::Event::kNone) {
      if (std::chrono::steady_clock::now() - last > std::chrono::seconds(300)) {
        Die(role, "no completion for 300 s");
      }
      continue;
    }
    last = std::chrono::steady_clock::now();
    if (e.what == Connection::Event::kError) {
      Die(role, std::string("a work request failed: ") + ibv_wc_status_str(e.status));
    }
    if (e.what == Connection::Event::kRdmaDone) {
      Pending& p = pending.at(static_cast<std::uint32_t>(e.tag));
      if (p.request.kind == Kind::kGet) {
        std::size_t first_bad = 0;
        if (!CheckPayload(p.local.data(), p.request.seed, p.request.length, &first_bad)) {
          Die(role, "GET " + std::to_string(p.request.id) + ": byte " + std::to_string(first_bad) +
                        " is wrong");
        }
      }
      conn->Send({.kind = Kind::kDone, .id = p.request.id});
      continue;
    }
    const Message& m = e.message;
    Pending& p = pending.at(m.id);
    if (m.kind == Kind::kGrant) {
      if (m.length != p.request.length) Die(role, "the grant's length is not the request's");
      p.grant = m;
      if (p.request.flags & kCanary) {  // DONE without writing: the server revokes
        canary_grant = m;
        conn->Send({.kind = Kind::kDone, .id = m.id});
        continue;
      }
      p.local = pool->Allocate(m.length);
      if (!p.local) Die(role, "pool exhausted");
      if (p.request.kind == Kind::kPut) {
        FillPayload(p.local.data(), p.request.seed, m.length);
        conn->Rdma(IBV_WR_RDMA_WRITE, p.local, m.length, m.address, m.rkey, m.id);
      } else {
        std::memset(p.local.data(), 0, m.length);
        conn->Rdma(IBV_WR_RDMA_READ, p.local, m.length, m.address, m.rkey, m.id);
      }
    } else if (m.kind == Kind::kAck) {
      if (m.status != 0)
        Die(role, "the server found wrong bytes in request " + std::to_string(m.id));
      if (!(p.request.flags & kCanary)) {
        bytes += p.request.length;
        (p.request.kind == Kind::kPut ? puts : gets) += 1;
        pool->Deallocate(p.local);
      }
      pending.erase(m.id);
      ++acked;
      if (static_cast<int>(next) < total) {
        // The canary goes last, alone: every other request is over by then.
        if (static_cast<int>(next) < total - 1 || acked == next) issue();
      }
    }
  }
  std::printf("client: %d requests (%" PRIu64 " PUT, %" PRIu64 " GET), %" PRIu64
              " bytes, every byte checked; every grant revoked (acknowledged)\n",
              args.requests, puts, gets, bytes);

  // The canary: write through the grant the server revoked. The device must refuse it.
  Block stale = pool->Allocate(canary_grant.length);
  std::memset(stale.data(), 0x3a, stale.size());
  conn->Rdma(IBV_WR_RDMA_WRITE, stale, canary_grant.length, canary_grant.address, canary_grant.rkey,
             canary_grant.id);
  ibv_wc_status status = IBV_WC_SUCCESS;
  for (;;) {
    Connection::Event e = conn->Poll(no_hook);
    if (e.what == Connection::Event::kError) {
      status = e.status;
      break;
    }
    if (e.what == Connection::Event::kRdmaDone) break;
  }
  std::printf("client: stale WRITE through the revoked grant: %s\n", ibv_wc_status_str(status));
  if (status != IBV_WC_REM_ACCESS_ERR) Die(role, "the stale write was not refused");
  rdma_disconnect(id);
  pool->Deallocate(stale);
  conn.reset();
  rdma_destroy_id(id);
  pool.reset();
  ibv_dealloc_pd(pd);
  rdma_destroy_event_channel(channel);
  std::printf("client: OK\n");
  return 0;
}

Args Parse(int argc, char** argv) {
  Args a;
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: %s server ADDRESS [--port P] [--clients N]\n"
                 "       %s client ADDRESS [--port P] [--requests N] [--depth D] "
                 "[--max-size BYTES] [--seed S] [--connect-seconds S]\n",
                 argv[0], argv[0]);
    std::exit(2);
  }
  a.role = argv[1];
  a.address = argv[2];
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const long v = std::strtol(argv[i + 1], nullptr, 0);
    if (k == "--port")
      a.port = static_cast<std::uint16_t>(v);
    else if (k == "--clients")
      a.clients = static_cast<int>(v);
    else if (k == "--requests")
      a.requests = static_cast<int>(v);
    else if (k == "--depth")
      a.depth = static_cast<int>(v);
    else if (k == "--max-size")
      a.max_size = static_cast<std::size_t>(v);
    else if (k == "--seed")
      a.seed = static_cast<std::uint32_t>(v);
    else if (k == "--connect-seconds")
      a.connect_seconds = static_cast<int>(v);
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      std::exit(2);
    }
  }
  if (a.depth < 1 || a.depth > 64 || a.requests < 1 || a.max_size < 1) {
    std::fprintf(stderr, "--depth 1..64, --requests >= 1, --max-size >= 1\n");
    std::exit(2);
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = Parse(argc, argv);
  if (args.role == "server") return Serve(args);
  if (args.role == "client") return Client(args);
  std::fprintf(stderr, "the role is server or client, not %s\n", args.role.c_str());
  return 2;
}
