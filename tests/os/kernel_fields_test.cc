// The os room's small pure helpers: the one parser of "Key: value" /proc files, the page-size
// order MapChunk (and pinpool-info) walk, and the one memlock headroom computation.
#include "os/kernel_fields.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "os/os.h"

namespace pinpool::internal::os {
namespace {

constexpr std::string_view kStatus =
    "Name:\tpool\nVmPeak:\t  123456 kB\nVmLck:\t       0 kB\nVmPin:\t    2048 kB\n"
    "CapEff:\t000001ffffffffff\nVmPinned:\t7 kB\nThreads:\t4";

TEST(KernelFieldsTest, FindsTheKeyAtALineStartNotAPrefixOfAnother) {
  EXPECT_EQ(KernelField(kStatus, "Name"), "pool");
  EXPECT_EQ(KernelFieldBytes(kStatus, "VmPin"), 2048u << 10) << "not VmPinned";
  EXPECT_EQ(KernelFieldBytes(kStatus, "VmPinned"), 7u << 10);
  EXPECT_EQ(KernelFieldBytes(kStatus, "VmLck"), 0u);
  EXPECT_EQ(KernelFieldNumber(kStatus, "Threads"), 4u) << "the last line has no newline";
  EXPECT_EQ(KernelFieldNumber(kStatus, "CapEff", 16), 0x1ffffffffffu);
  EXPECT_FALSE(KernelField(kStatus, "VmSwap").has_value());
  EXPECT_FALSE(KernelField(kStatus, "Vm").has_value()) << "a prefix is not a key";
  EXPECT_FALSE(KernelFieldNumber(kStatus, "Name").has_value()) << "not a number";
}

TEST(KernelFieldsTest, ReadsThisProcesssStatus) {
  const std::optional<std::uint64_t> size = ProcStatusBytes("VmSize");
  ASSERT_TRUE(size.has_value());
  EXPECT_GT(*size, 1u << 20);
  EXPECT_FALSE(ProcStatusBytes("NoSuchField").has_value());
}

TEST(PageSizesToTryTest, LargestFirstFromThePolicyOrOnlyTheRequiredOne) {
  using V = std::vector<PageSize>;
  EXPECT_EQ(PageSizesToTry(PageSize::k1G, false),
            (V{PageSize::k1G, PageSize::k2M, PageSize::kTransparent, PageSize::k4K}));
  EXPECT_EQ(PageSizesToTry(PageSize::kTransparent, false),
            (V{PageSize::kTransparent, PageSize::k4K}));
  EXPECT_EQ(PageSizesToTry(PageSize::k4K, false), (V{PageSize::k4K}));
  EXPECT_EQ(PageSizesToTry(PageSize::k2M, true), (V{PageSize::k2M}));
}

TEST(MemlockHeadroomTest, TheLimitLessWhatIsUsedOrNoneWhenTheLimitDoesNotApply) {
  const MemlockState limited{.limit = 8 << 20};
  EXPECT_EQ(limited.Headroom(3 << 20), std::size_t{5} << 20);
  EXPECT_EQ(limited.Headroom(8 << 20), 0u);
  EXPECT_EQ(limited.Headroom(9 << 20), 0u) << "over the limit: none, not a wrapped number";
  EXPECT_FALSE((MemlockState{.limit = SIZE_MAX}.Headroom(1)).has_value()) << "unlimited";
  EXPECT_FALSE((MemlockState{.limit = 8 << 20, .exempt = true}.Headroom(1)).has_value())
      << "CAP_IPC_LOCK";
}

}  // namespace
}  // namespace pinpool::internal::os
