// Every failure point of every host scenario, tried in turn (tests/support/fault_sweep.h;
// docs/robustness.md, "Every failure point"): create, grow, trim, share, attach, update, quiesce
// and hand over, adopt and claim, give back, arrays, classes, metrics serving, and growth with the
// resident and io_uring domains. Each scenario runs once to count the failure points it reaches,
// then once per point and errno with that call failing: every run ends in OK (done, or a
// documented recovery: the scenario checks it) or in an error its header documents, leaves no
// descriptor, thread, pin, lock, mapping or file behind, and loses or changes no live block.
// The providers' sweeps are in tests/providers (UCX and libfabric on the host, verbs in the
// soft-RoCE guest).
#include "support/fault_sweep.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pinpool/io_uring.h"
#include "pinpool/pool.h"
#include "pinpool/share.h"
#include "pinpool/take_back.h"
#include "support/socket_pair.h"

namespace pinpool {
namespace {

using testing::Allowed;
using testing::FaultPlan;
using testing::Outcome;
using testing::SocketPair;
using testing::Sweep;
using Code = absl::StatusCode;

constexpr std::size_t kChunk = 2 * kMiB;

// A directory in /dev/shm for file-backed pools, removed with what is left in it.
struct ShmDir {
  std::string path;
  ShmDir() {
    char tmpl[] = "/dev/shm/pinpool-sweep-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~ShmDir() { std::filesystem::remove_all(path); }
};

PoolOptions Options(BackingKind backing = BackingKind::kAnonymous, const std::string& dir = "") {
  PoolOptions o;
  o.chunk_size = kChunk;
  o.budget = 8 * kChunk;
  o.initial_size = kChunk;
  o.page_size = PageSize::k4K;
  o.numa_node = kNoNumaNode;
  o.reserve_threads = 1;
  o.backing.kind = backing;
  o.backing.directory = backing == BackingKind::kFiles ? dir : "";
  return o;
}

std::byte Pattern(std::size_t i, unsigned seed) { return std::byte((i * 131 + seed) & 0xff); }

// Blocks written with a pattern, checked at the end of a run: what "no live block lost or
// changed" means here.
struct Live {
  struct Entry {
    void* data;
    std::size_t size;
    unsigned seed;
  };
  std::vector<Entry> entries;
  void Add(void* data, std::size_t size, unsigned seed) {
    for (std::size_t i = 0; i < size; i += 61) static_cast<std::byte*>(data)[i] = Pattern(i, seed);
    entries.push_back({data, size, seed});
  }
  static bool Holds(const void* data, std::size_t size, unsigned seed) {
    for (std::size_t i = 0; i < size; i += 61) {
      if (static_cast<const std::byte*>(data)[i] != Pattern(i, seed)) return false;
    }
    return true;
  }
  // Fills `o` with how many there are and how many changed.
  void Check(Outcome& o) const {
    o.blocks += entries.size();
    for (const Entry& e : entries) o.changed += Holds(e.data, e.size, e.seed) ? 0 : 1;
  }
};

// Blocks of a pool, allocated and written (count of `size` bytes).
Live Fill(Pool& pool, std::size_t count, std::size_t size, unsigned seed = 0) {
  Live live;
  for (std::size_t i = 0; i < count; ++i) {
    Block b = pool.Allocate(size);
    EXPECT_TRUE(b) << "setup allocation " << i;
    if (b) live.Add(b.data(), b.size(), seed + static_cast<unsigned>(i));
  }
  return live;
}
void FreeAll(Pool& pool, const Live& live) {
  for (const Live::Entry& e : live.entries) pool.Deallocate(e.data);
}

// --- pool creation ------------------------------------------------------------------------------

// Pool::Create with its first chunks: the default domain's ring and table, the reservation, the
// heap's metadata, each chunk's file, mapping, population and pin.
Outcome CreateScenario(PoolOptions options) {
  Outcome o;
  absl::StatusOr<std::unique_ptr<Pool>> pool = Pool::Create(std::move(options));
  o.status = pool.status();
  if (!pool.ok()) return o;
  FaultPlan::Pause pause;
  Live live = Fill(**pool, 4, 100 * kKiB);
  live.Check(o);
  FreeAll(**pool, live);
  return o;
}

// pool.h: Create fails with kResourceExhausted (limits, address space), kFailedPrecondition,
// kPermissionDenied / kUnimplemented (long-term pinning impossible), or what a domain returned;
// kInternal for a kernel call that should not fail (sealing, MADV_DONTFORK), named.
const Allowed kCreateErrors = {Code::kResourceExhausted, Code::kFailedPrecondition,
                               Code::kPermissionDenied, Code::kUnimplemented, Code::kInternal};

TEST(FaultSweep, CreateAnonymous) {
  Sweep(
      "create (anonymous, 2 chunks)", [] { return CreateScenario(Options()); }, kCreateErrors);
}

TEST(FaultSweep, CreateMemfd) {
  PoolOptions o = Options(BackingKind::kMemfd);
  o.initial_size = 2 * kChunk;
  Sweep(
      "create (memfd, 2 chunks)", [&] { return CreateScenario(o); }, kCreateErrors);
}

TEST(FaultSweep, CreateFiles) {
  ShmDir dir;
  PoolOptions o = Options(BackingKind::kFiles, dir.path);
  o.initial_size = 2 * kChunk;
  Sweep(
      "create (files, 2 chunks)", [&] { return CreateScenario(o); }, kCreateErrors, dir.path);
}

TEST(FaultSweep, CreateOnANumaNode) {
  PoolOptions o = Options();
  o.numa_node = 0;  // every machine has node 0: mbind, and the placement read back
  Sweep("create (NUMA node 0)", [&] { return CreateScenario(o); },
        {Code::kResourceExhausted, Code::kFailedPrecondition, Code::kPermissionDenied,
         Code::kUnimplemented, Code::kInternal, Code::kInvalidArgument});
}

// --- growth -------------------------------------------------------------------------------------

// A pool of one chunk with live blocks grows by Reserve and by allocations that find no room:
// the old blocks keep their bytes whatever fails, the pool keeps serving, and growth succeeds
// once the fault is gone (faults_test covers each call's exact counts).
Outcome GrowScenario(const PoolOptions& options) {
  Outcome o;
  std::unique_ptr<Pool> pool;
  Live before;
  {
    FaultPlan::Pause pause;
    pool = Pool::Create(options).value();
    before = Fill(*pool, 8, 100 * kKiB);
  }
  o.status = pool->Reserve(3 * kChunk);
  std::vector<Block> grown;
  for (int i = 0; i < 3 && o.status.ok(); ++i) {  // needs a fourth chunk: allocation growth
    Block b = pool->Allocate(kChunk / 2 + 1);
    if (b) grown.push_back(b);
  }
  Block big = pool->Allocate(kChunk * 3 / 4);
  if (!big && o.status.ok()) o.status = pool->last_growth_error();
  FaultPlan::Pause pause;
  before.Check(o);
  if (big) pool->Deallocate(big);
  for (const Block& b : grown) pool->Deallocate(b);
  // The documented recovery: the next growth, with the fault gone, succeeds.
  const absl::Status again = pool->Reserve(4 * kChunk);
  EXPECT_TRUE(again.ok()) << "growth after the fault: " << again;
  Live after = Fill(*pool, 4, 200 * kKiB, 50);
  after.Check(o);
  FreeAll(*pool, after);
  FreeAll(*pool, before);
  return o;
}

// pool.h: Reserve fails with kResourceExhausted (limits, mappings) or what a domain returned;
// kFailedPrecondition (huge pages), kInternal (a call that should not fail, named).
const Allowed kGrowErrors = {Code::kResourceExhausted, Code::kFailedPrecondition, Code::kInternal};

TEST(FaultSweep, GrowAnonymous) {
  Sweep(
      "grow (anonymous)", [] { return GrowScenario(Options()); }, kGrowErrors);
}

TEST(FaultSweep, GrowFiles) {
  ShmDir dir;
  Sweep(
      "grow (files)", [&] { return GrowScenario(Options(BackingKind::kFiles, dir.path)); },
      kGrowErrors, dir.path);
}

TEST(FaultSweep, GrowWithTheResidentDomain) {
  PoolOptions o = Options();
  o.domains = {MakeResidentNotPinnedDomain()};
  Sweep(
      "grow (resident domain)", [&] { return GrowScenario(o); }, kGrowErrors);
}

TEST(FaultSweep, GrowWithAnIoUringDomain) {
  absl::StatusOr<std::shared_ptr<IoUringDomain>> ring = IoUringDomain::Create(4);
  ASSERT_TRUE(ring.ok()) << ring.status();
  PoolOptions o = Options();
  o.domains = {*ring};
  Sweep(
      "grow (io_uring domain)", [&] { return GrowScenario(o); }, kGrowErrors);
}

// --- trim ---------------------------------------------------------------------------------------

// Trim of a pool whose first chunk holds live blocks: never an error; what it cannot give back
// now (caches it could not drain) a later Trim does.
TEST(FaultSweep, Trim) {
  Sweep("trim",
        [] {
          Outcome o;
          std::unique_ptr<Pool> pool;
          Live keep;
          {
            FaultPlan::Pause pause;
            pool = Pool::Create(Options()).value();
            keep = Fill(*pool, 4, 64 * kKiB);
            Live rest = Fill(*pool, 6, kChunk / 2, 10);
            FreeAll(*pool, rest);
          }
          pool->Trim(0);
          FaultPlan::Pause pause;
          pool->Trim(0);  // the recovery: whatever the first left
          const std::size_t mapped = pool->GetStats().mapped_bytes;
          if (mapped != kChunk) {
            o.status = absl::InternalError(
                absl::StrFormat("%d bytes mapped after two trims, one chunk expected", mapped));
          }
          keep.Check(o);
          FreeAll(*pool, keep);
          return o;
        },
        {});
}

// --- sharing ------------------------------------------------------------------------------------

// Every block of `live` through an attachment: the same bytes (written the other way too).
void CheckThrough(const Attachment& att, Pool& pool, Live& live, Outcome& o) {
  for (const Live::Entry& e : live.entries) {
    absl::StatusOr<BlockHandle> h = pool.HandleOf(Block(e.data, e.size, nullptr));
    absl::StatusOr<std::span<std::byte>> view =
        h.ok() ? att.Map(*h) : absl::StatusOr<std::span<std::byte>>(h.status());
    ++o.blocks;
    if (!view.ok() || !Live::Holds(view->data(), view->size(), e.seed)) ++o.changed;
  }
}

// Share: all or nothing. After a failure nothing usable reached the other end (it gets an error
// or nothing), and a share on a new socket works.
TEST(FaultSweep, Share) {
  ShmDir dir;
  Sweep(
      "share (files)",
      [&] {
        Outcome o;
        std::unique_ptr<Pool> pool;
        Live live;
        SocketPair s;
        {
          FaultPlan::Pause pause;
          pool = Pool::Create(Options(BackingKind::kFiles, dir.path)).value();
          EXPECT_TRUE(pool->Reserve(3 * kChunk).ok());
          live = Fill(*pool, 6, kChunk / 2);
        }
        o.status = pool->Share(s.a.get());
        FaultPlan::Pause pause;
        if (!o.status.ok()) {
          // What a receiver gets now: an error, never a partial pool. Then the recovery.
          s.a.reset();
          absl::StatusOr<std::unique_ptr<Attachment>> partial = Attachment::Receive(s.b.get());
          EXPECT_FALSE(partial.ok()) << "a failed share was received as a whole pool";
          s = SocketPair();
          EXPECT_TRUE(pool->Share(s.a.get()).ok());
        }
        absl::StatusOr<std::unique_ptr<Attachment>> att = Attachment::Receive(s.b.get());
        EXPECT_TRUE(att.ok()) << att.status();
        if (att.ok()) CheckThrough(**att, *pool, live, o);
        live.Check(o);
        FreeAll(*pool, live);
        return o;
      },
      {Code::kResourceExhausted, Code::kUnavailable, Code::kInternal}, dir.path);
}

TEST(FaultSweep, Attach) {
  Sweep("attach (memfd)",
        [] {
          Outcome o;
          std::unique_ptr<Pool> pool;
          Live live;
          SocketPair s;
          {
            FaultPlan::Pause pause;
            pool = Pool::Create(Options(BackingKind::kMemfd)).value();
            EXPECT_TRUE(pool->Reserve(3 * kChunk).ok());
            live = Fill(*pool, 6, kChunk / 2);
            EXPECT_TRUE(pool->Share(s.a.get()).ok());
          }
          absl::StatusOr<std::unique_ptr<Attachment>> att = Attachment::Receive(s.b.get());
          o.status = att.status();
          FaultPlan::Pause pause;
          if (!att.ok()) {  // the recovery: the owner shares again
            s = SocketPair();
            EXPECT_TRUE(pool->Share(s.a.get()).ok());
            att = Attachment::Receive(s.b.get());
            EXPECT_TRUE(att.ok()) << att.status();
          }
          if (att.ok()) CheckThrough(**att, *pool, live, o);
          live.Check(o);
          FreeAll(*pool, live);
          return o;
        },
        // share.h: Receive's errors.
        {Code::kInvalidArgument, Code::kUnavailable, Code::kResourceExhausted});
}

// Update after the owner trimmed a chunk and grew another at its index: whatever it returns,
// every handle maps its own chunk's bytes or nothing; a later Update recovers.
TEST(FaultSweep, Update) {
  Sweep("update (memfd)",
        [] {
          Outcome o;
          std::unique_ptr<Pool> pool;
          std::unique_ptr<Attachment> att;
          Live live;
          SocketPair s;
          {
            FaultPlan::Pause pause;
            pool = Pool::Create(Options(BackingKind::kMemfd)).value();
            EXPECT_TRUE(pool->Reserve(3 * kChunk).ok());
            EXPECT_TRUE(pool->Share(s.a.get()).ok());
            att = Attachment::Receive(s.b.get()).value();
            pool->Trim(0);
            live = Fill(*pool, 6, kChunk / 2);  // chunks 0-2 again, new generations
            EXPECT_TRUE(pool->Share(s.a.get()).ok());
          }
          o.status = att->Update(s.b.get());
          FaultPlan::Pause pause;
          for (const Live::Entry& e : live.entries) {
            const BlockHandle h = pool->HandleOf(Block(e.data, e.size, nullptr)).value();
            absl::StatusOr<std::span<std::byte>> view = att->Map(h);
            if (view.ok() && !Live::Holds(view->data(), view->size(), e.seed)) ++o.changed;
            if (o.status.ok() && !view.ok()) ++o.changed;
          }
          if (!o.status.ok()) {  // the recovery: the next share and update
            EXPECT_TRUE(pool->Share(s.a.get()).ok());
            const absl::Status again = att->Update(s.b.get());
            if (!again.ok()) {  // a message left half read on the socket: a new one
              s = SocketPair();
              EXPECT_TRUE(pool->Share(s.a.get()).ok());
              att = Attachment::Receive(s.b.get()).value();
            }
            CheckThrough(*att, *pool, live, o);
          }
          live.Check(o);
          FreeAll(*pool, live);
          return o;
        },
        {Code::kInvalidArgument, Code::kUnavailable, Code::kResourceExhausted});
}

// --- warm restart -------------------------------------------------------------------------------

// Quiesce and HandOver: a failed handover leaves the pool able to hand over again; every live
// block reaches the successor intact.
TEST(FaultSweep, QuiesceAndHandOver) {
  ShmDir dir;
  Sweep(
      "quiesce and hand over (files)",
      [&] {
        Outcome o;
        std::optional<SocketPair> s(std::in_place);
        std::vector<BlockHandle> handles;
        Live live;
        {
          std::unique_ptr<Pool> a;
          {
            FaultPlan::Pause pause;
            a = Pool::Create(Options(BackingKind::kFiles, dir.path)).value();
            EXPECT_TRUE(a->Reserve(3 * kChunk).ok());
            live = Fill(*a, 6, kChunk / 2);
            for (const Live::Entry& e : live.entries) {
              handles.push_back(a->HandleOf(Block(e.data, e.size, nullptr)).value());
            }
          }
          o.status = a->Quiesce();
          if (o.status.ok()) o.status = a->HandOver(s->a.get(), handles);
          FaultPlan::Pause pause;
          if (!o.status.ok()) {  // the recovery: hand over again, on a new socket
            s.emplace();
            EXPECT_TRUE(a->Quiesce().ok());
            EXPECT_TRUE(a->HandOver(s->a.get(), handles).ok());
          }
        }
        FaultPlan::Pause pause;
        PoolOptions o2 = Options(BackingKind::kFiles, dir.path);
        o2.initial_size = 0;
        absl::StatusOr<std::unique_ptr<Pool>> b = Pool::Adopt(o2, s->b.get());
        EXPECT_TRUE(b.ok()) << b.status();
        if (!b.ok()) return o;
        for (std::size_t i = 0; i < handles.size(); ++i) {
          absl::StatusOr<Block> c = (*b)->Claim(handles[i]);
          ++o.blocks;
          if (!c.ok() || !Live::Holds(c->data(), c->size(), live.entries[i].seed)) {
            ++o.changed;
          } else {
            (*b)->Deallocate(*c);
          }
        }
        return o;
      },
      // pool.h: HandOver's errors.
      {Code::kUnavailable, Code::kResourceExhausted, Code::kInternal}, dir.path);
}

// Adopt and Claim on the successor's side. The predecessor keeps its pool until the successor's
// Adopt returned OK (the application's protocol tells it): when Adopt fails it hands the pool over
// again. Once adopted, a chunk whose adoption failed is kept and built again (the start-up's
// retries, then Claim's): no block is lost to a passing failure.
TEST(FaultSweep, AdoptAndClaim) {
  Sweep("adopt and claim (memfd)",
        [] {
          Outcome o;
          std::optional<SocketPair> s(std::in_place);
          std::unique_ptr<Pool> a;
          std::vector<BlockHandle> handles;
          std::vector<unsigned> seeds;
          {
            FaultPlan::Pause pause;
            a = Pool::Create(Options(BackingKind::kMemfd)).value();
            EXPECT_TRUE(a->Reserve(3 * kChunk).ok());
            Live live = Fill(*a, 6, kChunk / 2);
            for (const Live::Entry& e : live.entries) {
              handles.push_back(a->HandleOf(Block(e.data, e.size, nullptr)).value());
              seeds.push_back(e.seed);
            }
            EXPECT_TRUE(a->Quiesce().ok());
            EXPECT_TRUE(a->HandOver(s->a.get(), handles).ok());
          }
          PoolOptions options = Options(BackingKind::kMemfd);
          options.initial_size = 0;
          absl::StatusOr<std::unique_ptr<Pool>> b = Pool::Adopt(options, s->b.get());
          o.status = b.status();
          if (b.ok()) o.status = (*b)->AwaitInitialSize(std::chrono::seconds(60));
          std::vector<absl::StatusOr<Block>> claimed;
          if (b.ok()) {
            for (const BlockHandle& h : handles) claimed.push_back((*b)->Claim(h));
          }
          FaultPlan::Pause pause;
          if (!b.ok()) {  // the recovery: the predecessor hands the pool over again
            s.emplace();
            EXPECT_TRUE(a->HandOver(s->a.get(), handles).ok());
            b = Pool::Adopt(options, s->b.get());
            EXPECT_TRUE(b.ok()) << b.status();
            if (!b.ok()) return o;
            for (const BlockHandle& h : handles) claimed.push_back((*b)->Claim(h));
          }
          a.reset();  // adopted: the predecessor goes
          for (std::size_t i = 0; i < claimed.size(); ++i) {
            ++o.blocks;
            if (!claimed[i].ok()) {
              ADD_FAILURE() << "Claim: " << claimed[i].status();
              ++o.changed;
              continue;
            }
            if (!Live::Holds(claimed[i]->data(), claimed[i]->size(), seeds[i])) ++o.changed;
            (*b)->Deallocate(*claimed[i]);
          }
          return o;
        },
        // pool.h: Adopt's errors; AwaitInitialSize returns the start-up's failure.
        {Code::kResourceExhausted, Code::kInvalidArgument, Code::kFailedPrecondition,
         Code::kUnavailable, Code::kPermissionDenied, Code::kInternal});
}

// --- giving a chunk back ------------------------------------------------------------------------

TEST(FaultSweep, GiveBack) {
  ShmDir dir;
  Sweep(
      "give back (files)",
      [&] {
        Outcome o;
        std::unique_ptr<Pool> pool;
        Live keep;
        Block lost;
        {
          FaultPlan::Pause pause;
          pool = Pool::Create(Options(BackingKind::kFiles, dir.path)).value();
          keep = Fill(*pool, 2, kChunk / 2);      // chunk 0
          lost = pool->Allocate(kChunk * 3 / 4);  // chunk 1
          EXPECT_TRUE(lost);
        }
        o.status = pool->GiveBack(lost.data());
        FaultPlan::Pause pause;
        if (!o.status.ok()) o.status = pool->GiveBack(lost.data());  // the documented retry
        EXPECT_TRUE(o.status.ok()) << o.status;
        EXPECT_EQ(pool->TakeLostChunks().size(), o.status.ok() ? 1u : 0u);
        pool->Deallocate(lost);  // a lost block's free: accepted
        keep.Check(o);
        FreeAll(*pool, keep);
        return o;
      },
      // pool.h: GiveBack's errors.
      {Code::kDeadlineExceeded, Code::kFailedPrecondition}, dir.path);
}

// --- arrays and classes -------------------------------------------------------------------------

TEST(FaultSweep, ArrayAllocation) {
  Sweep("array allocation",
        [] {
          Outcome o;
          std::unique_ptr<Pool> pool;
          Live keep;
          {
            FaultPlan::Pause pause;
            pool = Pool::Create(Options()).value();
            keep = Fill(*pool, 2, 64 * kKiB);
          }
          absl::StatusOr<Array> a = pool->AllocateArray(3 * 512, 4096, 4096);  // 3 chunks
          o.status = a.status();
          FaultPlan::Pause pause;
          if (a.ok()) {
            for (std::size_t i = 0; i < a->size(); i += 97)
              std::memset(a->Element(i).data(), 1, 4096);
            pool->Deallocate(std::move(*a));
          } else if (pool->GetStats().arrays != 0) {
            o.status = absl::InternalError("a failed AllocateArray left an array counted");
          }
          keep.Check(o);
          FreeAll(*pool, keep);
          return o;
        },
        // pool.h: AllocateArray's errors.
        {Code::kResourceExhausted, Code::kFailedPrecondition, Code::kInternal});
}

TEST(FaultSweep, ClassAllocation) {
  Sweep("class allocation",
        [] {
          Outcome o;
          std::unique_ptr<Pool> pool;
          ClassId rpc;
          Live keep;
          {
            FaultPlan::Pause pause;
            PoolOptions opts = Options();
            opts.classes = {
                {.name = "rpc", .reserved = kChunk, .cap = 4 * kChunk, .scrub = Scrub::kOnReuse}};
            pool = Pool::Create(opts).value();
            rpc = pool->ClassOf("rpc").value();
            keep = Fill(*pool, 2, 64 * kKiB);
          }
          std::vector<Block> got;
          for (int i = 0; i < 6; ++i) {  // three chunks of the class
            Block b = pool->Allocate(rpc, kChunk / 2);
            if (!b) {
              o.status = pool->class_error(rpc);
              break;
            }
            got.push_back(b);
          }
          FaultPlan::Pause pause;
          for (const Block& b : got) pool->Deallocate(b);
          keep.Check(o);
          FreeAll(*pool, keep);
          return o;
        },
        {Code::kResourceExhausted, Code::kFailedPrecondition, Code::kInternal});
}

// --- metrics ------------------------------------------------------------------------------------

std::string Scrape(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, n);
  }
  ::close(fd);
  return out;
}

// ServeMetrics while another socket serves: a failed call leaves the first serving.
TEST(FaultSweep, MetricsServing) {
  const std::string first = ::testing::TempDir() + "pinpool-sweep-1-" + std::to_string(getpid());
  const std::string second = ::testing::TempDir() + "pinpool-sweep-2-" + std::to_string(getpid());
  Sweep("metrics serving",
        [&] {
          Outcome o;
          std::unique_ptr<Pool> pool;
          {
            FaultPlan::Pause pause;
            pool = Pool::Create(Options()).value();
            EXPECT_TRUE(pool->ServeMetrics(first).ok());
          }
          o.status = pool->ServeMetrics(second);
          FaultPlan::Pause pause;
          const std::string serving = o.status.ok() ? second : first;
          if (Scrape(serving).find("# EOF") == std::string::npos) {
            o.status = absl::InternalError("nothing serves at " + serving);
          }
          return o;
        },
        // pool.h: ServeMetrics's errors.
        {Code::kInvalidArgument, Code::kAlreadyExists, Code::kPermissionDenied, Code::kInternal,
         Code::kResourceExhausted});
}

}  // namespace
}  // namespace pinpool
