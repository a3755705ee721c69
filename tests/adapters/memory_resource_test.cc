// Tests for pinpool::MemoryResource: std::pmr containers (including nested ones, through
// polymorphic_allocator's uses-allocator construction) keep their storage in the pool, equality
// means "same pool", and exhaustion throws std::bad_alloc as memory_resource requires.
#include "pinpool/memory_resource.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <memory_resource>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "pinpool/block.h"
#include "pinpool/options.h"
#include "pinpool/pool.h"
#include "support/make_pool.h"

namespace pinpool {
namespace {

constexpr std::size_t kChunk = 4 * kMiB;

std::unique_ptr<Pool> MakePool(std::size_t budget = 16 * kMiB) {
  return testing::MakePool(
      {.chunk_size = kChunk, .budget = budget, .page_size = PoolOptions().page_size});
}

class MemoryResourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pool_ = MakePool();
    ASSERT_NE(pool_, nullptr);
    resource_.emplace(*pool_);
  }

  std::unique_ptr<Pool> pool_;
  std::optional<MemoryResource> resource_;
};

TEST_F(MemoryResourceTest, PoolAccessor) { EXPECT_EQ(&resource_->pool(), pool_.get()); }

TEST_F(MemoryResourceTest, PmrVectorStorageIsInPool) {
  std::pmr::vector<std::uint32_t> v(&*resource_);
  for (std::uint32_t i = 0; i < 100000; ++i) v.push_back(i);
  for (const std::uint32_t& x : v) ASSERT_TRUE(pool_->Contains(&x));
  const std::optional<Location> location = pool_->Lookup(v.data() + 500);
  ASSERT_TRUE(location.has_value());
  const auto address = reinterpret_cast<std::uintptr_t>(v.data() + 500);
  EXPECT_EQ(location->offset(0), address - location->keys(0).base);
}

TEST_F(MemoryResourceTest, PmrUnorderedMapAndNestedStringsAreInPool) {
  std::pmr::unordered_map<int, std::pmr::string> m(&*resource_);
  for (int i = 0; i < 2000; ++i) {
    // Long enough to leave the small-string buffer.
    m.emplace(i, std::string(64, static_cast<char>('a' + i % 26)));
  }
  ASSERT_EQ(m.size(), 2000u);
  for (const auto& [key, value] : m) {
    ASSERT_TRUE(pool_->Contains(&key));
    // polymorphic_allocator passes the resource down to the strings it constructs.
    ASSERT_EQ(value.get_allocator().resource(), &*resource_);
    ASSERT_TRUE(pool_->Contains(value.data()));
  }
  EXPECT_EQ(std::string_view(m.at(27)), std::string(64, 'b'));
}

TEST_F(MemoryResourceTest, UpstreamOfStandardPoolResource) {
  std::pmr::monotonic_buffer_resource monotonic(&*resource_);
  std::pmr::vector<int> v(&monotonic);
  for (int i = 0; i < 10000; ++i) v.push_back(i);
  EXPECT_TRUE(pool_->Contains(v.data()));
  EXPECT_TRUE(pool_->Contains(&v.back()));
}

TEST_F(MemoryResourceTest, EqualityMeansSamePool) {
  const MemoryResource same_pool(*pool_);
  std::unique_ptr<Pool> other = MakePool();
  ASSERT_NE(other, nullptr);
  const MemoryResource other_pool(*other);

  EXPECT_TRUE(resource_->is_equal(*resource_));
  EXPECT_TRUE(resource_->is_equal(same_pool));
  EXPECT_TRUE(same_pool.is_equal(*resource_));
  EXPECT_FALSE(resource_->is_equal(other_pool));
  EXPECT_FALSE(resource_->is_equal(*std::pmr::new_delete_resource()));
  EXPECT_FALSE(std::pmr::new_delete_resource()->is_equal(*resource_));

  // Memory from one resource may be freed through an equal one.
  void* p = resource_->allocate(100, 16);
  const_cast<MemoryResource&>(same_pool).deallocate(p, 100, 16);
}

TEST_F(MemoryResourceTest, MoveBetweenPoolsCopiesIntoTheDestination) {
  std::unique_ptr<Pool> other = MakePool();
  ASSERT_NE(other, nullptr);
  MemoryResource other_resource(*other);
  std::pmr::vector<int> source(&*resource_);
  for (int i = 0; i < 1000; ++i) source.push_back(i);
  // polymorphic_allocator does not propagate: the destination keeps its own pool.
  std::pmr::vector<int> destination(&other_resource);
  destination = std::move(source);
  ASSERT_EQ(destination.size(), 1000u);
  EXPECT_EQ(destination[999], 999);
  EXPECT_TRUE(other->Contains(destination.data()));
}

TEST_F(MemoryResourceTest, HonoursAlignmentAndZeroBytes) {
  for (std::size_t alignment :
       {std::size_t{1}, std::size_t{64}, std::size_t{4096}, std::size_t{2 * kMiB}}) {
    void* p = resource_->allocate(1000, alignment);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % alignment, 0u) << alignment;
    EXPECT_TRUE(pool_->Contains(p));
    resource_->deallocate(p, 1000, alignment);
  }
  void* empty = resource_->allocate(0);
  ASSERT_NE(empty, nullptr);
  EXPECT_TRUE(pool_->Contains(empty));
  resource_->deallocate(empty, 0);
}

TEST(MemoryResourceFailureTest, ExhaustionThrowsBadAlloc) {
  std::unique_ptr<Pool> pool = MakePool(/*budget=*/kChunk);
  ASSERT_NE(pool, nullptr);
  MemoryResource resource(*pool);

  void* first = resource.allocate(3 * kMiB);
  EXPECT_THROW((void)resource.allocate(3 * kMiB), std::bad_alloc);
  EXPECT_THROW((void)resource.allocate(kChunk + 1), std::bad_alloc);
  EXPECT_THROW((void)resource.allocate(64, 2 * kChunk), std::bad_alloc);

  std::pmr::vector<char> v(&resource);
  EXPECT_THROW(v.reserve(3 * kMiB), std::bad_alloc);

  resource.deallocate(first, 3 * kMiB);
  v.reserve(3 * kMiB);
  EXPECT_TRUE(pool->Contains(v.data()));
}

}  // namespace
}  // namespace pinpool
