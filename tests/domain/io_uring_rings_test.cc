// One pool, many rings (pinpool/io_uring.h): an IoUringDomain serving rings that join and leave,
// on the real kernel. Where the kernel clones (Linux 6.13+: the host) the rings share one
// registration: VmPin and the memlock charge stay those of one ring; where it cannot (Linux 6.1:
// the soft-RoCE guest runs this same program, rdma.io_uring_rings_in_guest) each ring registers
// every chunk, and the domain says so in its figures. IoUringDomainOptions::clone = false takes
// that fallback on any kernel, so the host checks both. Every ring reads and writes blocks of
// every chunk byte-exact with READ_FIXED / WRITE_FIXED through a file on a real filesystem.
// Then the misuse: tables missing or taken, a ring of another process's accounting, a ring closed
// under the pool, a clone the kernel refuses (fault injection); each a clear error, nothing left
// pinned.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <liburing.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "os/os.h"
#include "pinpool/io_uring.h"
#include "pinpool/pool.h"
#include "support/fixed_io.h"
#include "support/huge_pages.h"
#include "support/proc_status.h"
#include "support/unprivileged.h"
#include "support/wait_until.h"

namespace pinpool {
namespace {

using ::testing::AllOf;
using testing::FixedIo;
using ::testing::HasSubstr;
using testing::ProcStatusBytes;
using testing::ScratchFile;
using testing::WaitUntil;
using F = IoUringDomainFigures;

// The pool the 8-ring tests build: 1 GiB by default (PINPOOL_RINGS_POOL_MIB overrides it, for a
// slow machine), in chunks of a quarter of it.
std::size_t PoolBytes() {
  const char* env = std::getenv("PINPOOL_RINGS_POOL_MIB");
  return (env != nullptr ? std::strtoull(env, nullptr, 10) : 1024) * kMiB;
}

// An application's ring, closed at scope exit unless closed by the test.
struct Ring {
  io_uring ring{};
  bool open = false;
  explicit Ring(unsigned flags = 0) {
    io_uring_params p{};
    p.flags = flags;
    open = io_uring_queue_init_params(8, &ring, &p) == 0;
    EXPECT_TRUE(open);
  }
  ~Ring() { Close(); }
  void Close() {
    if (open) io_uring_queue_exit(&ring);
    open = false;
  }
  io_uring* get() { return &ring; }
};

std::uint64_t Figure(const Domain& d, std::string_view name) {
  const std::optional<std::uint64_t> v = FigureValue(d.figures(), name);
  EXPECT_TRUE(v.has_value()) << name;
  return v.value_or(~std::uint64_t{0});
}

// VmPin, once it has stopped moving. From Linux 6.13 (the kernels that clone ranges) an emptied
// slot's pin is dropped at once; Linux 6.1 drops it from a delayed worker, about a second later.
long long SettledVmPin() {
  if (IoUringDomain::KernelCanClone().ranges) return ProcStatusBytes("VmPin");
  long long last = -1;
  int same = 0;
  WaitUntil(
      [&] {
        const long long now = ProcStatusBytes("VmPin");
        same = now == last ? same + 1 : 0;
        last = now;
        return same == 3;
      },
      std::chrono::milliseconds(10000), std::chrono::milliseconds(500));
  return last;
}

void Fill(const Block& b, unsigned seed) {
  std::mt19937 rng(seed);
  auto* p = static_cast<unsigned char*>(b.data());
  for (std::size_t i = 0; i < b.size(); ++i) p[i] = static_cast<unsigned char>(rng());
}

// On ring `ring`: each block in `out` is written to the file with WRITE_FIXED and read back into
// `in` with READ_FIXED; both must match what the CPU wrote.
void ExpectByteExactOn(io_uring* ring, int fd, const std::vector<Block>& out,
                       const std::vector<Block>& in, unsigned seed) {
  off_t offset = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    Fill(out[i], seed + static_cast<unsigned>(i));
    ASSERT_EQ(FixedIo(ring, true, fd, out[i], 0, offset), static_cast<int>(out[i].size()))
        << "WRITE_FIXED of block " << i << " (chunk " << out[i].chunk().index << ")";
    std::memset(in[i].data(), 0, in[i].size());
    ASSERT_EQ(FixedIo(ring, false, fd, in[i], 0, offset), static_cast<int>(in[i].size()))
        << "READ_FIXED into block " << i << " (chunk " << in[i].chunk().index << ")";
    ASSERT_EQ(std::memcmp(in[i].data(), out[i].data(), out[i].size()), 0) << "block " << i;
    offset += static_cast<off_t>(out[i].size());
  }
}

// Two blocks in every chunk of the pool: allocated until each chunk holds one of each list.
struct BlocksInEveryChunk {
  std::vector<Block> out, in;
  BlocksInEveryChunk(Pool& pool, std::size_t chunk_size, std::size_t chunks) {
    std::vector<Block> filler;
    std::vector<bool> seen(chunks * 4, false);
    const std::size_t size = 256 * kKiB;
    for (std::size_t n = 0; n < chunks * chunk_size / size && out.size() < chunks; ++n) {
      Block a = pool.Allocate(size);
      Block b = pool.Allocate(size);
      if (!a || !b) break;
      if (a.chunk().index == b.chunk().index && !seen[a.chunk().index]) {
        seen[a.chunk().index] = true;
        out.push_back(a);
        in.push_back(b);
      } else {
        filler.push_back(a);
        filler.push_back(b);
      }
    }
    for (const Block& f : filler) pool.Deallocate(f);
    EXPECT_EQ(out.size(), chunks) << "not every chunk got a pair of blocks";
  }
  void Free(Pool& pool) {
    for (const Block& b : out) pool.Deallocate(b);
    for (const Block& b : in) pool.Deallocate(b);
  }
};

struct EightRingsCase {
  const char* name;
  PageSize page_size;
  bool clone;  // IoUringDomainOptions::clone
};

class EightRingsTest : public ::testing::TestWithParam<EightRingsCase> {};

// What a server with a ring per thread needs: 8 rings over one pool of 1 GiB. With cloning, VmPin
// and the memlock charge are those of one ring and a ring joins in well under a millisecond per
// GiB; without (the kernel cannot, or clone = false), each ring charges the pool again, and the
// domain says so.
TEST_P(EightRingsTest, ShareTheRegistrationAndReadAndWriteEveryChunkOnEveryRing) {
  const EightRingsCase& c = GetParam();
  const std::size_t bytes = PoolBytes();
  const std::size_t chunk = bytes / 4;
  std::unique_ptr<testing::HugePageGrant> grant;
  if (c.page_size == PageSize::k2M) {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to reserve hugetlb pages (vm.nr_hugepages)";
    grant = std::make_unique<testing::HugePageGrant>(2 * kMiB, bytes / (2 * kMiB));
    ASSERT_TRUE(grant->ok()) << grant->why_not();
  }
  ScratchFile file("pinpool_io_uring_rings_test");
  ASSERT_GE(file.fd(), 0) << "no non-tmpfs directory to write a scratch file in";
  const bool clones = c.clone && IoUringDomain::KernelCanClone().ranges;
  std::fprintf(stderr, "%s: kernel clones ranges: %s; this case %s\n", c.name,
               IoUringDomain::KernelCanClone().ranges ? "yes" : "no",
               clones ? "clones" : "registers per ring (the fallback)");

  const long long baseline = SettledVmPin();
  IoUringDomainOptions o;
  o.clone = c.clone;
  std::shared_ptr<IoUringDomain> domain = IoUringDomain::Create(8, o).value();
  PoolOptions po;
  po.chunk_size = chunk;
  po.budget = bytes;
  po.initial_size = bytes;
  po.page_size = c.page_size;
  po.require_page_size = c.page_size != PageSize::kTransparent;
  po.domains = {domain};
  std::unique_ptr<Pool> pool = Pool::Create(std::move(po)).value();
  ASSERT_EQ(pool->GetStats().chunks.size(), 4u);
  const long long one_ring = SettledVmPin() - baseline;
  EXPECT_EQ(one_ring, static_cast<long long>(bytes)) << "one ring pins the pool once";
  EXPECT_EQ(Figure(*domain, F::kMemlockBytes), bytes);

  std::vector<std::unique_ptr<Ring>> rings;
  double slowest = 0;
  for (int i = 0; i < 7; ++i) {
    rings.push_back(std::make_unique<Ring>());
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(domain->AddRing(rings.back()->get()).ok());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    slowest = std::max(slowest, s);
  }
  const double per_gib = slowest / (static_cast<double>(bytes) / kGiB);
  std::fprintf(stderr, "%s: slowest AddRing %.3f ms (%.3f ms per GiB of pool)\n", c.name,
               slowest * 1e3, per_gib * 1e3);
  ASSERT_EQ(domain->rings(), 8u);
  const long long eight_rings = SettledVmPin() - baseline;
  if (clones) {
    EXPECT_EQ(domain->sharing(), IoUringSharing::kClone);
    EXPECT_EQ(Figure(*domain, F::kCloning), 1u);
    EXPECT_EQ(eight_rings, one_ring) << "VmPin of 8 rings is that of one";
    EXPECT_EQ(Figure(*domain, F::kMemlockBytes), bytes);
    EXPECT_EQ(Figure(*domain, F::kRingRegistrations), 0u);
    // A generous bound (the benchmark measures it on a quiet machine): a clone copies table
    // entries, it touches no page.
    EXPECT_LT(per_gib, 0.05) << "a ring joins by cloning, without pinning anything";
  } else {
    EXPECT_EQ(domain->sharing(), IoUringSharing::kPerRing);
    EXPECT_EQ(Figure(*domain, F::kCloning), 0u) << "the fallback is reported";
    EXPECT_EQ(eight_rings, 8 * one_ring) << "each ring charges the pool again";
    EXPECT_EQ(Figure(*domain, F::kMemlockBytes), 8 * bytes);
    EXPECT_EQ(Figure(*domain, F::kRingRegistrations), 7u * 4u);
  }
  EXPECT_EQ(Figure(*domain, F::kRings), 8u);

  BlocksInEveryChunk blocks(*pool, chunk, 4);
  ExpectByteExactOn(domain->ring(), file.fd(), blocks.out, blocks.in, 1);
  for (std::size_t r = 0; r < rings.size(); ++r) {
    SCOPED_TRACE("ring " + std::to_string(r + 1));
    ExpectByteExactOn(rings[r]->get(), file.fd(), blocks.out, blocks.in,
                      100 * static_cast<unsigned>(r + 2));
  }
  blocks.Free(*pool);

  for (auto& r : rings) ASSERT_TRUE(domain->RemoveRing(r->get()).ok());
  EXPECT_EQ(SettledVmPin() - baseline, one_ring) << "the rings that left hold nothing";
  pool.reset();
  rings.clear();
  domain.reset();
  EXPECT_EQ(ProcStatusBytes("VmPin"), baseline)
      << "destroying the pool and the domain waits for every ring's pins to drop";
}

INSTANTIATE_TEST_SUITE_P(Pools, EightRingsTest,
                         ::testing::Values(EightRingsCase{"4K", PageSize::k4K, true},
                                           EightRingsCase{"2M", PageSize::k2M, true},
                                           EightRingsCase{"4K_per_ring", PageSize::k4K, false},
                                           EightRingsCase{"2M_per_ring", PageSize::k2M, false}),
                         [](const ::testing::TestParamInfo<EightRingsCase>& i) {
                           return std::string(i.param.name);
                         });

PoolOptions SmallPool(std::shared_ptr<Domain> domain) {
  PoolOptions o;
  o.chunk_size = 4 * kMiB;
  o.budget = 64 * kMiB;
  o.page_size = PageSize::kTransparent;
  o.domains = {std::move(domain)};
  return o;
}

class RingsTest : public ::testing::TestWithParam<bool> {
 protected:
  IoUringDomainOptions Options() const {
    IoUringDomainOptions o;
    o.clone = GetParam();
    return o;
  }
  // A domain of these options that rings `a` and `b` have joined.
  std::shared_ptr<IoUringDomain> JoinedBy(Ring& a, Ring& b) const {
    auto domain = IoUringDomain::Create(8, Options()).value();
    EXPECT_TRUE(domain->AddRing(a.get()).ok());
    EXPECT_TRUE(domain->AddRing(b.get()).ok());
    return domain;
  }
};

TEST_P(RingsTest, RingsThatJoinedBeforeGrowthSeeEveryLaterChunk) {
  ScratchFile file("pinpool_io_uring_rings_test");
  ASSERT_GE(file.fd(), 0);
  Ring a, b;
  auto domain = JoinedBy(a, b);
  auto pool = Pool::Create(SmallPool(domain)).value();
  ASSERT_TRUE(pool->Reserve(16 * kMiB).ok());  // four chunks, registered after the rings joined
  BlocksInEveryChunk blocks(*pool, 4 * kMiB, 4);
  ExpectByteExactOn(a.get(), file.fd(), blocks.out, blocks.in, 7);
  ExpectByteExactOn(b.get(), file.fd(), blocks.out, blocks.in, 8);
  // And a ring that joins now, after the growth, sees them all too.
  Ring late;
  ASSERT_TRUE(domain->AddRing(late.get()).ok());
  ExpectByteExactOn(late.get(), file.fd(), blocks.out, blocks.in, 9);
  blocks.Free(*pool);
}

// Trim empties a chunk's slot in every ring: READ_FIXED into the old slot fails with EFAULT on
// each (nothing reaches the chunk's pages any more), while the chunks kept still work.
TEST_P(RingsTest, TrimReachesEveryRing) {
  ScratchFile file("pinpool_io_uring_rings_test");
  ASSERT_GE(file.fd(), 0);
  Ring a, b;
  auto domain = JoinedBy(a, b);
  auto pool = Pool::Create(SmallPool(domain)).value();
  Block keep = pool->Allocate(3 * kMiB);
  Block gone = pool->Allocate(3 * kMiB);
  ASSERT_TRUE(keep && gone);
  ASSERT_NE(keep.chunk().index, gone.chunk().index);
  const Block stale = gone;  // its keys, for the I/O after the trim
  pool->Deallocate(gone);
  pool->Trim(0);
  ASSERT_EQ(pool->GetStats().chunks.size(), 1u);
  EXPECT_EQ(domain->slots_in_use(), 1u);
  for (io_uring* r : {domain->ring(), a.get(), b.get()}) {
    EXPECT_EQ(FixedIo(r, false, file.fd(), Block(keep.data(), 4096, &keep.chunk()), 0, 0), 0)
        << "the kept chunk still reads (an empty file: 0 bytes)";
    EXPECT_EQ(FixedIo(r, true, file.fd(), Block(stale.data(), 4096, &stale.chunk()), 0, 0), -EFAULT)
        << "the trimmed chunk's slot is empty in every ring";
  }
  pool->Deallocate(keep);
}

// Rings join and leave while another thread allocates, frees and grows the pool; whatever ring
// has joined reads and writes what is live, byte-exact.
TEST_P(RingsTest, RingsJoinAndLeaveWhileThePoolServes) {
  ScratchFile file("pinpool_io_uring_rings_test");
  ASSERT_GE(file.fd(), 0);
  auto domain = IoUringDomain::Create(8, Options()).value();
  PoolOptions o = SmallPool(domain);
  o.budget = 128 * kMiB;
  auto pool = Pool::Create(o).value();
  std::atomic<bool> stop{false};
  std::thread churn([&] {
    std::mt19937 rng(3);
    std::vector<Block> live;
    while (!stop.load()) {
      if (live.size() > 40 || (!live.empty() && rng() % 2 == 0)) {
        pool->Deallocate(live.back());
        live.pop_back();
      } else if (Block b = pool->Allocate(std::size_t{64} << (rng() % 15))) {
        live.push_back(b);
      }
      if (rng() % 256 == 0) (void)pool->Reserve(pool->GetStats().mapped_bytes + 4 * kMiB);
    }
    for (const Block& b : live) pool->Deallocate(b);
  });
  for (int round = 0; round < 20; ++round) {
    Ring r;
    ASSERT_TRUE(domain->AddRing(r.get()).ok()) << "round " << round;
    Block out = pool->Allocate(128 * kKiB);
    Block in = pool->Allocate(128 * kKiB);
    ASSERT_TRUE(out && in);
    ExpectByteExactOn(r.get(), file.fd(), {out}, {in}, 50 + static_cast<unsigned>(round));
    pool->Deallocate(out);
    pool->Deallocate(in);
    ASSERT_TRUE(domain->RemoveRing(r.get()).ok()) << "round " << round;
  }
  stop = true;
  churn.join();
  EXPECT_EQ(domain->rings(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Sharing, RingsTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return std::string(i.param ? "Clone" : "PerRing");
                         });

TEST(RingsMisuseTest, MembershipErrorsAreClear) {
  auto domain = IoUringDomain::Create(8).value();
  Ring a;
  EXPECT_EQ(domain->AddRing(nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(domain->AddRing(domain->ring()).code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(domain->AddRing(a.get()).ok());
  EXPECT_EQ(domain->AddRing(a.get()).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(domain->Serves(a.get()));
  EXPECT_EQ(domain->RemoveRing(domain->ring()).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(domain->RemoveRing(a.get()).ok());
  EXPECT_FALSE(domain->Serves(a.get()));
  EXPECT_EQ(domain->RemoveRing(a.get()).code(), absl::StatusCode::kNotFound);
  // A single-issuer ring refuses registrations from other threads: refused when it joins.
  Ring single(IORING_SETUP_SINGLE_ISSUER);
  const absl::Status s = domain->AddRing(single.get());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("IORING_SETUP_SINGLE_ISSUER"));
}

// A ring without the table the options promise, or with one when pinpool is to register it: a
// clear error, the ring left as it was, nothing pinned.
TEST_P(RingsTest, ATableMissingOrTakenIsRefusedAndNothingIsPinned) {
  auto domain = IoUringDomain::Create(8, Options()).value();
  auto pool = Pool::Create(SmallPool(domain)).value();
  ASSERT_TRUE(pool->Reserve(8 * kMiB).ok());
  const long long pinned = SettledVmPin();
  IoUringRingOptions theirs;
  theirs.register_table = false;

  Ring bare;  // no table at all
  absl::Status s = domain->AddRing(bare.get(), theirs);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("has no fixed-buffer table"));
  EXPECT_EQ(io_uring_register_buffers_sparse(bare.get(), 4), 0) << "the ring was left without one";

  Ring small;  // a sparse table, too small for the domain's slots
  ASSERT_EQ(io_uring_register_buffers_sparse(small.get(), 16), 0);
  s = domain->AddRing(small.get(), theirs);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("fewer than the 1024 slots"));

  Ring taken;  // a table, and pinpool was to register one
  ASSERT_EQ(io_uring_register_buffers_sparse(taken.get(), 2048), 0);
  s = domain->AddRing(taken.get());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("register_table = false"));
  EXPECT_EQ(domain->rings(), 1u);
  EXPECT_EQ(SettledVmPin(), pinned);

  // That last ring's own table is fine when said so.
  s = domain->AddRing(taken.get(), theirs);
  if (GetParam() && !IoUringDomain::KernelCanClone().keeps_later_entries &&
      IoUringDomain::KernelCanClone().ranges) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  } else {
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_TRUE(domain->RemoveRing(taken.get()).ok());
  }
}

// A ring inherited across fork is charged to the parent: the child's pool must not register in
// it. Cloning, the kernel refuses (EINVAL); registering per ring, the domain finds out first.
TEST_P(RingsTest, ARingOfAnotherProcessIsRefusedAndNothingIsCharged) {
  Ring parents;
  const long long parent_pinned = SettledVmPin();
  const IoUringDomainOptions options = Options();
  std::fflush(nullptr);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto domain = IoUringDomain::Create(8, options).value();
    auto pool = Pool::Create(SmallPool(domain)).value();
    if (!pool->Reserve(8 * kMiB).ok()) _exit(2);
    const long long pinned = ProcStatusBytes("VmPin");
    const absl::Status s = domain->AddRing(parents.get());
    std::fprintf(stderr, "child: %s\n", s.ToString().c_str());
    if (s.code() != absl::StatusCode::kFailedPrecondition) _exit(3);
    if (std::string(s.message()).find("another process") == std::string::npos) _exit(4);
    if (domain->rings() != 1) _exit(5);
    if (ProcStatusBytes("VmPin") != pinned) _exit(6);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child's check that failed (see its stderr)";
  EXPECT_EQ(SettledVmPin(), parent_pinned) << "nothing was charged to the ring's owner";
  // The parent's ring is unchanged: it has no table.
  EXPECT_EQ(io_uring_register_buffers_sparse(parents.get(), 4), 0);
}

// The application closes a ring the domain serves: growth goes on, the ring is let go (its
// charge with it), and RemoveRing says what happened.
TEST_P(RingsTest, ARingClosedUnderThePoolIsLetGoAndSaidSo) {
  auto domain = IoUringDomain::Create(8, Options()).value();
  auto pool = Pool::Create(SmallPool(domain)).value();
  ASSERT_TRUE(pool->Reserve(8 * kMiB).ok());
  const long long one_ring = SettledVmPin();
  auto r = std::make_unique<Ring>();
  io_uring* key = r->get();
  ASSERT_TRUE(domain->AddRing(key).ok());
  r->Close();  // io_uring_queue_exit without RemoveRing
  ASSERT_TRUE(pool->Reserve(12 * kMiB).ok()) << "growth goes on";
  EXPECT_EQ(domain->rings(), 1u);
  EXPECT_EQ(Figure(*domain, F::kRingsClosed), 1u);
  const absl::Status s = domain->RemoveRing(key);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr("was closed while the domain served it"),
                                              HasSubstr("remove a ring before closing it")));
  EXPECT_EQ(domain->RemoveRing(key).code(), absl::StatusCode::kNotFound) << "told once";
  const long long pool_pins = one_ring + static_cast<long long>(4 * kMiB);
  EXPECT_TRUE(WaitUntil([&] { return ProcStatusBytes("VmPin") == pool_pins; },
                        std::chrono::milliseconds(10000)))
      << "nothing of the closed ring stays pinned: VmPin " << ProcStatusBytes("VmPin")
      << ", the pool's " << pool_pins;
}

int FailClones(internal::os::Call call, std::size_t) {
  return call == internal::os::Call::kCloneBuffers ? EIO : 0;
}
// Fails a chunk's registration (not the domain's few probe pages) in every ring but the first
// asked since `pins_seen` was reset: the domain's own ring registers, a ring that joined refuses.
std::atomic<int> pins_seen{0};
int FailPinsAfterTheFirst(internal::os::Call call, std::size_t length) {
  if (call != internal::os::Call::kPinBuffer || length < kMiB) return 0;
  return pins_seen.fetch_add(1) == 0 ? 0 : EIO;
}
int FailPins(internal::os::Call call, std::size_t length) {
  return call == internal::os::Call::kPinBuffer && length >= kMiB ? EIO : 0;
}

struct FaultHookScope {
  explicit FaultHookScope(internal::os::FaultHook h) { internal::os::SetFaultHook(h); }
  ~FaultHookScope() { internal::os::SetFaultHook(nullptr); }
};

// The kernel refusing to share a chunk with a ring (a clone, or with kPerRing the ring's own
// registration), when the ring joins and when the pool grows: a clear error, the ring left
// without the domain's table, the chunk registered nowhere.
TEST_P(RingsTest, ACloneOrRegistrationRefusedByTheKernelLeavesNothing) {
  const bool clones = GetParam() && IoUringDomain::KernelCanClone().ranges;
  auto domain = IoUringDomain::Create(8, Options()).value();
  auto pool = Pool::Create(SmallPool(domain)).value();
  ASSERT_TRUE(pool->Reserve(8 * kMiB).ok());
  const long long pinned = SettledVmPin();
  Ring r;
  {
    FaultHookScope hook(clones ? &FailClones : &FailPins);
    const absl::Status s = domain->AddRing(r.get());
    EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
    EXPECT_THAT(std::string(s.message()),
                HasSubstr(clones ? "refused to clone" : "registration of"));
  }
  EXPECT_EQ(domain->rings(), 1u);
  EXPECT_EQ(SettledVmPin(), pinned);
  EXPECT_EQ(io_uring_register_buffers_sparse(r.get(), 4), 0) << "the ring's table was removed";
  io_uring_unregister_buffers(r.get());

  ASSERT_TRUE(domain->AddRing(r.get()).ok());
  const std::uint32_t slots = domain->slots_in_use();
  const long long joined = SettledVmPin();
  {
    pins_seen = 0;
    FaultHookScope hook(clones ? &FailClones : &FailPinsAfterTheFirst);
    const absl::Status s = pool->Reserve(12 * kMiB);
    EXPECT_FALSE(s.ok());
    EXPECT_THAT(std::string(pool->last_growth_error().message()),
                HasSubstr(clones ? "refused to clone" : "registration of"));
  }
  EXPECT_EQ(domain->slots_in_use(), slots) << "the chunk holds no slot";
  EXPECT_EQ(SettledVmPin(), joined) << "nor any pin";
  ASSERT_TRUE(pool->Reserve(12 * kMiB).ok()) << "and the next growth works";
  EXPECT_TRUE(domain->RemoveRing(r.get()).ok());
}

// Per ring, a ring that joins pins the whole pool again: over RLIMIT_MEMLOCK that is the memlock
// error, with nothing pinned. Cloning, the same ring joins within the limit.
TEST_P(RingsTest, OverRlimitMemlockAJoiningRingFailsNamingItOrClonesWithinIt) {
  const bool clone = GetParam();
  static bool clone_case;
  clone_case = clone;
  testing::RunAsUnprivileged([] {
    IoUringDomainOptions o;
    o.clone = clone_case;
    auto domain = IoUringDomain::Create(8, o).value();
    PoolOptions po = SmallPool(domain);
    po.chunk_size = 2 * kMiB;
    auto pool = Pool::Create(po).value();
    ASSERT_TRUE(pool->Reserve(6 * kMiB).ok());  // 6 of the 8 MiB the user may pin
    const long long pinned = ProcStatusBytes("VmPin");
    Ring r;
    const absl::Status s = domain->AddRing(r.get());
    if (clone_case && IoUringDomain::KernelCanClone().ranges) {
      EXPECT_TRUE(s.ok()) << "a clone is not charged again: " << s;
    } else {
      EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
      EXPECT_THAT(std::string(s.message()),
                  AllOf(HasSubstr("RLIMIT_MEMLOCK is 8 MiB"), HasSubstr("each ring registers")));
      EXPECT_EQ(domain->rings(), 1u);
    }
    EXPECT_EQ(ProcStatusBytes("VmPin"), pinned);
    std::fprintf(stderr, "as the user sees it: %s\n", s.ToString().c_str());
  });
}

// The domain's figures reach PoolStats, its JSON and its OpenMetrics text.
TEST(RingsStatsTest, FiguresReachStatsJsonAndMetrics) {
  auto domain = IoUringDomain::Create(8).value();
  Ring a;
  ASSERT_TRUE(domain->AddRing(a.get()).ok());
  auto pool = Pool::Create(SmallPool(domain)).value();
  ASSERT_TRUE(pool->Reserve(4 * kMiB).ok());
  const PoolStats stats = pool->GetStats();
  ASSERT_EQ(stats.domains.size(), 1u);
  EXPECT_EQ(FigureValue(stats.domains[0].figures, F::kRings), 2u);
  EXPECT_EQ(FigureValue(stats.domains[0].figures, F::kMemlockBytes),
            IoUringDomain::KernelCanClone().ranges ? 4 * kMiB : 8 * kMiB);
  EXPECT_THAT(stats.ToJson(), HasSubstr("\"io_uring_rings\""));
  const std::string metrics = stats.ToOpenMetrics();
  EXPECT_THAT(metrics, AllOf(HasSubstr("pinpool_domain_io_uring_rings{"),
                             HasSubstr("pinpool_domain_io_uring_memlock_bytes{"),
                             HasSubstr("pinpool_domain_io_uring_clones_total{")));
  ASSERT_TRUE(domain->RemoveRing(a.get()).ok());
}

}  // namespace
}  // namespace pinpool
