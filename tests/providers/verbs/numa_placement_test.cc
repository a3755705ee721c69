// NUMA placement on a machine with two nodes: the soft-RoCE guest booted with PINPOOL_VM_NUMA=2,
// rxe0 on a NIC behind a PCI expander bridge on node 1 (PINPOOL_VM_NIC_NODE=1) and 2 MiB huge pages
// on node 1 only (ctest rdma.numa_placement_test; tests/providers/verbs/CMakeLists.txt). Run with
// --expect-device-node=N (the node the harness put the NIC on).
//  - the verbs domain reports its device's node, and a pool placed by default puts every chunk
//    there: the pool's stats say so and the kernel agrees, asked independently here
//    (get_mempolicy(MPOL_F_NODE | MPOL_F_ADDR) per page, and move_pages without targets);
//  - an explicit node wins over the device's; kNoNumaNode binds nothing;
//  - hugetlb chunks come from the chosen node's own pool; asking them of a node without any fails
//    saying which node and how to reserve them there;
//  - a node that is not there fails Create with the nodes there are.
// Fails (never skips) with fewer than two nodes or no device when PINPOOL_REQUIRE_RDMA=1.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "os/os.h"
#include "pinpool/pool.h"
#include "pinpool/verbs.h"
#include "verbs_test_support.h"

namespace pinpool {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
int expected_device_node = -1;

constexpr std::size_t kChunk = 8 * kMiB;
constexpr int kMpolFNode = 1 << 0;  // <numaif.h>, without needing libnuma's headers
constexpr int kMpolFAddr = 1 << 1;

// The node of the page at `p`, asked of the kernel directly.
int NodeOfPage(const void* p) {
  int node = -1;
  if (syscall(SYS_get_mempolicy, &node, nullptr, 0, const_cast<void*>(p),
              kMpolFNode | kMpolFAddr) != 0) {
    return -100 - errno;
  }
  return node;
}

// Pages of [p, p + n) per node (index: node; the last entry counts pages not present).
std::vector<std::size_t> PagesPerNode(const void* p, std::size_t n) {
  std::vector<void*> pages;
  for (std::size_t off = 0; off < n; off += 4096) {
    pages.push_back(static_cast<char*>(const_cast<void*>(p)) + off);
  }
  std::vector<int> status(pages.size(), -1);
  std::vector<std::size_t> count(3, 0);
  if (syscall(SYS_move_pages, 0, pages.size(), pages.data(), nullptr, status.data(), 0) != 0) {
    return {};
  }
  for (int s : status) ++count[s >= 0 && s < 2 ? s : 2];
  return count;
}

class NumaPlacementTest : public pinpool::testing::VerbsTest {
 protected:
  void SetUp() override {
    VerbsTest::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    ASSERT_GE(internal::os::OnlineNodes().size(), 2u)
        << "this test needs two NUMA nodes: run it in the guest with PINPOOL_VM_NUMA=2";
  }

  PoolOptions Options(int node, PageSize page = PageSize::k4K) {
    PoolOptions o;
    o.chunk_size = kChunk;
    o.budget = 4 * kChunk;
    o.initial_size = 2 * kChunk;
    o.page_size = page;
    o.require_page_size = true;
    o.numa_node = node;
    o.domains = {domain_};
    return o;
  }

  // Every chunk of `pool` is on `node`: in the pool's stats, and per the kernel.
  void ExpectAllOn(const Pool& pool, int node) {
    const PoolStats s = pool.GetStats();
    EXPECT_EQ(s.growth.numa_node, node);
    ASSERT_EQ(s.chunks.size(), 2u);
    for (const ChunkStats& c : s.chunks) {
      EXPECT_EQ(c.numa_node, node) << "chunk " << c.index << " (pool's stats)";
      const auto* p = reinterpret_cast<const char*>(c.base);
      EXPECT_EQ(NodeOfPage(p), node) << "first page of chunk " << c.index;
      EXPECT_EQ(NodeOfPage(p + c.size - 4096), node) << "last page of chunk " << c.index;
      const std::vector<std::size_t> per = PagesPerNode(p, c.size);
      ASSERT_EQ(per.size(), 3u) << "move_pages failed";
      EXPECT_EQ(per[node], c.size / 4096)
          << "pages on node0/node1/absent: " << per[0] << "/" << per[1] << "/" << per[2];
    }
  }
};

TEST_F(NumaPlacementTest, ByDefaultChunksGoToTheDevicesNode) {
  ASSERT_GE(expected_device_node, 0) << "run with --expect-device-node=N";
  EXPECT_EQ(domain_->numa_node(), expected_device_node) << domain_->device_name();
  auto pool = Pool::Create(Options(kDeviceNumaNode));
  ASSERT_TRUE(pool.ok()) << pool.status();
  ExpectAllOn(**pool, expected_device_node);
  const std::string text = (*pool)->GetStats().ToString();
  EXPECT_EQ((*pool)->GetStats().growth.numa_node, expected_device_node);
  EXPECT_THAT(text, ContainsRegex("numa_node +" + std::to_string(expected_device_node) + " "));
  // A block there carries the chunk's keys: an RDMA WRITE into it works like anywhere else.
  Block b = (*pool)->Allocate(64 * kKiB);
  ASSERT_TRUE(b);
  EXPECT_EQ(NodeOfPage(b.data()), expected_device_node);
  (*pool)->Deallocate(b);
}

TEST_F(NumaPlacementTest, AnExplicitNodeWins) {
  const int other = expected_device_node == 0 ? 1 : 0;
  auto pool = Pool::Create(Options(other));
  ASSERT_TRUE(pool.ok()) << pool.status();
  ExpectAllOn(**pool, other);
}

TEST_F(NumaPlacementTest, NoNumaNodeBindsNothing) {
  auto pool = Pool::Create(Options(kNoNumaNode));
  ASSERT_TRUE(pool.ok()) << pool.status();
  const PoolStats s = (*pool)->GetStats();
  EXPECT_EQ(s.growth.numa_node, -1);
  for (const ChunkStats& c : s.chunks) EXPECT_EQ(c.numa_node, -1);
}

TEST_F(NumaPlacementTest, HugePagesComeFromTheChosenNodesOwnPool) {
  // The harness reserved 2 MiB pages on node 1 only.
  auto on1 = Pool::Create(Options(1, PageSize::k2M));
  ASSERT_TRUE(on1.ok()) << on1.status();
  for (const ChunkStats& c : (*on1)->GetStats().chunks) {
    EXPECT_EQ(c.page_size, PageSize::k2M);
    EXPECT_EQ(c.numa_node, 1);
    EXPECT_EQ(NodeOfPage(reinterpret_cast<void*>(c.base)), 1);
  }
  on1->reset();
  auto on0 = Pool::Create(Options(0, PageSize::k2M));
  ASSERT_FALSE(on0.ok());
  EXPECT_EQ(on0.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(on0.status().message()),
              AllOf(HasSubstr("NUMA node 0 has 0 free 2 MiB huge pages"),
                    HasSubstr("/sys/devices/system/node/node0/hugepages/hugepages-2048kB")));
}

TEST_F(NumaPlacementTest, ANodeThatIsNotThereFailsNamingTheNodes) {
  auto pool = Pool::Create(Options(5));
  ASSERT_FALSE(pool.ok());
  EXPECT_EQ(pool.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(pool.status().message()),
              AllOf(HasSubstr("numa_node is 5"), HasSubstr("online NUMA nodes are 0,1")));
}

}  // namespace
}  // namespace pinpool

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const std::string flag = "--expect-device-node=";
    if (arg.rfind(flag, 0) == 0)
      pinpool::expected_device_node = std::atoi(arg.c_str() + flag.size());
  }
  return RUN_ALL_TESTS();
}
