// The verbs domain's parts that need no device, tested on every machine (label unit): the
// messages registration failures turn into (one per errno class, each naming the limit and the
// fix), the max_mr_size rule, the access checks (ODP, atomics), VerbsAccess's IBV_ACCESS_* bits,
// ToSge / ToRemoteBuffer on a pool with a fake domain, fork-mode names, and what Open says on a
// machine without RDMA. The device-level behaviour is in the other tests of this directory,
// which run in the soft-RoCE guest.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include "pinpool/pool.h"
#include "pinpool/verbs.h"
#include "providers/verbs/access.h"
#include "providers/verbs/device.h"
#include "providers/verbs/errors.h"
#include "providers/verbs/windows.h"
#include "support/counting_domain.h"

namespace pinpool {
namespace {

using internal::RegMrContext;
using internal::VerbsDeviceCaps;
using ::testing::HasSubstr;

RegMrContext Context(bool unlimited) {
  RegMrContext c;
  c.domain = "rxe0/pd1";
  c.length = 4 * kMiB;
  c.access = {.trusted_whole_chunk = {.read = true, .write = true}};
  c.live_regions = 7;
  c.max_mr = 524287;
  c.memlock.limit = unlimited ? SIZE_MAX : 64 * kKiB;
  c.memlock.locked = 0;
  c.memlock.exempt = false;
  c.memlock.pinned = 2 * kMiB;
  return c;
}

// A device's NUMA node from a sysfs tree laid out as the two-node guest's (docs/softroce.md, "NUMA
// mode"): rxe0 has no device link, its parent netdev's device is a virtio device without numa_node,
// whose PCI function has one; a hardware device has its own; a virtual netdev (dummy0) has none.
TEST(VerbsDeviceNumaNodeTest, WalksFromTheNetdevToTheFirstAncestorWithANode) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("pinpool-sysfs-" + std::to_string(getpid()));
  fs::remove_all(root);
  const auto write = [&](const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  };
  const fs::path pci = root / "devices/pci0000:20/0000:20:00.0/0000:21:00.0";
  write(pci / "numa_node", "1\n");
  fs::create_directories(pci / "virtio2");
  write(root / "class/infiniband/rxe0/parent", "eth0\n");
  fs::create_directories(root / "class/net/eth0");
  fs::create_directory_symlink(pci / "virtio2", root / "class/net/eth0/device");
  write(root / "class/infiniband/rxe1/parent", "dummy0\n");
  fs::create_directories(root / "class/net/dummy0");
  const fs::path hca = root / "devices/pci0000:00/0000:00:03.0";
  write(hca / "numa_node", "0\n");
  fs::create_directories(root / "class/infiniband/mlx5_0");
  fs::create_directory_symlink(hca, root / "class/infiniband/mlx5_0/device");
  const fs::path unknown = root / "devices/pci0000:00/0000:00:04.0";
  write(unknown / "numa_node", "-1\n");
  fs::create_directories(root / "class/infiniband/mlx5_1");
  fs::create_directory_symlink(unknown, root / "class/infiniband/mlx5_1/device");

  EXPECT_EQ(internal::VerbsDeviceNumaNode("rxe0", root), 1);
  EXPECT_EQ(internal::VerbsDeviceNumaNode("rxe1", root), -1) << "dummy0 has no device";
  EXPECT_EQ(internal::VerbsDeviceNumaNode("mlx5_0", root), 0);
  EXPECT_EQ(internal::VerbsDeviceNumaNode("mlx5_1", root), -1) << "the kernel says -1: unknown";
  EXPECT_EQ(internal::VerbsDeviceNumaNode("nosuch", root), -1);
  fs::remove_all(root);
}

TEST(VerbsErrorsTest, RegionLargerThanMaxMrSizeNamesTheLimitAndChunkSize) {
  EXPECT_TRUE(internal::CheckRegionSize(64 * kMiB, 64 * kMiB, "dev/pd1").ok());
  EXPECT_TRUE(internal::CheckRegionSize(2 * kMiB, UINT64_MAX, "dev/pd1").ok());
  const absl::Status s = internal::CheckRegionSize(64 * kMiB, 48 * kMiB, "dev/pd1");
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("max_mr_size (48 MiB)"));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("lower PoolOptions::chunk_size to at most 32 MiB"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("dev/pd1"));
}

TEST(VerbsErrorsTest, PinRefusedUnderRlimitMemlockNamesTheLimitVmPinAndTheFix) {
  for (const int err : {ENOMEM, EAGAIN}) {
    const absl::Status s = internal::RegMrFailed(err, Context(/*unlimited=*/false));
    EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
    const std::string m(s.message());
    EXPECT_THAT(m, HasSubstr("ibv_reg_mr of 4 MiB failed"));
    EXPECT_THAT(m, HasSubstr("RLIMIT_MEMLOCK"));
    EXPECT_THAT(m, HasSubstr("ulimit -l"));
    EXPECT_THAT(m, HasSubstr("CAP_IPC_LOCK"));
    EXPECT_THAT(m, HasSubstr("VmPin, 2 MiB now"));
  }
}

TEST(VerbsErrorsTest, PinRefusedWithoutLimitBlamesTheDevicesResources) {
  const absl::Status s = internal::RegMrFailed(ENOMEM, Context(/*unlimited=*/true));
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  const std::string m(s.message());
  EXPECT_THAT(m, HasSubstr("may pin without limit"));
  EXPECT_THAT(m, HasSubstr("rxe0/pd1 holds 7 regions, the device allows 524287"));
  EXPECT_THAT(m, HasSubstr("lower PoolOptions::budget"));
}

TEST(VerbsErrorsTest, OtherErrnosMapToTheirCodesAndSayWhatWasAsked) {
  const RegMrContext c = Context(false);
  const absl::Status inval = internal::RegMrFailed(EINVAL, c);
  EXPECT_TRUE(absl::IsInvalidArgument(inval)) << inval;
  EXPECT_THAT(std::string(inval.message()),
              HasSubstr("local_write+trusted_whole_chunk.read+trusted_whole_chunk.write"));
  const absl::Status fault = internal::RegMrFailed(EFAULT, c);
  EXPECT_TRUE(absl::IsInvalidArgument(fault)) << fault;
  EXPECT_THAT(std::string(fault.message()), HasSubstr("not memory the kernel can pin"));
  EXPECT_TRUE(absl::IsPermissionDenied(internal::RegMrFailed(EPERM, c)));
  EXPECT_TRUE(absl::IsPermissionDenied(internal::RegMrFailed(EACCES, c)));
  EXPECT_TRUE(absl::IsUnimplemented(internal::RegMrFailed(EOPNOTSUPP, c)));
  const absl::Status other = internal::RegMrFailed(EIO, c);
  EXPECT_TRUE(absl::IsInternal(other)) << other;
  EXPECT_THAT(std::string(other.message()), HasSubstr("Input/output error"));
}

TEST(VerbsAccessTest, DefaultIsLocalWriteOnlyAndRemoteRightsOnlyWhenAsked) {
  EXPECT_EQ(VerbsAccess{}.ibv_flags(), IBV_ACCESS_LOCAL_WRITE);
  EXPECT_EQ((VerbsAccess{.trusted_whole_chunk = {.read = true}}.ibv_flags()),
            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
  EXPECT_EQ((VerbsAccess{.trusted_whole_chunk = {.write = true, .atomic = true}}.ibv_flags()),
            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
  EXPECT_EQ((VerbsAccess{.local_write = false}.ibv_flags()), 0);
  EXPECT_EQ((VerbsAccess{.on_demand = true}.ibv_flags()),
            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
}

TEST(VerbsAccessTest, OnDemandPagingNeedsTheDevicesOdpForRcReadAndWrite) {
  const VerbsAccess odp{.trusted_whole_chunk = {.read = true, .write = true}, .on_demand = true};
  VerbsDeviceCaps none;  // what rxe reports
  const absl::Status s = internal::CheckVerbsAccess(odp, none, "rxe0");
  EXPECT_TRUE(absl::IsUnimplemented(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("rxe0 has no on-demand paging (ODP)"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("leave VerbsAccess::on_demand false"));

  VerbsDeviceCaps send_only{.odp = true, .rc_odp_caps = IBV_ODP_SUPPORT_SEND};
  EXPECT_TRUE(absl::IsUnimplemented(internal::CheckVerbsAccess(odp, send_only, "mlx5_0")));
  VerbsDeviceCaps full{.odp = true, .rc_odp_caps = IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_WRITE};
  EXPECT_TRUE(internal::CheckVerbsAccess(odp, full, "mlx5_0").ok());
  EXPECT_TRUE(internal::CheckVerbsAccess(VerbsAccess{}, none, "rxe0").ok());
}

TEST(VerbsAccessTest, AtomicsNeedTheCapabilityAndRemoteWritesNeedLocalWrite) {
  VerbsDeviceCaps no_atomics{.atomics = false};
  const absl::Status a =
      internal::CheckVerbsAccess({.trusted_whole_chunk = {.atomic = true}}, no_atomics, "dev0");
  EXPECT_TRUE(absl::IsUnimplemented(a)) << a;
  EXPECT_THAT(std::string(a.message()), HasSubstr("IBV_ATOMIC_NONE"));
  const absl::Status w =
      internal::CheckVerbsAccess({.local_write = false, .trusted_whole_chunk = {.write = true}},
                                 VerbsDeviceCaps{.atomics = true}, "dev0");
  EXPECT_TRUE(absl::IsInvalidArgument(w)) << w;
  EXPECT_THAT(std::string(w.message()), HasSubstr("set VerbsAccess::local_write"));
}

// ToSge and ToRemoteBuffer take exactly the block's address, size and the keys of the domain
// asked for: checked against a fake domain's distinct keys, for domain 0 and domain 1.
// The capability table behind GrantMechanism::kAuto: no type 2 windows names the capability;
// rxe's windows are known not to enforce their bounds (and say why); other devices' do. rxe also
// reports SEND_WITH_INV with the kernel's flag bit.
TEST(WindowSupportTest, KautoUsesWindowsOnlyWhereTheyEnforceTheirBounds) {
  VerbsDeviceCaps none{.windows_type2 = false};
  const WindowSupport a = internal::WindowSupportOf(none);
  EXPECT_FALSE(a.type2);
  EXPECT_FALSE(a.bounds_enforced);
  EXPECT_THAT(a.reason, HasSubstr("IBV_DEVICE_MEM_WINDOW_TYPE_2A"));
  EXPECT_THAT(a.reason, HasSubstr("SR-IOV"));

  VerbsDeviceCaps rxe{.vendor_id = 0xffffff, .windows_type2 = true};
  const WindowSupport b = internal::WindowSupportOf(rxe);
  EXPECT_TRUE(b.type2);
  EXPECT_FALSE(b.bounds_enforced);
  EXPECT_THAT(b.reason, HasSubstr("rxe"));
  EXPECT_THAT(b.reason, HasSubstr("whole chunk"));
  EXPECT_EQ(internal::WithInvalidateFlag(rxe), 1u << 2);

  VerbsDeviceCaps mlx5{.vendor_id = 0x02c9, .windows_type2 = true};
  const WindowSupport c = internal::WindowSupportOf(mlx5);
  EXPECT_TRUE(c.type2 && c.bounds_enforced);
  EXPECT_TRUE(c.reason.empty());
  EXPECT_EQ(internal::WithInvalidateFlag(mlx5), static_cast<unsigned>(IBV_WC_WITH_INV));
}

TEST(VerbsHelpersTest, SgeAndRemoteBufferCarryTheBlocksAddressSizeAndKeys) {
  auto d0 = std::make_shared<testing::CountingDomain>("fake0");
  auto d1 = std::make_shared<testing::CountingDomain>("fake1");
  PoolOptions o;
  o.chunk_size = 2 * kMiB;
  o.budget = 4 * kMiB;
  o.domains = {d0, d1};
  absl::StatusOr<std::unique_ptr<Pool>> pool = Pool::Create(o);
  ASSERT_TRUE(pool.ok()) << pool.status();
  const Block b = (*pool)->Allocate(5000);
  ASSERT_TRUE(b);
  for (std::size_t d = 0; d < 2; ++d) {
    const ibv_sge sge = ToSge(b, d);
    EXPECT_EQ(sge.addr, reinterpret_cast<std::uintptr_t>(b.data()));
    EXPECT_EQ(sge.length, b.size());
    EXPECT_EQ(sge.lkey, ToUnderlying(b.chunk().keys[d].lkey));
    const RemoteBuffer r = ToRemoteBuffer(b, d);
    EXPECT_EQ(r.address, reinterpret_cast<std::uintptr_t>(b.data()));
    EXPECT_EQ(r.length, b.size());
    EXPECT_EQ(ToUnderlying(r.rkey), ToUnderlying(b.chunk().keys[d].rkey));
  }
  EXPECT_NE(ToSge(b, 0).lkey, ToSge(b, 1).lkey);

  const auto* interior = static_cast<const char*>(b.data()) + 1000;
  const std::optional<Location> at = (*pool)->Lookup(interior);
  ASSERT_TRUE(at);
  const ibv_sge part = ToSge(*at, 100, 1);
  EXPECT_EQ(part.addr, reinterpret_cast<std::uintptr_t>(interior));
  EXPECT_EQ(part.length, 100u);
  EXPECT_EQ(part.lkey, ToUnderlying(b.lkey(1)));
  (*pool)->Deallocate(b);
}

TEST(VerbsHelpersTest, ForkModeHasANameForEveryMode) {
  EXPECT_STREQ(ForkModeName(ForkMode::kDisabled), "disabled");
  EXPECT_STREQ(ForkModeName(ForkMode::kEnabled), "enabled");
  EXPECT_STREQ(ForkModeName(ForkMode::kUnneeded), "unneeded");
  EXPECT_STRNE(ForkModeName(QueryForkMode()), "?");
}

// On a machine without RDMA (the project's hosts: no RDMA in the kernel at all), Open says so
// and says what to load, instead of failing somewhere inside libibverbs.
TEST(VerbsDomainWithoutDeviceTest, OpenSaysThereIsNoDeviceAndWhatToLoad) {
  struct stat st {};
  if (::stat("/sys/class/infiniband", &st) == 0) {
    GTEST_SKIP() << "this machine has RDMA devices (/sys/class/infiniband exists); the tests run "
                    "against them are in verbs_domain_test";
  }
  const absl::StatusOr<std::shared_ptr<VerbsDomain>> d = VerbsDomain::Open();
  ASSERT_FALSE(d.ok());
  EXPECT_TRUE(absl::IsNotFound(d.status())) << d.status();
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("no RDMA device"));
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("rdma_rxe"));
  const absl::StatusOr<std::shared_ptr<VerbsDomain>> w = VerbsDomain::Wrap(nullptr);
  EXPECT_TRUE(absl::IsInvalidArgument(w.status())) << w.status();
}

}  // namespace
}  // namespace pinpool
