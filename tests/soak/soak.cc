// pinpool_soak: everything at once, for as long as the command line says (docs/robustness.md,
// "Soak"). Threads allocate, free and reallocate blocks, class blocks and arrays, each written with
// a pattern of its own and checked before it is freed; attached processes write the blocks they
// are handed; the pool trims and grows; in the middle the pool moves to a successor process (warm
// restart) with every live block; at random another process breaks a chunk file's lease (the
// chunk is given back), an attached process is killed with SIGKILL, the descriptor limit drops to
// what is open, and the memory cgroup's limit to what is used. Checked throughout: every live
// byte, every attached write, the stats' own invariants at every scrape (read through the metrics
// socket and GetStats, with the workers paused), and at the end everything back to where it
// started (no block live, VmPin back, no descriptor, thread or file left).
//
//   pinpool_soak --seconds N [--seed S] [--dir D] [--verbs]
//
// It prints its seed first; a failing run replays with --seed (the choices are the seed's; the
// threads' interleaving is the machine's). Exit 0 when every check held, 1 naming the first that
// did not, 2 for bad arguments. With --verbs (the soft-RoCE guest: an RDMA device), the shared
// pool registers with a verbs domain and a peer reads and writes blocks granted to it through
// memory windows, and is refused by the device once a grant is revoked or its block freed; the
// peer is a connection of its own (its own device context, PD, pool and RC queue pair, which the
// device checks every key against as for another host), driven by the owner's control thread.
// The host has no RDMA device, so its soak has no grants.
//
// Processes: the supervisor (main) forks the first owner and its successor, and owns the memory
// cgroup both run in; each owner runs the pools, its worker threads and the control loop; the
// owner forks its attached processes and lease breakers.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <random>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "os/kernel_fields.h"
#include "pinpool/pool.h"
#include "pinpool/share.h"
#include "pinpool/take_back.h"
#include "pinpool/verbs.h"
#include "pinpool/verbs_remote_access.h"
#include "rc_pair.h"
#include "support/memory_cgroup.h"
#include "support/sanitizers.h"

namespace {

using pinpool::Block;
using pinpool::BlockHandle;
using pinpool::kMiB;
using pinpool::Pool;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kChunk = 2 * kMiB;

// --- failing ------------------------------------------------------------------------------------

[[noreturn]] void Fail(const char* format, ...) {
  std::va_list args;
  va_start(args, format);
  std::fprintf(stderr, "pinpool_soak [%d]: FAILED: ", ::getpid());
  std::vfprintf(stderr, format, args);
  std::fprintf(stderr, "\n");
  va_end(args);
  std::fflush(nullptr);
  ::_exit(1);
}
#define CHECK(cond, ...)            \
  do {                              \
    if (!(cond)) Fail(__VA_ARGS__); \
  } while (false)

// --- figures ------------------------------------------------------------------------------------

// What a run did, counted in shared memory so that every process adds to the same figures.
struct Figures {
  std::atomic<std::uint64_t> operations{0};       // allocations, frees, reallocations, arrays
  std::atomic<std::uint64_t> bytes_checked{0};    // bytes read back against their pattern
  std::atomic<std::uint64_t> refused{0};          // allocations refused (limits, pressure)
  std::atomic<std::uint64_t> attached_writes{0};  // blocks an attached process wrote, checked
  std::atomic<std::uint64_t> kills{0};            // attached processes killed (SIGKILL)
  std::atomic<std::uint64_t> lease_breaks{0};     // chunks given back after another process's open
  std::atomic<std::uint64_t> lost_blocks{0};      // live blocks lost with them (reported, dropped)
  std::atomic<std::uint64_t> fd_pressure{0};      // periods at the descriptor limit
  std::atomic<std::uint64_t> cgroup_pressure{0};  // periods at the memory cgroup's limit
  std::atomic<std::uint64_t> trims{0};
  std::atomic<std::uint64_t> scrapes{0};        // invariant checks (metrics socket + stats)
  std::atomic<std::uint64_t> shares{0};         // shares and updates of attached processes
  std::atomic<std::uint64_t> handovers{0};      // warm restarts
  std::atomic<std::uint64_t> handed_blocks{0};  // blocks carried across them, checked
  std::atomic<std::uint64_t> grants{0};         // blocks granted, read and written by the peer
  std::atomic<std::uint64_t> refused_after_revoke{0};  // the peer's accesses the device refused
};
Figures* figures = nullptr;

// --- patterns -----------------------------------------------------------------------------------

// Every byte of a block is a function of its tag and position: the block starts with its tag.
std::uint64_t Word(std::uint64_t tag, std::size_t i) { return (tag + i) * 0x9e3779b97f4a7c15ull; }
void Write(void* data, std::size_t size, std::uint64_t tag) {
  auto* p = static_cast<unsigned char*>(data);
  std::size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    const std::uint64_t w = Word(tag, i / 8);
    std::memcpy(p + i, &w, 8);
  }
  for (; i < size; ++i) p[i] = static_cast<unsigned char>(Word(tag, i / 8) >> (8 * (i % 8)));
}
// The first byte that differs, or SIZE_MAX.
std::size_t Differs(const void* data, std::size_t size, std::uint64_t tag) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + i, 8);
    if (w != Word(tag, i / 8)) return i;
  }
  for (; i < size; ++i) {
    if (p[i] != static_cast<unsigned char>(Word(tag, i / 8) >> (8 * (i % 8)))) return i;
  }
  figures->bytes_checked.fetch_add(size, std::memory_order_relaxed);
  return SIZE_MAX;
}
void Verify(const void* data, std::size_t size, std::uint64_t tag, const char* what) {
  const std::size_t at = Differs(data, size, tag);
  CHECK(at == SIZE_MAX, "%s: byte %zu of %zu at %p is not what was written (tag %" PRIu64 ")", what,
        at, size, data, tag);
}

// --- an owner's blocks --------------------------------------------------------------------------

struct Entry {
  void* data = nullptr;
  std::size_t size = 0;
  std::uint64_t tag = 0;
};

// What every thread of an owner shares: the pools, and the lock that pauses the workers.
struct World {
  std::unique_ptr<Pool> shared;   // files in a directory: shared, handed over, leases
  std::unique_ptr<Pool> classes;  // anonymous, with a named class (a shared pool may have none)
  pinpool::ClassId rpc;
  std::shared_mutex pause;           // workers hold it shared per operation; the control, whole
  std::atomic<bool> pausing{false};  // the control wants it whole: workers wait before taking it
  std::atomic<bool> stop{false};
  // Chunks given back (a broken lease): blocks in them are lost, never touched again.
  std::mutex lost_mu;
  std::vector<std::pair<std::uintptr_t, std::uintptr_t>> lost;
  bool Lost(const void* p) {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    std::lock_guard<std::mutex> lock(lost_mu);
    for (const auto& [lo, hi] : lost) {
      if (a >= lo && a < hi) return true;
    }
    return false;
  }
};

// One worker thread: its own blocks, checked before every free and at the end.
struct Worker {
  World* world = nullptr;
  unsigned index = 0;
  std::mt19937_64 rng;
  std::vector<Entry> blocks;        // in world->shared (handed over with the pool)
  std::vector<Entry> class_blocks;  // in world->classes
  std::vector<std::pair<pinpool::Array, std::uint64_t>> arrays;  // in world->shared
  std::thread thread;

  std::uint64_t Tag() { return rng() | 1; }
  std::size_t Size() {
    switch (rng() % 4) {
      case 0:
        return 16 + rng() % 256;
      case 1:
        return 512 + rng() % 8192;
      case 2:
        return 16384 + rng() % 65536;
      default:
        return 65536 + rng() % (256 << 10);
    }
  }
  void DropLost() {
    std::erase_if(blocks, [&](const Entry& e) {
      if (!world->Lost(e.data)) return false;
      world->shared->Deallocate(e.data);  // a lost block's free: accepted, nothing done
      figures->lost_blocks.fetch_add(1);
      return true;
    });
    std::erase_if(arrays, [&](auto& a) {
      for (const pinpool::ArrayRun& r : a.first.runs()) {
        if (world->Lost(r.base)) {
          world->shared->Deallocate(std::move(a.first));
          return true;
        }
      }
      return false;
    });
  }
  void One() {
    Pool& pool = *world->shared;
    const unsigned op = rng() % 100;
    if (op < 35) {  // allocate
      const std::size_t size = Size();
      Block b = pool.Allocate(size);
      if (!b) {
        figures->refused.fetch_add(1);
        return;
      }
      const Entry e{b.data(), b.size(), Tag()};
      Write(e.data, e.size, e.tag);
      blocks.push_back(e);
    } else if (op < 65 && !blocks.empty()) {  // free
      const std::size_t i = rng() % blocks.size();
      Verify(blocks[i].data, blocks[i].size, blocks[i].tag, "a worker's block");
      pool.Deallocate(blocks[i].data, blocks[i].size);
      blocks[i] = blocks.back();
      blocks.pop_back();
    } else if (op < 75 && !blocks.empty()) {  // reallocate
      Entry& e = blocks[rng() % blocks.size()];
      Verify(e.data, e.size, e.tag, "a block before its reallocation");
      const std::size_t size = Size();
      Block b = pool.Reallocate(e.data, size);
      if (!b) {
        figures->refused.fetch_add(1);
        return;
      }
      Verify(b.data(), std::min(size, e.size) / 8 * 8, e.tag, "a reallocated block's bytes");
      e = {b.data(), b.size(), Tag()};
      Write(e.data, e.size, e.tag);
    } else if (op < 85) {  // a class block
      pinpool::Pool& c = *world->classes;
      if (!class_blocks.empty() && rng() % 2 == 0) {
        const std::size_t i = rng() % class_blocks.size();
        Verify(class_blocks[i].data, class_blocks[i].size, class_blocks[i].tag, "a class block");
        c.Deallocate(class_blocks[i].data, class_blocks[i].size);
        class_blocks[i] = class_blocks.back();
        class_blocks.pop_back();
      } else {
        Block b = c.Allocate(world->rpc, Size());
        if (!b) {
          figures->refused.fetch_add(1);
          return;
        }
        class_blocks.push_back({b.data(), b.size(), Tag()});
        Write(b.data(), b.size(), class_blocks.back().tag);
      }
    } else if (op < 92) {  // an array
      if (!arrays.empty() && (arrays.size() > 2 || rng() % 2 == 0)) {
        auto& [a, tag] = arrays.back();
        for (std::size_t i = 0; i < a.size(); i += 1 + rng() % 64) {
          Verify(a.Element(i).data(), a.element_size(), tag + i, "an array element");
        }
        pool.Deallocate(std::move(a));
        arrays.pop_back();
      } else {
        const std::size_t count = 64 + rng() % 1500;
        absl::StatusOr<pinpool::Array> a = pool.AllocateArray(count, 4096, 4096);
        if (!a.ok()) {
          figures->refused.fetch_add(1);
          return;
        }
        const std::uint64_t tag = Tag();
        for (std::size_t i = 0; i < a->size(); ++i) Write(a->Element(i).data(), 4096, tag + i);
        arrays.emplace_back(*std::move(a), tag);
      }
    } else if (!blocks.empty()) {  // check one
      const Entry& e = blocks[rng() % blocks.size()];
      Verify(e.data, e.size, e.tag, "a worker's block");
    }
    // Bound what one thread holds: the budget is shared.
    while (blocks.size() > 200) {
      Verify(blocks.front().data, blocks.front().size, blocks.front().tag, "a worker's block");
      pool.Deallocate(blocks.front().data);
      blocks.erase(blocks.begin());
    }
    figures->operations.fetch_add(1, std::memory_order_relaxed);
  }
  void Run() {
    while (!world->stop.load()) {
      while (world->pausing.load()) std::this_thread::sleep_for(std::chrono::microseconds(200));
      std::shared_lock<std::shared_mutex> lock(world->pause);
      One();
    }
  }
  // Checks and frees what is left in the class pool and the arrays (not handed over).
  void FreeRest() {
    for (const Entry& e : class_blocks) {
      Verify(e.data, e.size, e.tag, "a class block at the end");
      world->classes->Deallocate(e.data);
    }
    class_blocks.clear();
    for (auto& [a, tag] : arrays) {
      for (std::size_t i = 0; i < a.size(); ++i) {
        Verify(a.Element(i).data(), a.element_size(), tag + i, "an array element at the end");
      }
      world->shared->Deallocate(std::move(a));
    }
    arrays.clear();
  }
};

// --- attached processes -------------------------------------------------------------------------

// What an attached process is asked over its socket (then answered with one byte, 'K').
struct Command {
  char what = 0;  // 'W': write `tag`'s pattern into `handle`; 'U': an update follows
  BlockHandle handle;
  std::uint64_t tag = 0;
};

int AttachedMain(int socket) {
  absl::StatusOr<std::unique_ptr<pinpool::Attachment>> att = pinpool::Attachment::Receive(socket);
  if (!att.ok()) return 3;
  for (;;) {
    Command c;
    if (::recv(socket, &c, sizeof c, MSG_WAITALL) != sizeof c) return 0;  // the owner is done
    if (c.what == 'U') {
      if (!(*att)->Update(socket).ok()) return 4;
    } else {
      absl::StatusOr<std::span<std::byte>> view = (*att)->Map(c.handle);
      if (!view.ok()) return 5;
      Write(view->data(), view->size(), c.tag);
    }
    const char ok = 'K';
    if (::send(socket, &ok, 1, MSG_NOSIGNAL) != 1) return 0;
  }
}

struct Attached {
  pid_t pid = -1;
  int socket = -1;
};

// --- an owner -----------------------------------------------------------------------------------

struct Settings {
  std::uint64_t seed = 0;
  double seconds = 60;
  std::string dir;
  pinpool::testing::MemoryCgroup* cgroup = nullptr;  // null: no memory pressure
  bool verbs = false;
};

// --verbs: the shared pool's verbs domain, and the peer: its own domain, pool and queue pair, and
// the pool's grant mechanism on the connection.
struct Peer {
  std::shared_ptr<pinpool::VerbsDomain> domain;
  std::unique_ptr<Pool> pool;
  std::unique_ptr<pinpool::testing::RcPair> pair;
  std::unique_ptr<pinpool::VerbsRemoteAccess> access;
  Block buffer;

  void Connect(Pool& owner, pinpool::VerbsDomain& owner_domain) {
    absl::StatusOr<std::shared_ptr<pinpool::VerbsDomain>> d = pinpool::VerbsDomain::Open({});
    CHECK(d.ok(), "the peer's verbs domain: %s", std::string(d.status().message()).c_str());
    domain = *d;
    pinpool::PoolOptions o;
    o.chunk_size = kChunk;
    o.budget = 8 * kMiB;
    o.initial_size = kChunk;
    o.page_size = pinpool::PageSize::k4K;
    o.numa_node = pinpool::kNoNumaNode;
    o.domains = {domain};
    absl::StatusOr<std::unique_ptr<Pool>> p = Pool::Create(o);
    CHECK(p.ok(), "the peer's pool: %s", std::string(p.status().message()).c_str());
    pool = *std::move(p);
    buffer = pool->Allocate(kChunk / 2);
    auto connected = pinpool::testing::RcPair::Connect(owner_domain.pd(), domain->pd());
    CHECK(connected.ok(), "connecting the peer: %s",
          std::string(connected.status().message()).c_str());
    pair = *std::move(connected);
    auto a =
        pinpool::VerbsRemoteAccess::Create(owner, pair->qp(pinpool::testing::RcPair::Side::kA), {});
    CHECK(a.ok(), "VerbsRemoteAccess: %s", std::string(a.status().message()).c_str());
    access = *std::move(a);
    pinpool::VerbsRemoteAccess* raw = access.get();
    pair->SetCompletionHook(pinpool::testing::RcPair::Side::kA,
                            [raw](const ibv_wc& wc) { return raw->OnCompletion(wc); });
  }
  // Ends every grant (before a Quiesce) and closes the connection.
  void Disconnect() {
    access.reset();
    pair.reset();
    if (buffer) pool->Deallocate(buffer);
    buffer = {};
    pool.reset();
    domain.reset();
  }
};

pinpool::PoolOptions SharedOptions(const std::string& dir) {
  pinpool::PoolOptions o;
  o.chunk_size = kChunk;
  o.budget = 96 * kMiB;
  o.initial_size = 8 * kMiB;
  o.page_size = pinpool::PageSize::k4K;
  o.numa_node = pinpool::kNoNumaNode;
  o.backing.kind = pinpool::BackingKind::kFiles;
  o.backing.directory = dir;
  o.low_watermark = 4 * kMiB;
  return o;
}

pinpool::PoolOptions ClassOptions() {
  pinpool::PoolOptions o;
  o.chunk_size = kChunk;
  o.budget = 32 * kMiB;
  o.page_size = pinpool::PageSize::k4K;
  o.numa_node = pinpool::kNoNumaNode;
  o.classes = {{.name = "rpc",
                .reserved = 2 * kChunk,
                .cap = 12 * kChunk,
                .scrub = pinpool::Scrub::kOnReuse}};
  return o;
}

// The entries of `dir`; SIZE_MAX when it cannot be read (another process removed it).
std::size_t Entries(const char* dir) {
  std::error_code ec;
  std::size_t n = 0;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    ++n;
  }
  return ec ? SIZE_MAX : n;
}

class Owner {
 public:
  Owner(const Settings& s, unsigned generation, std::uint64_t seed)
      : s_(s), generation_(generation), rng_(seed) {}

  // The first owner: a new pool.
  void Start() {
    world_.shared = Created(Pool::Create(Options()), "the shared pool");
    StartRest();
  }
  // The successor: the pool handed over on `socket`, and the tags of its blocks after it.
  void Adopt(int socket) {
    pinpool::PoolOptions o = Options();
    o.initial_size = 0;
    absl::StatusOr<std::unique_ptr<Pool>> pool = Pool::Adopt(o, socket);
    const char ack = pool.ok() ? 'A' : 'F';
    CHECK(::send(socket, &ack, 1, MSG_NOSIGNAL) == 1, "answering the handover");
    CHECK(pool.ok(), "Adopt: %s", std::string(pool.status().message()).c_str());
    world_.shared = *std::move(pool);
    std::uint64_t n = 0;
    CHECK(::recv(socket, &n, sizeof n, MSG_WAITALL) == sizeof n, "the handed-over tags");
    std::vector<std::uint64_t> tags(n);
    CHECK(::recv(socket, tags.data(), n * 8, MSG_WAITALL) == static_cast<ssize_t>(n * 8),
          "the handed-over tags");
    const std::vector<BlockHandle> handles = world_.shared->AdoptedBlocks();
    CHECK(handles.size() == n, "%zu blocks handed over, %" PRIu64 " tags", handles.size(), n);
    StartRest();  // workers exist (not running yet)
    for (std::size_t i = 0; i < n; ++i) {
      absl::StatusOr<Block> b = world_.shared->Claim(handles[i]);
      CHECK(b.ok(), "Claim: %s", std::string(b.status().message()).c_str());
      Verify(b->data(), b->size(), tags[i], "a block handed over");
      workers_[i % workers_.size()].blocks.push_back({b->data(), b->size(), tags[i]});
    }
    figures->handed_blocks.fetch_add(n);
  }

  // Runs the workers and the control loop until `until`.
  void Run(Clock::time_point until) {
    for (Worker& w : workers_) w.thread = std::thread([&w] { w.Run(); });
    while (Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10 + rng_() % 60));
      Event();
    }
    world_.stop = true;
    for (Worker& w : workers_) w.thread.join();
    RestoreLimits();
  }

  // Hands the pool over on `socket` (the successor answers once it adopted: again if it failed).
  void HandOver(int socket) {
    KillAttached();
    peer_.Disconnect();  // ends every grant: nothing a peer holds reaches the pool
    std::vector<BlockHandle> handles;
    std::vector<std::uint64_t> tags;
    for (Worker& w : workers_) {
      w.DropLost();
      w.FreeRest();
      for (const Entry& e : w.blocks) {
        Verify(e.data, e.size, e.tag, "a block before the handover");
        handles.push_back(*world_.shared->HandleOf(Block(e.data, e.size, nullptr)));
        tags.push_back(e.tag);
      }
    }
    world_.classes.reset();
    CHECK(world_.shared->Quiesce().ok(), "Quiesce");
    for (int attempt = 0;; ++attempt) {
      const absl::Status sent = world_.shared->HandOver(socket, handles);
      CHECK(sent.ok(), "HandOver: %s", std::string(sent.message()).c_str());
      char ack = 0;
      CHECK(::recv(socket, &ack, 1, MSG_WAITALL) == 1, "the successor's answer");
      if (ack == 'A') break;
      CHECK(attempt < 3, "the successor failed to adopt %d times", attempt + 1);
    }
    const std::uint64_t n = tags.size();
    CHECK(::send(socket, &n, 8, MSG_NOSIGNAL) == 8 &&
              ::send(socket, tags.data(), n * 8, MSG_NOSIGNAL) == static_cast<ssize_t>(n * 8),
          "sending the tags");
    figures->handovers.fetch_add(1);
    // Adopted: this process's descriptions of the files go (the successor leases them then), and
    // the files with their names stay (the pool was handed over).
    world_.shared.reset();
  }

  // The end: every block checked and freed, then everything back to where it started.
  void Finish(std::size_t fds_before) {
    KillAttached();
    peer_.Disconnect();
    for (Worker& w : workers_) {
      w.DropLost();
      w.FreeRest();
      for (const Entry& e : w.blocks) {
        Verify(e.data, e.size, e.tag, "a block at the end");
        world_.shared->Deallocate(e.data);
      }
      w.blocks.clear();
    }
    for (Pool* p : {world_.shared.get(), world_.classes.get()}) {
      p->Trim(0);
      const pinpool::PoolStats st = p->GetStats();
      CHECK(st.live_bytes == 0 && st.arrays == 0 && st.grants.held_blocks == 0,
            "at the end: %zu bytes live, %zu arrays, %" PRIu64 " blocks held", st.live_bytes,
            st.arrays, st.grants.held_blocks);
    }
    world_.shared.reset();
    world_.classes.reset();
    verbs_.reset();  // its device context
    const auto pinned = pinpool::internal::os::ProcStatusBytes("VmPin");
    CHECK(pinned && *pinned == 0, "VmPin is %zu after the pools went", pinned.value_or(0));
    CHECK(Entries("/proc/self/fd") == fds_before, "%zu descriptors open at the end, %zu before",
          Entries("/proc/self/fd"), fds_before);
    // TSan's runtime starts threads of its own when it pleases: the other builds count threads.
    CHECK(pinpool::testing::kTsan || Entries("/proc/self/task") == 1, "%zu threads at the end",
          Entries("/proc/self/task"));
  }

 private:
  std::unique_ptr<Pool> Created(absl::StatusOr<std::unique_ptr<Pool>> pool, const char* what) {
    CHECK(pool.ok(), "%s: %s", what, std::string(pool.status().message()).c_str());
    return *std::move(pool);
  }
  pinpool::PoolOptions Options() {
    pinpool::PoolOptions o = SharedOptions(s_.dir);
    if (s_.verbs) {
      absl::StatusOr<std::shared_ptr<pinpool::VerbsDomain>> d = pinpool::VerbsDomain::Open({});
      CHECK(d.ok(), "--verbs: no verbs domain: %s", std::string(d.status().message()).c_str());
      verbs_ = *d;
      o.domains = {verbs_};
    }
    return o;
  }
  void StartRest() {
    if (s_.verbs) peer_.Connect(*world_.shared, *verbs_);
    world_.classes = Created(Pool::Create(ClassOptions()), "the class pool");
    world_.rpc = *world_.classes->ClassOf("rpc");
    metrics_path_ = s_.dir + "/../pinpool-soak-metrics-" + std::to_string(::getpid());
    CHECK(world_.shared->ServeMetrics(metrics_path_).ok(), "ServeMetrics");
    workers_ = std::vector<Worker>(3);
    for (unsigned i = 0; i < workers_.size(); ++i) {
      workers_[i].world = &world_;
      workers_[i].index = i;
      workers_[i].rng.seed(rng_());
    }
  }

  void Event() {
    if (s_.verbs && rng_() % 4 == 0) {
      GrantCycle();
      return;
    }
    switch (rng_() % 10) {
      case 0:
      case 1:
        Scrape();
        break;
      case 2:
        (rng_() % 2 == 0 ? world_.shared : world_.classes)->Trim(rng_() % 3 * 4 * kMiB);
        figures->trims.fetch_add(1);
        break;
      case 3:
      case 4:
      case 5:
        AttachedWrite();
        break;
      case 6:
        if (lease_breaks_ < 6 && rng_() % 3 == 0) BreakALease();
        break;
      case 7:
        if (rng_() % 3 == 0) FdPressure();
        break;
      case 8:
        if (rng_() % 3 == 0) CgroupPressure();
        break;
      default:
        if (!attached_.empty() && rng_() % 4 == 0) Kill(rng_() % attached_.size());
        break;
    }
  }

  // The workers, paused between two operations for the scope of one.
  struct Paused {
    World& w;
    std::unique_lock<std::shared_mutex> lock;
    explicit Paused(World& world) : w(world) {
      w.pausing = true;
      lock = std::unique_lock<std::shared_mutex>(w.pause);
    }
    ~Paused() { w.pausing = false; }
  };

  // The stats' own invariants, with the workers paused: from the metrics socket and GetStats.
  void Scrape() {
    Paused paused(world_);
    const std::string text = ReadSocket(metrics_path_);
    CHECK(text.size() > 6 && text.compare(text.size() - 6, 6, "# EOF\n") == 0,
          "the metrics socket's answer is cut short (%zu bytes)", text.size());
    for (Pool* p : {world_.shared.get(), world_.classes.get()}) {
      const pinpool::PoolStats s = p->GetStats();
      CHECK(s.live_bytes + s.cached_bytes + s.grants.held_bytes <= s.heap_active_bytes,
            "live %zu + cached %zu + held %" PRIu64 " > heap active %zu", s.live_bytes,
            s.cached_bytes, s.grants.held_bytes, s.heap_active_bytes);
      CHECK(s.heap_active_bytes + s.array_bytes <= s.mapped_bytes,
            "heap active %zu + arrays %zu > mapped %zu", s.heap_active_bytes, s.array_bytes,
            s.mapped_bytes);
      CHECK(s.mapped_bytes <= s.budget_bytes, "mapped %zu > budget %zu", s.mapped_bytes,
            s.budget_bytes);
      CHECK(s.pinned_bytes == s.mapped_bytes, "pinned %zu, mapped %zu", s.pinned_bytes,
            s.mapped_bytes);
    }
    // VmPin against what the pools pin. Chunks the background work is building are registered
    // (pinned) before they are mapped in the stats: the workers are paused, the grower is not, so
    // the pools' figures are read again on every try (a chunk it starts after one reading is in
    // the next). And the kernel drops the pins of a deregistered chunk a little later (io_uring
    // releases a buffer's pages once its table node's last reference goes): a chunk just trimmed
    // or given back may still count, for a few milliseconds.
    std::size_t vm_pin = 0, pinned = 0, in_flight = 0;
    for (int i = 0; i < 200; ++i) {
      pinned = in_flight = 0;
      for (Pool* p : {world_.shared.get(), world_.classes.get()}) {
        const pinpool::PoolStats s = p->GetStats();
        pinned += s.pinned_bytes;
        in_flight += s.growth.chunks_growing * kChunk;
      }
      if (peer_.pool != nullptr) pinned += peer_.pool->GetStats().pinned_bytes;
      vm_pin = pinpool::internal::os::ProcStatusBytes("VmPin").value_or(0);
      if (vm_pin >= pinned && vm_pin <= pinned + in_flight) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    CHECK(vm_pin >= pinned && vm_pin <= pinned + in_flight,
          "VmPin %zu, the pools pin %zu (%zu more being built), after a second", vm_pin, pinned,
          in_flight);
    figures->scrapes.fetch_add(1);
  }

  static std::string ReadSocket(const std::string& path) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.data(), std::min(path.size(), sizeof addr.sun_path - 1));
    std::string out;
    const int connected = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    const int connect_errno = errno;
    if (connected == 0) {
      char buf[8192];
      for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, n);
    }
    ::close(fd);
    CHECK(connected == 0, "cannot connect to the metrics socket %s: %s", path.c_str(),
          std::strerror(connect_errno));
    return out;
  }

  // --verbs: a block granted to the peer, which reads it and writes it through the grant; then
  // revoked (or freed while granted, which revokes it), and the peer's next access through it is
  // refused by the device (the connection is brought back up afterwards).
  void GrantCycle() {
    using Side = pinpool::testing::RcPair::Side;
    const std::size_t size = 4096 + rng_() % (kChunk / 2 - 4096);
    Block b = world_.shared->Allocate(size);
    if (!b) {
      figures->refused.fetch_add(1);
      return;
    }
    const std::uint64_t before = rng_() | 1, after = rng_() | 1;
    Write(b.data(), size, before);
    absl::StatusOr<pinpool::RemoteGrant> g = peer_.access->Grant(b, {.read = true, .write = true});
    if (!g.ok()) {
      figures->refused.fetch_add(1);
      world_.shared->Deallocate(b);
      return;
    }
    ibv_sge sge = pinpool::ToSge(peer_.buffer);
    sge.length = static_cast<std::uint32_t>(size);
    absl::StatusOr<ibv_wc_status> wc = peer_.pair->Read(Side::kB, sge, g->remote());
    CHECK(wc.ok() && *wc == IBV_WC_SUCCESS, "the peer's READ through a live grant: %s",
          wc.ok() ? pinpool::testing::StatusName(*wc) : std::string(wc.status().message()).c_str());
    Verify(peer_.buffer.data(), size, before, "what the peer read through a grant");
    Write(peer_.buffer.data(), size, after);
    wc = peer_.pair->Write(Side::kB, sge, g->remote());
    CHECK(wc.ok() && *wc == IBV_WC_SUCCESS, "the peer's WRITE through a live grant");
    Verify(b.data(), size, after, "what the peer wrote through a grant");
    figures->grants.fetch_add(1);
    const bool free_first = rng_() % 2 == 0;
    if (free_first) {
      world_.shared->Deallocate(b);  // held until the revocation the free started completes
    } else {
      CHECK(peer_.access->Revoke(*g).ok(), "Revoke");
    }
    CHECK(peer_.pair->PollUntil(Side::kA, [&] { return peer_.access->Ended(*g); }).ok(),
          "the revocation never completed");
    wc = peer_.pair->Read(Side::kB, sge, g->remote());
    CHECK(wc.ok() && *wc != IBV_WC_SUCCESS, "a READ through a revoked grant succeeded");
    figures->refused_after_revoke.fetch_add(1);
    CHECK(peer_.pair->Reconnect().ok(), "reconnecting the peer");
    if (!free_first) world_.shared->Deallocate(b);
  }

  // An attached process writes a block the owner allocated, which the owner then checks; now and
  // then the owner re-shares first (the pool grew or trimmed), or kills the process mid-write.
  void AttachedWrite() {
    if (attached_.size() < 2) Spawn();
    if (attached_.empty()) return;
    const std::size_t who = rng_() % attached_.size();
    const int socket = attached_[who].socket;
    if (rng_() % 4 == 0) {  // an update: the pool has grown or trimmed since
      const Command u{.what = 'U', .handle = {}, .tag = 0};
      if (::send(socket, &u, sizeof u, MSG_NOSIGNAL) != sizeof u || !Share(socket) ||
          !Answered(socket)) {
        Kill(who);
        return;
      }
    }
    Block b = world_.shared->Allocate(4096 + rng_() % (512 << 10));
    if (!b) {
      figures->refused.fetch_add(1);
      return;
    }
    const Command c{.what = 'W', .handle = *world_.shared->HandleOf(b), .tag = rng_() | 1};
    static_assert(sizeof(Command) == 40);
    const bool kill = rng_() % 8 == 0;
    if (::send(socket, &c, sizeof c, MSG_NOSIGNAL) != sizeof c) {
      world_.shared->Deallocate(b);
      Kill(who);
      return;
    }
    if (kill) {  // mid-write: the block's bytes are whatever it wrote; the pool is untouched
      Kill(who);
      world_.shared->Deallocate(b);
      return;
    }
    if (!Answered(socket)) {  // its chunk was not mapped there (the share before the growth)
      world_.shared->Deallocate(b);
      Kill(who);
      return;
    }
    Verify(b.data(), b.size(), c.tag, "a block an attached process wrote");
    figures->attached_writes.fetch_add(1);
    world_.shared->Deallocate(b);
  }
  bool Answered(int socket) {
    pollfd p{socket, POLLIN, 0};
    char ok = 0;
    return ::poll(&p, 1, 10000) == 1 && ::recv(socket, &ok, 1, 0) == 1 && ok == 'K';
  }
  bool Share(int socket) {
    const absl::Status s = world_.shared->Share(socket);
    if (!s.ok()) {
      figures->refused.fetch_add(1);  // the descriptor limit, say
      return false;
    }
    figures->shares.fetch_add(1);
    return true;
  }
  void Spawn() {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return;
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(sv[0]);
      ::_exit(AttachedMain(sv[1]));
    }
    ::close(sv[1]);
    if (pid < 0 || !Share(sv[0])) {
      if (pid > 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
      ::close(sv[0]);
      return;
    }
    attached_.push_back({pid, sv[0]});
  }
  void Kill(std::size_t who) {
    ::kill(attached_[who].pid, SIGKILL);
    ::waitpid(attached_[who].pid, nullptr, 0);
    ::close(attached_[who].socket);
    attached_.erase(attached_.begin() + static_cast<std::ptrdiff_t>(who));
    figures->kills.fetch_add(1);
  }
  void KillAttached() {
    while (!attached_.empty()) Kill(attached_.size() - 1);
  }

  // Another process opens a chunk's file: the pool gives the chunk back, and the blocks in it are
  // lost (reported by TakeLostChunks, dropped by their workers without touching them).
  void BreakALease() {
    Paused paused(world_);
    const pinpool::PoolStats st = world_.shared->GetStats();
    if (st.chunks.size() < 3) return;
    const pinpool::ChunkStats& c = st.chunks[rng_() % st.chunks.size()];
    if (c.backing.rfind("file ", 0) != 0) return;
    const std::string path = c.backing.substr(5);
    // A successor leases an adopted chunk's file once its predecessor has closed it (the next
    // lease pass after that): an open before then would break nothing.
    if (!Leased(path)) return;
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);  // waits for the give back
      ::_exit(fd >= 0 ? 0 : 9);
    }
    int status = 0;
    CHECK(::waitpid(pid, &status, 0) == pid, "waiting for the lease breaker");
    std::vector<pinpool::LostChunk> lost = world_.shared->TakeLostChunks();
    CHECK(!lost.empty(), "another process opened %s and no chunk was given back", path.c_str());
    {
      std::lock_guard<std::mutex> lock(world_.lost_mu);
      for (const pinpool::LostChunk& l : lost) {
        world_.lost.emplace_back(l.base, l.base + l.size);
        figures->lease_breaks.fetch_add(1);
      }
    }
    ++lease_breaks_;
    // Every worker forgets its blocks there before it goes on.
    for (Worker& w : workers_) w.DropLost();
  }

  // Whether /proc/locks lists this process's lease on `path`, within a second.
  static bool Leased(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return false;
    const std::string pid = " " + std::to_string(::getpid()) + " ";
    const std::string inode = ":" + std::to_string(st.st_ino) + " ";
    for (int i = 0; i < 100; ++i) {
      std::ifstream locks("/proc/locks");
      for (std::string line; std::getline(locks, line);) {
        if (line.find("LEASE") != std::string::npos && line.find(pid) != std::string::npos &&
            line.find(inode) != std::string::npos) {
          return true;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  // The descriptor limit at what is open, for a moment: growth of file chunks, shares and new
  // attached processes are refused, each with an error; nothing else breaks.
  void FdPressure() {
    rlimit saved{};
    ::getrlimit(RLIMIT_NOFILE, &saved);
    rlimit low = saved;
    low.rlim_cur = Entries("/proc/self/fd") + 2;
    ::setrlimit(RLIMIT_NOFILE, &low);
    figures->fd_pressure.fetch_add(1);
    for (int i = 0; i < 4; ++i) {
      AttachedWrite();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ::setrlimit(RLIMIT_NOFILE, &saved);
  }

  // The memory cgroup's limit just above what it uses, for a moment: growth is refused (the
  // preflight, never the OOM killer), allocations come back empty, nothing else breaks.
  void CgroupPressure() {
    if (s_.cgroup == nullptr) return;
    if (!s_.cgroup->Limit(s_.cgroup->Usage() + 48 * kMiB)) return;
    figures->cgroup_pressure.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(150 + rng_() % 200));
    CHECK(s_.cgroup->Limit(std::nullopt), "lifting the memory cgroup's limit");
  }
  void RestoreLimits() {
    if (s_.cgroup != nullptr) s_.cgroup->Limit(std::nullopt);
  }

  const Settings& s_;
  [[maybe_unused]] const unsigned generation_;
  std::mt19937_64 rng_;
  World world_;
  std::vector<Worker> workers_;
  std::vector<Attached> attached_;
  std::string metrics_path_;
  int lease_breaks_ = 0;
  std::shared_ptr<pinpool::VerbsDomain> verbs_;  // --verbs: the shared pool's domain
  Peer peer_;
};

// --- the supervisor -----------------------------------------------------------------------------

// An owner enters the soak's memory cgroup before it makes a pool (a pool finds its cgroup once).
void Join(const Settings& s) {
  if (s.cgroup != nullptr) CHECK(s.cgroup->Enter(), "joining %s", s.cgroup->dir().c_str());
}

int Usage() {
  std::fprintf(stderr, "usage: pinpool_soak --seconds N [--seed S] [--dir DIR] [--verbs]\n");
  return 2;
}

int Wait(pid_t pid, const char* who) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
  std::fprintf(stderr, "pinpool_soak: the %s (pid %d) %s %d\n", who, pid,
               WIFEXITED(status) ? "exited with" : "died of signal",
               WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  s.seed = std::random_device{}();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--verbs") {
      s.verbs = true;
      continue;
    }
    if (i + 1 >= argc) return Usage();
    if (a == "--seconds") {
      s.seconds = std::atof(argv[++i]);
    } else if (a == "--seed") {
      s.seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--dir") {
      s.dir = argv[++i];
    } else {
      return Usage();
    }
  }
  if (s.seconds <= 0) return Usage();
  std::printf("pinpool_soak: seed %" PRIu64 " (replay: --seed %" PRIu64 "), %.0f s\n", s.seed,
              s.seed, s.seconds);
  std::fflush(stdout);
  std::string made;
  if (s.dir.empty()) {
    char tmpl[] = "/dev/shm/pinpool-soak-XXXXXX";
    CHECK(::mkdtemp(tmpl) != nullptr, "mkdtemp: %s", std::strerror(errno));
    s.dir = made = tmpl;
  }
  // Both owners run in a memory cgroup of their own, whose limit the pressure lowers.
  pinpool::testing::MemoryCgroup cgroup("pinpool-soak-" + std::to_string(::getpid()));
  // Not under a sanitizer: there most of the process's memory is the sanitizer's own (shadow,
  // quarantine), charged to the cgroup beside the chunks, and the pool's preflight counts the
  // chunks only, so 48 MiB of headroom ends in the OOM killer, not a refusal (seen under TSan: the
  // first owner killed at 3 s with 305 MB anonymous).
  if (pinpool::testing::kAsan || pinpool::testing::kTsan) {
    std::printf(
        "pinpool_soak: no memory cgroup pressure: a sanitizer's own memory is charged "
        "beside the pool's, which the preflight cannot count\n");
  } else if (cgroup.version() != 0) {
    s.cgroup = &cgroup;
  } else {
    std::printf("pinpool_soak: no memory cgroup pressure: %s\n", cgroup.why_not().c_str());
  }
  void* shared =
      ::mmap(nullptr, sizeof(Figures), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  CHECK(shared != MAP_FAILED, "mmap of the figures");
  figures = new (shared) Figures;
  ::signal(SIGPIPE, SIG_IGN);

  const auto start = Clock::now();
  const auto half = start + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(s.seconds / 2));
  const auto end =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s.seconds));
  int sv[2];
  CHECK(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, "socketpair");
  std::fflush(nullptr);
  // The successor first: it waits in Adopt for its predecessor's handover.
  const pid_t successor = ::fork();
  if (successor == 0) {
    ::close(sv[0]);
    Join(s);
    const std::size_t fds = Entries("/proc/self/fd") - 1;  // less the handover socket
    Owner b(s, 1, s.seed * 2 + 1);
    b.Adopt(sv[1]);
    ::close(sv[1]);
    b.Run(end);
    b.Finish(fds);
    std::fflush(nullptr);
    ::_exit(0);
  }
  const pid_t first = ::fork();
  if (first == 0) {
    ::close(sv[1]);
    Join(s);
    Owner a(s, 0, s.seed * 2);
    a.Start();
    a.Run(half);
    a.HandOver(sv[0]);
    std::fflush(nullptr);
    ::_exit(0);  // the pool's destruction keeps the files: the successor owns them now
  }
  ::close(sv[0]);
  ::close(sv[1]);
  int failed = Wait(first, "first owner");
  if (failed != 0) ::kill(successor, SIGKILL);
  failed |= Wait(successor, "successor");
  if (failed != 0) cgroup.KillAll();  // an owner's attached processes, orphaned when it failed
  if (!cgroup.Remove() && cgroup.version() != 0) {
    std::fprintf(stderr, "pinpool_soak: cannot remove %s: %s\n", cgroup.dir().c_str(),
                 std::strerror(errno));
    failed = 1;
  }
  const std::size_t left = Entries(s.dir.c_str());
  if (left == SIZE_MAX) {
    std::fprintf(stderr, "pinpool_soak: cannot read %s: removed by another process?\n",
                 s.dir.c_str());
    failed = 1;
  } else if (left != 0) {
    std::fprintf(stderr, "pinpool_soak: %zu files left in %s\n", left, s.dir.c_str());
    failed = 1;
  }
  if (!made.empty()) std::filesystem::remove_all(made);
  const Figures& f = *figures;
  std::printf(
      "pinpool_soak: %s after %.0f s: %" PRIu64 " operations, %" PRIu64 " bytes checked, %" PRIu64
      " attached writes checked, %" PRIu64 " blocks carried across %" PRIu64
      " warm restart(s); faults: %" PRIu64 " SIGKILLs, %" PRIu64 " lease breaks (%" PRIu64
      " blocks lost with them), %" PRIu64 " descriptor-limit and %" PRIu64
      " memory-cgroup pressure periods, %" PRIu64 " allocations refused; %" PRIu64
      " trims, %" PRIu64 " scrapes checked, %" PRIu64 " shares; %" PRIu64
      " grants read and written by the peer, %" PRIu64 " accesses refused after revocation\n",
      failed == 0 ? "OK" : "FAILED", std::chrono::duration<double>(Clock::now() - start).count(),
      f.operations.load(), f.bytes_checked.load(), f.attached_writes.load(), f.handed_blocks.load(),
      f.handovers.load(), f.kills.load(), f.lease_breaks.load(), f.lost_blocks.load(),
      f.fd_pressure.load(), f.cgroup_pressure.load(), f.refused.load(), f.trims.load(),
      f.scrapes.load(), f.shares.load(), f.grants.load(), f.refused_after_revoke.load());
  return failed;
}
