// RMA writes and reads between pool blocks of two processes (two hosts) through libfabric, with
// the chunks of both pools registered once by pinpool::FabricDomain, and every request served
// through its own grant (pinpool::FabricRemoteAccess), revoked as soon as the request is over.
//
//   target:    pinpool_fabric_transfer target ADDRESS [--port P] [--provider NAME]
//   initiator: pinpool_fabric_transfer initiator ADDRESS [--port P] [--provider NAME]
//                                      [--requests N] [--max-size BYTES]
//
// Both open a reliable-datagram endpoint (FI_EP_RDM) of the provider (default "tcp", which
// libfabric serves as tcp;ofi_rxm; "verbs" gives verbs;ofi_rxm on an RDMA device) and exchange
// endpoint names over a TCP control channel (examples/control_channel.h). Per request, the
// initiator asks for N bytes to write or to read; the target allocates a pool block (filling it
// for a read), grants exactly those bytes and sends the grant's address and key; the initiator
// writes from (FI_DELIVERY_COMPLETE: the bytes are at the target when it completes) or reads
// into a block of its own pool, checking every byte read, and says done; the target checks every
// byte written, revokes the grant and frees the block.
//
// Grants are registrations of their own, so a provider that caches registrations would hand back
// the whole chunk's instead: run with FI_MR_CACHE_MAX_COUNT=0 (libfabric's verbs provider caches
// by default; pinpool's chunks need no cache). Under soft-RoCE, verbs;ofi_rxm also needs
// FI_UNIVERSE_SIZE=64 (its default 256 asks rxe for a completion queue larger than rxe allows).
// On hosts without RDMA, tcp moves data only when the target calls into libfabric: the target
// reads its completion queue while it waits for the control channel.
// Exit status 0 when every byte held on both sides; 1 otherwise.
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "control_channel.h"
#include "pinpool/fabric.h"
#include "pinpool/pinpool.h"

namespace {

using pinpool::Block;
using pinpool::examples::ControlChannel;

struct Request {
  std::uint32_t write = 0;  // 1: the initiator writes; 0: it reads
  std::uint32_t length = 0;
  std::uint32_t seed = 0;
  std::uint32_t last = 0;  // 1: no request follows
};
struct Granted {
  std::uint64_t address = 0;
  std::uint64_t key = 0;
  std::uint64_t length = 0;
  std::uint32_t range_enforced = 0;
  std::uint32_t pad = 0;
};
struct Ack {
  std::uint32_t ok = 0;
  std::uint32_t live_grants = 0;  // after the revocation: 0
};

std::uint8_t Byte(std::uint32_t seed, std::size_t i) {
  return static_cast<std::uint8_t>(seed * 2654435761u + i * 11 + (i >> 10) + 5);
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
  std::fprintf(stderr, "fabric_transfer %s: FAILED: %s\n", role, why.c_str());
  std::exit(1);
}
void Must(const char* role, int ret, const char* what) {
  if (ret != 0) Die(role, std::string(what) + ": " + fi_strerror(-ret));
}

struct Args {
  std::string role, address, provider = "tcp";
  std::uint16_t port = 7473;
  int requests = 200;
  std::size_t max_size = 1 << 20;
};

// The application's libfabric objects: one RDM endpoint with its address vector and CQ.
struct Fabric {
  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_av* av = nullptr;
  fid_cq* cq = nullptr;
  fid_ep* ep = nullptr;
  fi_addr_t peer = FI_ADDR_UNSPEC;

  Fabric(const char* role, const std::string& provider) {
    fi_info* hints = fi_allocinfo();
    hints->caps = FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
    hints->ep_attr->type = FI_EP_RDM;
    // The modes pinpool's domain handles (FI_MR_ENDPOINT too, but no provider here needs it).
    hints->domain_attr->mr_mode =
        FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
    hints->domain_attr->threading = FI_THREAD_SAFE;
    hints->fabric_attr->prov_name = strdup(provider.c_str());
    Must(role, fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info), "fi_getinfo");
    fi_freeinfo(hints);
    Must(role, fi_fabric(info->fabric_attr, &fabric, nullptr), "fi_fabric");
    Must(role, fi_domain(fabric, info, &domain, nullptr), "fi_domain");
    fi_av_attr av_attr{};
    av_attr.type = FI_AV_TABLE;
    Must(role, fi_av_open(domain, &av_attr, &av, nullptr), "fi_av_open");
    fi_cq_attr cq_attr{};
    cq_attr.format = FI_CQ_FORMAT_CONTEXT;
    cq_attr.size = 128;
    Must(role, fi_cq_open(domain, &cq_attr, &cq, nullptr), "fi_cq_open");
    Must(role, fi_endpoint(domain, info, &ep, nullptr), "fi_endpoint");
    Must(role, fi_ep_bind(ep, &av->fid, 0), "fi_ep_bind(av)");
    Must(role, fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
    const int r = fi_enable(ep);
    if (r != 0) {
      Die(role, std::string("fi_enable: ") + fi_strerror(-r) +
                    " (verbs;ofi_rxm on soft-RoCE: set FI_UNIVERSE_SIZE=64)");
    }
  }
  ~Fabric() {
    fi_close(&ep->fid);
    fi_close(&av->fid);
    fi_close(&cq->fid);
    fi_close(&domain->fid);
    fi_close(&fabric->fid);
    fi_freeinfo(info);
  }
  // Reading the CQ drives the provider's progress (tcp and rxm progress manually).
  void Progress() {
    fi_cq_tagged_entry e;
    fi_cq_read(cq, &e, 1);
  }
  std::vector<std::uint8_t> Name() {
    std::vector<std::uint8_t> name(256);
    std::size_t len = name.size();
    if (fi_getname(&ep->fid, name.data(), &len) != 0) name.clear();
    name.resize(len);
    return name;
  }
  void Insert(const char* role, const std::vector<std::uint8_t>& name) {
    if (fi_av_insert(av, name.data(), 1, &peer, 0, nullptr) != 1) Die(role, "fi_av_insert");
  }
};

std::unique_ptr<pinpool::Pool> MakePool(const char* role, Fabric& f,
                                        std::shared_ptr<pinpool::FabricDomain>* out) {
  auto domain = pinpool::FabricDomain::Wrap(f.domain, f.info, {.endpoint = f.ep});
  if (!domain.ok()) Die(role, domain.status().ToString());
  pinpool::PoolOptions o;
  o.chunk_size = 8 * pinpool::kMiB;
  o.budget = 128 * pinpool::kMiB;
  o.initial_size = 8 * pinpool::kMiB;
  o.page_size = pinpool::PageSize::kTransparent;
  o.domains = {*domain};
  auto pool = pinpool::Pool::Create(o);
  if (!pool.ok()) Die(role, pool.status().ToString());
  *out = *domain;
  return *std::move(pool);
}

int Target(const Args& args) {
  const char* role = "target";
  Fabric f(role, args.provider);
  std::shared_ptr<pinpool::FabricDomain> domain;
  std::unique_ptr<pinpool::Pool> pool = MakePool(role, f, &domain);
  auto access = pinpool::FabricRemoteAccess::Create(*pool, 0, f.ep);
  if (!access.ok()) Die(role, access.status().ToString());
  std::printf("target: %s, mr_mode %#" PRIx64 ", grants %s\n", domain->name().c_str(),
              domain->mr_mode(),
              (*access)->range_enforced() ? "range-enforced by the provider"
                                          : "NOT range-enforced by this provider");
  std::fflush(stdout);
  ControlChannel control;
  if (std::string e = control.Accept(args.address, args.port, 600); !e.empty()) Die(role, e);
  std::vector<std::uint8_t> name;
  control.Send(f.Name());
  if (std::string e = control.Receive(name); !e.empty()) Die(role, e);
  f.Insert(role, name);
  const auto progress = [&] { f.Progress(); };

  std::uint64_t served = 0, bytes = 0, wrong = 0;
  for (;;) {
    Request r{};
    if (std::string e = control.ReceiveValue(r, progress); !e.empty()) Die(role, e);
    if (r.last) break;
    Block b = pool->Allocate(r.length);
    if (!b) Die(role, "pool exhausted");
    if (r.write) {
      std::memset(b.data(), 0, b.size());
    } else {
      Fill(b.data(), r.seed, r.length);
    }
    auto grant = (*access)->Grant(
        b, 0, r.length,
        r.write ? pinpool::RemoteRights{.write = true} : pinpool::RemoteRights{.read = true});
    if (!grant.ok()) Die(role, grant.status().ToString());
    control.SendValue(Granted{.address = grant->remote.address,
                              .key = grant->remote.key,
                              .length = grant->remote.length,
                              .range_enforced = grant->range_enforced});
    std::uint32_t done = 0;
    if (std::string e = control.ReceiveValue(done, progress); !e.empty()) Die(role, e);
    const bool ok = !r.write || Check(b.data(), r.seed, r.length);
    if (!ok) ++wrong;
    if (absl::Status s = (*access)->Revoke(*grant); !s.ok()) Die(role, s.ToString());
    pool->Deallocate(b);
    control.SendValue(Ack{.ok = ok ? 1u : 0u,
                          .live_grants = static_cast<std::uint32_t>((*access)->live_grants())});
    ++served;
    bytes += r.length;
  }
  const pinpool::GrantStats g = pool->GetStats().grants;
  const std::uint64_t revoked =
      pinpool::FigureValue(g.figures, "fabric_region_deregistrations").value_or(0);
  std::printf("target: %" PRIu64 " requests served from pool blocks, %" PRIu64 " bytes, %" PRIu64
              " with a wrong byte; %" PRIu64 " grants made, %" PRIu64 " revoked, %zu live\n",
              served, bytes, wrong, g.grants, revoked, (*access)->live_grants());
  access->reset();
  pool.reset();
  if (wrong != 0 || g.grants != served || revoked != served) {
    Die(role, "see above");
  }
  std::printf("target: OK\n");
  return 0;
}

int Initiator(const Args& args) {
  const char* role = "initiator";
  Fabric f(role, args.provider);
  std::shared_ptr<pinpool::FabricDomain> domain;
  std::unique_ptr<pinpool::Pool> pool = MakePool(role, f, &domain);
  ControlChannel control;
  if (std::string e = control.Connect(args.address, args.port, 300); !e.empty()) Die(role, e);
  std::vector<std::uint8_t> name;
  if (std::string e = control.Receive(name); !e.empty()) Die(role, e);
  control.Send(f.Name());
  f.Insert(role, name);

  std::mt19937 rng(15);
  std::uint64_t writes = 0, reads = 0, bytes = 0;
  for (int i = 0; i < args.requests; ++i) {
    const auto length = static_cast<std::uint32_t>(std::max(
        1.0, std::exp2(std::uniform_real_distribution<double>(0, std::log2(args.max_size))(rng))));
    const Request r{.write = (rng() & 1) ? 1u : 0u,
                    .length = length,
                    .seed = static_cast<std::uint32_t>(rng()),
                    .last = 0};
    control.SendValue(r);
    Granted g{};
    if (std::string e = control.ReceiveValue(g); !e.empty()) Die(role, e);
    const pinpool::FabricRemote remote{.address = g.address, .key = g.key, .length = g.length};
    Block b = pool->Allocate(length);
    if (!b) Die(role, "pool exhausted");
    absl::Status s;
    if (r.write) {
      Fill(b.data(), r.seed, length);
      s = pinpool::FabricWriteSync(f.ep, f.cq, b, 0, length, f.peer, remote, 0,
                                   FI_DELIVERY_COMPLETE);
    } else {
      std::memset(b.data(), 0, length);
      s = pinpool::FabricReadSync(f.ep, f.cq, b, 0, length, f.peer, remote, 0);
      if (s.ok() && !Check(b.data(), r.seed, length)) {
        Die(role, "request " + std::to_string(i) + ": wrong bytes read");
      }
    }
    if (!s.ok()) Die(role, "request " + std::to_string(i) + ": " + s.ToString());
    control.SendValue(std::uint32_t{1});
    Ack ack{};
    if (std::string e = control.ReceiveValue(ack); !e.empty()) Die(role, e);
    if (!ack.ok) Die(role, "the target found wrong bytes in request " + std::to_string(i));
    if (ack.live_grants != 0) Die(role, "the target kept a grant after the request");
    (r.write ? writes : reads) += 1;
    bytes += length;
    pool->Deallocate(b);
  }
  control.SendValue(Request{.write = 0, .length = 0, .seed = 0, .last = 1});
  std::printf("initiator: %s: %" PRIu64 " writes and %" PRIu64
              " reads between pool blocks through per-request grants, %" PRIu64
              " bytes, every byte checked\n",
              domain->name().c_str(), writes, reads, bytes);
  pool.reset();
  std::printf("initiator: OK\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: %s target ADDRESS [--port P] [--provider NAME]\n"
                 "       %s initiator ADDRESS [--port P] [--provider NAME] [--requests N] "
                 "[--max-size BYTES]\n",
                 argv[0], argv[0]);
    return 2;
  }
  Args a;
  a.role = argv[1];
  a.address = argv[2];
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const std::string v = argv[i + 1];
    if (k == "--port")
      a.port = static_cast<std::uint16_t>(std::stoi(v));
    else if (k == "--provider")
      a.provider = v;
    else if (k == "--requests")
      a.requests = std::stoi(v);
    else if (k == "--max-size")
      a.max_size = std::stoul(v);
    else
      return 2;
  }
  if (a.role == "target") return Target(a);
  if (a.role == "initiator") return Initiator(a);
  return 2;
}
