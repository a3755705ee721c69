// Pool::Create's preflight (pool/preflight.h) and the arena's per-chunk check of the memory
// cgroup: every ceiling that applies to what a pool pins is checked before anything is pinned
// or mapped, and each refusal names the ceiling, the numbers and the fix.
//
// - PreflightRules: the decisions on fabricated kernel state (memlock over, exempt, unlimited;
//   cgroup over, unlimited, an ancestor's limit; mlock; required hugetlb pages not charged).
// - PreflightMemlock: real children with an 8 MiB RLIMIT_MEMLOCK, one an unprivileged user
//   (support/unprivileged.h: capabilities still in the bounding set, none effective), one root
//   with CAP_IPC_LOCK dropped from the effective set only.
// - PreflightCgroup: a real memory cgroup limited to 64 MiB (v1 where the host mounts the v1
//   memory controller, v2 otherwise: in the soft-RoCE guest the test mounts cgroup2 itself); a
//   child moved into it asks for a 256 MiB initial_size and then grows past the limit. Without
//   the checks the child is OOM-killed, and the test fails saying so (it never hangs: the child
//   is waited for with a deadline).
// - PreflightHugePages: required hugetlb pages that are not free are refused before mapping.
// Tests needing root or a cgroup the machine does not offer skip saying why, unless
// PINPOOL_REQUIRE_CGROUP=1 or PINPOOL_REQUIRE_RDMA=1 (scripts/test.sh, CI, the guest): then they
// fail.
#include "pool/preflight.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "domain/memlock.h"
#include "os/cgroup.h"
#include "os/os.h"
#include "pinpool/pool.h"
#include "support/memory_cgroup.h"
#include "support/proc_status.h"
#include "support/unprivileged.h"

namespace pinpool {
namespace {

using internal::os::MemlockState;
using internal::os::MemoryCgroupState;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::ProcStatusBytes;

bool MustRun() {
  for (const char* name : {"PINPOOL_REQUIRE_CGROUP", "PINPOOL_REQUIRE_RDMA"}) {
    const char* v = std::getenv(name);
    if (v != nullptr && std::string(v) == "1") return true;
  }
  return false;
}

#define SKIP_OR_FAIL(reason)                                     \
  do {                                                           \
    if (MustRun()) FAIL() << "required here, but: " << (reason); \
    GTEST_SKIP() << (reason);                                    \
  } while (false)

MemlockState Limited(std::size_t limit, std::size_t pinned = 0) {
  MemlockState s;
  s.limit = limit;
  s.pinned = pinned;
  return s;
}

MemoryCgroupState Cgroup(std::size_t limit, std::size_t usage, std::size_t reclaimable = 0) {
  MemoryCgroupState c;
  c.where.version = 2;
  c.where.path = "/kubepods/pod1/c1";
  c.limited = true;
  c.limit_path = "/kubepods/pod1/c1";
  c.limit = limit;
  c.usage = usage;
  c.reclaimable = reclaimable;
  return c;
}

PoolOptions Initial(std::size_t initial) {
  PoolOptions o;
  o.chunk_size = 64 * kMiB;
  o.budget = 1 * kGiB;
  o.initial_size = initial;
  return o;
}

TEST(PreflightRules, InitialSizeOverRlimitMemlockIsRefusedWithEveryPlacesFix) {
  const absl::Status s =
      internal::PreflightCeilings(Initial(100 * kMiB), Limited(8 * kMiB), MemoryCgroupState{});
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(
      std::string(s.message()),
      AllOf(HasSubstr("initial_size (100 MiB, 128 MiB in chunks of 64 MiB)"),
            HasSubstr("refused before pinning anything"), HasSubstr("RLIMIT_MEMLOCK is 8 MiB"),
            HasSubstr("pinning 128 MiB more"), HasSubstr("`ulimit -l unlimited`"),
            HasSubstr("limits.conf"), HasSubstr("LimitMEMLOCK=infinity"),
            HasSubstr("--ulimit memlock=-1"), HasSubstr("containerd.service"),
            HasSubstr("--cap-add IPC_LOCK"), HasSubstr("securityContext.capabilities.add"),
            HasSubstr("or lower PoolOptions::initial_size")));
}

TEST(PreflightRules, CapabilityInTheBoundingSetOnlyIsNamed) {
  MemlockState m = Limited(8 * kMiB);
  m.bounded_not_effective = true;
  m.uid = 1000;
  const absl::Status s = internal::PreflightCeilings(Initial(64 * kMiB), m, MemoryCgroupState{});
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("CAP_IPC_LOCK in its bounding set but not in its effective set: uid 1000 "
                        "is not root"));
}

TEST(PreflightRules, NothingUpFrontOrNoLimitPasses) {
  EXPECT_TRUE(internal::PreflightCeilings(Initial(0), Limited(0), Cgroup(kMiB, kMiB)).ok());
  MemlockState exempt = Limited(8 * kMiB);
  exempt.exempt = true;
  EXPECT_TRUE(internal::PreflightCeilings(Initial(kGiB), exempt, MemoryCgroupState{}).ok());
  EXPECT_TRUE(
      internal::PreflightCeilings(Initial(kGiB), Limited(SIZE_MAX), MemoryCgroupState{}).ok());
  EXPECT_TRUE(internal::PreflightCeilings(Initial(64 * kMiB), Limited(64 * kMiB),
                                          Cgroup(100 * kMiB, 36 * kMiB))
                  .ok())
      << "exactly at both ceilings fits";
}

TEST(PreflightRules, InitialSizeOverTheMemoryCgroupIsRefusedNamingItAndTheOomKiller) {
  const absl::Status s = internal::PreflightCeilings(Initial(256 * kMiB), Limited(SIZE_MAX),
                                                     Cgroup(64 * kMiB, 3 * kMiB, kMiB));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(
      std::string(s.message()),
      AllOf(HasSubstr("memory cgroup /kubepods/pod1/c1 (cgroup v2, memory.max) is "
                      "limited to 64 MiB and holds 3 MiB (1 MiB of it reclaimable"),
            HasSubstr("256 MiB more pinned memory"), HasSubstr("OOM killer"),
            HasSubstr("at least 258 MiB"), HasSubstr("MemoryMax=258M"), HasSubstr("--memory"),
            HasSubstr("resources.limits.memory"), HasSubstr("or lower PoolOptions::initial_size")));
}

TEST(PreflightRules, AnAncestorsLimitIsNamedAsSuch) {
  MemoryCgroupState c = Cgroup(64 * kMiB, 0);
  c.where.version = 1;
  c.limit_path = "/kubepods";
  const absl::Status s = internal::PreflightCeilings(Initial(128 * kMiB), Limited(SIZE_MAX), c);
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr("memory cgroup /kubepods (an ancestor of this process's "
                              "/kubepods/pod1/c1) (cgroup v1, memory.limit_in_bytes)"),
                    HasSubstr("MemoryLimit=")));
}

TEST(PreflightRules, MlockCountsVmLckAndRequiredHugetlbPagesAreNotChargedToTheCgroup) {
  PoolOptions o = Initial(64 * kMiB);
  o.domains = {MakeResidentNotPinnedDomain()};
  const internal::PinDemand resident = internal::DemandFor(o, 64 * kMiB);
  EXPECT_EQ(resident.pin, 0u);
  EXPECT_EQ(resident.lock, 64 * kMiB);
  EXPECT_EQ(resident.charge, 64 * kMiB);
  EXPECT_THAT(
      std::string(internal::PreflightCeilings(o, Limited(8 * kMiB), MemoryCgroupState{}).message()),
      HasSubstr("already locked (VmLck); locking 64 MiB more"));

  PoolOptions huge = Initial(64 * kMiB);
  huge.page_size = PageSize::k2M;
  huge.require_page_size = true;
  EXPECT_EQ(internal::DemandFor(huge, 64 * kMiB).charge, 0u);
  EXPECT_TRUE(internal::PreflightCeilings(huge, Limited(SIZE_MAX), Cgroup(kMiB, kMiB)).ok());
  huge.require_page_size = false;  // may fall back to pages the cgroup is charged for
  EXPECT_EQ(internal::DemandFor(huge, 64 * kMiB).charge, 64 * kMiB);
}

// The fields a test reads back after a refusal: nothing pinned, locked or mapped.
struct Held {
  long long pinned = ProcStatusBytes("VmPin");
  long long locked = ProcStatusBytes("VmLck");
  std::int64_t chunk_bytes = internal::os::counters().chunk_bytes.load();
  std::uint64_t mmaps = internal::os::counters().mmap.load();
};

void ExpectNothingHeld(const Held& before) {
  const Held after;
  EXPECT_EQ(after.pinned, before.pinned) << "VmPin";
  EXPECT_EQ(after.locked, before.locked) << "VmLck";
  EXPECT_EQ(after.chunk_bytes, 0);
  EXPECT_EQ(after.mmaps, before.mmaps) << "the preflight refused before the arena mapped a range";
}

TEST(PreflightMemlock, UnprivilegedUserWithEightMiBIsRefusedBeforePinningAndToldWhy) {
  if (geteuid() != 0) SKIP_OR_FAIL("needs root to become an unprivileged user of its own");
  testing::RunAsUnprivileged([] {
    const Held before;
    auto pool = Pool::Create(Initial(256 * kMiB));
    ASSERT_FALSE(pool.ok());
    EXPECT_EQ(pool.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(std::string(pool.status().message()),
                AllOf(HasSubstr("refused before pinning anything"),
                      HasSubstr("RLIMIT_MEMLOCK is 8 MiB"), HasSubstr("pinning 256 MiB more"),
                      HasSubstr("LimitMEMLOCK=infinity"), HasSubstr("containerd.service"),
                      HasSubstr("CAP_IPC_LOCK in its bounding set but not in its effective set"),
                      HasSubstr("is not root")));
    ExpectNothingHeld(before);
  });
}

TEST(PreflightMemlock, CapIpcLockBoundedButNotEffectiveDoesNotExemptAndIsNamed) {
  if (geteuid() != 0) SKIP_OR_FAIL("needs root to hold CAP_IPC_LOCK and drop it");
  std::fflush(nullptr);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const rlimit eight = {8 * kMiB, 8 * kMiB};
    if (setrlimit(RLIMIT_MEMLOCK, &eight) != 0) _exit(20);
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2] = {};
    if (syscall(SYS_capget, &header, data) != 0) _exit(21);
    data[0].effective &= ~(1u << CAP_IPC_LOCK);  // still permitted, still in the bounding set
    if (syscall(SYS_capset, &header, data) != 0) _exit(22);
    const MemlockState m = internal::os::QueryMemlock();
    EXPECT_FALSE(m.exempt);
    EXPECT_TRUE(m.bounded_not_effective);
    const Held before;
    auto pool = Pool::Create(Initial(64 * kMiB));
    EXPECT_EQ(pool.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(std::string(pool.status().message()),
                AllOf(HasSubstr("RLIMIT_MEMLOCK is 8 MiB"),
                      HasSubstr("CAP_IPC_LOCK in its bounding set but not in its effective set: "
                                "uid 0 dropped it"),
                      HasSubstr("or lower PoolOptions::initial_size")));
    ExpectNothingHeld(before);
    std::fflush(nullptr);
    _exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child died with signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "see the child's output (20-22: could not set up)";
}

// --- A real memory cgroup -------------------------------------------------------------------

std::string ReadText(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// A memory cgroup of the test's own (support/memory_cgroup.h) limited to `limit`; removed when it
// goes. `why_not` says why none could be made.
class TestCgroup {
 public:
  explicit TestCgroup(std::size_t limit) : cgroup_("pinpool-test-" + std::to_string(getpid())) {
    if (cgroup_.version() != 0 && !cgroup_.Limit(limit)) why_not_ = "cannot limit " + cgroup_.dir();
  }
  ~TestCgroup() {
    if (!cgroup_.Remove()) {
      ADD_FAILURE() << "cannot remove " << cgroup_.dir() << ": " << std::strerror(errno);
    }
  }
  const std::string& why_not() const { return why_not_.empty() ? cgroup_.why_not() : why_not_; }
  int version() const { return cgroup_.version(); }
  const std::string& dir() const { return cgroup_.dir(); }
  // Moves the calling process in (from the child itself).
  bool Enter() const { return cgroup_.Enter(); }

 private:
  testing::MemoryCgroup cgroup_;
  std::string why_not_;
};

// Runs `body` in a child moved into a fresh cgroup limited to `limit`; fails (never hangs) when
// the child is killed, which is what the kernel's OOM killer does without the checks.
void RunInMemoryCgroup(std::size_t limit, void (*body)(int version)) {
  if (geteuid() != 0) SKIP_OR_FAIL("needs root to create a memory cgroup");
  TestCgroup cgroup(limit);
  if (cgroup.version() == 0 || !cgroup.why_not().empty()) SKIP_OR_FAIL(cgroup.why_not());
  if (std::getenv("PINPOOL_SOFTROCE") != nullptr) {
    EXPECT_EQ(cgroup.version(), 2) << "the guest's kernel is meant to prove cgroup v2";
  }
  std::printf("[ cgroup v%d: %s, limit %zu MiB ]\n", cgroup.version(), cgroup.dir().c_str(),
              limit >> 20);
  std::fflush(nullptr);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (!cgroup.Enter()) _exit(30);
    body(cgroup.version());
    std::fflush(nullptr);
    _exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(240);
  pid_t done = 0;
  while ((done = waitpid(pid, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (done == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL() << "the child in the cgroup did not finish in 240 s (stuck under the limit?)";
  }
  ASSERT_TRUE(WIFEXITED(status))
      << "the child in the memory cgroup was killed by signal " << WTERMSIG(status)
      << (WTERMSIG(status) == SIGKILL ? " (the OOM killer: the pool pinned past the cgroup's limit)"
                                      : "");
  EXPECT_EQ(WEXITSTATUS(status), 0) << "see the child's output (30: could not enter the cgroup)";
}

TEST(PreflightCgroup, CreateOverTheLimitIsRefusedNamingTheCgroupInsteadOfAnOomKill) {
  RunInMemoryCgroup(64 * kMiB, [](int version) {
    const Held before;
    PoolOptions o = Initial(256 * kMiB);
    o.page_size = PageSize::k4K;
    auto pool = Pool::Create(o);
    ASSERT_FALSE(pool.ok()) << "a 256 MiB pool in a 64 MiB cgroup";
    EXPECT_EQ(pool.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(std::string(pool.status().message()),
                AllOf(HasSubstr("refused before pinning anything"),
                      HasSubstr("memory cgroup /pinpool-test-"),
                      HasSubstr(version == 1 ? "(cgroup v1, memory.limit_in_bytes)"
                                             : "(cgroup v2, memory.max)"),
                      HasSubstr("is limited to 64 MiB"), HasSubstr("256 MiB more pinned"),
                      HasSubstr("OOM killer"), HasSubstr("resources.limits.memory"),
                      HasSubstr("or lower PoolOptions::initial_size")))
        << pool.status();
    ExpectNothingHeld(before);
  });
}

TEST(PreflightCgroup, GrowthPastTheLimitIsAnErrorPerChunkNotAnOomKill) {
  RunInMemoryCgroup(64 * kMiB, [](int) {
    PoolOptions o;
    o.chunk_size = 16 * kMiB;
    o.budget = 256 * kMiB;
    o.page_size = PageSize::k4K;
    auto pool = Pool::Create(o);
    ASSERT_TRUE(pool.ok()) << pool.status();
    std::vector<Block> blocks;
    for (Block b; (b = (*pool)->Allocate(12 * kMiB));) blocks.push_back(b);
    EXPECT_GE(blocks.size(), 1u);
    EXPECT_LE(blocks.size(), 4u) << "no more than 64 MiB of chunks fit";
    const absl::Status error = (*pool)->last_growth_error();
    std::printf("[ %zu chunks of 16 MiB grew; then: %s ]\n", blocks.size(),
                std::string(error.message()).c_str());
    EXPECT_EQ(error.code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(std::string(error.message()),
                AllOf(HasSubstr("memory cgroup /pinpool-test-"), HasSubstr("16 MiB more pinned"),
                      HasSubstr("OOM killer"), HasSubstr("or lower PoolOptions::budget")))
        << error;
    const absl::Status reserve = (*pool)->Reserve(256 * kMiB);
    EXPECT_EQ(reserve.code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(std::string(reserve.message()), HasSubstr("memory cgroup /pinpool-test-"));
    // The stats show the ceiling and how close the pool has come to it.
    const PoolStats stats = (*pool)->GetStats();
    EXPECT_EQ(stats.cgroup_limit_bytes, 64 * kMiB);
    EXPECT_LT(stats.cgroup_headroom_bytes, 16 * kMiB) << "another chunk would not fit";
    for (Block& b : blocks) (*pool)->Deallocate(b);
  });
}

// --- Huge pages -------------------------------------------------------------------------------

std::size_t FreeHugePages2M() {
  const std::string t = ReadText("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages");
  return t.empty() ? 0 : std::stoul(t);
}

TEST(PreflightHugePages, RequiredPagesThatAreNotFreeAreRefusedBeforeMapping) {
  const std::size_t free_pages = FreeHugePages2M();
  PoolOptions o;
  o.chunk_size = 2 * kMiB;
  o.initial_size = (free_pages + 1) * 2 * kMiB;
  o.budget = o.initial_size;
  o.page_size = PageSize::k2M;
  o.require_page_size = true;
  const Held before;
  auto pool = Pool::Create(o);
  ASSERT_FALSE(pool.ok());
  EXPECT_EQ(pool.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(pool.status().message()),
              AllOf(HasSubstr("refused before pinning anything"), HasSubstr("huge pages"),
                    HasSubstr("nr_hugepages"), HasSubstr("require_page_size = false")));
  ExpectNothingHeld(before);
}

TEST(PreflightHugePages, ANodesOwnPoolIsWhatCounts) {
  // No node has 2^40 free 2 MiB pages: the refusal names the node and its sysfs file.
  const absl::Status s =
      internal::os::CheckHugePagesAvailable(PageSize::k2M, std::size_t{1} << 61, 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr("NUMA node 0 has"), HasSubstr("node0/hugepages/hugepages-2048kB")));
  EXPECT_TRUE(internal::os::CheckHugePagesAvailable(PageSize::k2M, 0, 0).ok());
}

}  // namespace
}  // namespace pinpool
