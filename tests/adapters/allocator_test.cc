// Tests for pinpool::Allocator: every standard container keeps all of its storage in the pool (and
// none on the global heap), the storage's keys can be looked up, allocators behave as pool handles
// under copy, move, swap and assignment across two pools, and exhaustion surfaces as the
// exceptions standard containers expect.
//
// This binary replaces global operator new/delete with counting versions (see below) to prove
// that containers using the allocator never touch the global heap.
#include "pinpool/allocator.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <functional>
#include <iterator>
#include <limits>
#include <list>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <scoped_allocator>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "pinpool/block.h"
#include "pinpool/options.h"
#include "pinpool/pool.h"
#include "support/make_pool.h"

// --- Counting global operator new ---------------------------------------------------------------
// Counts calls on threads that asked for it, so a test can assert that a block of container code
// made none. Only the forms libstdc++ funnels everything through are replaced.
namespace {
thread_local bool counting_global_new = false;
thread_local std::size_t global_new_calls = 0;
}  // namespace

void* operator new(std::size_t size) {
  if (counting_global_new) ++global_new_calls;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t size, std::align_val_t alignment) {
  if (counting_global_new) ++global_new_calls;
  const auto align = static_cast<std::size_t>(alignment);
  const std::size_t rounded = (size + align - 1) / align * align;
  if (void* p = std::aligned_alloc(align, rounded == 0 ? align : rounded)) return p;
  throw std::bad_alloc();
}
// Out of line: once inlined next to a `new`, GCC 12 mistakes free() here for a mismatched
// deallocation (-Wmismatched-new-delete).
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}

namespace pinpool {
namespace {

// Counts global operator new calls made by this thread while alive.
class GlobalNewCounter {
 public:
  GlobalNewCounter() {
    global_new_calls = 0;
    counting_global_new = true;
  }
  ~GlobalNewCounter() { counting_global_new = false; }
  std::size_t calls() const { return global_new_calls; }
};

constexpr std::size_t kChunk = 4 * kMiB;

std::unique_ptr<Pool> MakePool(std::size_t budget = 16 * kMiB, std::size_t initial = 0) {
  return testing::MakePool({.chunk_size = kChunk,
                            .budget = budget,
                            .initial_size = initial,
                            .page_size = PoolOptions().page_size});
}

// Every element of `c` lies in `pool`, and its keys are those of the registration containing it.
template <typename Container>
void ExpectAllInPool(const Pool& pool, const Container& c) {
  std::size_t checked = 0;
  for (const auto& element : c) {
    const void* address = std::addressof(element);
    ASSERT_TRUE(pool.Contains(address)) << "element " << checked << " at " << address;
    const std::optional<Location> location = pool.Lookup(address);
    ASSERT_TRUE(location.has_value());
    ASSERT_GE(location->domain_count(), 1u);
    const auto a = reinterpret_cast<std::uintptr_t>(address);
    const Keys& keys = location->keys(0);
    ASSERT_GE(a, keys.base);
    ASSERT_LT(a + sizeof(element) - 1, keys.base + keys.length);
    ASSERT_EQ(location->offset(0), a - keys.base);
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<std::size_t>(std::distance(c.begin(), c.end())));
}

template <typename T>
using Vector = std::vector<T, Allocator<T>>;
template <typename K, typename V>
using Map = std::map<K, V, std::less<K>, Allocator<std::pair<const K, V>>>;
template <typename K, typename V>
using UnorderedMap =
    std::unordered_map<K, V, std::hash<K>, std::equal_to<K>, Allocator<std::pair<const K, V>>>;

// --- Compile-time contract -----------------------------------------------------------------------

using Traits = std::allocator_traits<Allocator<int>>;
static_assert(std::is_same_v<Traits::value_type, int>);
static_assert(Traits::propagate_on_container_copy_assignment::value);
static_assert(Traits::propagate_on_container_move_assignment::value);
static_assert(Traits::propagate_on_container_swap::value);
static_assert(!Traits::is_always_equal::value);
static_assert(std::is_same_v<Traits::rebind_alloc<double>, Allocator<double>>);
static_assert(std::is_nothrow_copy_constructible_v<Allocator<int>>);
static_assert(std::is_nothrow_constructible_v<Allocator<int>, const Allocator<double>&>);
// No default constructor: an allocator without a pool could only fail.
static_assert(!std::is_default_constructible_v<Allocator<int>>);
static_assert(std::is_same_v<string::allocator_type, Allocator<char>>);

// --- Containers ----------------------------------------------------------------------------------

class AllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pool_ = MakePool();
    ASSERT_NE(pool_, nullptr);
  }
  Allocator<int> alloc() { return Allocator<int>(pool_.get()); }

  std::unique_ptr<Pool> pool_;
};

TEST_F(AllocatorTest, VectorStorageIsInPoolWithKeys) {
  Vector<int> v(alloc());
  for (int i = 0; i < 100000; ++i) v.push_back(i);
  ExpectAllInPool(*pool_, v);

  const std::optional<Location> location = v.get_allocator().Lookup(v.data());
  ASSERT_TRUE(location.has_value());
  EXPECT_EQ(location->address(), v.data());
  const auto data = reinterpret_cast<std::uintptr_t>(v.data());
  EXPECT_GE(data, location->chunk().base);
  EXPECT_LE(data + v.size() * sizeof(int), location->chunk().base + location->chunk().size);
  // The block the vector owns is a real pool block, big enough for its capacity.
  EXPECT_GE(pool_->UsableSize(v.data()), v.capacity() * sizeof(int));
}

TEST_F(AllocatorTest, DequeStorageIsInPool) {
  std::deque<int, Allocator<int>> d(alloc());
  for (int i = 0; i < 50000; ++i) {
    d.push_back(i);
    d.push_front(-i);
  }
  ExpectAllInPool(*pool_, d);
}

TEST_F(AllocatorTest, ListStorageIsInPool) {
  std::list<int, Allocator<int>> l(alloc());
  for (int i = 0; i < 10000; ++i) l.push_back(i);
  ExpectAllInPool(*pool_, l);
}

TEST_F(AllocatorTest, MapStorageIsInPool) {
  Map<int, double> m(alloc());
  for (int i = 0; i < 10000; ++i) m.emplace(i, i * 0.5);
  ExpectAllInPool(*pool_, m);
  EXPECT_EQ(m.at(4242), 2121.0);
}

TEST_F(AllocatorTest, UnorderedMapStorageIsInPool) {
  UnorderedMap<std::uint64_t, std::uint64_t> m(alloc());
  for (std::uint64_t i = 0; i < 10000; ++i) m.emplace(i, i * i);
  ExpectAllInPool(*pool_, m);
  EXPECT_EQ(m.at(99), 9801u);
}

TEST_F(AllocatorTest, StringStorageIsInPool) {
  string s(alloc());
  for (int i = 0; i < 1000; ++i) s += "registered ";
  EXPECT_TRUE(pool_->Contains(s.data()));
  EXPECT_TRUE(pool_->Contains(s.data() + s.size() - 1));
  ASSERT_TRUE(pool_->Lookup(s.data()).has_value());

  // The small-string optimisation keeps short contents inside the string object: not in the pool
  // (documented in allocator.h). reserve() past the inline capacity moves them there.
  string small("tiny", alloc());
  EXPECT_FALSE(pool_->Contains(small.data()));
  small.reserve(64);
  EXPECT_TRUE(pool_->Contains(small.data()));
  EXPECT_EQ(small, "tiny");
}

TEST_F(AllocatorTest, NestedContainersWithScopedAllocatorAdaptor) {
  using Inner = string;
  using Outer = std::vector<Inner, std::scoped_allocator_adaptor<Allocator<Inner>>>;
  Outer outer(alloc());
  for (int i = 0; i < 100; ++i) {
    outer.emplace_back(std::string(100, static_cast<char>('a' + i % 26)).c_str());
  }
  ExpectAllInPool(*pool_, outer);
  for (const Inner& inner : outer) {
    EXPECT_EQ(inner.get_allocator(), alloc());
    EXPECT_TRUE(pool_->Contains(inner.data()));
  }
}

// Containers built on a pool whose chunks are already mapped never use the global heap: all
// their storage (buckets, deque maps, nodes, string buffers) comes through the allocator.
TEST(AllocatorGlobalHeapTest, ContainersNeverUseGlobalNew) {
  std::unique_ptr<Pool> pool = MakePool(16 * kMiB, 16 * kMiB);
  ASSERT_NE(pool, nullptr);
  const Allocator<int> alloc(pool.get());
  std::size_t calls = 0;
  {
    // Warm up this thread's cache in the pool outside the counted region.
    Vector<int> warm(alloc);
    warm.resize(1000);
  }
  {
    GlobalNewCounter counter;
    {
      Vector<int> v(alloc);
      for (int i = 0; i < 10000; ++i) v.push_back(i);
      std::deque<int, Allocator<int>> d(alloc);
      for (int i = 0; i < 10000; ++i) d.push_front(i);
      std::list<int, Allocator<int>> l(alloc);
      for (int i = 0; i < 1000; ++i) l.push_back(i);
      Map<int, int> m(alloc);
      for (int i = 0; i < 1000; ++i) m[i] = i;
      UnorderedMap<int, int> u(alloc);
      for (int i = 0; i < 1000; ++i) u[i] = i;
      string s(alloc);
      s.assign(5000, 'x');
    }
    calls = counter.calls();
  }
  EXPECT_EQ(calls, 0u) << "global operator new was called by container code";
}

// --- Allocator semantics -------------------------------------------------------------------------

TEST_F(AllocatorTest, EqualityMeansSamePool) {
  std::unique_ptr<Pool> other = MakePool();
  ASSERT_NE(other, nullptr);
  const Allocator<int> a(pool_.get());
  const Allocator<double> a_rebound(a);
  const Allocator<int> b(other.get());
  EXPECT_TRUE(a == a_rebound);
  EXPECT_TRUE(a_rebound == a);
  EXPECT_FALSE(a != Allocator<int>(*pool_));
  EXPECT_TRUE(a != b);
  EXPECT_EQ(a_rebound.pool(), pool_.get());
  EXPECT_EQ(a.select_on_container_copy_construction(), a);

  // Memory from one allocator is freed by an equal (rebound) one.
  int* p = a.allocate(10);
  std::allocator_traits<Allocator<int>>::rebind_alloc<int>(a_rebound).deallocate(p, 10);
}

TEST_F(AllocatorTest, MaxSizeIsTheLargestBlock) {
  const std::size_t largest = pool_->max_block_size();
  EXPECT_GT(largest, kChunk / 2);
  EXPECT_LE(largest, kChunk);
  EXPECT_EQ(Allocator<char>(*pool_).max_size(), largest);
  EXPECT_EQ(Allocator<std::uint64_t>(*pool_).max_size(), largest / 8);
  // The largest block is really available.
  Allocator<char> a(*pool_);
  char* p = a.allocate(largest);
  EXPECT_TRUE(pool_->Contains(p));
  EXPECT_TRUE(pool_->Contains(p + largest - 1));
  a.deallocate(p, largest);
}

TEST_F(AllocatorTest, ZeroElementsGetARealBlock) {
  Allocator<int> a = alloc();
  int* p = a.allocate(0);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(pool_->Contains(p));
  a.deallocate(p, 0);
}

TEST_F(AllocatorTest, HonoursAlignmentOfOverAlignedTypes) {
  struct alignas(256) Wide {
    char bytes[256];
  };
  Vector<Wide> v{Allocator<Wide>(*pool_)};
  v.resize(10);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(v.data()) % 256, 0u);
  EXPECT_TRUE(pool_->Contains(v.data()));
}

class TwoPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    a_ = MakePool();
    b_ = MakePool();
    ASSERT_NE(a_, nullptr);
    ASSERT_NE(b_, nullptr);
  }
  static Vector<int> Filled(Pool& pool, int n, int first) {
    Vector<int> v{Allocator<int>(pool)};
    for (int i = 0; i < n; ++i) v.push_back(first + i);
    return v;
  }

  std::unique_ptr<Pool> a_;
  std::unique_ptr<Pool> b_;
};

TEST_F(TwoPoolTest, CopyConstructionStaysInSourcePool) {
  const Vector<int> va = Filled(*a_, 1000, 0);
  const Vector<int> copy(va);
  EXPECT_EQ(copy.get_allocator().pool(), a_.get());
  ExpectAllInPool(*a_, copy);

  // An explicit allocator picks the pool.
  const Vector<int> into_b(va, Allocator<int>(*b_));
  EXPECT_EQ(into_b, va);
  ExpectAllInPool(*b_, into_b);
}

TEST_F(TwoPoolTest, CopyAssignmentPropagatesTheAllocator) {
  const Vector<int> va = Filled(*a_, 1000, 0);
  Vector<int> vb = Filled(*b_, 10, 5000);
  vb = va;
  EXPECT_EQ(vb, va);
  EXPECT_EQ(vb.get_allocator().pool(), a_.get());
  ExpectAllInPool(*a_, vb);
  ExpectAllInPool(*a_, va);
}

TEST_F(TwoPoolTest, MoveAssignmentTakesStorageAndAllocator) {
  Vector<int> va = Filled(*a_, 1000, 0);
  Vector<int> vb = Filled(*b_, 10, 5000);
  const int* storage = va.data();
  vb = std::move(va);
  EXPECT_EQ(vb.data(), storage);  // no element-wise move into b's pool
  EXPECT_EQ(vb.get_allocator().pool(), a_.get());
  ASSERT_EQ(vb.size(), 1000u);
  EXPECT_EQ(vb[999], 999);
  ExpectAllInPool(*a_, vb);
}

TEST_F(TwoPoolTest, MoveConstructionTakesStorageAndAllocator) {
  Vector<int> va = Filled(*a_, 1000, 0);
  const int* storage = va.data();
  const Vector<int> moved(std::move(va));
  EXPECT_EQ(moved.data(), storage);
  EXPECT_EQ(moved.get_allocator().pool(), a_.get());
}

TEST_F(TwoPoolTest, SwapExchangesAllocators) {
  Vector<int> va = Filled(*a_, 1000, 0);
  Vector<int> vb = Filled(*b_, 10, 5000);
  const int* storage_a = va.data();
  const int* storage_b = vb.data();
  using std::swap;
  swap(va, vb);
  EXPECT_EQ(va.data(), storage_b);
  EXPECT_EQ(vb.data(), storage_a);
  EXPECT_EQ(va.get_allocator().pool(), b_.get());
  EXPECT_EQ(vb.get_allocator().pool(), a_.get());
  ExpectAllInPool(*b_, va);
  ExpectAllInPool(*a_, vb);
  // Both still grow and free correctly in their (new) pools.
  for (int i = 0; i < 10000; ++i) va.push_back(i);
  ExpectAllInPool(*b_, va);
}

TEST_F(TwoPoolTest, NodeContainersPropagateToo) {
  Map<int, int> ma{Allocator<int>(*a_)};
  Map<int, int> mb{Allocator<int>(*b_)};
  for (int i = 0; i < 100; ++i) ma[i] = i;
  mb[-1] = -1;
  mb = ma;
  EXPECT_EQ(mb.get_allocator(), Allocator<int>(*a_));
  ExpectAllInPool(*a_, mb);

  UnorderedMap<int, int> ua{Allocator<int>(*a_)};
  UnorderedMap<int, int> ub{Allocator<int>(*b_)};
  for (int i = 0; i < 100; ++i) ua[i] = i;
  ub[-1] = -1;
  ua.swap(ub);
  EXPECT_EQ(ua.get_allocator(), Allocator<int>(*b_));
  ExpectAllInPool(*b_, ua);
  ExpectAllInPool(*a_, ub);
}

// --- Failure -------------------------------------------------------------------------------------

TEST(AllocatorFailureTest, ExhaustedBudgetThrowsBadAlloc) {
  std::unique_ptr<Pool> pool = MakePool(/*budget=*/kChunk);
  ASSERT_NE(pool, nullptr);
  Allocator<char> a(*pool);

  char* first = a.allocate(3 * kMiB);
  ASSERT_NE(first, nullptr);
  EXPECT_THROW({ [[maybe_unused]] char* p = a.allocate(3 * kMiB); }, std::bad_alloc);
  EXPECT_FALSE(pool->last_growth_error().ok());

  // Containers see the same: the pool's single chunk is taken.
  Vector<char> v(a);
  EXPECT_THROW(v.reserve(3 * kMiB), std::bad_alloc);
  EXPECT_TRUE(v.empty());

  // Freed memory is reusable.
  a.deallocate(first, 3 * kMiB);
  v.reserve(3 * kMiB);
  EXPECT_TRUE(pool->Contains(v.data()));
}

TEST_F(AllocatorTest, OversizedRequestsThrow) {
  Allocator<std::uint64_t> a(*pool_);
  // n * sizeof(T) overflows size_t.
  EXPECT_THROW(
      { [[maybe_unused]] auto* p = a.allocate(std::numeric_limits<std::size_t>::max() / 4); },
      std::bad_array_new_length);
  // Bigger than the largest block: the pool cannot hold it in one registration.
  const std::size_t too_many = pool_->max_block_size() / 8 + 1;
  EXPECT_THROW({ [[maybe_unused]] auto* p = a.allocate(too_many); }, std::bad_alloc);
  // Containers check max_size() first and say so.
  Vector<std::uint64_t> v(a);
  EXPECT_THROW(v.reserve(too_many), std::length_error);
}

}  // namespace
}  // namespace pinpool
