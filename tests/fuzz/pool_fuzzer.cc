// libFuzzer target: random operation sequences on a fresh pool per input, with every invariant
// checked after every operation.
//
// Operations: allocate (sizes from 1 B to the largest block, alignments valid and not), free by
// Block, by address and sized, reallocate (by Block and by address), lookup of interior and
// foreign pointers, usable size, reserve (setup-time growth), and faults: a fake domain refusing
// its next registrations, the os layer refusing its next mappings.
// Invariants: every live block lies inside one chunk whose keys each fake domain registered for
// that chunk (and reports those keys); no two live blocks overlap; every live block still holds
// the pattern written into it; the stats agree with the domains (mapped bytes = chunks x chunk
// size = bytes each domain has live, within the budget; the heap's allocated bytes cover the
// live blocks and the caches, which keep to their bounds); and destroying the pool, with or without
// live blocks, deregisters and unmaps everything.
//
// Build and run: the `fuzz` preset (clang), `ctest --preset fuzz`, or
//   build-fuzz/tests/fuzz/pool_fuzzer -max_total_time=60 scratch/ tests/fuzz/corpus/
#include <fuzzer/FuzzedDataProvider.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
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
      std::fprintf(stderr, "\n");                                                                \
      std::abort();                                                                              \
    }                                                                                            \
  } while (false)

// Mappings the os layer should refuse from now on (fault injection through its hook).
int mmap_failures_left = 0;
int FailMappings(pinpool::internal::os::Call call, std::size_t) {
  using pinpool::internal::os::Call;
  if (call != Call::kMapAnonymous || mmap_failures_left <= 0) return 0;
  --mmap_failures_left;
  return ENOMEM;
}

struct Live {
  Block block;
  std::uint8_t seed;
};

// A block holds its seed in every byte (seeds differ between neighbours often enough that an
// overlap or a stray write shows). Filling and checking run without coverage instrumentation:
// they are the fuzzer's own bookkeeping, not code under test.
#define FUZZ_NO_COVERAGE __attribute__((no_sanitize("coverage")))

FUZZ_NO_COVERAGE void Fill(const Live& l) { std::memset(l.block.data(), l.seed, l.block.size()); }

// The first `upto` bytes of the block (all of it when upto >= size), else the first and last
// 256 bytes too, which keeps an execution fast.
FUZZ_NO_COVERAGE std::size_t FirstChanged(const void* data, std::size_t size, std::uint8_t seed,
                                          std::size_t upto) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  const std::size_t n = std::min(upto, size);
  for (std::size_t i = 0; i < n; ++i) {
    if (p[i] != seed) return i;
  }
  for (std::size_t i = size > 256 && n < size ? size - 256 : size; i < size; ++i) {
    if (p[i] != seed) return i;
  }
  return SIZE_MAX;
}

void CheckPattern(const Live& l, std::size_t upto) {
  const std::size_t at = FirstChanged(l.block.data(), l.block.size(), l.seed, upto);
  FUZZ_CHECK(at == SIZE_MAX, "block %p+%zu: byte %zu changed", l.block.data(), l.block.size(), at);
}

class Harness {
 public:
  explicit Harness(FuzzedDataProvider& in) : in_(in) {
    pinpool::PoolOptions o;
    o.chunk_size = std::size_t{2} * kMiB << in.ConsumeIntegralInRange(0, 1);
    // Few chunks: mapping one reads /proc/self/smaps, the slowest step of an execution.
    o.budget = o.chunk_size * in.ConsumeIntegralInRange(1, 3);
    o.page_size = pinpool::PageSize::k4K;
    o.populate = in.ConsumeBool();
    o.debug_checks = in.ConsumeBool();
    const int ndomains = in.ConsumeIntegralInRange(1, 3);
    for (int d = 0; d < ndomains; ++d) {
      domains_.push_back(std::make_shared<CountingDomain>("fuzz" + std::to_string(d)));
      o.domains.push_back(domains_.back());
    }
    chunk_bytes_before_ = pinpool::internal::os::counters().chunk_bytes.load();
    auto pool = Pool::Create(o);
    FUZZ_CHECK(pool.ok(), "%s", pool.status().ToString().c_str());
    pool_ = std::move(*pool);
  }

  void Run() {
    for (int ops = 0; ops < 300 && in_.remaining_bytes() > 0; ++ops) {
      Step(in_.ConsumeIntegralInRange(0, 12));
      CheckInvariants();
    }
    if (in_.ConsumeBool()) {  // free everything, each in some way
      while (!live_.empty()) Free(live_.begin(), in_.ConsumeIntegralInRange(0, 2));
    }
    pool_.reset();  // with or without live blocks
    for (const auto& d : domains_) {
      FUZZ_CHECK(d->live_registrations() == 0, "%zu registrations left", d->live_registrations());
      FUZZ_CHECK(d->bad_deregisters() == 0, "a deregistration of keys never registered");
    }
    FUZZ_CHECK(pinpool::internal::os::counters().chunk_bytes.load() == chunk_bytes_before_,
               "chunks left mapped");
  }

 private:
  std::size_t PickSize() {
    switch (in_.ConsumeIntegralInRange(0, 9)) {
      case 0:
        return in_.ConsumeIntegralInRange<std::size_t>(0, pool_->max_block_size());
      case 1:
        return in_.PickValueInArray<std::size_t>(
            {0, SIZE_MAX, SIZE_MAX - 15, pool_->max_block_size(), pool_->max_block_size() + 1,
             pool_->chunk_size(), 64 * 1024, 64 * 1024 + 1, 14336, 16384});
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
    return size != 0 && size <= pool_->max_block_size() && align != 0 &&
           (align & (align - 1)) == 0 && align <= pool_->chunk_size();
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
    auto next = live_.lower_bound(start);
    FUZZ_CHECK(next == live_.end() || next->first >= start + b.size(),
               "block %p+%zu overlaps live block %#lx", b.data(), b.size(),
               static_cast<unsigned long>(next->first));
    if (next != live_.begin()) {
      const Live& prev = std::prev(next)->second;
      FUZZ_CHECK(reinterpret_cast<std::uintptr_t>(prev.block.data()) + prev.block.size() <= start,
                 "block %p overlaps live block %p+%zu", b.data(), prev.block.data(),
                 prev.block.size());
    }
    Live l{b, in_.ConsumeIntegral<std::uint8_t>()};
    Fill(l);
    live_.emplace(start, l);
  }

  void Free(std::map<std::uintptr_t, Live>::iterator it, int how) {
    CheckPattern(it->second, SIZE_MAX);
    const Block b = it->second.block;
    live_.erase(it);
    switch (how) {
      case 0:
        pool_->Deallocate(b);
        break;
      case 1:
        pool_->Deallocate(b.data());
        break;
      default:
        pool_->Deallocate(b.data(), b.size());
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
        const Block b = op == 0 ? pool_->Allocate(size, align) : pool_->Allocate(size);
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
        const std::size_t size = PickSize();
        const Block moved = in_.ConsumeBool() ? pool_->Reallocate(old.block, size)
                                              : pool_->Reallocate(old.block.data(), size);
        if (!moved) {  // the old block is untouched and still live
          CheckPattern(old, SIZE_MAX);
          break;
        }
        FUZZ_CHECK(Valid(size, 16), "Reallocate to %zu succeeded", size);
        live_.erase(it);
        const std::size_t kept = std::min(old.block.size(), size);
        const std::size_t at = FirstChanged(moved.data(), kept, old.seed, SIZE_MAX);
        FUZZ_CHECK(at == SIZE_MAX, "Reallocate lost byte %zu of %zu", at, kept);
        Adopt(moved, 16);
        break;
      }
      case 7: {  // lookup: interior pointers of a live block, and foreign pointers
        int on_stack = 0;
        FUZZ_CHECK(!pool_->Lookup(&on_stack) && !pool_->Contains(&on_stack), "stack in pool");
        if (live_.empty()) break;
        const Live& l = PickLive()->second;
        const std::size_t off = in_.ConsumeIntegralInRange<std::size_t>(0, l.block.size() - 1);
        const auto loc = pool_->Lookup(static_cast<char*>(l.block.data()) + off);
        FUZZ_CHECK(loc && &loc->chunk() == &l.block.chunk() &&
                       loc->offset() == l.block.offset() + off && loc->lkey() == l.block.lkey(),
                   "Lookup of %p + %zu", l.block.data(), off);
        break;
      }
      case 8: {  // usable size
        if (live_.empty()) break;
        const Live& l = PickLive()->second;
        FUZZ_CHECK(pool_->UsableSize(l.block.data()) >= l.block.size(), "UsableSize too small");
        break;
      }
      case 9: {  // reserve
        const std::size_t bytes =
            in_.ConsumeIntegralInRange<std::size_t>(0, pool_->options().budget + kMiB);
        const absl::Status s = pool_->Reserve(bytes);
        if (s.ok()) {
          FUZZ_CHECK(pool_->GetStats().mapped_bytes >= bytes, "Reserve(%zu) mapped less", bytes);
        } else {
          FUZZ_CHECK(s.code() == absl::StatusCode::kResourceExhausted, "%s", s.ToString().c_str());
        }
        break;
      }
      case 10:  // a domain refuses one of its next registrations
        domains_[in_.ConsumeIntegralInRange<std::size_t>(0, domains_.size() - 1)]->FailRegistration(
            in_.ConsumeIntegralInRange(0, 3));
        break;
      case 11:  // the os layer refuses the next mappings
        mmap_failures_left = in_.ConsumeIntegralInRange(0, 2);
        break;
      default: {  // a burst of small allocations and frees (the thread cache's fast path)
        std::vector<Block> burst;
        const int n = in_.ConsumeIntegralInRange(1, 200);
        const std::size_t size = in_.ConsumeIntegralInRange<std::size_t>(1, 4096);
        for (int i = 0; i < n; ++i) {
          Block b = pool_->Allocate(size);
          if (!b) break;
          std::memset(b.data(), 0xa5, b.size());
          burst.push_back(b);
        }
        for (const Block& b : burst) pool_->Deallocate(b);
        break;
      }
    }
  }

  void CheckInvariants() {
    std::size_t live_bytes = 0;
    for (const auto& [start, l] : live_) {
      CheckPattern(l, 4096);
      live_bytes += l.block.size();
    }
    const pinpool::PoolStats s = pool_->GetStats();
    FUZZ_CHECK(s.mapped_bytes == s.chunks.size() * pool_->chunk_size(), "mapped %zu, %zu chunks",
               s.mapped_bytes, s.chunks.size());
    FUZZ_CHECK(s.mapped_bytes <= s.budget_bytes, "mapped %zu over budget %zu", s.mapped_bytes,
               s.budget_bytes);
    FUZZ_CHECK(s.domains.size() == domains_.size(), "stats for %zu domains", s.domains.size());
    for (std::size_t d = 0; d < domains_.size(); ++d) {
      FUZZ_CHECK(domains_[d]->live_registrations() == s.chunks.size(),
                 "domain %zu has %zu registrations for %zu chunks", d,
                 domains_[d]->live_registrations(), s.chunks.size());
      FUZZ_CHECK(s.domains[d].registered_bytes == s.mapped_bytes, "domain %zu: %zu bytes", d,
                 static_cast<std::size_t>(s.domains[d].registered_bytes));
    }
    FUZZ_CHECK(pinpool::internal::os::counters().chunk_bytes.load() - chunk_bytes_before_ ==
                   static_cast<std::int64_t>(s.mapped_bytes),
               "the os layer maps other than the chunks");
    FUZZ_CHECK(s.allocated_bytes >= live_bytes, "the heap counts %zu bytes, %zu are live",
               s.allocated_bytes, live_bytes);
    FUZZ_CHECK(s.thread_cache_bytes <= s.thread_cache_limit_bytes, "thread cache %zu over %zu",
               s.thread_cache_bytes, s.thread_cache_limit_bytes);
    FUZZ_CHECK(s.transfer_cache_bytes <= s.transfer_cache_limit_bytes, "transfer %zu over %zu",
               s.transfer_cache_bytes, s.transfer_cache_limit_bytes);
    FUZZ_CHECK(s.allocated_bytes >= live_bytes + s.thread_cache_bytes + s.transfer_cache_bytes,
               "allocated %zu < live %zu + cached %zu + %zu", s.allocated_bytes, live_bytes,
               s.thread_cache_bytes, s.transfer_cache_bytes);
    FUZZ_CHECK(s.heap_active_bytes >= s.allocated_bytes, "active %zu < allocated %zu",
               s.heap_active_bytes, s.allocated_bytes);
  }

  FuzzedDataProvider& in_;
  std::vector<std::shared_ptr<CountingDomain>> domains_;
  std::unique_ptr<Pool> pool_;
  std::map<std::uintptr_t, Live> live_;
  std::int64_t chunk_bytes_before_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  pinpool::internal::os::SetFaultHook(&FailMappings);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  mmap_failures_left = 0;
  Harness h(in);
  h.Run();
  return 0;
}
