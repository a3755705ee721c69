// libFuzzer target: random operation sequences on long-lived pools, one per configuration, with
// cheap checks after every operation and the whole-pool checks at the end of every input.
//
// Pools: kConfigs fixes a few option sets (chunk size, budget, populate, debug checks, one to
// three fake counting domains); each input picks one, runs its operations on that configuration's
// pool and then frees everything it allocated, so the next input finds the pool empty (its chunks
// stay mapped: a pool never gives registered pages back). A pool is destroyed and its
// destruction checked after the inputs whose hash is 0 modulo kDestroyEvery (one in that many,
// whatever the corpus holds, and the same input always), which may leave blocks live, and at
// exit; the next input on that configuration creates a new pool, whose growth and fault paths
// are then fuzzed again. A finding that needs an earlier input's leftovers may not reproduce from
// the crash file alone: its message says how many inputs the pool had run.
//
// Operations: allocate (sizes from 1 B to the largest block, alignments valid and not), free by
// Block, by address and sized, reallocate (by Block and by address), lookup of interior and
// foreign pointers, usable size, reserve (setup-time growth), bursts of small allocations, and
// faults: a fake domain refusing its next registrations, the os room refusing its next mappings.
// Checked per operation (O(log n) in the live blocks): each result as the API states it; a new
// block lies inside one chunk whose keys each fake domain registered for that chunk (and reports
// those keys) and overlaps no live block (an interval map); a block freed, reallocated or looked
// up still holds the pattern written into it, and so does each block of a burst as it is freed.
// Checked per input: every live block's pattern (as it is freed); the stats agree with the
// domains (mapped bytes = chunks x chunk size = bytes each domain has live, within the budget; the
// chunks' keys are the domains'); the heap's allocated bytes cover the live blocks and the caches,
// which keep to their bounds, and once everything is freed they are exactly the caches; the os
// layer maps nothing but the pools' chunks. Checked at each destruction, with or without live
// blocks: everything is deregistered and unmapped.
//
// The log shows findings only: a pool with debug checks warns on stderr when destroyed with live
// blocks, so only pools without them are destroyed with blocks live. At exit one line gives the
// operations per second (pool calls whose result was checked).
//
// Build and run: the `fuzz` preset (clang), `ctest --preset fuzz`, or
//   build-fuzz/tests/fuzz/pool_fuzzer -max_total_time=60 scratch/ tests/fuzz/corpus/
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "os/os.h"
#include "pinpool/pool.h"
#include "support/counting_domain.h"

namespace {

using pinpool::Block;
using pinpool::kMiB;
using pinpool::Pool;
using pinpool::testing::CountingDomain;

#define FUZZ_CHECK(cond, ...)                                                                    \
  do {                                                                                           \
    if (!(cond)) {                                                                               \
      std::fprintf(stderr, "pool_fuzzer: %s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                                         \
      std::fprintf(stderr, " (pool of configuration %zu, input %llu of its life)\n",             \
                   current_config, static_cast<unsigned long long>(current_input));              \
      std::abort();                                                                              \
    }                                                                                            \
  } while (false)

// What a failed check names, so that a finding that depends on earlier inputs says so.
std::size_t current_config = 0;
std::uint64_t current_input = 0;

// Mappings the os room should refuse from now on (fault injection through its hook).
int mmap_failures_left = 0;
int FailMappings(pinpool::internal::os::Call call, std::size_t) {
  using pinpool::internal::os::Call;
  if (call != Call::kMapAnonymous || mmap_failures_left <= 0) return 0;
  --mmap_failures_left;
  return ENOMEM;
}

// One input in kDestroyEvery ends its pool's life.
constexpr std::uint64_t kDestroyEvery = 64;

struct Config {
  std::size_t chunk_mib;
  std::size_t budget_chunks;  // few: mapping a chunk reads /proc/self/smaps, the slowest step
  bool populate;
  bool debug_checks;
  int domains;
};
// Every value of every option, each with others.
constexpr Config kConfigs[] = {
    {2, 1, false, false, 1}, {2, 2, false, true, 2}, {2, 3, true, false, 3},
    {4, 1, true, true, 3},   {4, 2, true, false, 1}, {4, 3, false, true, 2},
};
constexpr std::size_t kNumConfigs = std::size(kConfigs);

// Counts for the line printed at exit.
struct Totals {
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  std::uint64_t inputs = 0;
  std::uint64_t ops = 0;        // calls into a pool whose result was checked
  std::uint64_t burst_ops = 0;  // of which in bursts of small allocations and their frees
  std::uint64_t pools_destroyed = 0;
};
Totals totals;

// A pool that outlives the inputs, with its fake domains.
struct LongLivedPool {
  std::vector<std::shared_ptr<CountingDomain>> domains;
  std::unique_ptr<Pool> pool;
  std::uint64_t inputs = 0;
  std::size_t mapped = 0;  // as its stats said when last checked

  void Create(const Config& c) {
    pinpool::PoolOptions o;
    o.chunk_size = c.chunk_mib * kMiB;
    o.budget = o.chunk_size * c.budget_chunks;
    o.page_size = pinpool::PageSize::k4K;
    o.populate = c.populate;
    o.debug_checks = c.debug_checks;
    domains.clear();
    for (int d = 0; d < c.domains; ++d) {
      domains.push_back(std::make_shared<CountingDomain>("fuzz" + std::to_string(d)));
      o.domains.push_back(domains.back());
    }
    auto created = Pool::Create(o);
    FUZZ_CHECK(created.ok(), "%s", created.status().ToString().c_str());
    pool = std::move(*created);
    inputs = 0;
  }

  // Destroys the pool (with or without live blocks) and checks that it gave everything back.
  void Destroy() {
    const std::int64_t mapped_before = pinpool::internal::os::counters().chunk_bytes.load();
    const std::size_t had = pool->GetStats().mapped_bytes;
    pool.reset();
    mapped = 0;
    for (const auto& d : domains) {
      FUZZ_CHECK(d->live_registrations() == 0, "%zu registrations left", d->live_registrations());
      FUZZ_CHECK(d->bad_deregisters() == 0, "a deregistration of keys never registered");
    }
    FUZZ_CHECK(pinpool::internal::os::counters().chunk_bytes.load() ==
                   mapped_before - static_cast<std::int64_t>(had),
               "chunks left mapped");
    domains.clear();
    ++totals.pools_destroyed;
  }
};
LongLivedPool pools[kNumConfigs];
std::int64_t chunk_bytes_at_start = 0;

// Bytes of chunks all pools have mapped, as their stats said when last checked (only the pool of
// the current input can have changed since).
std::int64_t PoolsMappedBytes() {
  std::int64_t bytes = 0;
  for (const LongLivedPool& p : pools) bytes += static_cast<std::int64_t>(p.mapped);
  return bytes;
}

struct Live {
  Block block;
  std::uint8_t seed;
};

// A block holds its seed in every byte (seeds differ between neighbours often enough that an
// overlap or a stray write shows). Filling and checking are the fuzzer's own bookkeeping, not code
// under test: they go through memset and memcmp (uninstrumented, and fast even for a block of
// megabytes), byte by byte only to name the byte once a check has failed.
void Fill(const Live& l) { std::memset(l.block.data(), l.seed, l.block.size()); }

// The first byte of `data` that is not `seed`, or SIZE_MAX.
std::size_t FirstChanged(const void* data, std::size_t size, std::uint8_t seed) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  if (size == 0 || (p[0] == seed && std::memcmp(p, p + 1, size - 1) == 0)) return SIZE_MAX;
  for (std::size_t i = 0;; ++i) {
    if (p[i] != seed) return i;
  }
}

void CheckPattern(const Live& l) {
  const std::size_t at = FirstChanged(l.block.data(), l.block.size(), l.seed);
  FUZZ_CHECK(at == SIZE_MAX, "block %p+%zu: byte %zu changed", l.block.data(), l.block.size(), at);
}

// One input's operations on a long-lived pool, which it leaves empty (unless `last`).
class Input {
 public:
  Input(FuzzedDataProvider& in, LongLivedPool& p)
      : in_(in), owner_(p), domains_(p.domains), pool_(*p.pool) {}

  // `last`: the pool is destroyed after this input, which may then leave blocks live.
  void Run(bool last) {
    for (int ops = 0; ops < 300 && in_.remaining_bytes() > 0; ++ops) {
      Step(in_.ConsumeIntegralInRange(0, 12));
    }
    CheckPool();
    // Faults left armed would hit the next input's first growth, unasked for.
    mmap_failures_left = 0;
    for (const auto& d : domains_) d->FailRegistration(0);
    if (last && !pool_.options().debug_checks && in_.ConsumeBool()) return;
    while (!live_.empty()) Free(live_.begin(), in_.ConsumeIntegralInRange(0, 2));
    CheckPool();
  }

 private:
  std::size_t PickSize() {
    switch (in_.ConsumeIntegralInRange(0, 9)) {
      case 0:
        return in_.ConsumeIntegralInRange<std::size_t>(0, pool_.max_block_size());
      case 1:
        return in_.PickValueInArray<std::size_t>(
            {0, SIZE_MAX, SIZE_MAX - 15, pool_.max_block_size(), pool_.max_block_size() + 1,
             pool_.chunk_size(), 64 * 1024, 64 * 1024 + 1, 14336, 16384});
      case 2:
      case 3:
        return in_.ConsumeIntegralInRange<std::size_t>(1, 64 * 1024);
      default:
        return in_.ConsumeIntegralInRange<std::size_t>(1, 512);
    }
  }

  std::size_t PickAlignment() {
    if (in_.ConsumeBool()) return 16;
    if (in_.ConsumeIntegralInRange(0, 7) == 0) {
      return in_.PickValueInArray<std::size_t>({0, 3, 24, 48, 4097, SIZE_MAX});  // invalid
    }
    return std::size_t{1} << in_.ConsumeIntegralInRange(0, 23);  // up to 8 MiB (> a chunk)
  }

  std::map<std::uintptr_t, Live>::iterator PickLive() {
    auto it = live_.begin();
    std::advance(it, in_.ConsumeIntegralInRange<std::size_t>(0, live_.size() - 1));
    return it;
  }

  bool Valid(std::size_t size, std::size_t align) const {
    return size != 0 && size <= pool_.max_block_size() && align != 0 &&
           (align & (align - 1)) == 0 && align <= pool_.chunk_size();
  }

  // No live block overlaps [start, start + size).
  void CheckNoOverlap(const void* data, std::size_t size) const {
    const auto start = reinterpret_cast<std::uintptr_t>(data);
    auto next = live_.lower_bound(start);
    FUZZ_CHECK(next == live_.end() || next->first >= start + size,
               "block %p+%zu overlaps live block %#lx", data, size,
               static_cast<unsigned long>(next->first));
    if (next != live_.begin()) {
      const Live& prev = std::prev(next)->second;
      FUZZ_CHECK(reinterpret_cast<std::uintptr_t>(prev.block.data()) + prev.block.size() <= start,
                 "block %p overlaps live block %p+%zu", data, prev.block.data(), prev.block.size());
    }
  }

  // A block just handed out: inside its chunk, with the keys every domain registered for that
  // chunk, aligned, overlapping no live block. Then it is filled and recorded.
  void Adopt(const Block& b, std::size_t align) {
    const auto start = reinterpret_cast<std::uintptr_t>(b.data());
    const pinpool::ChunkInfo& c = b.chunk();
    FUZZ_CHECK(start % align == 0 && start % 16 == 0, "block %p not aligned to %zu", b.data(),
               align);
    FUZZ_CHECK(start >= c.base && start + b.size() <= c.base + c.size,
               "block %p+%zu outside its chunk %#lx+%zu", b.data(), b.size(),
               static_cast<unsigned long>(c.base), c.size);
    FUZZ_CHECK(b.domain_count() == domains_.size(), "block has keys for %zu domains",
               b.domain_count());
    for (std::size_t d = 0; d < domains_.size(); ++d) {
      pinpool::Keys k;
      FUZZ_CHECK(domains_[d]->KeysFor(c.base, &k), "chunk %#lx not registered with domain %zu",
                 static_cast<unsigned long>(c.base), d);
      FUZZ_CHECK(pinpool::ToUnderlying(k.lkey) == pinpool::ToUnderlying(b.lkey(d)) &&
                     k.length == c.size && b.offset(d) == start - k.base,
                 "block %p reports keys other than its chunk's", b.data());
    }
    CheckNoOverlap(b.data(), b.size());
    Live l{b, in_.ConsumeIntegral<std::uint8_t>()};
    Fill(l);
    live_.emplace(start, l);
  }

  void Free(std::map<std::uintptr_t, Live>::iterator it, int how) {
    CheckPattern(it->second);
    const Block b = it->second.block;
    live_.erase(it);
    ++totals.ops;
    switch (how) {
      case 0:
        pool_.Deallocate(b);
        break;
      case 1:
        pool_.Deallocate(b.data());
        break;
      default:
        pool_.Deallocate(b.data(), b.size());
        break;
    }
  }

  void Step(int op) {
    switch (op) {
      case 0:
      case 1:
      case 2: {  // allocate
        const std::size_t size = PickSize();
        const std::size_t align = op == 0 ? PickAlignment() : 16;
        const Block b = op == 0 ? pool_.Allocate(size, align) : pool_.Allocate(size);
        ++totals.ops;
        if (!Valid(size, align)) {
          FUZZ_CHECK(!b, "Allocate(%zu, %zu) succeeded", size, align);
        } else if (b) {
          FUZZ_CHECK(b.size() == size, "size %zu for %zu", b.size(), size);
          Adopt(b, align);
        }
        break;
      }
      case 3:
      case 4:
      case 5:  // free, three ways
        if (!live_.empty()) Free(PickLive(), op - 3);
        break;
      case 6: {  // reallocate
        if (live_.empty()) break;
        auto it = PickLive();
        const Live old = it->second;
        CheckPattern(old);
        const std::size_t size = PickSize();
        const Block moved = in_.ConsumeBool() ? pool_.Reallocate(old.block, size)
                                              : pool_.Reallocate(old.block.data(), size);
        ++totals.ops;
        if (!moved) {  // the old block is untouched and still live
          CheckPattern(old);
          break;
        }
        FUZZ_CHECK(Valid(size, 16), "Reallocate to %zu succeeded", size);
        live_.erase(it);
        const std::size_t kept = std::min(old.block.size(), size);
        const std::size_t at = FirstChanged(moved.data(), kept, old.seed);
        FUZZ_CHECK(at == SIZE_MAX, "Reallocate lost byte %zu of %zu", at, kept);
        Adopt(moved, 16);
        break;
      }
      case 7: {  // lookup: interior pointers of a live block, and foreign pointers
        int on_stack = 0;
        FUZZ_CHECK(!pool_.Lookup(&on_stack) && !pool_.Contains(&on_stack), "stack in pool");
        totals.ops += 2;
        if (live_.empty()) break;
        const Live& l = PickLive()->second;
        const std::size_t off = in_.ConsumeIntegralInRange<std::size_t>(0, l.block.size() - 1);
        const auto loc = pool_.Lookup(static_cast<char*>(l.block.data()) + off);
        ++totals.ops;
        FUZZ_CHECK(loc && &loc->chunk() == &l.block.chunk() &&
                       loc->offset() == l.block.offset() + off && loc->lkey() == l.block.lkey(),
                   "Lookup of %p + %zu", l.block.data(), off);
        CheckPattern(l);
        break;
      }
      case 8: {  // usable size
        if (live_.empty()) break;
        const Live& l = PickLive()->second;
        FUZZ_CHECK(pool_.UsableSize(l.block.data()) >= l.block.size(), "UsableSize too small");
        ++totals.ops;
        break;
      }
      case 9: {  // reserve
        const std::size_t bytes =
            in_.ConsumeIntegralInRange<std::size_t>(0, pool_.options().budget + kMiB);
        const absl::Status s = pool_.Reserve(bytes);
        ++totals.ops;
        if (s.ok()) {  // checked with the stats (a pool never unmaps a chunk while it lives)
          reserved_ = std::max(reserved_, bytes);
        } else {
          FUZZ_CHECK(s.code() == absl::StatusCode::kResourceExhausted, "%s", s.ToString().c_str());
        }
        break;
      }
      case 10:  // a domain refuses one of its next registrations
        domains_[in_.ConsumeIntegralInRange<std::size_t>(0, domains_.size() - 1)]->FailRegistration(
            in_.ConsumeIntegralInRange(0, 3));
        break;
      case 11:  // the os room refuses the next mappings
        mmap_failures_left = in_.ConsumeIntegralInRange(0, 2);
        break;
      default: {  // a burst of small allocations and frees (the thread cache's fast path)
        std::vector<Block> burst;
        const int n = in_.ConsumeIntegralInRange(1, 200);
        const std::size_t size = in_.ConsumeIntegralInRange<std::size_t>(1, 4096);
        for (int i = 0; i < n; ++i) {
          Block b = pool_.Allocate(size);
          ++totals.ops;
          if (!b) {
            ++totals.burst_ops;
            break;
          }
          FUZZ_CHECK(b.size() == size, "size %zu for %zu", b.size(), size);
          CheckNoOverlap(b.data(), b.size());
          std::memset(b.data(), 0xa5, b.size());
          burst.push_back(b);
        }
        std::sort(burst.begin(), burst.end(),
                  [](const Block& a, const Block& b) { return a.data() < b.data(); });
        for (std::size_t i = 1; i < burst.size(); ++i) {
          FUZZ_CHECK(static_cast<char*>(burst[i - 1].data()) + size <= burst[i].data(),
                     "burst blocks %p and %p overlap", burst[i - 1].data(), burst[i].data());
        }
        for (const Block& b : burst) {
          const std::size_t at = FirstChanged(b.data(), b.size(), 0xa5);
          FUZZ_CHECK(at == SIZE_MAX, "burst block %p+%zu: byte %zu changed", b.data(), b.size(),
                     at);
          pool_.Deallocate(b);
        }
        totals.ops += burst.size();
        totals.burst_ops += 2 * burst.size();
        break;
      }
    }
  }

  // The whole-pool checks: stats against the domains, the os room and the live blocks.
  void CheckPool() {
    std::size_t live_bytes = 0;
    for (const auto& [start, l] : live_) live_bytes += l.block.size();
    const pinpool::PoolStats s = pool_.GetStats();
    owner_.mapped = s.mapped_bytes;
    FUZZ_CHECK(s.mapped_bytes == s.chunks.size() * pool_.chunk_size(), "mapped %zu, %zu chunks",
               s.mapped_bytes, s.chunks.size());
    FUZZ_CHECK(s.mapped_bytes >= reserved_, "Reserve(%zu) succeeded, %zu mapped", reserved_,
               s.mapped_bytes);
    FUZZ_CHECK(s.mapped_bytes <= s.budget_bytes, "mapped %zu over budget %zu", s.mapped_bytes,
               s.budget_bytes);
    FUZZ_CHECK(s.domains.size() == domains_.size(), "stats for %zu domains", s.domains.size());
    for (std::size_t d = 0; d < domains_.size(); ++d) {
      FUZZ_CHECK(domains_[d]->live_registrations() == s.chunks.size(),
                 "domain %zu has %zu registrations for %zu chunks", d,
                 domains_[d]->live_registrations(), s.chunks.size());
      FUZZ_CHECK(domains_[d]->bad_deregisters() == 0, "a deregistration of keys never registered");
      FUZZ_CHECK(s.domains[d].registered_bytes == s.mapped_bytes, "domain %zu: %zu bytes", d,
                 static_cast<std::size_t>(s.domains[d].registered_bytes));
      for (const pinpool::ChunkStats& c : s.chunks) {
        pinpool::Keys k;
        FUZZ_CHECK(domains_[d]->KeysFor(c.base, &k) && c.keys.size() == domains_.size() &&
                       pinpool::ToUnderlying(k.lkey) == pinpool::ToUnderlying(c.keys[d].lkey),
                   "the stats give chunk %#lx keys domain %zu did not register",
                   static_cast<unsigned long>(c.base), d);
      }
    }
    FUZZ_CHECK(pinpool::internal::os::counters().chunk_bytes.load() - chunk_bytes_at_start ==
                   PoolsMappedBytes(),
               "the os room maps other than the pools' chunks");
    FUZZ_CHECK(s.thread_cache_bytes <= s.thread_cache_limit_bytes, "thread cache %zu over %zu",
               s.thread_cache_bytes, s.thread_cache_limit_bytes);
    FUZZ_CHECK(s.transfer_cache_bytes <= s.transfer_cache_limit_bytes, "transfer %zu over %zu",
               s.transfer_cache_bytes, s.transfer_cache_limit_bytes);
    const std::size_t cached = s.thread_cache_bytes + s.transfer_cache_bytes;
    FUZZ_CHECK(s.cached_bytes == cached, "cached %zu != thread %zu + transfer %zu", s.cached_bytes,
               s.thread_cache_bytes, s.transfer_cache_bytes);
    FUZZ_CHECK(s.live_bytes >= live_bytes, "live %zu < the %zu bytes asked for", s.live_bytes,
               live_bytes);
    FUZZ_CHECK(!live_.empty() || s.live_bytes == 0,
               "nothing is live, yet the stats count %zu live bytes", s.live_bytes);
    FUZZ_CHECK(s.heap_active_bytes >= s.live_bytes + s.cached_bytes,
               "active %zu < live %zu + cached %zu", s.heap_active_bytes, s.live_bytes,
               s.cached_bytes);
  }

  FuzzedDataProvider& in_;
  LongLivedPool& owner_;
  const std::vector<std::shared_ptr<CountingDomain>>& domains_;
  Pool& pool_;
  std::map<std::uintptr_t, Live> live_;  // by start address: the interval map for overlaps
  std::size_t reserved_ = 0;             // the most a successful Reserve asked for
};

std::uint64_t Fnv1a(const std::uint8_t* data, std::size_t size) {
  std::uint64_t h = 0xcbf29ce484222325;
  for (std::size_t i = 0; i < size; ++i) h = (h ^ data[i]) * 0x100000001b3;
  return h;
}

// At exit (after the thread's caches went back to their heaps): destroy what is left, checking
// each destruction, then the one line of figures.
void AtExit() {
  for (std::size_t c = 0; c < kNumConfigs; ++c) {
    current_config = c;
    current_input = pools[c].inputs;
    if (pools[c].pool) pools[c].Destroy();
  }
  FUZZ_CHECK(pinpool::internal::os::counters().chunk_bytes.load() == chunk_bytes_at_start,
             "chunks left mapped at exit");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - totals.start).count();
  std::fprintf(stderr,
               "pool_fuzzer: %llu checked operations (%llu in bursts) in %.1f s: %.0f ops/s (%llu "
               "inputs, %.0f/s; %llu pools destroyed and checked)\n",
               static_cast<unsigned long long>(totals.ops),
               static_cast<unsigned long long>(totals.burst_ops), seconds,
               static_cast<double>(totals.ops) / seconds,
               static_cast<unsigned long long>(totals.inputs),
               static_cast<double>(totals.inputs) / seconds,
               static_cast<unsigned long long>(totals.pools_destroyed));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  pinpool::internal::os::SetFaultHook(&FailMappings);
  chunk_bytes_at_start = pinpool::internal::os::counters().chunk_bytes.load();
  totals.start = std::chrono::steady_clock::now();
  std::atexit(&AtExit);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const bool last = Fnv1a(data, size) % kDestroyEvery == 0;
  FuzzedDataProvider in(data, size);
  current_config = in.ConsumeIntegralInRange<std::size_t>(0, kNumConfigs - 1);
  LongLivedPool& p = pools[current_config];
  mmap_failures_left = 0;
  if (!p.pool) p.Create(kConfigs[current_config]);
  current_input = ++p.inputs;
  Input(in, p).Run(last);
  if (last) p.Destroy();
  ++totals.inputs;
  return 0;
}
