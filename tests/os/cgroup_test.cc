// The memory cgroup's location and headroom (os/cgroup.h) on fabricated files: /proc/self/cgroup
// and /proc/self/mountinfo texts of both versions, and a temporary directory standing for the
// mounted hierarchy, with nested limits, "max", v1's unlimited number, use_hierarchy 0, an
// ancestor tighter than the cgroup itself, a container's partial mount, and reclaimable cache.
#include "os/cgroup.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace pinpool::internal::os {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kMiB = std::size_t{1} << 20;

class FakeHierarchy {
 public:
  FakeHierarchy() {
    char tmpl[] = "/tmp/pinpool-cgroup-test-XXXXXX";
    root_ = ::mkdtemp(tmpl);
  }
  ~FakeHierarchy() { fs::remove_all(root_); }
  const std::string& root() const { return root_; }
  void Write(const std::string& rel, const std::string& text) {
    const fs::path p = fs::path(root_) / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }

 private:
  std::string root_;
};

std::string V1Mountinfo(const std::string& mount, const std::string& root = "/") {
  return "25 1 0:23 / / rw - ext4 /dev/vda rw\n"
         "35 31 0:32 " +
         root + " " + mount +
         " rw,relatime - cgroup cgroup rw,memory\n"
         "36 31 0:33 / /elsewhere rw,relatime - cgroup cgroup rw,cpu\n"
         "41 31 0:38 / /unified rw,relatime - cgroup2 cgroup2 rw\n";
}
std::string V2Mountinfo(const std::string& mount, const std::string& root = "/") {
  return "25 1 0:23 / / rw - ext4 /dev/vda rw\n"
         "41 31 0:38 " +
         root + " " + mount + " rw,nosuid shared:9 - cgroup2 cgroup2 rw\n";
}

TEST(CgroupParse, V1MemoryLineWinsOnAHybridHost) {
  const auto where = ParseMemoryCgroup("5:devices:/\n4:memory:/a/b\n3:cpu,cpuacct:/\n0::/\n",
                                       V1Mountinfo("/cg/memory"));
  EXPECT_EQ(where.version, 1);
  EXPECT_EQ(where.path, "/a/b");
  EXPECT_EQ(where.mount, "/cg/memory");
  EXPECT_EQ(where.dir, "/cg/memory/a/b");
}

TEST(CgroupParse, MemoryBesideOtherControllersOnOneV1Line) {
  const auto where = ParseMemoryCgroup("4:cpu,memory:/x\n", V1Mountinfo("/m"));
  EXPECT_EQ(where.version, 1);
  EXPECT_EQ(where.dir, "/m/x");
}

TEST(CgroupParse, V2WithOptionalMountinfoFields) {
  const auto where = ParseMemoryCgroup("0::/kubepods/pod1/c1\n", V2Mountinfo("/sys/fs/cgroup"));
  EXPECT_EQ(where.version, 2);
  EXPECT_EQ(where.dir, "/sys/fs/cgroup/kubepods/pod1/c1");
}

TEST(CgroupParse, RootCgroupIsTheMountPoint) {
  const auto where = ParseMemoryCgroup("0::/\n", V2Mountinfo("/sys/fs/cgroup"));
  EXPECT_EQ(where.version, 2);
  EXPECT_EQ(where.dir, "/sys/fs/cgroup");
}

TEST(CgroupParse, AContainerSeesOnlyItsPartOfTheHierarchy) {
  // The mount's root is the container's cgroup: the longest matching root is used and the path
  // below it is what is joined to the mount point.
  const auto where =
      ParseMemoryCgroup("0::/kubepods/pod1/c1\n", V2Mountinfo("/sys/fs/cgroup", "/kubepods/pod1") +
                                                      V2Mountinfo("/other", "/"));
  EXPECT_EQ(where.mount, "/sys/fs/cgroup");
  EXPECT_EQ(where.dir, "/sys/fs/cgroup/c1");
}

TEST(CgroupParse, PrefixOfANameIsNotAParent) {
  const auto where = ParseMemoryCgroup("0::/ab\n", V2Mountinfo("/sys/fs/cgroup", "/a"));
  EXPECT_EQ(where.version, 0);
  EXPECT_FALSE(where.note.empty());
}

TEST(CgroupParse, NoMemoryControllerAnywhereSaysWhy) {
  EXPECT_EQ(ParseMemoryCgroup("", "").version, 0);
  EXPECT_NE(ParseMemoryCgroup("", "").note, "");
  const auto unmounted = ParseMemoryCgroup("4:memory:/a\n", V2Mountinfo("/sys/fs/cgroup"));
  EXPECT_EQ(unmounted.version, 0);
  EXPECT_NE(unmounted.note.find("v1 memory controller is not mounted"), std::string::npos);
}

TEST(CgroupRead, V2NestedLimitsTheTightestAncestorWins) {
  FakeHierarchy h;
  // The root has no memory.max (as in the kernel); /a is limited to 100 MiB with 90 MiB used by
  // all its children; /a/b, the process's, has 512 MiB with 10 MiB used: /a is the ceiling.
  h.Write("a/memory.max", std::to_string(100 * kMiB) + "\n");
  h.Write("a/memory.current", std::to_string(90 * kMiB) + "\n");
  h.Write("a/memory.stat", "anon 1\ninactive_file " + std::to_string(4 * kMiB) + "\nfile 9\n");
  h.Write("a/b/memory.max", std::to_string(512 * kMiB) + "\n");
  h.Write("a/b/memory.current", std::to_string(10 * kMiB) + "\n");
  h.Write("a/b/memory.stat", "inactive_file 0\n");
  const auto where = ParseMemoryCgroup("0::/a/b\n", V2Mountinfo(h.root()));
  ASSERT_EQ(where.dir, h.root() + "/a/b");
  const MemoryCgroupState s = ReadMemoryCgroup(where);
  EXPECT_TRUE(s.error.empty()) << s.error;
  EXPECT_EQ(s.levels, 3);
  ASSERT_TRUE(s.limited);
  EXPECT_EQ(s.limit_path, "/a");
  EXPECT_EQ(s.limit, 100 * kMiB);
  EXPECT_EQ(s.usage, 90 * kMiB);
  EXPECT_EQ(s.reclaimable, 4 * kMiB);
  EXPECT_EQ(s.Headroom(), 14 * kMiB) << "limit - (usage - inactive file)";
}

TEST(CgroupRead, V2MaxEverywhereIsUnlimited) {
  FakeHierarchy h;
  h.Write("a/memory.max", "max\n");
  h.Write("a/memory.current", "123\n");
  h.Write("a/b/memory.max", "max\n");
  h.Write("a/b/memory.current", "100\n");
  const MemoryCgroupState s =
      ReadMemoryCgroup(ParseMemoryCgroup("0::/a/b\n", V2Mountinfo(h.root())));
  EXPECT_FALSE(s.limited);
  EXPECT_EQ(s.Headroom(), std::nullopt);
  EXPECT_TRUE(s.error.empty()) << s.error;
}

TEST(CgroupRead, V2OwnLimitOverUsedIsZeroHeadroom) {
  FakeHierarchy h;
  h.Write("c/memory.max", std::to_string(64 * kMiB));
  h.Write("c/memory.current", std::to_string(65 * kMiB));
  const MemoryCgroupState s = ReadMemoryCgroup(ParseMemoryCgroup("0::/c\n", V2Mountinfo(h.root())));
  ASSERT_TRUE(s.limited);
  EXPECT_EQ(s.limit_path, "/c");
  EXPECT_EQ(s.Headroom(), 0u);
}

TEST(CgroupRead, V1UnlimitedNumberAndNestedLimit) {
  FakeHierarchy h;
  h.Write("memory.limit_in_bytes", "9223372036854771712\n");  // the root: unlimited
  h.Write("memory.usage_in_bytes", "999999999\n");
  h.Write("memory.use_hierarchy", "1\n");
  h.Write("p/memory.limit_in_bytes", std::to_string(64 * kMiB));
  h.Write("p/memory.usage_in_bytes", std::to_string(3 * kMiB));
  h.Write("p/memory.stat",
          "cache 5\ninactive_file 7\ntotal_inactive_file " + std::to_string(kMiB) + "\n");
  h.Write("p/memory.use_hierarchy", "1\n");
  h.Write("p/q/memory.limit_in_bytes", "9223372036854771712\n");
  h.Write("p/q/memory.usage_in_bytes", std::to_string(kMiB));
  const MemoryCgroupState s =
      ReadMemoryCgroup(ParseMemoryCgroup("4:memory:/p/q\n", V1Mountinfo(h.root())));
  EXPECT_EQ(s.where.version, 1);
  EXPECT_EQ(s.levels, 3);
  ASSERT_TRUE(s.limited);
  EXPECT_EQ(s.limit_path, "/p");
  EXPECT_EQ(s.limit, 64 * kMiB);
  EXPECT_EQ(s.reclaimable, kMiB) << "v1's hierarchical total_inactive_file, not inactive_file";
  EXPECT_EQ(s.Headroom(), 62 * kMiB);
}

TEST(CgroupRead, V1ParentWithoutHierarchyIsNotAnAncestorLimit) {
  FakeHierarchy h;
  h.Write("p/memory.limit_in_bytes", std::to_string(8 * kMiB));
  h.Write("p/memory.usage_in_bytes", std::to_string(7 * kMiB));
  h.Write("p/memory.use_hierarchy", "0\n");
  h.Write("p/q/memory.limit_in_bytes", "9223372036854771712\n");
  h.Write("p/q/memory.usage_in_bytes", "0\n");
  const MemoryCgroupState s =
      ReadMemoryCgroup(ParseMemoryCgroup("4:memory:/p/q\n", V1Mountinfo(h.root())));
  EXPECT_FALSE(s.limited);
  EXPECT_EQ(s.levels, 1);
}

TEST(CgroupRead, AMissingLimitFileBelowTheRootIsReported) {
  FakeHierarchy h;
  h.Write("a/memory.current", "1\n");
  const MemoryCgroupState s = ReadMemoryCgroup(ParseMemoryCgroup("0::/a\n", V2Mountinfo(h.root())));
  EXPECT_FALSE(s.limited);
  EXPECT_NE(s.error.find("memory.max"), std::string::npos) << s.error;
}

TEST(CgroupRead, ThisProcessIsFoundAndReadWithoutError) {
  const MemoryCgroupState s = QueryMemoryCgroup();
  if (s.where.version == 0) GTEST_SKIP() << "no memory cgroup here: " << s.where.note;
  EXPECT_TRUE(s.error.empty()) << s.error;
  EXPECT_TRUE(std::filesystem::exists(s.where.dir)) << s.where.dir;
}

}  // namespace
}  // namespace pinpool::internal::os
