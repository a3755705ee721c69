// pinpool-info's planning and fixes against made-up machines: what the real host of a test run
// cannot show (reserved huge pages, a device with a small max_mr_size, a port that is down,
// io_uring switched off, no long-term pinning), each with the numbers its fix must carry. Also the
// that both renderings hold what the plan says.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <string>
#include <vector>

#include "info.h"
#include "support/json_parse.h"

namespace pinpool::info {
namespace {

using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// A machine like the project's hosts: no RDMA in the kernel, no huge pages reserved, THP on
// madvise, root (CAP_IPC_LOCK) with an 8 MiB RLIMIT_MEMLOCK, io_uring available.
Facts Host() {
  Facts f;
  f.system = {"6.1.0-test", "x86_64", 2, 0};
  f.rdma.list_errno = ENOSYS;
  f.rdma.modules = {{"ib_core", "absent"},
                    {"ib_uverbs", "absent"},
                    {"rdma_rxe", "absent"},
                    {"rdma_ucm", "absent"},
                    {"siw", "absent"}};
  f.rdma.netdevs = {"eth0"};
  f.memory.hugepages = {{2 * kMiB, 0, 0, 0, 0, 0}, {1 * kGiB, 0, 0, 0, 0, 0}};
  f.memory.thp_enabled = "madvise";
  f.memory.thp_defrag = "madvise";
  f.memory.total = 24 * kGiB;
  f.memory.available = 20 * kGiB;
  f.memlock = {8 * kMiB, 8 * kMiB, 0, 0, /*cap_ipc_lock=*/true};
  f.fork_mode = "unneeded";
  f.io_uring.available = true;
  f.io_uring.disabled_sysctl = 0;
  f.io_uring.sparse_buffers = true;
  f.long_term_pin.available = true;
  return f;
}

// rxe0 as the soft-RoCE guest has it.
DeviceInfo Rxe() {
  DeviceInfo d;
  d.name = "rxe0";
  d.transport = "InfiniBand";
  d.max_mr_size = ~std::uint64_t{0};
  d.max_mr = 524287;
  d.page_size_cap = 0xfffff000;
  d.extended_query = true;
  PortInfo p;
  p.port = 1;
  p.state = "PORT_ACTIVE";
  p.active = true;
  p.phys_state = "LINK_UP";
  p.link_layer = "Ethernet";
  p.gid_table_size = 1024;
  p.gids = {{0, "fe80::1", "RoCE v2", std::nullopt, "dummy0"},
            {1, "::ffff:10.77.0.1", "RoCE v2", "10.77.0.1", "dummy0"}};
  d.ports = {p};
  return d;
}

const Finding* Find(const std::vector<Finding>& all, const std::string& id) {
  for (const Finding& f : all) {
    if (f.id == id) return &f;
  }
  return nullptr;
}

// Finding pointers point into the vector: never into a temporary one.
const Finding* Find(std::vector<Finding>&& all, const std::string& id) = delete;
bool Has(const std::vector<Finding>& all, const std::string& id) {
  return Find(all, id) != nullptr;
}

std::vector<std::string> Ids(const std::vector<Finding>& all) {
  std::vector<std::string> ids;
  for (const Finding& f : all) ids.push_back(f.id);
  return ids;
}

ToolOptions Options(std::size_t chunk, std::size_t budget, PageSize page, bool require = false) {
  ToolOptions o;
  o.chunk_size = chunk;
  o.budget = budget;
  o.page_size = page;
  o.require_page_size = require;
  return o;
}

TEST(InfoRdmaTest, NoDeviceInAKernelWithoutRdmaSaysToChangeKernelOrUseSoftRdma) {
  const Facts f = Host();
  const auto all = FindProblems(f, PlanPool(ToolOptions{}, f));
  const Finding* p = Find(all, "no_rdma_device");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->severity, Severity::kError);
  EXPECT_THAT(p->problem, HasSubstr("Function not implemented"));
  EXPECT_THAT(p->fix,
              AllOf(HasSubstr("CONFIG_INFINIBAND_USER_ACCESS"),
                    HasSubstr("modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth0"),
                    HasSubstr("modprobe siw && rdma link add siw0 type siw netdev eth0")));
  EXPECT_EQ(all.front().id, "no_rdma_device") << "errors come first";
}

TEST(InfoRdmaTest, NoDeviceWithModulesAvailableSaysWhichToLoad) {
  Facts f = Host();
  f.rdma.list_errno.reset();  // the list is empty: nothing bound
  f.rdma.modules["ib_uverbs"] = "loaded";
  f.rdma.modules["rdma_rxe"] = "available";
  f.rdma.netdevs = {"enp1s0"};
  const std::vector<Finding> all_p = FindProblems(f, PlanPool(ToolOptions{}, f));
  const Finding* p = Find(all_p, "no_rdma_device");
  ASSERT_NE(p, nullptr);
  EXPECT_THAT(p->problem, HasSubstr("found none"));
  EXPECT_THAT(p->fix, AllOf(HasSubstr("modprobe ib_uverbs mlx5_ib"),
                            HasSubstr("rdma link add rxe0 type rxe netdev enp1s0")));
  EXPECT_THAT(p->fix, Not(HasSubstr("CONFIG_INFINIBAND")));
}

TEST(InfoRdmaTest, HealthyRxeHasNoRdmaProblemAndFitsThePool) {
  Facts f = Host();
  f.rdma.list_errno.reset();
  f.rdma.devices = {Rxe()};
  const PoolPlan plan = PlanPool(ToolOptions{}, f);
  ASSERT_EQ(plan.devices.size(), 1u);
  EXPECT_TRUE(plan.devices[0].chunk_fits_max_mr_size);
  EXPECT_TRUE(plan.devices[0].chunks_fit_max_mr);
  EXPECT_TRUE(plan.devices[0].page_size_supported);
  for (const Finding& p : FindProblems(f, plan)) {
    EXPECT_THAT(p.id, Not(AnyOf(HasSubstr("rdma"), HasSubstr("roce"), HasSubstr("max_mr"))));
  }
}

TEST(InfoRdmaTest, PortDownMissingIpv4GidAndSmallMaxMrSizeAreEachReported) {
  Facts f = Host();
  f.rdma.list_errno.reset();
  DeviceInfo small = Rxe();
  small.name = "mlx5_0";
  small.max_mr_size = 32 * kMiB;
  small.max_mr = 4;
  small.ports[0].gids.pop_back();  // only the link-local GID: no IPv4 address
  DeviceInfo down = Rxe();
  down.name = "rxe1";
  down.ports[0].active = false;
  down.ports[0].state = "PORT_DOWN";
  down.ports[0].phys_state = "DISABLED";
  f.rdma.devices = {small, down};
  const auto all = FindProblems(f, PlanPool(ToolOptions{}, f));  // 16 chunks of 64 MiB
  const Finding* mr = Find(all, "chunk_exceeds_max_mr_size");
  ASSERT_NE(mr, nullptr) << ::testing::PrintToString(Ids(all));
  EXPECT_THAT(mr->problem, HasSubstr("mlx5_0 registers at most 32 MiB"));
  EXPECT_THAT(mr->fix, HasSubstr("at most 32 MiB"));
  ASSERT_NE(Find(all, "too_many_regions"), nullptr);
  const Finding* port = Find(all, "rdma_no_active_port");
  ASSERT_NE(port, nullptr);
  EXPECT_EQ(port->severity, Severity::kWarning) << "another device is ACTIVE";
  EXPECT_THAT(port->problem, HasSubstr("rxe1 has no ACTIVE port: port 1 PORT_DOWN (DISABLED)"));
  const Finding* gid = Find(all, "roce_no_ipv4_gid");
  ASSERT_NE(gid, nullptr);
  EXPECT_THAT(gid->fix, HasSubstr("dev dummy0"));
}

TEST(InfoRdmaTest, UnopenableDeviceNamesTheGroupFix) {
  Facts f = Host();
  f.rdma.list_errno.reset();
  DeviceInfo d;
  d.name = "mlx5_0";
  d.error = "ibv_open_device: Permission denied";
  d.permission_denied = true;
  f.rdma.devices = {d};
  const std::vector<Finding> all_p = FindProblems(f, PlanPool(ToolOptions{}, f));
  const Finding* p = Find(all_p, "rdma_device_permission");
  ASSERT_NE(p, nullptr);
  EXPECT_THAT(p->fix, HasSubstr("usermod -aG rdma"));
}

TEST(InfoPagesTest, NoHugePagesFallBackToThpAndTheFixReservesBudgetOver2MiB) {
  const Facts f = Host();
  const PoolPlan plan = PlanPool(Options(64 * kMiB, 1 * kGiB, PageSize::k1G), f);
  ASSERT_TRUE(plan.invalid.empty());
  EXPECT_EQ(plan.chunks, 16u);
  ASSERT_EQ(plan.page_sizes.size(), 3u);  // 1G skipped (chunk too small), 2M none, THP all
  EXPECT_EQ(plan.page_sizes[0].page_size, PageSize::k1G);
  EXPECT_EQ(plan.page_sizes[0].chunks, 0u);
  EXPECT_EQ(plan.page_sizes[1].chunks, 0u);
  EXPECT_EQ(plan.page_sizes[2].page_size, PageSize::kTransparent);
  EXPECT_EQ(plan.page_sizes[2].chunks, 16u);
  EXPECT_EQ(plan.first_chunk_page_size, PageSize::kTransparent);
  const std::vector<Finding> all_p = FindProblems(f, plan);
  const Finding* p = Find(all_p, "hugepages_missing");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->severity, Severity::kWarning);
  EXPECT_THAT(p->problem, HasSubstr("no 2 MiB huge pages reserved"));
  EXPECT_THAT(p->fix, HasSubstr("`sysctl vm.nr_hugepages=512`"));
}

TEST(InfoPagesTest, SomeFreePagesServeSomeChunksAndTheFixAddsTheRest) {
  Facts f = Host();
  f.memory.hugepages[0] = {2 * kMiB, /*total=*/200, /*free=*/110, /*reserved=*/10, 0, 0};
  const PoolPlan plan = PlanPool(Options(64 * kMiB, 1 * kGiB, PageSize::k2M), f);
  ASSERT_EQ(plan.page_sizes.size(), 2u);
  EXPECT_EQ(plan.page_sizes[0].chunks, 3u);  // 100 usable pages / 32 per chunk
  EXPECT_EQ(plan.page_sizes[1].chunks, 13u);
  const std::vector<Finding> all_p = FindProblems(f, plan);
  const Finding* p = Find(all_p, "hugepages_missing");
  ASSERT_NE(p, nullptr);
  // 512 needed, 100 usable: 412 more on top of the 200 there are.
  EXPECT_THAT(p->fix, HasSubstr("`sysctl vm.nr_hugepages=612`"));
  EXPECT_THAT(p->problem, HasSubstr("13 of 16 chunks fall back"));
}

TEST(InfoPagesTest, EnoughPagesMeanNoProblem) {
  Facts f = Host();
  f.memory.hugepages[0] = {2 * kMiB, 512, 512, 0, 0, 0};
  const PoolPlan plan = PlanPool(Options(64 * kMiB, 1 * kGiB, PageSize::k2M), f);
  EXPECT_EQ(plan.page_sizes[0].chunks, 16u);
  EXPECT_FALSE(Has(FindProblems(f, plan), "hugepages_missing"));
}

TEST(InfoPagesTest, RequiredPageSizeWithoutPagesIsAnErrorAndChunksFail) {
  const Facts f = Host();
  const PoolPlan plan = PlanPool(Options(64 * kMiB, 1 * kGiB, PageSize::k2M, true), f);
  EXPECT_EQ(plan.failing_chunks, 16u);
  ASSERT_EQ(plan.page_sizes.size(), 1u) << "no fallback is tried";
  const std::vector<Finding> all_p = FindProblems(f, plan);
  const Finding* p = Find(all_p, "hugepages_missing");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->severity, Severity::kError);
  EXPECT_THAT(p->problem, HasSubstr("maps only 0 of its 16 chunks"));
}

TEST(InfoPagesTest, OneGigPagesNeedOneGigChunksAndTheirOwnFix) {
  Facts f = Host();
  f.memory.hugepages[1] = {1 * kGiB, 2, 2, 0, 0, 0};
  ToolOptions o = Options(1 * kGiB, 4 * kGiB, PageSize::k1G);
  const PoolPlan plan = PlanPool(o, f);
  EXPECT_EQ(plan.page_sizes[0].chunks, 2u);
  const std::vector<Finding> all_p = FindProblems(f, plan);
  const Finding* p = Find(all_p, "hugepages_missing");
  ASSERT_NE(p, nullptr);
  EXPECT_THAT(p->fix, AllOf(HasSubstr("echo 4 > /sys/kernel/mm/hugepages/hugepages-1048576kB/"),
                            HasSubstr("hugepagesz=1G hugepages=4")));
  o = Options(64 * kMiB, 1 * kGiB, PageSize::k1G);
  o.page_size_given = true;
  EXPECT_TRUE(Has(FindProblems(f, PlanPool(o, f)), "hugepage_1g_needs_1g_chunks"));
}

TEST(InfoPagesTest, ThpNeverLeavesBasePagesAndSaysHowToEnableIt) {
  Facts f = Host();
  f.memory.thp_enabled = "never";
  const PoolPlan plan = PlanPool(Options(64 * kMiB, 1 * kGiB, PageSize::k2M), f);
  EXPECT_EQ(plan.page_sizes.back().page_size, PageSize::k4K);
  EXPECT_EQ(plan.page_sizes.back().chunks, 16u);
  const std::vector<Finding> all_p = FindProblems(f, plan);
  const Finding* p = Find(all_p, "thp_disabled");
  ASSERT_NE(p, nullptr);
  EXPECT_THAT(p->fix, HasSubstr("echo madvise > /sys/kernel/mm/transparent_hugepage/enabled"));
}

TEST(InfoMemlockTest, BudgetAboveTheLimitWithoutCapIpcLockIsAnErrorWithEveryFix) {
  Facts f = Host();
  f.memlock.cap_ipc_lock = false;
  f.memlock.pinned = 1 * kMiB;
  f.memlock.locked = 5 * kMiB;  // mlock's counter: the pools planned here pin, they do not lock
  const PoolPlan plan = PlanPool(Options(2 * kMiB, 1 * kGiB, PageSize::k2M), f);
  EXPECT_TRUE(plan.memlock_applies);
  EXPECT_FALSE(plan.memlock_fits);
  const std::vector<Finding> all_p = FindProblems(f, plan);
  const Finding* p = Find(all_p, "memlock_too_low");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->severity, Severity::kError);
  EXPECT_THAT(p->problem, HasSubstr("RLIMIT_MEMLOCK is 8 MiB but the budget is 1 GiB and 1 MiB is "
                                    "long-term pinned already (VmPin)"));
  EXPECT_THAT(p->fix, AllOf(HasSubstr("`ulimit -l unlimited`"), HasSubstr("`ulimit -l 1049600`"),
                            HasSubstr("(needs root: above the hard limit of 8 MiB)"),
                            HasSubstr("/etc/security/limits.conf"),
                            HasSubstr("LimitMEMLOCK=infinity"), HasSubstr("CAP_IPC_LOCK"),
                            HasSubstr("lower the budget to 6 MiB (3 chunks of 2 MiB)")));
}

TEST(InfoCgroupTest, BudgetPastTheMemoryCgroupIsAnErrorWithThePerPlaceFix) {
  Facts f = Host();
  f.cgroup.version = 2;
  f.cgroup.path = f.cgroup.limit_path = "/kubepods/pod1/c1";
  f.cgroup.limit = 64 * kMiB;
  f.cgroup.usage = 4 * kMiB;
  f.cgroup.headroom = 60 * kMiB;
  f.cgroup.state.where.version = 2;
  const PoolPlan plan = PlanPool(Options(2 * kMiB, 1 * kGiB, PageSize::k2M), f);
  EXPECT_TRUE(plan.cgroup_applies);
  EXPECT_FALSE(plan.cgroup_fits);
  const std::vector<Finding> all_p = FindProblems(f, plan);
  const Finding* p = Find(all_p, "cgroup_too_small");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->severity, Severity::kError);
  EXPECT_THAT(p->problem, AllOf(HasSubstr("memory cgroup /kubepods/pod1/c1 (cgroup v2) is limited "
                                          "to 64 MiB"),
                                HasSubstr("60 MiB of headroom for a budget of 1 GiB"),
                                HasSubstr("OOM killer")));
  EXPECT_THAT(p->fix,
              AllOf(HasSubstr("MemoryMax=1028M"), HasSubstr("--memory 1028m"),
                    HasSubstr("resources.limits.memory: 1028Mi"), HasSubstr("--memory"),
                    HasSubstr("resources.limits.memory"), HasSubstr("or lower the budget")));
  // Required hugetlb pages are not charged to the memory cgroup.
  ToolOptions huge = Options(2 * kMiB, 1 * kGiB, PageSize::k2M);
  huge.require_page_size = true;
  EXPECT_TRUE(PlanPool(huge, f).cgroup_fits);
  // No limit: nothing to say.
  f.cgroup.limit.reset();
  f.cgroup.headroom.reset();
  const PoolPlan free_plan = PlanPool(Options(2 * kMiB, 1 * kGiB, PageSize::k2M), f);
  EXPECT_FALSE(free_plan.cgroup_applies);
  const std::vector<Finding> none = FindProblems(f, free_plan);
  EXPECT_EQ(Find(none, "cgroup_too_small"), nullptr);
}

TEST(InfoMemlockTest, CapIpcLockInTheBoundingSetOnlyIsReportedAsInert) {
  Facts f = Host();
  f.memlock.cap_ipc_lock = false;
  f.memlock.cap_ipc_lock_bounding_only = true;
  f.system.uid = 1000;
  const std::vector<Finding> all_p =
      FindProblems(f, PlanPool(Options(2 * kMiB, 1 * kGiB, PageSize::k2M), f));
  const Finding* p = Find(all_p, "cap_ipc_lock_not_effective");
  ASSERT_NE(p, nullptr);
  EXPECT_THAT(p->problem, AllOf(HasSubstr("bounding set but not effective (uid 1000)"),
                                HasSubstr("does not lift RLIMIT_MEMLOCK")));
  EXPECT_THAT(p->fix, AllOf(HasSubstr("containerd.service"), HasSubstr("--ulimit memlock=-1")));
  const Finding* low = Find(all_p, "memlock_too_low");
  ASSERT_NE(low, nullptr);
  EXPECT_THAT(low->fix, HasSubstr("for Kubernetes, the node's container runtime"));
}

TEST(InfoMemlockTest, FitsUnlimitedOrExempt) {
  Facts f = Host();
  f.memlock.cap_ipc_lock = false;
  EXPECT_TRUE(PlanPool(Options(2 * kMiB, 8 * kMiB, PageSize::k2M), f).memlock_fits);
  f.memlock.soft.reset();
  f.memlock.hard.reset();
  PoolPlan plan = PlanPool(ToolOptions{}, f);
  EXPECT_FALSE(plan.memlock_applies);
  EXPECT_FALSE(Has(FindProblems(f, plan), "memlock_too_low"));
  // Root: exempt here, but a note says what others would get.
  const Facts root = Host();
  plan = PlanPool(ToolOptions{}, root);
  EXPECT_TRUE(plan.memlock_fits);
  const std::vector<Finding> all_note = FindProblems(root, plan);
  const Finding* note = Find(all_note, "memlock_exempt_here");
  ASSERT_NE(note, nullptr);
  EXPECT_EQ(note->severity, Severity::kNote);
}

TEST(InfoIoUringTest, DisabledBySysctlSaysWhichSysctl) {
  Facts f = Host();
  f.io_uring = {};
  f.io_uring.error_errno = EPERM;
  f.io_uring.disabled_sysctl = 2;
  const std::vector<Finding> all_p = FindProblems(f, PlanPool(ToolOptions{}, f));
  const Finding* p = Find(all_p, "io_uring_unavailable");
  ASSERT_NE(p, nullptr);
  EXPECT_THAT(p->fix, HasSubstr("sysctl kernel.io_uring_disabled=0"));
  f.io_uring = {};
  f.io_uring.available = true;
  f.io_uring.sparse_buffers = false;
  f.io_uring.sparse_errno = EINVAL;
  EXPECT_TRUE(Has(FindProblems(f, PlanPool(ToolOptions{}, f)), "io_uring_no_sparse_buffers"));
}

// What N rings cost (--rings): the pool once where the kernel clones a registration into every
// ring (Linux 6.13+), once per ring where it cannot (this made-up host is 6.1), with the note and,
// past RLIMIT_MEMLOCK, the warning that say so.
TEST(InfoIoUringTest, RingsCostThePoolOnceWhereTheKernelClonesAndOncePerRingWhereItCannot) {
  Facts f = Host();
  f.memlock = {4 * kGiB, 4 * kGiB, 0, 0, /*cap_ipc_lock=*/false};
  ToolOptions o = Options(64 * kMiB, 1 * kGiB, PageSize::kTransparent);
  o.rings = 8;
  PoolPlan plan = PlanPool(o, f);
  EXPECT_EQ(plan.ring_sharing, IoUringSharing::kPerRing);
  EXPECT_EQ(plan.ring_memlock_bytes, 8 * kGiB);
  EXPECT_TRUE(plan.memlock_fits);
  EXPECT_FALSE(plan.ring_memlock_fits);
  std::vector<Finding> all = FindProblems(f, plan);
  const Finding* note = Find(all, "io_uring_no_clone");
  ASSERT_NE(note, nullptr);
  EXPECT_EQ(note->severity, Severity::kNote);
  EXPECT_THAT(note->problem, AllOf(HasSubstr("serving 8 rings"), HasSubstr("8 times (8 GiB)"),
                                   HasSubstr("ranges in 6.13")));
  EXPECT_THAT(note->fix, HasSubstr("Linux 6.13"));
  const Finding* over = Find(all, "io_uring_rings_exceed_memlock");
  ASSERT_NE(over, nullptr);
  EXPECT_EQ(over->severity, Severity::kWarning);
  EXPECT_THAT(over->problem,
              AllOf(HasSubstr("would charge 8 GiB"), HasSubstr("4 GiB of headroom")));
  EXPECT_THAT(over->fix, AllOf(HasSubstr("`ulimit -l 8388608`"), HasSubstr("fewer rings")));
  std::string error;
  auto v = testing::ParseJson(RenderJson(f, plan, all), &error);
  ASSERT_TRUE(v.has_value()) << error;
  EXPECT_FALSE((*v)["io_uring"]["clone"]["ranges"].boolean);
  EXPECT_EQ((*v)["pool"]["io_uring_rings"]["sharing"].text, "per_ring");
  EXPECT_EQ((*v)["pool"]["io_uring_rings"]["memlock_bytes"].Uint(), 8 * kGiB);
  EXPECT_EQ((*v)["pool"]["io_uring_rings"]["memlock_bytes_cloned"].Uint(), 1 * kGiB);
  EXPECT_FALSE((*v)["pool"]["io_uring_rings"]["fits"].boolean);
  EXPECT_THAT(RenderText(f, plan, all),
              AllOf(HasSubstr("NO (before Linux 6.12): each ring registers every chunk"),
                    HasSubstr("io_uring, 8 rings  memlock 8 GiB (the pool once per ring")));

  // Linux 6.12: whole tables only, which does not help a ring that serves I/O.
  f.io_uring.clone.whole_table = true;
  all = FindProblems(f, PlanPool(o, f));
  ASSERT_TRUE(Has(all, "io_uring_no_clone"));
  EXPECT_THAT(Find(all, "io_uring_no_clone")->problem, HasSubstr("Linux 6.12 clones only whole"));

  // Linux 6.13 and later: one registration for every ring.
  f.io_uring.clone = {.whole_table = true, .ranges = true, .keeps_later_entries = true};
  plan = PlanPool(o, f);
  EXPECT_EQ(plan.ring_sharing, IoUringSharing::kClone);
  EXPECT_EQ(plan.ring_memlock_bytes, 1 * kGiB);
  EXPECT_TRUE(plan.ring_memlock_fits);
  all = FindProblems(f, plan);
  EXPECT_FALSE(Has(all, "io_uring_no_clone"));
  EXPECT_FALSE(Has(all, "io_uring_rings_exceed_memlock"));
  EXPECT_FALSE(Has(all, "io_uring_clone_drops_later_slots"));
  v = testing::ParseJson(RenderJson(f, plan, all), &error);
  ASSERT_TRUE(v.has_value()) << error;
  EXPECT_TRUE((*v)["io_uring"]["clone"]["ranges"].boolean);
  EXPECT_EQ((*v)["pool"]["io_uring_rings"]["sharing"].text, "clone");
  EXPECT_EQ((*v)["pool"]["io_uring_rings"]["memlock_bytes"].Uint(), 1 * kGiB);
  EXPECT_EQ((*v)["pool"]["io_uring_rings"]["memlock_bytes_per_ring"].Uint(), 8 * kGiB);
  EXPECT_THAT(RenderText(f, plan, all),
              HasSubstr("memlock 1 GiB (the pool once, cloned into every ring; 8 GiB if each"));

  // A kernel whose range clones drop the destination's later slots.
  f.io_uring.clone.keeps_later_entries = false;
  EXPECT_TRUE(Has(FindProblems(f, PlanPool(o, f)), "io_uring_clone_drops_later_slots"));
}

TEST(InfoPinningTest, EachDomainSaysWhatItDoesToThePagesAndWhetherItIsAvailable) {
  Facts f = Host();
  std::vector<DomainPinning> d = DescribeDomains(f);
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(d[0].domain, "default");
  EXPECT_EQ(d[0].pinning, Pinning::kLongTerm);
  EXPECT_TRUE(d[0].available);
  EXPECT_EQ(d[1].domain, "io_uring");
  EXPECT_EQ(d[1].pinning, Pinning::kLongTerm);
  EXPECT_TRUE(d[1].available);
  EXPECT_EQ(d[2].domain, "verbs");
  EXPECT_FALSE(d[2].available) << "no RDMA device on this made-up host";
  EXPECT_EQ(d[3].domain, "mlock");
  EXPECT_EQ(d[3].pinning, Pinning::kResident);
  EXPECT_FALSE(Has(FindProblems(f, PlanPool(ToolOptions{}, f)), "long_term_pinning_unavailable"));
  f.rdma.list_errno.reset();
  f.rdma.devices = {Rxe()};
  EXPECT_TRUE(DescribeDomains(f)[2].available);

  const std::string text = RenderText(f, PlanPool(ToolOptions{}, f), {});
  EXPECT_THAT(text, AllOf(HasSubstr("Pinning (what each domain does to a chunk's pages)"),
                          HasSubstr("resident, not pinned: the physical address may change; not "
                                    "for DMA;")));
}

TEST(InfoPinningTest, NoLongTermPinIsAnErrorWithTheLibrarysReasonAndTheAlternatives) {
  Facts f = Host();
  f.io_uring = {};
  f.io_uring.error_errno = EPERM;
  f.io_uring.disabled_sysctl = 2;
  f.long_term_pin.available = false;
  f.long_term_pin.error = "long-term pinning is not available here: ... io_uring_disabled is 2";
  const std::vector<DomainPinning> d = DescribeDomains(f);
  EXPECT_FALSE(d[0].available);
  EXPECT_EQ(d[0].unavailable, f.long_term_pin.error);
  EXPECT_FALSE(d[1].available);
  EXPECT_THAT(d[1].unavailable, HasSubstr("sysctl kernel.io_uring_disabled=0"));
  EXPECT_TRUE(d[3].available) << "mlock needs no io_uring";
  const PoolPlan plan = PlanPool(ToolOptions{}, f);
  const std::vector<Finding> all = FindProblems(f, plan);
  const Finding* p = Find(all, "long_term_pinning_unavailable");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->severity, Severity::kError);
  EXPECT_THAT(p->problem, AllOf(HasSubstr("Pool::Create with no domain named fails"),
                                HasSubstr(f.long_term_pin.error)));
  EXPECT_THAT(p->fix,
              AllOf(HasSubstr("VerbsDomain::Open()"), HasSubstr("MakeResidentNotPinnedDomain()"),
                    HasSubstr("resident, not pinned"), HasSubstr("not for DMA")));
  EXPECT_EQ(all.front().severity, Severity::kError);
  std::string error;
  const auto v = testing::ParseJson(RenderJson(f, plan, all), &error);
  ASSERT_TRUE(v.has_value()) << error;
  EXPECT_FALSE((*v)["pinning"]["long_term_available"].boolean);
  EXPECT_EQ((*v)["pinning"]["long_term_error"].text, f.long_term_pin.error);
  EXPECT_THAT(RenderText(f, plan, all), HasSubstr("FAIL at Pool::Create"));
}

TEST(InfoPlanTest, InvalidOptionsAreRefusedAsPoolCreateWould) {
  const Facts f = Host();
  for (const ToolOptions& o :
       {Options(3 * kMiB, 1 * kGiB, PageSize::k2M), Options(64 * kMiB, 32 * kMiB, PageSize::k2M),
        Options(2 * kGiB, 4 * kGiB, PageSize::k2M),
        Options(64 * kMiB, 1 * kGiB, PageSize::k1G, true)}) {
    const PoolPlan plan = PlanPool(o, f);
    EXPECT_FALSE(plan.invalid.empty());
    EXPECT_TRUE(Has(FindProblems(f, plan), "invalid_pool_options")) << plan.invalid;
  }
}

TEST(InfoArgsTest, SizesAndPageSizes) {
  EXPECT_EQ(ParseSize("4096"), 4096u);
  EXPECT_EQ(ParseSize("64M"), 64 * kMiB);
  EXPECT_EQ(ParseSize("64MiB"), 64 * kMiB);
  EXPECT_EQ(ParseSize("64mb"), 64 * kMiB);
  EXPECT_EQ(ParseSize("1.5G"), 3 * kGiB / 2);
  EXPECT_EQ(ParseSize("2T"), 2048 * kGiB);
  for (const char* bad : {"", "M", "1X", "-1G", "1.3B", "1e3", "64 M"}) {
    EXPECT_EQ(ParseSize(bad), std::nullopt) << bad;
  }
  EXPECT_EQ(ParsePageSize("thp"), PageSize::kTransparent);
  EXPECT_EQ(ParsePageSize("2m"), PageSize::k2M);
  EXPECT_EQ(ParsePageSize("3M"), std::nullopt);
}

std::optional<ToolOptions> Parse(std::vector<std::string> args, std::string& error) {
  std::vector<char*> argv = {const_cast<char*>("pinpool-info")};
  for (std::string& a : args) argv.push_back(a.data());
  bool help = false, version = false;
  return ParseArguments(static_cast<int>(argv.size()), argv.data(), error, help, version);
}

TEST(InfoArgsTest, OptionsWithAndWithoutEquals) {
  std::string error;
  auto o = Parse({"--json", "--budget=2G", "--chunk-size", "128M", "--page-size=thp",
                  "--require-page-size", "--try", "--device", "rxe0"},
                 error);
  ASSERT_TRUE(o.has_value()) << error;
  EXPECT_TRUE(o->json);
  EXPECT_EQ(o->budget, 2 * kGiB);
  EXPECT_EQ(o->chunk_size, 128 * kMiB);
  EXPECT_EQ(o->page_size, PageSize::kTransparent);
  EXPECT_TRUE(o->require_page_size && o->try_pool && o->page_size_given);
  EXPECT_EQ(o->device, "rxe0");
  EXPECT_EQ(o->rings, 8u) << "the default";
  o = Parse({"--rings=16"}, error);
  ASSERT_TRUE(o.has_value()) << error;
  EXPECT_EQ(o->rings, 16u);
  for (std::vector<std::string> bad : std::vector<std::vector<std::string>>{{"--budget"},
                                                                            {"--budget", "x"},
                                                                            {"--json=yes"},
                                                                            {"--frobnicate"},
                                                                            {"--device", "a"},
                                                                            {"--rings", "0"},
                                                                            {"--rings", "many"},
                                                                            {"--rings", "8x"}}) {
    EXPECT_FALSE(Parse(bad, error).has_value()) << bad[0];
    EXPECT_THAT(error, Not(IsEmpty()));
  }
}

TEST(InfoRenderTest, JsonParsesAndTextHasEverySection) {
  Facts f = Host();
  f.rdma.list_errno.reset();
  f.rdma.devices = {Rxe()};
  const PoolPlan plan = PlanPool(ToolOptions{}, f);
  const auto all = FindProblems(f, plan);
  std::string error;
  const auto v = testing::ParseJson(RenderJson(f, plan, all), &error);
  ASSERT_TRUE(v.has_value()) << error;
  EXPECT_EQ((*v)["rdma"]["devices"][0]["max_mr_size"].Uint(), ~std::uint64_t{0});
  EXPECT_EQ((*v)["rdma"]["devices"][0]["ports"][0]["gids"][1]["ipv4"].text, "10.77.0.1");
  EXPECT_TRUE((*v)["rdma"]["devices"][0]["ports"][0]["gids"][1]["ipv4_mapped"].boolean);
  EXPECT_TRUE((*v)["rdma"]["devices"][0]["ports"][0]["gids"][0]["ipv4"].is_null());
  EXPECT_EQ((*v)["memlock"]["soft_limit_bytes"].Uint(), 8 * kMiB);
  EXPECT_TRUE((*v)["memlock"]["pin_headroom_bytes"].is_null()) << "CAP_IPC_LOCK: no limit";
  EXPECT_TRUE((*v)["memlock"]["lock_headroom_bytes"].is_null());
  EXPECT_EQ((*v)["schema_version"].Uint(), 4u);
  ASSERT_EQ((*v)["pinning"]["domains"].array.size(), 4u);
  EXPECT_EQ((*v)["pinning"]["domains"][0]["pinning"].text, "long-term");
  EXPECT_EQ((*v)["pinning"]["domains"][3]["pinning"].text, "resident");
  EXPECT_TRUE((*v)["pinning"]["long_term_available"].boolean);
  EXPECT_TRUE((*v)["pinning"]["long_term_error"].is_null());
  EXPECT_EQ((*v)["pool"]["chunks"].Uint(), 16u);
  EXPECT_EQ((*v)["problems"].array.size(), all.size());
  const std::string text = RenderText(f, plan, all);
  EXPECT_THAT(
      text, AllOf(HasSubstr("rxe0 (InfiniBand"), HasSubstr("PORT_ACTIVE"),
                  HasSubstr("::ffff:10.77.0.1"), HasSubstr("IPv4-mapped"), HasSubstr("Huge pages"),
                  HasSubstr("Pinning"), HasSubstr("Problems and fixes")));
}

}  // namespace
}  // namespace pinpool::info
