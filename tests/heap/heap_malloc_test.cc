// The heap and malloc (docs/design.md, "The heap"): once a thread has used a pool and the pool
// holds the chunks its working set needs, allocating and freeing on that thread never calls
// malloc, calloc, realloc or their aligned forms, whatever the sizes (slab classes, spans, large
// blocks; refills, flushes to the transfer stacks, frees of blocks another thread allocated).
// Counted, not assumed: this binary defines the malloc family itself (forwarding to glibc's
// __libc_* entry points), and counts the calls made on a thread while it measures.
//
// What does call malloc, and is left out of the measured window: the pool's creation, and a
// thread's first call to a pool (the heap's list of thread caches and the thread's list of its
// caches are std::vectors, and glibc records the thread-exit hook with calloc). The last test
// prints those counts and checks that the counter sees them, so a counter that sees nothing
// cannot pass the others. Under ASan or TSan, which own malloc, the tests skip.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "pinpool/pool.h"
#include "support/counting_domain.h"
#include "support/sanitizers.h"

namespace {

constinit thread_local bool t_counting __attribute__((tls_model("initial-exec"))) = false;
std::atomic<long> g_calls{0};

inline void Note() {
  if (t_counting) g_calls.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

#if !PINPOOL_TEST_ASAN && !PINPOOL_TEST_TSAN
extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);

void* malloc(std::size_t n) noexcept {
  Note();
  return __libc_malloc(n);
}
void* calloc(std::size_t n, std::size_t size) noexcept {
  Note();
  return __libc_calloc(n, size);
}
void* realloc(void* p, std::size_t n) noexcept {
  Note();
  return __libc_realloc(p, n);
}
void* memalign(std::size_t alignment, std::size_t n) noexcept {
  Note();
  return __libc_memalign(alignment, n);
}
void* aligned_alloc(std::size_t alignment, std::size_t n) noexcept {
  Note();
  return __libc_memalign(alignment, n);
}
int posix_memalign(void** out, std::size_t alignment, std::size_t n) noexcept {
  Note();
  if (alignment % sizeof(void*) != 0 || (alignment & (alignment - 1)) != 0) return EINVAL;
  void* p = __libc_memalign(alignment, n);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}
}  // extern "C"
#endif

namespace pinpool {
namespace {

constexpr bool kCounted = !PINPOOL_TEST_ASAN && !PINPOOL_TEST_TSAN;

// Calls made on this thread while counting (`on`; off: a warm-up round of the same code).
class Counting {
 public:
  explicit Counting(bool on = true) : start_(g_calls.load()) { t_counting = on; }
  ~Counting() { t_counting = false; }
  long calls() const { return g_calls.load() - start_; }

 private:
  long start_;
};

PoolOptions Options() {
  PoolOptions o;
  o.chunk_size = 16 * kMiB;
  o.budget = 256 * kMiB;
  o.page_size = PageSize::kTransparent;
  o.domains.push_back(std::make_shared<testing::CountingDomain>());
  return o;
}

// The same sequence for the same seed: sizes from 64 B to 4 MiB (slab classes, page spans and
// large blocks) and a window of up to 64 live blocks freed in random order. No allocation of its
// own: the window is a fixed array.
void Churn(Pool& pool, int pairs, std::uint64_t seed, bool* ok) {
  static constexpr std::size_t kSizes[] = {64,   200,   512,   1024,    4096,
                                           9000, 16384, 65536, 300'000, 4 << 20};
  std::mt19937_64 rng(seed);
  Block window[64] = {};
  for (int i = 0; i < pairs; ++i) {
    Block& slot = window[rng() % 64];
    if (slot) pool.Deallocate(slot);
    slot = pool.Allocate(kSizes[rng() % std::size(kSizes)]);
    if (!slot) *ok = false;
  }
  for (Block& b : window) pool.Deallocate(b);
}

TEST(HeapMallocTest, AllocateAndFreeNeverCallMallocOnceTheThreadIsWarm) {
  if (!kCounted) GTEST_SKIP() << "the sanitizer owns malloc: nothing to interpose";
  auto pool = Pool::Create(Options()).value();
  bool ok = true;
  Churn(*pool, 100'000, 7, &ok);  // warm: this thread's cache, the chunks, the bins' storage
  ASSERT_TRUE(ok);
  long calls;
  {
    Counting counting;
    Churn(*pool, 100'000, 7, &ok);
    calls = counting.calls();
  }
  ASSERT_TRUE(ok);
  EXPECT_EQ(calls, 0) << "malloc-family calls during 10^5 warm allocate/free pairs";
}

TEST(HeapMallocTest, FreesOfAnotherThreadsBlocksNeverCallMalloc) {
  if (!kCounted) GTEST_SKIP() << "the sanitizer owns malloc: nothing to interpose";
  auto pool = Pool::Create(Options()).value();
  constexpr int kBlocks = 200;  // about 56 MiB live: well within the budget, no growth failure
  constexpr int kRounds = 3;    // rounds 0 and 1 warm both threads with the same sequence
  static constexpr std::size_t kSizes[] = {64, 4096, 65536, 1 << 20};
  std::vector<Block> blocks(kBlocks);  // the producer's blocks, freed by the consumer
  std::atomic<int> produced{0}, consumed{0};
  long producer_calls = -1, consumer_calls = -1;
  std::thread consumer([&] {
    for (int round = 0; round < kRounds; ++round) {
      while (produced.load() <= round) std::this_thread::yield();
      {
        Counting counting(round == kRounds - 1);
        for (Block& b : blocks) pool->Deallocate(b);
        consumer_calls = counting.calls();
      }
      consumed.store(round + 1);
    }
  });
  for (int round = 0; round < kRounds; ++round) {
    {
      Counting counting(round == kRounds - 1);
      for (int i = 0; i < kBlocks; ++i) blocks[i] = pool->Allocate(kSizes[i % 4]);
      producer_calls = counting.calls();
    }
    for (const Block& b : blocks) EXPECT_TRUE(b) << "round " << round;
    produced.store(round + 1);
    while (consumed.load() <= round) std::this_thread::yield();
  }
  consumer.join();
  EXPECT_EQ(producer_calls, 0) << "malloc-family calls allocating on the producer";
  EXPECT_EQ(consumer_calls, 0) << "malloc-family calls freeing the producer's blocks";
}

// The counter sees what it should: a thread's first call to a pool does call malloc today
// (printed), and so does any std container. Were the interposition lost, this fails.
TEST(HeapMallocTest, TheCounterSeesMalloc) {
  if (!kCounted) GTEST_SKIP() << "the sanitizer owns malloc: nothing to interpose";
  auto pool = Pool::Create(Options()).value();
  long first_call = 0;
  std::thread([&] {
    Counting counting;
    pool->Deallocate(pool->Allocate(64));
    first_call = counting.calls();
  }).join();
  std::printf("a thread's first call to a pool: %ld malloc-family calls\n", first_call);
  long vector_calls;
  {
    Counting counting;
    std::vector<int> v(100);
    v[0] = 1;
    vector_calls = counting.calls();
  }
  EXPECT_GE(vector_calls, 1);
}

}  // namespace
}  // namespace pinpool
