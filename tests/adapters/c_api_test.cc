// Tests for the C API (pinpool/pinpool_c.h), from C++: option defaults, error codes and messages
// from pinpool_create, the malloc family's libc semantics (calloc overflow and zeroing, realloc's
// NULL/0 cases and content preservation, aligned_alloc's alignment rules, errno), and keys of
// interior pointers. tests/c_program/ checks the same header compiles and links as plain C.
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "os/os.h"
#include "pinpool/keys.h"
#include "pinpool/options.h"
#include "pinpool/pinpool_c.h"
#include "pinpool/version.h"

namespace {

constexpr std::size_t kMiB = pinpool::kMiB;
constexpr std::size_t kChunk = 4 * kMiB;

// Owns a pool created through the C API.
class CPool {
 public:
  explicit CPool(std::size_t budget = 16 * kMiB) {
    pinpool_options_t options;
    pinpool_options_init(&options);
    options.chunk_size = kChunk;
    options.budget = budget;
    char err[256] = "unset";
    rc_ = pinpool_create(&options, &pool_, err, sizeof err);
    error_ = err;
  }
  ~CPool() { pinpool_destroy(pool_); }
  CPool(const CPool&) = delete;
  CPool& operator=(const CPool&) = delete;

  pinpool_pool_t* get() const { return pool_; }
  int rc() const { return rc_; }
  const std::string& error() const { return error_; }

 private:
  pinpool_pool_t* pool_ = nullptr;
  int rc_ = 0;
  std::string error_;
};

class CApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(pool_.rc(), 0) << pool_.error();
    ASSERT_NE(pool_.get(), nullptr);
    EXPECT_EQ(pool_.error(), "");  // cleared on success
  }
  bool InPool(const void* p) {
    pinpool_keys_t keys;
    return pinpool_keys(pool_.get(), p, 0, &keys) == 0;
  }

  CPool pool_;
};

TEST(CApiOptionsTest, InitMatchesPoolOptionsDefaults) {
  pinpool_options_t options;
  std::memset(&options, 0xAB, sizeof options);
  pinpool_options_init(&options);
  const pinpool::PoolOptions defaults;
  EXPECT_EQ(options.chunk_size, defaults.chunk_size);
  EXPECT_EQ(options.budget, defaults.budget);
  EXPECT_EQ(options.initial_size, defaults.initial_size);
  EXPECT_EQ(static_cast<int>(options.page_size), static_cast<int>(defaults.page_size));
  EXPECT_EQ(options.require_page_size, defaults.require_page_size);
  EXPECT_EQ(options.populate, defaults.populate);
  pinpool_options_init(nullptr);  // ignored
}

TEST(CApiCreateTest, InvalidChunkSizeIsEinvalWithMessage) {
  pinpool_options_t options;
  pinpool_options_init(&options);
  options.chunk_size = 3 * kMiB;  // not a power of two
  pinpool_pool_t* pool = reinterpret_cast<pinpool_pool_t*>(0x1);
  char err[256] = "";
  EXPECT_EQ(pinpool_create(&options, &pool, err, sizeof err), -EINVAL);
  EXPECT_EQ(pool, nullptr);
  EXPECT_GT(std::strlen(err), 0u);
}

TEST(CApiCreateTest, InvalidPageSizeIsEinval) {
  pinpool_options_t options;
  pinpool_options_init(&options);
  // As a C caller could: 17 is not a pinpool_page_size_t (and cannot be one in C++).
  const int bad = 17;
  std::memcpy(&options.page_size, &bad, sizeof bad);
  pinpool_pool_t* pool = nullptr;
  char err[256] = "";
  EXPECT_EQ(pinpool_create(&options, &pool, err, sizeof err), -EINVAL);
  EXPECT_EQ(pool, nullptr);
  EXPECT_NE(std::string(err).find("page_size"), std::string::npos) << err;
}

// Required huge pages that are not there: the system must change first (kFailedPrecondition),
// which the C API reports as -EAGAIN with the fix in the message. (The os room's fault hook
// makes the hugetlb mapping fail as it does when none are reserved.)
TEST(CApiCreateTest, RequiredHugePagesMissingIsEagainWithTheFix) {
  using pinpool::internal::os::Call;
  const auto previous = pinpool::internal::os::SetFaultHook(
      [](Call call, std::size_t) { return call == Call::kMapHugetlb ? ENOMEM : 0; });
  pinpool_options_t options;
  pinpool_options_init(&options);
  options.chunk_size = 2 * kMiB;
  options.budget = 2 * kMiB;
  options.initial_size = 2 * kMiB;
  options.page_size = PINPOOL_PAGE_2M;
  options.require_page_size = true;
  pinpool_pool_t* pool = nullptr;
  char err[512] = "";
  EXPECT_EQ(pinpool_create(&options, &pool, err, sizeof err), -EAGAIN) << err;
  EXPECT_EQ(pool, nullptr);
  EXPECT_NE(std::string(err).find("nr_hugepages"), std::string::npos) << err;
  pinpool::internal::os::SetFaultHook(previous);
}

TEST(CApiCreateTest, ErrorMessageIsTruncatedAndTerminated) {
  pinpool_options_t options;
  pinpool_options_init(&options);
  options.chunk_size = 3 * kMiB;
  pinpool_pool_t* pool = nullptr;
  char err[8];
  std::memset(err, 'x', sizeof err);
  EXPECT_EQ(pinpool_create(&options, &pool, err, sizeof err), -EINVAL);
  EXPECT_EQ(std::strlen(err), sizeof err - 1);
  // No buffer at all is fine too.
  EXPECT_EQ(pinpool_create(&options, &pool, nullptr, 0), -EINVAL);
  EXPECT_EQ(pinpool_create(&options, nullptr, nullptr, 0), -EINVAL);
}

TEST(CApiCreateTest, NullOptionsMeansDefaults) {
  pinpool_pool_t* pool = nullptr;
  char err[256] = "";
  ASSERT_EQ(pinpool_create(nullptr, &pool, err, sizeof err), 0) << err;
  void* p = pinpool_malloc(pool, 100);
  EXPECT_NE(p, nullptr);
  pinpool_free(pool, p);
  pinpool_destroy(pool);
  pinpool_destroy(nullptr);  // ignored
}

TEST(CApiVersionTest, MatchesHeader) { EXPECT_STREQ(pinpool_version(), PINPOOL_VERSION_STRING); }

TEST_F(CApiTest, MallocReturnsPoolMemory) {
  auto* p = static_cast<unsigned char*>(pinpool_malloc(pool_.get(), 1000));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % alignof(std::max_align_t), 0u);
  EXPECT_TRUE(InPool(p));
  std::memset(p, 0x5A, 1000);
  EXPECT_GE(pinpool_usable_size(pool_.get(), p), 1000u);
  pinpool_free(pool_.get(), p);
  pinpool_free(pool_.get(), nullptr);
}

TEST_F(CApiTest, MallocZeroIsAUniquePointer) {
  void* a = pinpool_malloc(pool_.get(), 0);
  void* b = pinpool_malloc(pool_.get(), 0);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
  pinpool_free(pool_.get(), a);
  pinpool_free(pool_.get(), b);
}

TEST_F(CApiTest, MallocTooLargeIsNullWithEnomem) {
  errno = 0;
  EXPECT_EQ(pinpool_malloc(pool_.get(), kChunk + 1), nullptr);
  EXPECT_EQ(errno, ENOMEM);
}

TEST_F(CApiTest, CallocZeroesRecycledMemory) {
  constexpr std::size_t kSize = 64 * 1024;
  // Dirty some memory and give it back so calloc is likely to get it again.
  for (int i = 0; i < 8; ++i) {
    void* dirty = pinpool_malloc(pool_.get(), kSize);
    ASSERT_NE(dirty, nullptr);
    std::memset(dirty, 0xFF, kSize);
    pinpool_free(pool_.get(), dirty);
  }
  auto* p = static_cast<unsigned char*>(pinpool_calloc(pool_.get(), kSize / 8, 8));
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(InPool(p));
  for (std::size_t i = 0; i < kSize; ++i) ASSERT_EQ(p[i], 0) << i;
  pinpool_free(pool_.get(), p);

  void* empty = pinpool_calloc(pool_.get(), 0, 16);
  EXPECT_NE(empty, nullptr);
  pinpool_free(pool_.get(), empty);
}

TEST_F(CApiTest, CallocOverflowIsNullWithEnomem) {
  constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max();
  errno = 0;
  EXPECT_EQ(pinpool_calloc(pool_.get(), kMax / 2 + 1, 2), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(pinpool_calloc(pool_.get(), 2, kMax / 2 + 1), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(pinpool_calloc(pool_.get(), kMax, kMax), nullptr);
  EXPECT_EQ(errno, ENOMEM);
}

TEST_F(CApiTest, ReallocNullIsMallocAndZeroIsFree) {
  void* p = pinpool_realloc(pool_.get(), nullptr, 100);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(InPool(p));
  EXPECT_EQ(pinpool_realloc(pool_.get(), p, 0), nullptr);  // freed
}

TEST_F(CApiTest, ReallocPreservesContentsAcrossGrowthAndShrink) {
  std::size_t size = 16;
  auto* p = static_cast<unsigned char*>(pinpool_malloc(pool_.get(), size));
  ASSERT_NE(p, nullptr);
  for (std::size_t i = 0; i < size; ++i) p[i] = static_cast<unsigned char>(i * 7);
  // Grow through small, medium and large sizes (several moves between size classes).
  for (std::size_t next : {std::size_t{100}, std::size_t{4096}, std::size_t{100000},
                           std::size_t{1 * kMiB}, std::size_t{3 * kMiB}}) {
    p = static_cast<unsigned char*>(pinpool_realloc(pool_.get(), p, next));
    ASSERT_NE(p, nullptr) << next;
    EXPECT_TRUE(InPool(p));
    EXPECT_TRUE(InPool(p + next - 1));
    EXPECT_GE(pinpool_usable_size(pool_.get(), p), next);
    for (std::size_t i = 0; i < size; ++i) {
      ASSERT_EQ(p[i], static_cast<unsigned char>(i * 7)) << "byte " << i << " after " << next;
    }
    for (std::size_t i = size; i < next; ++i) p[i] = static_cast<unsigned char>(i * 7);
    size = next;
  }
  p = static_cast<unsigned char*>(pinpool_realloc(pool_.get(), p, 50));
  ASSERT_NE(p, nullptr);
  for (std::size_t i = 0; i < 50; ++i) ASSERT_EQ(p[i], static_cast<unsigned char>(i * 7));
  pinpool_free(pool_.get(), p);
}

TEST_F(CApiTest, ReallocFailureLeavesTheBlockAlone) {
  auto* p = static_cast<unsigned char*>(pinpool_malloc(pool_.get(), 1000));
  ASSERT_NE(p, nullptr);
  std::memset(p, 0x42, 1000);
  errno = 0;
  EXPECT_EQ(pinpool_realloc(pool_.get(), p, kChunk + 1), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(p[i], 0x42);
  pinpool_free(pool_.get(), p);
}

TEST_F(CApiTest, AlignedAlloc) {
  for (std::size_t alignment :
       {std::size_t{1}, std::size_t{8}, std::size_t{64}, std::size_t{4096}, 2 * kMiB}) {
    void* p = pinpool_aligned_alloc(pool_.get(), alignment, 100);  // size not a multiple: fine
    ASSERT_NE(p, nullptr) << alignment;
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % alignment, 0u);
    EXPECT_TRUE(InPool(p));
    pinpool_free(pool_.get(), p);
  }
  for (std::size_t bad : {std::size_t{0}, std::size_t{3}, std::size_t{48}, 2 * kChunk}) {
    errno = 0;
    EXPECT_EQ(pinpool_aligned_alloc(pool_.get(), bad, 64), nullptr) << bad;
    EXPECT_EQ(errno, EINVAL) << bad;
  }
}

TEST_F(CApiTest, KeysOfInteriorPointers) {
  constexpr std::size_t kSize = 256 * 1024;
  auto* p = static_cast<unsigned char*>(pinpool_malloc(pool_.get(), kSize));
  ASSERT_NE(p, nullptr);
  pinpool_keys_t first;
  ASSERT_EQ(pinpool_keys(pool_.get(), p, 0, &first), 0);
  EXPECT_GT(first.length, 0u);
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  EXPECT_LE(first.base, address);
  EXPECT_LE(address + kSize, first.base + first.length);
  EXPECT_EQ(first.offset, address - first.base);

  for (std::size_t at : {std::size_t{1}, std::size_t{1000}, kSize / 2, kSize - 1}) {
    pinpool_keys_t keys;
    ASSERT_EQ(pinpool_keys(pool_.get(), p + at, 0, &keys), 0) << at;
    // Same registration, offset moved by exactly `at`.
    EXPECT_EQ(keys.base, first.base);
    EXPECT_EQ(keys.length, first.length);
    EXPECT_EQ(keys.lkey, first.lkey);
    EXPECT_EQ(keys.rkey, first.rkey);
    EXPECT_EQ(keys.buffer_index, first.buffer_index);
    EXPECT_EQ(keys.offset, first.offset + at);
  }
  pinpool_free(pool_.get(), p);
}

TEST_F(CApiTest, KeysRejectForeignPointersAndBadArguments) {
  int on_stack = 0;
  std::vector<int> on_heap(100);
  pinpool_keys_t keys;
  EXPECT_EQ(pinpool_keys(pool_.get(), &on_stack, 0, &keys), -EINVAL);
  EXPECT_EQ(pinpool_keys(pool_.get(), on_heap.data(), 0, &keys), -EINVAL);
  EXPECT_EQ(pinpool_keys(pool_.get(), nullptr, 0, &keys), -EINVAL);

  void* p = pinpool_malloc(pool_.get(), 64);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(pinpool_keys(pool_.get(), p, 1, &keys), -EINVAL);  // one (host) domain only
  EXPECT_EQ(pinpool_keys(pool_.get(), p, 0, nullptr), -EINVAL);
  EXPECT_EQ(pinpool_usable_size(pool_.get(), &on_stack), 0u);
  EXPECT_EQ(pinpool_usable_size(pool_.get(), nullptr), 0u);
  pinpool_free(pool_.get(), p);
}

TEST_F(CApiTest, FreeFromAnotherThread) {
  std::vector<void*> blocks;
  for (int i = 0; i < 1000; ++i) {
    blocks.push_back(pinpool_malloc(pool_.get(), 64 + i));
    ASSERT_NE(blocks.back(), nullptr);
  }
  std::thread([&] {
    for (void* p : blocks) pinpool_free(pool_.get(), p);
  }).join();
}

TEST(CApiExhaustionTest, BudgetSpentIsNullWithEnomem) {
  CPool pool(/*budget=*/kChunk);
  ASSERT_EQ(pool.rc(), 0) << pool.error();
  void* first = pinpool_malloc(pool.get(), 3 * kMiB);
  ASSERT_NE(first, nullptr);
  errno = 0;
  EXPECT_EQ(pinpool_malloc(pool.get(), 3 * kMiB), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  pinpool_free(pool.get(), first);
  void* again = pinpool_malloc(pool.get(), 3 * kMiB);
  EXPECT_NE(again, nullptr);
  pinpool_free(pool.get(), again);
}

// The C encoder: a descriptor of a subrange across a run boundary, sized first with a NULL
// buffer, that the C decoder reads back element by element as the array's own addresses and
// keys; then each documented error.
TEST_F(CApiTest, ArrayDescribeWritesWhatTheDecoderReadsAndRefusesBadInput) {
  pinpool_array_t* array = nullptr;
  char err[256] = "unset";
  ASSERT_EQ(pinpool_array_alloc(pool_.get(), 2500, 4100, 64, &array, err, sizeof err), 0) << err;
  ASSERT_EQ(pinpool_array_run_count(array), 3u);  // 1008 elements a run
  const std::size_t domain = 0;
  const std::uint64_t first = 1000;
  const std::uint64_t count = 1100;  // 1000..2099: three runs
  std::size_t needed = 0;
  ASSERT_EQ(
      pinpool_array_describe(array, &domain, 1, first, count, nullptr, 0, &needed, err, sizeof err),
      -ENOSPC);
  EXPECT_EQ(needed, 40u + 3 * 40) << "a header and three runs of one key";
  std::vector<unsigned char> buf(needed, 0xee);  // no byte left unwritten passes as a 0
  std::size_t written = 0;
  ASSERT_EQ(pinpool_array_describe(array, &domain, 1, first, count, buf.data(), buf.size(),
                                   &written, err, sizeof err),
            0)
      << err;
  EXPECT_STREQ(err, "");
  ASSERT_EQ(written, needed);

  pinpool_descriptor_t* d = nullptr;
  ASSERT_EQ(pinpool_descriptor_decode(buf.data(), written, &d, err, sizeof err), 0) << err;
  ASSERT_EQ(pinpool_descriptor_size(d), count);
  EXPECT_EQ(pinpool_descriptor_element_size(d), 4100u);
  for (std::uint64_t i = 0; i < count; ++i) {
    std::uint64_t address = 0;
    std::uint64_t rkey = 1;
    ASSERT_EQ(pinpool_descriptor_element(d, i, 0, &address, &rkey), 0);
    ASSERT_EQ(address, reinterpret_cast<std::uintptr_t>(pinpool_array_element(array, first + i)))
        << i;
    pinpool_keys_t keys;
    ASSERT_EQ(pinpool_array_keys(array, first + i, 0, &keys), 0);
    ASSERT_EQ(rkey, keys.rkey) << i;
  }
  pinpool_descriptor_free(d);

  // One byte short: nothing written, the length needed reported.
  std::vector<unsigned char> small(needed - 1, 0xee);
  EXPECT_EQ(pinpool_array_describe(array, &domain, 1, first, count, small.data(), small.size(),
                                   &written, err, sizeof err),
            -ENOSPC);
  EXPECT_EQ(written, needed);
  EXPECT_EQ(std::count(small.begin(), small.end(), 0xee), static_cast<long>(small.size()));
  // The rest of the subrange by UINT64_MAX; then the refusals.
  ASSERT_EQ(pinpool_array_describe(array, &domain, 1, 2000, UINT64_MAX, buf.data(), buf.size(),
                                   &written, err, sizeof err),
            0)
      << err;
  ASSERT_EQ(pinpool_descriptor_decode(buf.data(), written, &d, err, sizeof err), 0) << err;
  EXPECT_EQ(pinpool_descriptor_size(d), 500u);
  pinpool_descriptor_free(d);
  const std::size_t missing_domain = 1;
  EXPECT_EQ(pinpool_array_describe(array, &missing_domain, 1, 0, 1, buf.data(), buf.size(),
                                   &written, err, sizeof err),
            -EINVAL);
  EXPECT_NE(std::string(err).find("domain"), std::string::npos) << err;
  EXPECT_EQ(pinpool_array_describe(array, &domain, 0, 0, 1, buf.data(), buf.size(), &written, err,
                                   sizeof err),
            -EINVAL)
      << "no domains";
  const std::vector<std::size_t> too_many(pinpool::kMaxDomains + 1, 0);
  EXPECT_EQ(pinpool_array_describe(array, too_many.data(), too_many.size(), 0, 1, buf.data(),
                                   buf.size(), &written, err, sizeof err),
            -EINVAL)
      << "more domains than a pool has room for";
  EXPECT_EQ(pinpool_array_describe(array, &domain, 1, 2500, 1, buf.data(), buf.size(), &written,
                                   err, sizeof err),
            -EINVAL)
      << "out of range";
  EXPECT_EQ(pinpool_array_describe(array, &domain, 1, 10, 0, buf.data(), buf.size(), &written, err,
                                   sizeof err),
            -EINVAL)
      << "empty";
  EXPECT_EQ(pinpool_array_describe(nullptr, &domain, 1, 0, 1, buf.data(), buf.size(), &written, err,
                                   sizeof err),
            -EINVAL);
  EXPECT_EQ(pinpool_array_describe(array, &domain, 1, 0, 1, buf.data(), buf.size(), nullptr, err,
                                   sizeof err),
            -EINVAL);
  EXPECT_EQ(pinpool_array_describe(array, nullptr, 1, 0, 1, buf.data(), buf.size(), &written, err,
                                   sizeof err),
            -EINVAL);
  EXPECT_EQ(pinpool_array_describe(array, &domain, 1, 0, 1, nullptr, 8, &written, err, sizeof err),
            -EINVAL);
  pinpool_array_free(pool_.get(), array);
}

TEST_F(CApiTest, ArraySpansChunksWithRunsElementsAndKeysThatAgree) {
  // 4100-byte elements aligned to 64 (a stride of 4160): 1008 per chunk, so 2500 of them take
  // three chunks.
  pinpool_array_t* array = nullptr;
  char err[256] = "unset";
  ASSERT_EQ(pinpool_array_alloc(pool_.get(), 2500, 4100, 64, &array, err, sizeof err), 0) << err;
  EXPECT_STREQ(err, "");
  ASSERT_NE(array, nullptr);
  EXPECT_EQ(pinpool_array_size(array), 2500u);
  ASSERT_EQ(pinpool_array_run_count(array), 3u);
  std::size_t next = 0;
  for (std::size_t r = 0; r < 3; ++r) {
    pinpool_array_run_t run;
    ASSERT_EQ(pinpool_array_run(array, r, &run), 0);
    EXPECT_EQ(run.first, next);
    EXPECT_EQ(run.stride, 4160u);
    EXPECT_EQ(run.element_size, 4100u);
    for (std::size_t k = 0; k < run.count; ++k) {
      char* e = static_cast<char*>(pinpool_array_element(array, run.first + k));
      ASSERT_EQ(e, static_cast<char*>(run.base) + k * run.stride);
      pinpool_keys_t by_element;
      pinpool_keys_t by_address;
      ASSERT_EQ(pinpool_array_keys(array, run.first + k, 0, &by_element), 0);
      ASSERT_EQ(pinpool_keys(pool_.get(), e + 4099, 0, &by_address), 0);
      ASSERT_EQ(by_element.base, by_address.base) << "element straddles a chunk";
      ASSERT_EQ(by_element.offset, by_address.offset - 4099);
    }
    next += run.count;
  }
  EXPECT_EQ(next, 2500u);
  pinpool_array_run_t run;
  pinpool_keys_t keys;
  EXPECT_EQ(pinpool_array_run(array, 3, &run), -EINVAL);
  EXPECT_EQ(pinpool_array_run(array, 0, nullptr), -EINVAL);
  EXPECT_EQ(pinpool_array_element(array, 2500), nullptr);
  EXPECT_EQ(pinpool_array_keys(array, 2500, 0, &keys), -EINVAL);
  EXPECT_EQ(pinpool_array_keys(array, 0, 1, &keys), -EINVAL) << "one domain";
  EXPECT_EQ(pinpool_array_size(nullptr), 0u);
  EXPECT_EQ(pinpool_array_run_count(nullptr), 0u);
  EXPECT_EQ(pinpool_array_element(nullptr, 0), nullptr);
  pinpool_array_free(pool_.get(), array);
  pinpool_array_free(pool_.get(), nullptr);
}

TEST_F(CApiTest, ArrayErrorsAreNegativeErrnoWithAMessageAndNoHandle) {
  struct Case {
    std::size_t count, size, alignment;
    int rc;
  };
  for (const Case& c : {Case{0, 64, 1, -EINVAL}, Case{8, 64, 128, -EINVAL}, Case{8, 64, 3, -EINVAL},
                        Case{2, kChunk + 1, 1, -EINVAL},
                        Case{std::numeric_limits<std::size_t>::max() / 2, 4096, 1, -EINVAL},
                        Case{std::numeric_limits<std::size_t>::max(), 1, 1, -EINVAL},
                        Case{5 * 1024, 4096, 4096, -ENOMEM}}) {
    pinpool_array_t* array = reinterpret_cast<pinpool_array_t*>(&pool_);
    char err[256] = "";
    EXPECT_EQ(
        pinpool_array_alloc(pool_.get(), c.count, c.size, c.alignment, &array, err, sizeof err),
        c.rc)
        << c.count << " x " << c.size;
    EXPECT_EQ(array, nullptr);
    EXPECT_NE(std::string(err).find("AllocateArray"), std::string::npos) << err;
  }
  pinpool_array_t* array = nullptr;
  EXPECT_EQ(pinpool_array_alloc(nullptr, 1, 64, 1, &array, nullptr, 0), -EINVAL);
  EXPECT_EQ(pinpool_array_alloc(pool_.get(), 1, 64, 1, nullptr, nullptr, 0), -EINVAL);
}

TEST(CApiDeathTest, ReallocOfForeignPointerAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  CPool pool;
  ASSERT_EQ(pool.rc(), 0) << pool.error();
  int on_stack = 0;
  EXPECT_DEATH((void)pinpool_realloc(pool.get(), &on_stack, 100), "not memory of this pool");
}

}  // namespace
