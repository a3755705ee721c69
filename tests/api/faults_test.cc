// Faults injected through the two seams below the pool: the domain (a fake that fails the Nth
// registration) and the os room (os::SetFaultHook makes a chosen kernel call fail with a chosen
// errno, taking the same path a real failure would). After each fault:
//  - the error names what failed,
//  - the pool keeps serving from the chunks it has, with the right keys,
//  - the counts are exactly what they should be: live registrations per domain, chunk bytes the
//    os room says are mapped, what /proc/self/maps shows over the pool's range (rw chunks,
//    PROT_NONE reservation, no hole), long-term pinned bytes (VmPin) for the default domain and
//    locked bytes (VmLck) for the resident (mlock) domain,
//  - and the next growth, with the fault gone, succeeds.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "os/os.h"
#include "pinpool/pool.h"
#include "support/counting_domain.h"
#include "support/maps.h"
#include "support/proc_status.h"
#include "support/sanitizers.h"
#include "support/unprivileged.h"

namespace pinpool {
namespace {

using internal::os::Call;
using ::testing::AllOf;
using testing::CountingDomain;
using ::testing::HasSubstr;
using testing::MappingsIn;
using testing::ProcStatusBytes;

constexpr std::size_t kChunk = 4 * kMiB;

// One planned fault: calls of kind `call` fail with `err` after `skip` of them succeeded,
// `times` times (then succeed again).
struct Plan {
  std::atomic<int> call{-1};
  std::atomic<int> err{0};
  std::atomic<int> skip{0};
  std::atomic<int> times{0};
  std::atomic<int> injected{0};
};
Plan plan;

int Hook(Call call, std::size_t) {
  if (static_cast<int>(call) != plan.call.load()) return 0;
  if (plan.skip.load() > 0) {
    plan.skip.fetch_sub(1);
    return 0;
  }
  if (plan.times.load() <= 0) return 0;
  plan.times.fetch_sub(1);
  plan.injected.fetch_add(1);
  return plan.err.load();
}

// Installs a plan for the scope of a test.
class FaultTest : public ::testing::Test {
 protected:
  void SetUp() override { internal::os::SetFaultHook(&Hook); }
  void TearDown() override {
    internal::os::SetFaultHook(nullptr);
    plan.call = -1;
  }

 public:
  static void Fail(Call call, int err, int times = 1, int skip = 0) {
    plan.injected = 0;
    plan.err = err;
    plan.skip = skip;
    plan.times = times;
    plan.call = static_cast<int>(call);
  }
};

PoolOptions Options(std::vector<std::shared_ptr<Domain>> domains) {
  PoolOptions o;
  o.chunk_size = kChunk;
  o.budget = 16 * kChunk;
  o.page_size = PageSize::k4K;
  o.domains = std::move(domains);
  return o;
}

// What a pool with `chunks` chunks must look like, in every count there is.
void ExpectExactly(const Pool& pool, std::size_t chunks,
                   const std::vector<std::shared_ptr<CountingDomain>>& fakes,
                   std::int64_t chunk_bytes_before) {
  const PoolStats s = pool.GetStats();
  EXPECT_EQ(s.mapped_bytes, chunks * kChunk);
  EXPECT_EQ(s.chunks.size(), chunks);
  for (const auto& d : fakes) {
    EXPECT_EQ(d->live_registrations(), chunks) << d->name();
    EXPECT_EQ(d->bad_deregisters(), 0u) << d->name();
  }
  for (const auto& d : s.domains) {
    EXPECT_EQ(d.registered_bytes, chunks * kChunk) << d.name;
  }
  EXPECT_EQ(internal::os::counters().chunk_bytes.load() - chunk_bytes_before,
            static_cast<std::int64_t>(chunks * kChunk));
  const std::uintptr_t start =
      pool.GetStats().chunks.empty() ? 0 : pool.GetStats().chunks.front().base;
  if (start != 0) {
    const testing::RangeMappings m = MappingsIn(start, start + s.reserved_bytes);
    EXPECT_EQ(m.read_write, chunks * kChunk) << "chunks mapped rw in the pool's range";
    EXPECT_EQ(m.none, s.reserved_bytes - chunks * kChunk) << "the rest still reserved";
    EXPECT_EQ(m.holes, 0u) << "a failed mapping left a hole in the reservation";
    EXPECT_EQ(m.other, 0u);
  }
}

// The pool still serves from what it has: blocks inside their chunk, with the keys the fake
// domains registered for that chunk, contents intact. Returns how many blocks it got.
std::size_t ExpectServes(Pool& pool, const std::vector<std::shared_ptr<CountingDomain>>& fakes,
                         std::size_t bytes) {
  std::vector<Block> blocks;
  for (std::size_t got = 0; got < bytes; got += 64 * kKiB) {
    Block b = pool.Allocate(60 * kKiB);
    if (!b) break;
    const auto start = reinterpret_cast<std::uintptr_t>(b.data());
    EXPECT_GE(start, b.chunk().base);
    EXPECT_LE(start + b.size(), b.chunk().base + b.chunk().size);
    for (std::size_t d = 0; d < fakes.size(); ++d) {
      Keys k;
      EXPECT_TRUE(fakes[d]->KeysFor(b.chunk().base, &k));
      EXPECT_EQ(ToUnderlying(k.lkey), ToUnderlying(b.lkey(d)));
    }
    std::memset(b.data(), static_cast<int>(blocks.size() & 0xff), b.size());
    blocks.push_back(b);
  }
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const auto* p = static_cast<const unsigned char*>(blocks[i].data());
    EXPECT_EQ(p[0], i & 0xff);
    EXPECT_EQ(p[blocks[i].size() - 1], i & 0xff);
    pool.Deallocate(blocks[i]);
  }
  return blocks.size();
}

TEST_F(FaultTest, RegistrationFailingMidwayThroughGrowthUndoesTheChunkAndKeepsServing) {
  auto a = std::make_shared<CountingDomain>("a");
  auto b = std::make_shared<CountingDomain>("b");
  auto c = std::make_shared<CountingDomain>("c");
  const std::vector<std::shared_ptr<CountingDomain>> fakes = {a, b, c};
  const std::int64_t before = internal::os::counters().chunk_bytes.load();
  PoolOptions o = Options({a, b, c});
  o.initial_size = 2 * kChunk;
  o.reserve_threads = 1;  // one chunk at a time, so the failing one is the last one tried
  auto pool = Pool::Create(o).value();
  ExpectExactly(*pool, 2, fakes, before);

  c->FailRegistration(1);  // the third chunk: a and b register it, c refuses
  const absl::Status s = pool->Reserve(4 * kChunk);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr("domain 2 (c)"), HasSubstr("injected registration failure")));
  EXPECT_EQ(a->register_calls(), 3u);
  EXPECT_EQ(a->deregister_calls(), 1u);  // a's and b's registrations of chunk 3 were undone
  EXPECT_EQ(b->deregister_calls(), 1u);
  ExpectExactly(*pool, 2, fakes, before);
  EXPECT_EQ(pool->GetStats().growth_failures, 1u);

  // It serves from the two chunks it has (growth on demand is refused again meanwhile).
  c->FailRegistration(1);
  EXPECT_GE(ExpectServes(*pool, fakes, 2 * kChunk), 2 * 50u);
  ExpectExactly(*pool, 2, fakes, before);

  // With the fault gone, growth goes on.
  c->FailRegistration(0);
  ASSERT_TRUE(pool->Reserve(4 * kChunk).ok());
  ExpectExactly(*pool, 4, fakes, before);
  EXPECT_GT(ExpectServes(*pool, fakes, 4 * kChunk), 4 * 50u);
  pool.reset();
  for (const auto& d : fakes) EXPECT_EQ(d->live_registrations(), 0u);
  EXPECT_EQ(internal::os::counters().chunk_bytes.load(), before);
}

// A host domain registers chunk 2, then the fake after it refuses: the host domain's pin (or
// lock) of chunk 2 must be undone, so `counter` (VmPin, VmLck) counts one chunk, not two.
void ExpectAFailureAfterTheHostDomainLeavesNothing(std::shared_ptr<Domain> host,
                                                   const char* counter) {
  auto fake = std::make_shared<CountingDomain>("after-host");
  const std::int64_t before = internal::os::counters().chunk_bytes.load();
  const long long held = ProcStatusBytes(counter);
  PoolOptions o = Options({std::move(host), fake});
  o.initial_size = kChunk;
  auto pool = Pool::Create(o).value();
  EXPECT_EQ(ProcStatusBytes(counter) - held, static_cast<long long>(kChunk)) << counter;
  fake->FailRegistration(1);  // the host domain holds chunk 2 when this fails
  EXPECT_FALSE(pool->Reserve(2 * kChunk).ok());
  EXPECT_EQ(ProcStatusBytes(counter) - held, static_cast<long long>(kChunk))
      << counter << ": chunk 2 was not released";
  ExpectExactly(*pool, 1, {fake}, before);
  EXPECT_GT(ExpectServes(*pool, {}, kChunk), 40u);
  ASSERT_TRUE(pool->Reserve(2 * kChunk).ok());
  EXPECT_EQ(ProcStatusBytes(counter) - held, static_cast<long long>(2 * kChunk)) << counter;
  pool.reset();
  EXPECT_EQ(ProcStatusBytes(counter), held) << counter;
}

TEST_F(FaultTest, RegistrationFailingAfterTheLongTermPinDomainLeavesNothingPinned) {
  ExpectAFailureAfterTheHostDomainLeavesNothing(MakeLongTermPinDomain().value(), "VmPin");
}

TEST_F(FaultTest, RegistrationFailingAfterTheResidentDomainLeavesNothingLocked) {
  PINPOOL_SKIP_IF_MLOCK_IS_A_NOOP();
  ExpectAFailureAfterTheHostDomainLeavesNothing(MakeResidentNotPinnedDomain(), "VmLck");
}

TEST_F(FaultTest, HugePagesRunningOutFallBackOrFailAsThePolicySays) {
  auto fake = std::make_shared<CountingDomain>();
  const std::int64_t before = internal::os::counters().chunk_bytes.load();
  PoolOptions o = Options({fake});
  o.page_size = PageSize::k2M;
  o.initial_size = kChunk;
  // Fallback allowed: the first chunk gets hugetlb pages if this machine has them, the second
  // finds none left (injected ENOMEM, as mmap reports it) and falls back to smaller pages.
  auto pool = Pool::Create(o).value();
  Fail(Call::kMapHugetlb, ENOMEM, /*times=*/100);
  ASSERT_TRUE(pool->Reserve(2 * kChunk).ok()) << pool->last_growth_error();
  EXPECT_GE(plan.injected.load(), 1);
  const PoolStats s = pool->GetStats();
  EXPECT_NE(s.chunks[1].page_size, PageSize::k2M);
  EXPECT_NE(s.chunks[1].page_size, PageSize::k1G);
  ExpectExactly(*pool, 2, {fake}, before);
  EXPECT_GT(ExpectServes(*pool, {fake}, 2 * kChunk), 80u);
  pool.reset();

  // Required: the growth fails with kFailedPrecondition naming the sysctl, the pool keeps what it
  // has. (The first chunk may have to fall back too on a machine without hugetlb pages, so the
  // required pool starts with none and the fault hits Create itself.)
  o.require_page_size = true;
  Fail(Call::kMapHugetlb, ENOMEM, /*times=*/100);
  auto required = Pool::Create(o);
  ASSERT_FALSE(required.ok());
  EXPECT_EQ(required.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(required.status().message()),
              AllOf(HasSubstr("2 MiB huge pages"), HasSubstr("nr_hugepages")));
  EXPECT_EQ(fake->live_registrations(), 0u);
  EXPECT_EQ(internal::os::counters().chunk_bytes.load(), before);
}

TEST_F(FaultTest, RealHugePagesRunningOutFailGrowthAndThePoolKeepsServing) {
  // The kernel's own exhaustion: reserve exactly two 2 MiB pages, require them, and grow past.
  if (geteuid() != 0) GTEST_SKIP() << "needs root to reserve hugetlb pages";
  const char* path = "/proc/sys/vm/nr_hugepages";
  auto read = [&] {
    long long v = -1;
    if (FILE* f = std::fopen(path, "r")) {
      if (std::fscanf(f, "%lld", &v) != 1) v = -1;
      std::fclose(f);
    }
    return v;
  };
  auto write = [&](long long v) {
    if (FILE* f = std::fopen(path, "w")) {
      std::fprintf(f, "%lld\n", v);
      std::fclose(f);
    }
  };
  const long long saved = read();
  struct Restore {  // whatever the test's outcome
    std::function<void()> f;
    ~Restore() { f(); }
  } restore{[&] { write(saved); }};
  auto free_pages = [] {
    long long v = -1;
    if (FILE* f = std::fopen("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages", "r")) {
      if (std::fscanf(f, "%lld", &v) != 1) v = -1;
      std::fclose(f);
    }
    return v;
  };
  write(saved + 2);
  if (free_pages() < 2) {
    GTEST_SKIP() << "the kernel could not reserve two free 2 MiB huge pages";
  }
  write(saved + (2 - (free_pages() - 2)));  // exactly two free for this test
  auto fake = std::make_shared<CountingDomain>();
  const std::int64_t before = internal::os::counters().chunk_bytes.load();
  PoolOptions o = Options({fake});
  o.chunk_size = 2 * kMiB;
  o.page_size = PageSize::k2M;
  o.require_page_size = true;
  {
    auto pool = Pool::Create(o).value();
    ASSERT_TRUE(pool->Reserve(4 * kMiB).ok()) << pool->last_growth_error();
    const absl::Status s = pool->Reserve(6 * kMiB);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("nr_hugepages"));
    const PoolStats st = pool->GetStats();
    EXPECT_EQ(st.mapped_bytes, 4 * kMiB);
    EXPECT_EQ(fake->live_registrations(), 2u);
    EXPECT_EQ(internal::os::counters().chunk_bytes.load() - before, 4 * kMiB);
    const testing::RangeMappings m =
        MappingsIn(st.chunks.front().base, st.chunks.front().base + st.reserved_bytes);
    EXPECT_EQ(m.read_write, 4 * kMiB);
    EXPECT_EQ(m.holes, 0u);
    std::vector<Block> blocks;
    for (Block b; (b = pool->Allocate(kMiB));) blocks.push_back(b);
    EXPECT_GE(blocks.size(), 2u);
    for (Block& b : blocks) pool->Deallocate(b);
  }
  EXPECT_EQ(fake->live_registrations(), 0u);
}

TEST_F(FaultTest, MmapFailingDuringGrowthIsAnErrorAndLeavesTheReservationWhole) {
  auto fake = std::make_shared<CountingDomain>();
  const std::int64_t before = internal::os::counters().chunk_bytes.load();
  PoolOptions o = Options({fake});
  o.page_size = PageSize::kTransparent;
  o.initial_size = kChunk;
  auto pool = Pool::Create(o).value();
  ExpectExactly(*pool, 1, {fake}, before);
  const std::uint64_t registrations = fake->register_calls();

  // On the allocation path: an empty Block, the reason in last_growth_error().
  Fail(Call::kMapAnonymous, ENOMEM);
  std::vector<Block> held;
  for (Block b; (b = pool->Allocate(3 * kMiB));) held.push_back(b);
  EXPECT_EQ(held.size(), 1u);
  EXPECT_EQ(plan.injected.load(), 1);
  const absl::Status s = pool->last_growth_error();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr("cannot map a 4 MiB chunk"), HasSubstr("Cannot allocate memory")));
  EXPECT_EQ(fake->register_calls(), registrations) << "nothing to register";
  ExpectExactly(*pool, 1, {fake}, before);
  for (Block& b : held) pool->Deallocate(b);
  EXPECT_GT(ExpectServes(*pool, {fake}, kChunk / 2), 20u);
  ExpectExactly(*pool, 1, {fake}, before);

  // Populating the chunk failing (the memory ran out after mmap) undoes the mapping too.
  Fail(Call::kPopulate, ENOMEM);
  EXPECT_EQ(pool->Reserve(2 * kChunk).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(pool->last_growth_error().message()), HasSubstr("cannot populate"));
  ExpectExactly(*pool, 1, {fake}, before);

  // And it grows once memory is there again.
  ASSERT_TRUE(pool->Reserve(3 * kChunk).ok());
  ExpectExactly(*pool, 3, {fake}, before);
  EXPECT_GT(ExpectServes(*pool, {fake}, 3 * kChunk), 120u);
}

// Binding a chunk to its NUMA node failing (mbind: an injected EINVAL), in a parallel Reserve and
// in the pool's background grower: reported through the pool, the chunk undone, the rest served.
TEST_F(FaultTest, BindingToTheNumaNodeFailingInAWorkerIsReportedAndUndone) {
  auto fake = std::make_shared<CountingDomain>("bound");
  fake->set_concurrent(true);
  const std::int64_t before = internal::os::counters().chunk_bytes.load();
  PoolOptions o = Options({fake});
  o.numa_node = 0;  // every machine has node 0
  o.reserve_threads = 2;
  o.initial_size = kChunk;
  auto pool = Pool::Create(o).value();
  ExpectExactly(*pool, 1, {fake}, before);
  EXPECT_EQ(pool->GetStats().chunks[0].numa_node, 0);

  Fail(Call::kBindNode, EINVAL);
  const absl::Status s = pool->Reserve(4 * kChunk);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("to NUMA node 0: mbind"));
  EXPECT_EQ(plan.injected.load(), 1);
  const std::size_t chunks = pool->GetStats().chunks.size();
  EXPECT_LT(chunks, 4u);
  ExpectExactly(*pool, chunks, {fake}, before);
  EXPECT_EQ(pool->GetStats().growth_failures, 1u);

  // The background grower meets the same failure: counted and kept, and it recovers.
  pool.reset();
  o.low_watermark = 2 * kChunk;
  o.reserve_threads = 1;
  // The grower starts as Create returns (one chunk is less room than the watermark), so the
  // fault is armed before: Create's own chunk binds (skipped), the grower's first bind fails.
  Fail(Call::kBindNode, EINVAL, /*times=*/1, /*skip=*/1);
  pool = Pool::Create(o).value();
  Block b = pool->Allocate(kChunk / 2);
  ASSERT_TRUE(b);
  for (int i = 0; i < 1000 && pool->GetStats().chunks.size() < 2; ++i) usleep(2000);
  EXPECT_EQ(plan.injected.load(), 1);
  EXPECT_GE(pool->GetStats().growth_failures, 1u);
  EXPECT_THAT(std::string(pool->last_growth_error().message()), HasSubstr("mbind"));
  EXPECT_GE(pool->GetStats().chunks.size(), 2u) << "the grower did not retry";
  pool->Deallocate(b);
  pool.reset();
  EXPECT_EQ(fake->live_registrations(), 0u);
  EXPECT_EQ(internal::os::counters().chunk_bytes.load(), before);
}

TEST_F(FaultTest, ReservingTheAddressRangeFailingFailsCreateAndLeavesNothing) {
  auto fake = std::make_shared<CountingDomain>();
  const std::int64_t before = internal::os::counters().chunk_bytes.load();
  const long long size_before = ProcStatusBytes("VmSize");
  Fail(Call::kReserve, ENOMEM);
  auto pool = Pool::Create(Options({fake}));
  ASSERT_FALSE(pool.ok());
  EXPECT_EQ(pool.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(pool.status().message()),
              AllOf(HasSubstr("cannot reserve"), HasSubstr("PoolOptions::budget")));
  EXPECT_EQ(fake->register_calls(), 0u);
  EXPECT_EQ(internal::os::counters().chunk_bytes.load(), before);
  EXPECT_NEAR(ProcStatusBytes("VmSize"), size_before, testing::kVmSlackBytes);
  auto again = Pool::Create(Options({fake}));  // and it works without the fault
  ASSERT_TRUE(again.ok());
  EXPECT_GT(ExpectServes(**again, {fake}, kChunk), 40u);
}

// The kernel refusing the host domain's pin (`call`) after the headroom check passed (the limit
// was lowered meanwhile, or another thread or process pinned first), with `err` as the kernel
// reports RLIMIT_MEMLOCK: the memlock error, naming the call, and the chunk undone.
void ExpectARefusedPinIsTheMemlockErrorAndUndoesTheChunk(std::shared_ptr<Domain> host,
                                                         const char* counter, Call call, int err,
                                                         const char* refused) {
  auto fake = std::make_shared<CountingDomain>("before-host");
  const std::string host_name = host->name();
  const std::int64_t before = internal::os::counters().chunk_bytes.load();
  const long long held = ProcStatusBytes(counter);
  PoolOptions o = Options({fake, std::move(host)});
  o.initial_size = kChunk;
  auto pool = Pool::Create(o).value();
  FaultTest::Fail(call, err);
  const absl::Status s = pool->Reserve(2 * kChunk);
  EXPECT_EQ(plan.injected.load(), 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr("domain 1 (" + host_name + ")"), HasSubstr(refused),
                    HasSubstr("RLIMIT_MEMLOCK"), HasSubstr("ulimit -l")));
  EXPECT_EQ(fake->deregister_calls(), 1u) << "domain 0's registration of the chunk undone";
  ExpectExactly(*pool, 1, {fake}, before);
  EXPECT_EQ(ProcStatusBytes(counter) - held, static_cast<long long>(kChunk)) << counter;
  EXPECT_GT(ExpectServes(*pool, {fake}, kChunk), 40u);
  ASSERT_TRUE(pool->Reserve(2 * kChunk).ok());
  EXPECT_EQ(ProcStatusBytes(counter) - held, static_cast<long long>(2 * kChunk)) << counter;
  pool.reset();
  EXPECT_EQ(ProcStatusBytes(counter), held) << counter;
}

TEST_F(FaultTest, LongTermPinRefusedMidwayIsTheMemlockErrorAndUndoesTheChunk) {
  // io_uring reports RLIMIT_MEMLOCK as ENOMEM.
  ExpectARefusedPinIsTheMemlockErrorAndUndoesTheChunk(
      MakeLongTermPinDomain().value(), "VmPin", Call::kPinBuffer, ENOMEM,
      "io_uring buffer registration of 4 MiB failed");
}

TEST_F(FaultTest, MlockRefusedMidwayIsTheMemlockErrorAndUndoesTheChunk) {
  // mlock reports RLIMIT_MEMLOCK as EAGAIN.
  PINPOOL_SKIP_IF_MLOCK_IS_A_NOOP();
  ExpectARefusedPinIsTheMemlockErrorAndUndoesTheChunk(
      MakeResidentNotPinnedDomain(), "VmLck", Call::kMlock, EAGAIN, "mlock of 4 MiB failed");
}

TEST_F(FaultTest, AFailedPinOfTheDefaultDomainLeavesNothingBehindAndGrowthResumes) {
  // The default domain (no domain named), failing on the allocation path.
  const std::int64_t before = internal::os::counters().chunk_bytes.load();
  const long long pinned = ProcStatusBytes("VmPin");
  PoolOptions o = Options({});
  o.initial_size = kChunk;
  auto pool = Pool::Create(o).value();
  ASSERT_EQ(pool->GetStats().domains.size(), 1u);
  EXPECT_EQ(pool->GetStats().domains[0].name, "long-term pin");
  Fail(Call::kPinBuffer, ENOMEM);
  std::vector<Block> held;
  for (Block b; (b = pool->Allocate(3 * kMiB));) held.push_back(b);
  EXPECT_EQ(held.size(), 1u);
  EXPECT_EQ(plan.injected.load(), 1);
  EXPECT_THAT(std::string(pool->last_growth_error().message()),
              AllOf(HasSubstr("domain 0 (long-term pin)"), HasSubstr("RLIMIT_MEMLOCK")));
  ExpectExactly(*pool, 1, {}, before);
  EXPECT_EQ(pool->GetStats().pinned_bytes, kChunk);
  EXPECT_EQ(ProcStatusBytes("VmPin") - pinned, static_cast<long long>(kChunk));
  for (Block& b : held) pool->Deallocate(b);
  ASSERT_TRUE(pool->Reserve(3 * kChunk).ok());
  ExpectExactly(*pool, 3, {}, before);
  EXPECT_EQ(ProcStatusBytes("VmPin") - pinned, static_cast<long long>(3 * kChunk));
  pool.reset();
  EXPECT_EQ(ProcStatusBytes("VmPin"), pinned);
  EXPECT_EQ(internal::os::counters().chunk_bytes.load(), before);
}

// The kernel's own limit, as an unprivileged user: 8 MiB of RLIMIT_MEMLOCK = two 4 MiB chunks
// at most (less what the process had pinned or locked already), through `host`.
void ExpectTheRealLimitStopsGrowthWithExactCounts(std::shared_ptr<Domain> host,
                                                  const char* counter) {
  auto fake = std::make_shared<CountingDomain>("beside-host");
  const std::int64_t before = internal::os::counters().chunk_bytes.load();
  const long long held = ProcStatusBytes(counter);
  auto pool = Pool::Create(Options({std::move(host), fake})).value();
  std::vector<Block> blocks;
  for (Block b; (b = pool->Allocate(3 * kMiB));) blocks.push_back(b);
  const std::size_t chunks = blocks.size();  // one 3 MiB block per 4 MiB chunk
  EXPECT_GE(chunks, 1u);
  EXPECT_LE(chunks, 2u);
  EXPECT_THAT(std::string(pool->last_growth_error().message()),
              AllOf(HasSubstr("RLIMIT_MEMLOCK is 8 MiB"), HasSubstr("ulimit -l")));
  EXPECT_EQ(ProcStatusBytes(counter) - held, static_cast<long long>(chunks * kChunk)) << counter;
  ExpectExactly(*pool, chunks, {fake}, before);
  for (Block& b : blocks) pool->Deallocate(b);
  EXPECT_GT(ExpectServes(*pool, {}, chunks * kChunk), chunks * 40);
  pool.reset();
  EXPECT_EQ(ProcStatusBytes(counter), held) << counter;
  EXPECT_EQ(fake->live_registrations(), 0u);
}

TEST(MemlockLimitTest, ReachingTheRealLimitWithTheLongTermPinDomainStopsGrowthWithExactCounts) {
  testing::RunAsUnprivileged(+[] {
    ExpectTheRealLimitStopsGrowthWithExactCounts(MakeLongTermPinDomain().value(), "VmPin");
  });
}

TEST(MemlockLimitTest, ReachingTheRealLimitWithTheResidentDomainStopsGrowthWithExactCounts) {
  PINPOOL_SKIP_IF_MLOCK_IS_A_NOOP();
  testing::RunAsUnprivileged(+[] {
    ExpectTheRealLimitStopsGrowthWithExactCounts(MakeResidentNotPinnedDomain(), "VmLck");
  });
}

}  // namespace
}  // namespace pinpool
