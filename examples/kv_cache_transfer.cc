// A KV-cache transfer between two hosts: a server holds a paged cache in one pool array, a
// client asks for lists of page numbers and RDMA READs those pages, finding each page's address
// and rkey in ONE compact descriptor of the whole cache (pinpool/descriptor.h), a few dozen bytes
// per chunk rather than an entry per page. Then the server evicts the cache and builds a new
// generation in the same memory; the client's old descriptor must be refused by the server's
// device, never return the new generation's bytes.
//
//   server                                       client
//   AllocateArray(pages): many chunk runs
//   fills page p with Pattern(p, generation 1)
//   GrantArray (read only): one grant per run
//   DescribeGrants -> descriptor  ------------>  Descriptor::Decode (untrusted bytes)
//                                 <------------  PAGES p0 p1 ...   (random, across chunk runs)
//   checks the numbers: READY 1   ------------>  RDMA READ page i from Element(i): address, rkey
//                                 <------------  DONE n            (every byte checked)
//   ... more lists ...
//                                 <------------  EVICT
//   Deallocate(array): its grants are revoked before its chunks are reused
//   AllocateArray again (the same chunks), Pattern(p, 2), GrantArray, DescribeGrants
//                                 ------------>  new descriptor; lists again, every byte checked
//                                                READs through the OLD descriptor, aimed at old
//                                                addresses now holding generation 2 pages:
//                                                IBV_WC_REM_ACCESS_ERR, no byte received
//                                 <------------  BYE (what the stale READs returned)
//
// Control messages travel over TCP (examples/control_channel.h); the pages over the RC QP that
// rdma_cm connects. Grants are range regions (GrantMechanism::kRegion): registered before
// GrantArray returns, so the descriptor may be sent on any channel. (A window's bind is posted on
// the QP and, on hardware, completes later; a program using windows sends the descriptor on the
// QP itself, fenced: examples/rdma_cm_block_server.cc.)
//
//   server: pinpool_kv_cache_transfer server ADDRESS [--port P] [--pages N] [--page-size B]
//                                         [--chunk-size B]
//   client: pinpool_kv_cache_transfer client ADDRESS [--port P] [--lists N] [--list-size N]
//                                         [--seed S]
//
// The RDMA connection uses port P, the control channel P + 1. Each side prints its counts and a
// last line "kv_cache: OK: server" (or client), and exits 0 when every byte and every check
// held; 1 otherwise. In two soft-RoCE guests: tests/providers/two-hosts.sh.
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "control_channel.h"
#include "pinpool/pinpool.h"
#include "pinpool/verbs.h"
#include "pinpool/verbs_remote_access.h"

namespace {

using pinpool::examples::ControlChannel;

// --- the protocol: messages are arrays of 32-bit words, the first one saying what they are ------

enum Op : std::uint32_t {
  kPages = 1,  // client: page numbers follow; server: READY {generation} or REFUSED
  kDone,       // client: {pages checked}
  kEvict,      // client: rebuild the cache; server: {generation}, then the new descriptor
  kBye,        // client: {stale READs refused, stale READs that returned data}
  kReady,
  kRefused,
  kGeneration,
};

using Words = std::vector<std::uint32_t>;

std::string SendWords(ControlChannel& channel, const Words& words) {
  return channel.Send(words.data(), static_cast<std::uint32_t>(words.size() * 4));
}
std::string ReceiveWords(ControlChannel& channel, Words& words) {
  std::vector<std::uint8_t> bytes;
  if (std::string e = channel.Receive(bytes); !e.empty()) return e;
  if (bytes.empty() || bytes.size() % 4 != 0) return "a malformed control message";
  words.resize(bytes.size() / 4);
  std::memcpy(words.data(), bytes.data(), bytes.size());
  return {};
}

// Page p of generation g: 64-bit words that differ for every (page, generation, word).
std::uint64_t PatternWord(std::uint64_t page, std::uint64_t generation, std::uint64_t word) {
  std::uint64_t x = (page << 20) ^ (generation << 52) ^ 0x9e3779b97f4a7c15;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9;
  x = (x ^ (x >> 27)) * 0x94d049bb133111eb;
  return (x ^ (x >> 31)) + word * 0x2545f4914f6cdd1d;
}
void FillPage(void* p, std::size_t bytes, std::uint64_t page, std::uint64_t generation) {
  auto* w = static_cast<std::uint64_t*>(p);
  for (std::size_t i = 0; i < bytes / 8; ++i) w[i] = PatternWord(page, generation, i);
}
// Whether every byte of the page is generation `generation`'s.
bool PageIs(const void* p, std::size_t bytes, std::uint64_t page, std::uint64_t generation) {
  const auto* w = static_cast<const std::uint64_t*>(p);
  for (std::size_t i = 0; i < bytes / 8; ++i) {
    if (w[i] != PatternWord(page, generation, i)) return false;
  }
  return true;
}

// --- small helpers ------------------------------------------------------------------------------

const char* g_role = "?";

[[noreturn]] void Die(const std::string& why) {
  std::fprintf(stderr, "kv_cache %s: FAILED: %s\n", g_role, why.c_str());
  std::exit(1);
}
void Check(const std::string& error) {
  if (!error.empty()) Die(error);
}
std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

std::unique_ptr<pinpool::Pool> MakePool(ibv_pd* pd, std::size_t chunk_size, std::size_t budget) {
  // Local access only: the peer gets in through grants alone.
  auto domain = pinpool::VerbsDomain::Wrap(pd);
  if (!domain.ok()) Die(domain.status().ToString());
  pinpool::PoolOptions o;
  o.chunk_size = chunk_size;
  o.budget = budget;
  o.page_size = pinpool::PageSize::kTransparent;
  o.domains = {*domain};
  auto pool = pinpool::Pool::Create(o);
  if (!pool.ok()) Die(pool.status().ToString());
  return *std::move(pool);
}

// The RC QP of one side, its CQ and PD (rdma_cm's synchronous calls: no event channel).
struct Rdma {
  rdma_cm_id* id = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;

  static constexpr int kDepth = 128;  // work requests in flight

  void CreateQp() {
    pd = ibv_alloc_pd(id->verbs);
    if (pd == nullptr) Die(Errno("ibv_alloc_pd"));
    cq = ibv_create_cq(id->verbs, 2 * kDepth, nullptr, nullptr, 0);
    if (cq == nullptr) Die(Errno("ibv_create_cq"));
    ibv_qp_init_attr attr{};
    attr.send_cq = cq;
    attr.recv_cq = cq;
    attr.qp_type = IBV_QPT_RC;
    attr.cap.max_send_wr = kDepth;
    attr.cap.max_recv_wr = 1;
    attr.cap.max_send_sge = 1;
    attr.cap.max_recv_sge = 1;
    if (rdma_create_qp(id, pd, &attr) != 0) Die(Errno("rdma_create_qp"));
  }

  // RDMA READ of `length` bytes at the peer's (address, rkey) into `local`.
  void Read(const pinpool::Block& local, std::uint64_t address, std::uint32_t rkey,
            std::uint64_t wr_id) {
    ibv_sge sge = pinpool::ToSge(local);
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.opcode = IBV_WR_RDMA_READ;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = address;
    wr.wr.rdma.rkey = rkey;
    ibv_send_wr* bad = nullptr;
    if (ibv_post_send(id->qp, &wr, &bad) != 0) Die(Errno("ibv_post_send (RDMA READ)"));
  }

  // Waits for `n` completions; returns them in completion order.
  std::vector<ibv_wc> Wait(std::size_t n) {
    std::vector<ibv_wc> done(n);
    for (std::size_t got = 0; got < n;) {
      const int k = ibv_poll_cq(cq, static_cast<int>(n - got), done.data() + got);
      if (k < 0) Die("ibv_poll_cq failed");
      got += static_cast<std::size_t>(k);
    }
    return done;
  }

  ~Rdma() {
    // No rdma_disconnect: synchronous, it would wait for the peer's reply; destroying the id
    // disconnects.
    if (id != nullptr && id->qp != nullptr) rdma_destroy_qp(id);
    if (cq != nullptr) ibv_destroy_cq(cq);
    if (pd != nullptr) ibv_dealloc_pd(pd);
    if (id != nullptr) rdma_destroy_ep(id);
  }
};

rdma_addrinfo* Resolve(const std::string& address, std::uint16_t port, bool passive) {
  rdma_addrinfo hints{};
  hints.ai_port_space = RDMA_PS_TCP;
  if (passive) hints.ai_flags = RAI_PASSIVE;
  rdma_addrinfo* res = nullptr;
  if (rdma_getaddrinfo(address.c_str(), std::to_string(port).c_str(), &hints, &res) != 0) {
    Die(Errno(("rdma_getaddrinfo " + address).c_str()));
  }
  return res;
}

struct Args {
  std::string role, address;
  std::uint16_t port = 7474;
  std::size_t pages = 3000;
  std::size_t page_size = 16 * 1024;
  std::size_t chunk_size = 2 * pinpool::kMiB;
  std::size_t lists = 16;
  std::size_t list_size = 64;
  std::uint32_t seed = 23;
};

// --- server -------------------------------------------------------------------------------------

// The cache: one array, its grants and the descriptor the peer gets.
struct Cache {
  pinpool::Array pages;
  std::vector<pinpool::RemoteGrant> grants;
  std::vector<std::byte> descriptor;
  std::uint32_t generation = 0;
};

Cache Build(pinpool::Pool& pool, pinpool::VerbsRemoteAccess& access, const Args& args,
            std::uint32_t generation) {
  Cache c;
  c.generation = generation;
  absl::StatusOr<pinpool::Array> a = pool.AllocateArray(args.pages, args.page_size, 4096);
  if (!a.ok()) Die(a.status().ToString());
  c.pages = *std::move(a);
  for (std::size_t p = 0; p < c.pages.size(); ++p) {
    FillPage(c.pages[p].data(), args.page_size, p, generation);
  }
  auto grants = access.GrantArray(c.pages, {.read = true});
  if (!grants.ok()) Die(grants.status().ToString());
  c.grants = *std::move(grants);
  auto d = pinpool::DescribeGrants(c.pages, c.grants);
  if (!d.ok()) Die(d.status().ToString());
  c.descriptor = *std::move(d);
  std::printf(
      "kv_cache server: generation %u: %zu pages of %zu B in %zu chunk runs (chunks of "
      "%zu KiB), %zu read-only grants (%s, range %s), descriptor of %zu bytes\n",
      generation, c.pages.size(), c.pages.element_size(), c.pages.runs().size(),
      args.chunk_size / 1024, c.grants.size(), pinpool::GrantMechanismName(access.mechanism()),
      access.range_enforced() ? "enforced" : "NOT enforced", c.descriptor.size());
  return c;
}

std::string SendCache(ControlChannel& channel, const Cache& c) {
  if (std::string e = SendWords(channel, {kGeneration, c.generation}); !e.empty()) return e;
  return channel.Send(c.descriptor.data(), static_cast<std::uint32_t>(c.descriptor.size()));
}

int Serve(const Args& args) {
  g_role = "server";
  if (args.page_size % 8 != 0 || args.page_size > args.chunk_size) {
    Die("--page-size must be a multiple of 8 and at most --chunk-size");
  }
  rdma_addrinfo* res = Resolve(args.address, args.port, /*passive=*/true);
  rdma_cm_id* listener = nullptr;
  if (rdma_create_ep(&listener, res, nullptr, nullptr) != 0) Die(Errno("rdma_create_ep"));
  rdma_freeaddrinfo(res);
  if (rdma_listen(listener, 1) != 0) Die(Errno("rdma_listen"));
  // The client connects the control channel first, then the QP: we listen on both by then.
  ControlChannel channel;
  Check(channel.Accept(args.address, static_cast<std::uint16_t>(args.port + 1), 600));
  Rdma rdma;
  if (rdma_get_request(listener, &rdma.id) != 0) Die(Errno("rdma_get_request"));
  rdma.CreateQp();
  rdma_conn_param accept{};
  accept.responder_resources = rdma.id->event->param.conn.responder_resources;  // its READs
  if (rdma_accept(rdma.id, &accept) != 0) Die(Errno("rdma_accept"));
  std::printf("kv_cache server: client connected (%s)\n",
              ibv_get_device_name(rdma.id->verbs->device));

  // The cache's chunks, plus two for the heap; a second generation can only reuse the first's.
  const std::size_t per_chunk = args.chunk_size / ((args.page_size + 4095) / 4096 * 4096);
  const std::size_t chunks = (args.pages + per_chunk - 1) / per_chunk;
  std::unique_ptr<pinpool::Pool> pool =
      MakePool(rdma.pd, args.chunk_size, (chunks + 2) * args.chunk_size);
  pinpool::VerbsRemoteAccessOptions ao;
  ao.mechanism = pinpool::GrantMechanism::kRegion;  // see the file comment
  auto access = pinpool::VerbsRemoteAccess::Create(*pool, rdma.id->qp, ao);
  if (!access.ok()) Die(access.status().ToString());

  Cache cache = Build(*pool, **access, args, 1);
  Check(SendCache(channel, cache));
  std::uint64_t lists = 0, pages = 0, refused = 0, reused = 0, old_runs = 0;
  Words bye;
  for (Words m; bye.empty();) {
    Check(ReceiveWords(channel, m));
    switch (m[0]) {
      case kPages: {
        // A real cache would pin these pages until DONE; ours never evicts during a transfer.
        const bool ok = std::all_of(m.begin() + 1, m.end(),
                                    [&](std::uint32_t p) { return p < cache.pages.size(); });
        refused += ok ? 0 : 1;
        Check(SendWords(channel, ok ? Words{kReady, cache.generation} : Words{kRefused}));
        break;
      }
      case kDone:
        ++lists;
        pages += m.at(1);
        break;
      case kEvict: {
        // Freeing the array revokes its grants (range regions: deregistered at once) and only
        // then gives its chunks back; the next generation may then take the same chunks.
        std::set<const void*> before;
        for (const pinpool::ArrayRun& run : cache.pages.runs()) before.insert(run.base);
        old_runs = before.size();
        const std::uint32_t next = cache.generation + 1;
        pool->Deallocate(std::move(cache.pages));
        for (const pinpool::RemoteGrant& g : cache.grants) {
          if (!(*access)->Ended(g)) Die("a grant of the freed generation did not end");
        }
        const pinpool::GrantStats g = pool->GetStats().grants;
        if (g.live != 0 || g.held_blocks != 0) {
          Die("after the free: " + std::to_string(g.live) + " grants live, " +
              std::to_string(g.held_blocks) + " runs held");
        }
        cache = Build(*pool, **access, args, next);
        for (const pinpool::ArrayRun& run : cache.pages.runs()) reused += before.count(run.base);
        std::printf(
            "kv_cache server: generation %u freed (every grant ended, no run held); "
            "generation %u reuses %" PRIu64 " of its %" PRIu64 " chunks\n",
            next - 1, next, reused, old_runs);
        Check(SendCache(channel, cache));
        break;
      }
      case kBye:
        bye = m;
        break;
      default:
        Die("an unknown control message " + std::to_string(m[0]));
    }
  }
  std::printf("kv_cache server: %" PRIu64 " lists served, %" PRIu64
              " pages read by the client, %" PRIu64
              " lists refused; client's stale READs: %u "
              "refused, %u returned data\n",
              lists, pages, refused, bye.at(1), bye.at(2));
  access->reset();
  pool->Deallocate(std::move(cache.pages));
  pool.reset();
  rdma_destroy_ep(listener);
  if (reused == 0) Die("the new generation reused no chunk: the stale check would mean nothing");
  if (pages == 0 || refused != 0 || bye.at(1) == 0 || bye.at(2) != 0) Die("see above");
  std::printf("kv_cache: OK: server\n");
  return 0;
}

// --- client -------------------------------------------------------------------------------------

pinpool::Descriptor ReceiveCache(ControlChannel& channel, std::uint32_t* generation) {
  Words m;
  Check(ReceiveWords(channel, m));
  if (m.size() != 2 || m[0] != kGeneration) Die("expected the cache's generation");
  *generation = m[1];
  std::vector<std::uint8_t> bytes;
  Check(channel.Receive(bytes));
  absl::StatusOr<pinpool::Descriptor> d = pinpool::Descriptor::Decode(
      std::span<const std::byte>(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()));
  if (!d.ok()) Die("the server's descriptor: " + d.status().ToString());
  std::printf(
      "kv_cache client: descriptor of generation %u: %" PRIu64 " pages of %" PRIu64
      " B in %zu runs, %zu bytes (one address, rkey and length per page would be %" PRIu64 ")\n",
      *generation, d->size(), d->element_size(), d->runs().size(), bytes.size(), d->size() * 16);
  return *std::move(d);
}

// The run of `d` that element i lies in.
std::size_t RunOf(const pinpool::Descriptor& d, std::uint64_t i) {
  const auto runs = d.runs();
  for (std::size_t r = 0; r < runs.size(); ++r) {
    if (i < runs[r].first + runs[r].count) return r;
  }
  return runs.size();
}

// The page of `d` whose bytes start at `address`, if one does.
std::optional<std::uint64_t> PageAt(const pinpool::Descriptor& d, std::uint64_t address) {
  for (const pinpool::DescriptorRun& r : d.runs()) {
    if (address >= r.base && address < r.base + r.count * r.stride &&
        (address - r.base) % r.stride == 0) {
      return r.first + (address - r.base) / r.stride;
    }
  }
  return std::nullopt;
}

// A random list of page numbers that always includes the two pages on either side of one chunk
// run boundary (when there is one).
Words PageList(const pinpool::Descriptor& d, std::size_t n, std::mt19937& rng) {
  Words list = {kPages};
  if (d.runs().size() > 1 && n >= 2) {
    const std::size_t r = 1 + rng() % (d.runs().size() - 1);
    const auto first = static_cast<std::uint32_t>(d.runs()[r].first);
    list.push_back(first - 1);
    list.push_back(first);
  }
  while (list.size() < n + 1) list.push_back(static_cast<std::uint32_t>(rng() % d.size()));
  return list;
}

// READs the pages of `list` (words after the op) through `d` into `local`, one element each,
// and checks every byte against `generation`. Returns the chunk run boundaries the list crossed.
std::size_t ReadAndCheck(Rdma& rdma, const pinpool::Descriptor& d, const pinpool::Array& local,
                         const Words& list, std::uint32_t generation) {
  const std::size_t n = list.size() - 1;
  for (std::size_t k = 0; k < n; ++k) {
    std::memset(local[k].data(), 0, local.element_size());
    // Address and rkey from the descriptor alone.
    const std::optional<pinpool::RemoteElement> e = d.Element(list[k + 1]);
    if (!e) Die("page " + std::to_string(list[k + 1]) + " is not in the descriptor");
    rdma.Read(local[k], e->address, static_cast<std::uint32_t>(e->keys[0]), k);
  }
  for (const ibv_wc& wc : rdma.Wait(n)) {
    if (wc.status != IBV_WC_SUCCESS) {
      Die("READ of page " + std::to_string(list[wc.wr_id + 1]) + ": " +
          ibv_wc_status_str(wc.status));
    }
  }
  std::size_t crossings = 0;
  for (std::size_t k = 0; k < n; ++k) {
    if (!PageIs(local[k].data(), d.element_size(), list[k + 1], generation)) {
      Die("page " + std::to_string(list[k + 1]) + " does not hold generation " +
          std::to_string(generation) + "'s bytes");
    }
    if (k > 0 && RunOf(d, list[k]) + 1 == RunOf(d, list[k + 1])) ++crossings;
  }
  return crossings;
}

// Asks for `lists` random lists of pages and reads them; returns the pages checked.
std::uint64_t Transfer(const Args& args, ControlChannel& channel, Rdma& rdma,
                       const pinpool::Descriptor& d, const pinpool::Array& local,
                       std::uint32_t generation, std::mt19937& rng) {
  std::uint64_t pages = 0, crossings = 0;
  std::set<std::size_t> runs;
  for (std::size_t l = 0; l < args.lists; ++l) {
    const Words list = PageList(d, args.list_size, rng);
    Check(SendWords(channel, list));
    Words reply;
    Check(ReceiveWords(channel, reply));
    if (reply.size() != 2 || reply[0] != kReady || reply[1] != generation) {
      Die("the server did not make the pages ready");
    }
    crossings += ReadAndCheck(rdma, d, local, list, generation);
    for (std::size_t k = 1; k < list.size(); ++k) runs.insert(RunOf(d, list[k]));
    pages += list.size() - 1;
    Check(SendWords(channel, {kDone, static_cast<std::uint32_t>(list.size() - 1)}));
  }
  std::printf("kv_cache client: generation %u: %zu lists, %" PRIu64
              " pages from %zu of %zu chunk runs read (%" PRIu64
              " run boundaries crossed), every byte checked\n",
              generation, args.lists, pages, runs.size(), d.runs().size(), crossings);
  if (crossings == 0 || runs.size() < 2) Die("the lists did not span chunk runs");
  return pages;
}

int Client(const Args& args) {
  g_role = "client";
  ControlChannel channel;
  Check(channel.Connect(args.address, static_cast<std::uint16_t>(args.port + 1), 600));
  Rdma rdma;
  rdma_addrinfo* res = Resolve(args.address, args.port, /*passive=*/false);
  if (rdma_create_ep(&rdma.id, res, nullptr, nullptr) != 0) Die(Errno("rdma_create_ep"));
  rdma_freeaddrinfo(res);
  rdma.CreateQp();
  rdma_conn_param param{};
  param.initiator_depth = 16;  // READs in flight
  param.retry_count = 7;
  param.rnr_retry_count = 7;
  if (rdma_connect(rdma.id, &param) != 0) Die(Errno("rdma_connect"));

  std::unique_ptr<pinpool::Pool> pool = MakePool(rdma.pd, 2 * pinpool::kMiB, 64 * pinpool::kMiB);
  std::uint32_t generation = 0;
  const pinpool::Descriptor old = ReceiveCache(channel, &generation);
  if (args.list_size < 2 || args.list_size > Rdma::kDepth) Die("--list-size is 2 .. 128");
  // Where READs land: an array of our own, one page per entry of a list.
  absl::StatusOr<pinpool::Array> local =
      pool->AllocateArray(args.list_size, old.element_size(), 4096);
  if (!local.ok()) Die(local.status().ToString());
  std::mt19937 rng(args.seed);
  Transfer(args, channel, rdma, old, *local, generation, rng);

  Check(SendWords(channel, {kEvict}));
  std::uint32_t old_generation = generation;
  const pinpool::Descriptor now = ReceiveCache(channel, &generation);
  if (generation == old_generation) Die("the server did not start a new generation");
  Transfer(args, channel, rdma, now, *local, generation, rng);

  // The old descriptor, aimed at old pages whose memory now holds a page of the new generation
  // (an old address inside a run of the new descriptor): the device must refuse every READ, and
  // nothing may arrive.
  Words stale;
  std::set<std::size_t> reused_runs;
  for (int tries = 0; tries < 10000 && stale.size() < 8; ++tries) {
    const std::uint64_t p = rng() % old.size();
    if (PageAt(now, old.Element(p)->address) &&
        std::find(stale.begin(), stale.end(), p) == stale.end()) {
      stale.push_back(static_cast<std::uint32_t>(p));
      reused_runs.insert(RunOf(old, p));
    }
  }
  if (stale.empty()) Die("no old page's memory holds a new page: nothing to show");
  for (std::size_t k = 0; k < stale.size(); ++k) {
    std::memset((*local)[k].data(), 0, local->element_size());
    const std::optional<pinpool::RemoteElement> e = old.Element(stale[k]);
    rdma.Read((*local)[k], e->address, static_cast<std::uint32_t>(e->keys[0]), k);
  }
  std::uint32_t refused = 0, returned = 0;
  const std::vector<ibv_wc> done = rdma.Wait(stale.size());
  for (const ibv_wc& wc : done) {
    if (wc.status == IBV_WC_SUCCESS) ++returned;
    if (wc.status == IBV_WC_REM_ACCESS_ERR) ++refused;
  }
  std::size_t changed = 0, new_bytes = 0;  // local pages no longer all zeros; holding new pages
  for (std::size_t k = 0; k < stale.size(); ++k) {
    const auto* b = static_cast<const std::uint8_t*>((*local)[k].data());
    if (std::any_of(b, b + local->element_size(), [](std::uint8_t x) { return x != 0; })) {
      ++changed;
      const std::optional<std::uint64_t> was = PageAt(now, old.Element(stale[k])->address);
      new_bytes += PageIs(b, local->element_size(), *was, generation) ? 1 : 0;
    }
  }
  std::printf(
      "kv_cache client: %zu READs through the generation %u descriptor at pages whose "
      "memory now holds generation %u pages (in %zu old chunk runs): first completion: "
      "%s; %u refused with a remote access error, %u returned data, %zu local pages "
      "changed, %zu hold generation %u bytes\n",
      stale.size(), old_generation, generation, reused_runs.size(),
      ibv_wc_status_str(done[0].status), refused, returned, changed, new_bytes, generation);
  Check(SendWords(channel, {kBye, refused, returned}));
  pool->Deallocate(std::move(*local));
  if (done[0].status != IBV_WC_REM_ACCESS_ERR || returned != 0 || changed != 0) {
    Die("a READ through the stale descriptor was not refused");
  }
  std::printf("kv_cache: OK: client\n");
  return 0;
}

Args Parse(int argc, char** argv) {
  Args a;
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: %s server ADDRESS [--port P] [--pages N] [--page-size B] "
                 "[--chunk-size B]\n"
                 "       %s client ADDRESS [--port P] [--lists N] [--list-size N] [--seed S]\n",
                 argv[0], argv[0]);
    std::exit(2);
  }
  a.role = argv[1];
  a.address = argv[2];
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const unsigned long v = std::strtoul(argv[i + 1], nullptr, 0);
    if (k == "--port")
      a.port = static_cast<std::uint16_t>(v);
    else if (k == "--pages")
      a.pages = v;
    else if (k == "--page-size")
      a.page_size = v;
    else if (k == "--chunk-size")
      a.chunk_size = v;
    else if (k == "--lists")
      a.lists = v;
    else if (k == "--list-size")
      a.list_size = v;
    else if (k == "--seed")
      a.seed = static_cast<std::uint32_t>(v);
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      std::exit(2);
    }
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
