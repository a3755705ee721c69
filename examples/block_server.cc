// A block server that gives each request its own buffer, reachable by the client for exactly as
// long as the request lasts. The pattern to copy for storage and RPC servers whose clients RDMA
// WRITE (or READ) request payloads:
//
//   client -> server  PUT {id, length}                          (SEND)
//   server            allocates a pool block, grants the client write access to it
//   server -> client  {id, address, rkey, length}               (SEND, fenced after the grant)
//   client            RDMA WRITEs the payload into the block
//   client -> server  DONE {id}                                  (SEND_WITH_INV of the rkey for
//                                                                 window grants: the cheapest
//                                                                 revocation; plain SEND else)
//   server            checks the payload, frees the block: the grant is revoked first, and the
//                     block is reused only once the revocation has completed
//
// The timeout path: a request whose DONE does not come in time is abandoned: the server frees
// its block, which revokes the grant. The client's late WRITE through the stale grant then
// fails with a remote access error (and, as verbs do, ends the connection), while the block's
// next owner (the next request) keeps its bytes. Without per-block grants that late WRITE
// would have landed in the next request's buffer, with no error anywhere.
//
// Client and server run in this one process over two loopback RC queue pairs on one device
// (support/rc_pair.h, the QP helper of pinpool's tests and examples), each side with its own device
// context, PD and pool, exactly as two hosts would have. Without an RDMA device it says so and
// exits 0, unless PINPOOL_REQUIRE_RDMA=1. The argument chooses the grant mechanism (auto, window,
// region; default auto). On any Linux box:
//   scripts/softroce/run-in-guest.sh build/examples/pinpool_block_server window
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "pinpool/pinpool.h"
#include "pinpool/verbs.h"
#include "pinpool/verbs_remote_access.h"
#include "rc_pair.h"

namespace {

using pinpool::Block;
using pinpool::RemoteGrant;
using pinpool::VerbsRemoteAccess;
using Pair = pinpool::testing::RcPair;
using Side = Pair::Side;
constexpr Side kServer = Side::kA, kClient = Side::kB;

// The protocol's messages (same layout on both sides: one process here).
struct Message {
  enum Kind : std::uint32_t { kPut, kGranted, kDone } kind;
  std::uint32_t id;
  std::uint64_t address;
  std::uint32_t rkey;
  std::uint32_t length;
};

int Fail(const char* what, const std::string& why) {
  std::fprintf(stderr, "block_server: %s: %s\n", what, why.c_str());
  return 1;
}

bool DeviceRequired() {
  const char* v = std::getenv("PINPOOL_REQUIRE_RDMA");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

std::unique_ptr<pinpool::Pool> MakePool(std::shared_ptr<pinpool::VerbsDomain> domain) {
  pinpool::PoolOptions o;
  o.chunk_size = 2 * pinpool::kMiB;
  o.budget = 16 * pinpool::kMiB;
  o.initial_size = 2 * pinpool::kMiB;
  o.domains = {std::move(domain)};
  absl::StatusOr<std::unique_ptr<pinpool::Pool>> pool = pinpool::Pool::Create(o);
  if (!pool.ok())
    std::fprintf(stderr, "block_server: pool: %s\n", pool.status().ToString().c_str());
  return pool.ok() ? *std::move(pool) : nullptr;
}

// One side's message buffers (registered: they are pool blocks too).
struct Mailbox {
  Block in, out;
  Message& incoming() { return *static_cast<Message*>(in.data()); }
  Message& outgoing() { return *static_cast<Message*>(out.data()); }
};

std::uint8_t PayloadByte(std::uint32_t id, std::size_t i) {
  return static_cast<std::uint8_t>(id * 131 + i * 7 + 1);
}

}  // namespace

int main(int argc, char** argv) {
  pinpool::GrantMechanism mechanism = pinpool::GrantMechanism::kAuto;
  if (argc > 1) {
    const std::string m = argv[1];
    if (m == "window") {
      mechanism = pinpool::GrantMechanism::kWindow;
    } else if (m == "region") {
      mechanism = pinpool::GrantMechanism::kRegion;
    } else if (m != "auto") {
      std::fprintf(stderr, "usage: %s [auto|window|region]\n", argv[0]);
      return 2;
    }
  }
  // The server's chunks are local-only (the default): clients get in through grants alone.
  absl::StatusOr<std::shared_ptr<pinpool::VerbsDomain>> server_domain =
      pinpool::VerbsDomain::Open();
  if (!server_domain.ok()) {
    std::printf("block_server: no RDMA device: %s\n", server_domain.status().ToString().c_str());
    if (DeviceRequired()) return Fail("PINPOOL_REQUIRE_RDMA=1", "no device");
    std::printf("block_server: run it in scripts/softroce/run-in-guest.sh\n");
    return 0;
  }
  absl::StatusOr<std::shared_ptr<pinpool::VerbsDomain>> client_domain =
      pinpool::VerbsDomain::Open({.device = (*server_domain)->device_name()});
  if (!client_domain.ok()) return Fail("client domain", client_domain.status().ToString());
  std::unique_ptr<pinpool::Pool> server = MakePool(*server_domain);
  std::unique_ptr<pinpool::Pool> client = MakePool(*client_domain);
  if (!server || !client) return 1;
  absl::StatusOr<std::unique_ptr<Pair>> pair =
      Pair::Connect((*server_domain)->pd(), (*client_domain)->pd());
  if (!pair.ok()) return Fail("connecting", pair.status().ToString());

  // One VerbsRemoteAccess per connection; every completion of the server's QP goes through it
  // first.
  std::unique_ptr<VerbsRemoteAccess> access;
  const auto open_access = [&]() -> bool {
    access.reset();
    absl::StatusOr<std::unique_ptr<VerbsRemoteAccess>> a =
        VerbsRemoteAccess::Create(*server, (*pair)->qp(kServer), {.mechanism = mechanism});
    if (!a.ok()) {
      Fail("VerbsRemoteAccess::Create", a.status().ToString());
      return false;
    }
    access = *std::move(a);
    (*pair)->SetCompletionHook(kServer, [&](const ibv_wc& wc) { return access->OnCompletion(wc); });
    return true;
  };
  if (!open_access()) return 1;
  std::printf("block_server: %s, grants by %s (range %s)\n", (*server_domain)->name().c_str(),
              pinpool::GrantMechanismName(access->mechanism()),
              access->range_enforced() ? "enforced" : "not enforced by this device");

  Mailbox srv{server->Allocate(sizeof(Message)), server->Allocate(sizeof(Message))};
  Mailbox cli{client->Allocate(sizeof(Message)), client->Allocate(sizeof(Message))};
  Block payload = client->Allocate(64 * pinpool::kKiB);  // the client's data to PUT
  if (!srv.in || !srv.out || !cli.in || !cli.out || !payload) return Fail("allocating", "empty");

  // Sends `m` from one side to the other (whose receive is posted first).
  const auto send = [&](Side from, Mailbox& box, Mailbox& to, const Message& m,
                        std::optional<std::uint32_t> invalidate = {}, unsigned flags = 0) -> bool {
    if (!(*pair)->PostRecv(from == kServer ? kClient : kServer, pinpool::ToSge(to.in)).ok()) {
      return false;
    }
    box.outgoing() = m;
    absl::StatusOr<ibv_wc_status> wc =
        (*pair)->Send(from, pinpool::ToSge(box.out), invalidate, flags);
    return wc.ok() && *wc == IBV_WC_SUCCESS &&
           (*pair)->WaitRecv(from == kServer ? kClient : kServer).ok();
  };

  constexpr std::uint32_t kRequests = 8, kTimesOut = 5;
  RemoteGrant abandoned;  // the grant of the request that timed out
  for (std::uint32_t id = 1; id <= kRequests; ++id) {
    const std::uint32_t length = 4096 * id;
    // PUT: the client asks for a buffer.
    if (!send(kClient, cli, srv, {Message::kPut, id, 0, 0, length})) return Fail("PUT", "send");
    // The server allocates a block for the request and grants the client write access to it.
    const Block block = server->Allocate(srv.incoming().length);
    std::memset(block.data(), 0, block.size());
    absl::StatusOr<RemoteGrant> grant = access->Grant(block, {.write = true});
    if (!grant.ok()) return Fail("Grant", grant.status().ToString());
    // Fenced: on hardware a window bind runs asynchronously, and the client must not be able to
    // use the rkey before it is bound.
    if (!send(kServer, srv, cli,
              {Message::kGranted, id, grant->address, pinpool::ToUnderlying(grant->rkey),
               grant->length},
              std::nullopt, IBV_SEND_FENCE)) {
      return Fail("GRANTED", "send");
    }

    if (id == kTimesOut) {
      // The client stalls. The server gives up on the request: freeing the block revokes the
      // grant, and the block is held until the revocation has completed.
      abandoned = *grant;
      server->Deallocate(block);
      if (!(*pair)->PollUntil(kServer, [&] { return access->Ended(abandoned); }).ok()) {
        return Fail("timeout", "the revocation did not complete");
      }
      std::printf("request %u: timed out, its block freed and its grant revoked\n", id);
      continue;
    }

    // The client writes its payload through the grant it was sent.
    const Message granted = cli.incoming();
    auto* bytes = static_cast<std::uint8_t*>(payload.data());
    for (std::size_t i = 0; i < length; ++i) bytes[i] = PayloadByte(id, i);
    ibv_sge sge = pinpool::ToSge(payload);
    sge.length = length;
    absl::StatusOr<ibv_wc_status> wc = (*pair)->Write(
        kClient, sge,
        {.address = granted.address, .rkey = pinpool::RKey{granted.rkey}, .length = length});
    if (!wc.ok() || *wc != IBV_WC_SUCCESS) return Fail("client WRITE", "failed");
    // DONE, invalidating a window grant with the same message.
    const std::optional<std::uint32_t> invalidate =
        grant->mechanism == pinpool::GrantMechanism::kWindow ? std::optional(granted.rkey)
                                                             : std::nullopt;
    if (!send(kClient, cli, srv, {Message::kDone, id, 0, 0, 0}, invalidate)) {
      return Fail("DONE", "send");
    }
    for (std::size_t i = 0; i < length; ++i) {
      if (static_cast<std::uint8_t*>(block.data())[i] != PayloadByte(id, i)) {
        return Fail("payload", "a byte differs");
      }
    }
    server->Deallocate(block);  // revokes unless the client's DONE already did
    if (!(*pair)->PollUntil(kServer, [&] { return access->Ended(*grant); }).ok()) {
      return Fail("revocation", "did not complete");
    }
    std::printf("request %u: %u bytes written by the client through grant 0x%x, checked\n", id,
                length, granted.rkey);

    if (id == kTimesOut + 1) {
      // The stalled client wakes up and writes its request's payload through the stale grant.
      // The server's memory has moved on: this request's block may be the same memory.
      const Block next = server->Allocate(abandoned.length);
      std::memset(next.data(), 0x5a, next.size());
      ibv_sge late = pinpool::ToSge(payload);
      late.length = abandoned.length;
      absl::StatusOr<ibv_wc_status> stale = (*pair)->Write(kClient, late, abandoned.remote());
      if (!stale.ok()) return Fail("late WRITE", stale.status().ToString());
      bool intact = true;
      for (std::size_t i = 0; i < next.size(); ++i) {
        intact &= static_cast<std::uint8_t*>(next.data())[i] == 0x5a;
      }
      std::printf(
          "request %u's late WRITE through the revoked grant: %s; the block's next owner "
          "(%s memory) is %s\n",
          kTimesOut, ibv_wc_status_str(*stale),
          next.data() == reinterpret_cast<void*>(abandoned.address) ? "the same" : "other",
          intact ? "untouched" : "OVERWRITTEN");
      if (*stale != IBV_WC_REM_ACCESS_ERR || !intact) return Fail("late WRITE", "not refused");
      server->Deallocate(next);
      // A remote access error ends an RC connection: reconnect, with a new VerbsRemoteAccess.
      access->RevokeAllNow();
      if (!(*pair)->Reconnect().ok() || !open_access()) return Fail("reconnect", "failed");
      std::printf("connection re-established after the client's error\n");
    }
  }

  const pinpool::GrantStats g = server->GetStats().grants;
  const auto Counted = [](const pinpool::GrantStats& s, std::string_view name) {
    return pinpool::FigureValue(s.figures, name).value_or(0);
  };
  std::printf("block_server: OK: %" PRIu64 " grants, %" PRIu64 " revoked by the peer, %" PRIu64
              " locally, %" PRIu64 " by deregistration, %" PRIu64 " blocks held meanwhile\n",
              g.grants, Counted(g, pinpool::VerbsGrantFigures::kPeerInvalidations),
              Counted(g, pinpool::VerbsGrantFigures::kLocalInvalidations),
              Counted(g, pinpool::VerbsGrantFigures::kRegionDeregistrations), g.held_ever);
  access.reset();
  for (const Block& b : {srv.in, srv.out}) server->Deallocate(b);
  for (const Block& b : {cli.in, cli.out, payload}) client->Deallocate(b);
  return 0;
}
