// Puts and gets between pool blocks of two processes (two hosts) through UCX, with the chunks of
// both pools mapped once by pinpool::UcxDomain: no registration per transfer.
//
//   target:    pinpool_ucx_transfer target ADDRESS [--port P] [--blocks N] [--max-size BYTES]
//   initiator: pinpool_ucx_transfer initiator ADDRESS [--port P] [--print-lanes]
//
// The target offers N blocks of mixed sizes (some to be written, some holding data to be read)
// and sends the initiator, over a TCP control channel (examples/control_channel.h), its worker
// address and, per block, its address, length and its chunk's packed rkey. The initiator puts
// from and gets into blocks of its own pool (passing each chunk's memory handle), checks every
// byte it read, flushes, and tells the target, which checks every byte written.
//
// Exposure: UCX rkeys cover a whole mapping and cannot be revoked (pinpool/ucx.h), so the target
// keeps what it exposes in a pool of its own, created with trusted_whole_chunk: the peer can reach
// every block of that pool, and nothing else of the process. The initiator's pool packs no rkey.
//
// Transports are UCX's choice (UCX_TLS, UCX_NET_DEVICES...). On a host without RDMA, UCX moves
// puts and gets as messages the target must handle, so the target keeps progressing its worker
// while it waits. On soft-RoCE (rxe) set UCX_IB_GID_INDEX=0 (docs/providers.md) and UCX_TLS=rc:
// the puts are then one-sided RDMA writes.
// Exit status 0 when every byte held on both sides; 1 otherwise, with the reason.
#include <ucp/api/ucp.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "control_channel.h"
#include "pinpool/pinpool.h"
#include "pinpool/ucx.h"

namespace {

using pinpool::Block;
using pinpool::examples::ControlChannel;

// One offered block, as the target describes it to the initiator (its packed rkey follows).
struct Offer {
  std::uint64_t address = 0;
  std::uint64_t length = 0;
  std::uint64_t chunk = 0;  // the chunk's base: blocks of one chunk share one rkey
  std::uint32_t put = 0;    // 1: the initiator writes it; 0: the initiator reads it
  std::uint32_t seed = 0;
};

struct Verdict {
  std::uint64_t blocks = 0;
  std::uint64_t bytes = 0;
  std::uint64_t wrong = 0;  // blocks with a wrong byte
};

std::uint8_t Byte(std::uint32_t seed, std::size_t i) {
  return static_cast<std::uint8_t>(seed * 2654435761u + i * 13 + (i >> 10) + 3);
}
void Fill(void* p, std::uint32_t seed, std::size_t n) {
  auto* b = static_cast<std::uint8_t*>(p);
  for (std::size_t i = 0; i < n; ++i) b[i] = Byte(seed, i);
}
bool Check(const void* p, std::uint32_t seed, std::size_t n) {
  const auto* b = static_cast<const std::uint8_t*>(p);
  for (std::size_t i = 0; i < n; ++i) {
    if (b[i] != Byte(seed, i)) return false;
  }
  return true;
}

[[noreturn]] void Die(const char* role, const std::string& why) {
  std::fprintf(stderr, "ucx_transfer %s: FAILED: %s\n", role, why.c_str());
  std::exit(1);
}

struct Args {
  std::string role, address;
  std::uint16_t port = 7472;
  int blocks = 200;
  std::size_t max_size = 1 << 20;
  bool print_lanes = false;
};

// The application's UCX context and worker (RMA only: that is all the domain needs).
struct Ucx {
  ucp_context_h context = nullptr;
  ucp_worker_h worker = nullptr;
  explicit Ucx(const char* role) {
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_RMA;
    if (ucs_status_t s = ucp_init(&params, nullptr, &context); s != UCS_OK) {
      Die(role, std::string("ucp_init: ") + ucs_status_string(s));
    }
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    if (ucs_status_t s = ucp_worker_create(context, &wp, &worker); s != UCS_OK) {
      Die(role, std::string("ucp_worker_create: ") + ucs_status_string(s));
    }
  }
  ~Ucx() {
    ucp_worker_destroy(worker);
    ucp_cleanup(context);
  }
};

std::unique_ptr<pinpool::Pool> MakePool(const char* role, ucp_context_h context, bool exposed) {
  auto domain = pinpool::UcxDomain::Wrap(context, {.trusted_whole_chunk = exposed});
  if (!domain.ok()) Die(role, domain.status().ToString());
  pinpool::PoolOptions o;
  o.chunk_size = 8 * pinpool::kMiB;
  o.budget = 256 * pinpool::kMiB;
  o.initial_size = 8 * pinpool::kMiB;
  o.page_size = pinpool::PageSize::kTransparent;
  o.domains = {*domain};
  auto pool = pinpool::Pool::Create(o);
  if (!pool.ok()) Die(role, pool.status().ToString());
  return *std::move(pool);
}

int Target(const Args& args) {
  const char* role = "target";
  Ucx ucx(role);
  std::unique_ptr<pinpool::Pool> exposed = MakePool(role, ucx.context, /*exposed=*/true);
  ControlChannel control;
  std::printf("target: waiting on %s:%u\n", args.address.c_str(), args.port);
  std::fflush(stdout);
  if (std::string e = control.Accept(args.address, args.port, 600); !e.empty()) Die(role, e);

  ucp_address_t* address = nullptr;
  std::size_t address_length = 0;
  if (ucp_worker_get_address(ucx.worker, &address, &address_length) != UCS_OK) {
    Die(role, "ucp_worker_get_address");
  }
  control.Send(address, static_cast<std::uint32_t>(address_length));
  ucp_worker_release_address(ucx.worker, address);

  // The blocks on offer: sizes log-uniform from 1 byte to max_size, half written, half read.
  std::mt19937 rng(15);
  std::vector<std::pair<Block, Offer>> blocks;
  control.SendValue(static_cast<std::uint32_t>(args.blocks));
  for (int i = 0; i < args.blocks; ++i) {
    const auto length = static_cast<std::size_t>(std::max(
        1.0, std::exp2(std::uniform_real_distribution<double>(0, std::log2(args.max_size))(rng))));
    Block b = exposed->Allocate(length);
    if (!b) Die(role, "pool exhausted");
    const bool put = i % 2 == 0;
    const auto seed = static_cast<std::uint32_t>(rng());
    if (put) {
      std::memset(b.data(), 0, b.size());
    } else {
      Fill(b.data(), seed, length);
    }
    auto peer = pinpool::ToUcxPeerBlock(b);
    if (!peer.ok()) Die(role, peer.status().ToString());
    const Offer offer{.address = peer->address,
                      .length = length,
                      .chunk = b.chunk().base,
                      .put = put ? 1u : 0u,
                      .seed = seed};
    control.SendValue(offer);
    control.Send(peer->packed_rkey.data(), static_cast<std::uint32_t>(peer->packed_rkey.size()));
    blocks.emplace_back(b, offer);
  }
  // Until the initiator is done, keep the worker progressing: on hosts without RDMA, UCX's puts
  // and gets are messages this side must handle.
  std::uint32_t done = 0;
  if (std::string e = control.ReceiveValue(done, [&] { ucp_worker_progress(ucx.worker); });
      !e.empty()) {
    Die(role, e);
  }
  Verdict v{};
  for (const auto& [b, offer] : blocks) {
    if (offer.put) {
      ++v.blocks;
      v.bytes += offer.length;
      if (!Check(b.data(), offer.seed, offer.length)) ++v.wrong;
    }
  }
  control.SendValue(v);
  std::vector<std::uint8_t> bye;
  control.Receive(bye, [&] { ucp_worker_progress(ucx.worker); });
  for (const auto& [b, offer] : blocks) exposed->Deallocate(b);
  std::printf("target: %" PRIu64 " blocks written by the peer, %" PRIu64 " bytes, %" PRIu64
              " with a wrong byte\n",
              v.blocks, v.bytes, v.wrong);
  if (v.wrong != 0) Die(role, "wrong bytes");
  std::printf("target: OK\n");
  return 0;
}

int Initiator(const Args& args) {
  const char* role = "initiator";
  Ucx ucx(role);
  std::unique_ptr<pinpool::Pool> local = MakePool(role, ucx.context, /*exposed=*/false);
  ControlChannel control;
  if (std::string e = control.Connect(args.address, args.port, 300); !e.empty()) Die(role, e);
  std::vector<std::uint8_t> target_address;
  if (std::string e = control.Receive(target_address); !e.empty()) Die(role, e);
  ucp_ep_params_t ep_params{};
  ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
  ep_params.address = reinterpret_cast<const ucp_address_t*>(target_address.data());
  ucp_ep_h ep = nullptr;
  if (ucs_status_t s = ucp_ep_create(ucx.worker, &ep_params, &ep); s != UCS_OK) {
    Die(role, std::string("ucp_ep_create: ") + ucs_status_string(s));
  }
  std::uint32_t count = 0;
  control.ReceiveValue(count);
  // rkeys unpacked once per peer chunk, destroyed before the endpoint is closed.
  std::map<std::uint64_t, pinpool::UcxRkey> rkeys;
  std::uint64_t puts = 0, gets = 0, bytes = 0;
  std::size_t rkey_size = 0;
  for (std::uint32_t i = 0; i < count; ++i) {
    Offer offer{};
    std::vector<std::uint8_t> packed;
    if (std::string e = control.ReceiveValue(offer); !e.empty()) Die(role, e);
    if (std::string e = control.Receive(packed); !e.empty()) Die(role, e);
    rkey_size = packed.size();
    auto& rkey = rkeys[offer.chunk];
    if (rkey.get() == nullptr) {
      auto unpacked = pinpool::UcxRkey::Unpack(
          ep, {reinterpret_cast<const std::byte*>(packed.data()), packed.size()});
      if (!unpacked.ok()) Die(role, unpacked.status().ToString());
      rkey = *std::move(unpacked);
    }
    const pinpool::UcxRemote remote{
        .address = offer.address, .length = offer.length, .rkey = rkey.get()};
    Block b = local->Allocate(offer.length);
    if (!b) Die(role, "pool exhausted");
    absl::StatusOr<ucs_status_ptr_t> request;
    if (offer.put) {
      Fill(b.data(), offer.seed, offer.length);
      request = pinpool::UcxPut(ep, b, 0, offer.length, remote, 0);
    } else {
      std::memset(b.data(), 0, offer.length);
      request = pinpool::UcxGet(ep, b, 0, offer.length, remote, 0);
    }
    if (!request.ok()) Die(role, request.status().ToString());
    if (absl::Status s = pinpool::UcxWait(ucx.worker, *request); !s.ok()) Die(role, s.ToString());
    if (!offer.put && !Check(b.data(), offer.seed, offer.length)) {
      Die(role, "block " + std::to_string(i) + ": wrong bytes read");
    }
    (offer.put ? puts : gets) += 1;
    bytes += offer.length;
    local->Deallocate(b);
  }
  // Remote completion of every put before the target looks.
  if (absl::Status s = pinpool::UcxFlush(ucx.worker, ep); !s.ok()) Die(role, s.ToString());
  if (args.print_lanes) ucp_ep_print_info(ep, stdout);
  control.SendValue(std::uint32_t{1});
  Verdict v{};
  if (std::string e = control.ReceiveValue(v, [&] { ucp_worker_progress(ucx.worker); });
      !e.empty()) {
    Die(role, e);
  }
  const std::size_t unpacked = rkeys.size();
  rkeys.clear();
  ucp_request_param_t close{};
  close.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  close.flags = UCP_EP_CLOSE_FLAG_FORCE;
  pinpool::UcxWait(ucx.worker, ucp_ep_close_nbx(ep, &close)).IgnoreError();
  control.SendValue(std::uint32_t{2});
  std::printf("initiator: %" PRIu64 " puts and %" PRIu64 " gets between pool blocks, %" PRIu64
              " bytes, every byte read checked; %zu-byte rkeys, %zu unpacked (one per chunk)\n",
              puts, gets, bytes, rkey_size, unpacked);
  std::printf("initiator: the target checked %" PRIu64 " blocks written: %" PRIu64 " wrong\n",
              v.blocks, v.wrong);
  if (v.wrong != 0 || v.blocks != puts) Die(role, "the target found wrong bytes");
  std::printf("initiator: OK\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: %s target ADDRESS [--port P] [--blocks N] [--max-size BYTES]\n"
                 "       %s initiator ADDRESS [--port P] [--print-lanes]\n",
                 argv[0], argv[0]);
    return 2;
  }
  Args a;
  a.role = argv[1];
  a.address = argv[2];
  for (int i = 3; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--print-lanes") {
      a.print_lanes = true;
      continue;
    }
    if (i + 1 >= argc) return 2;
    const long v = std::strtol(argv[++i], nullptr, 0);
    if (k == "--port")
      a.port = static_cast<std::uint16_t>(v);
    else if (k == "--blocks")
      a.blocks = static_cast<int>(v);
    else if (k == "--max-size")
      a.max_size = static_cast<std::size_t>(v);
    else
      return 2;
  }
  if (a.role == "target") return Target(a);
  if (a.role == "initiator") return Initiator(a);
  return 2;
}
