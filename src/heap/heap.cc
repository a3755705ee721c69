#include "heap/heap.h"

#include <sys/random.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_format.h"
#include "heap/jemalloc.h"
#include "util/bytes.h"
#include "util/check.h"

// Options for pinpool's private jemalloc only (the renamed copy reads pinpool_je_malloc_conf, and
// PINPOOL_JEC from the environment, never MALLOC_CONF). Its automatic tcache is off: every call
// passes MALLOCX_TCACHE_NONE (pinpool's own thread caches stand in front). retain is off so that
// a destroyed arena's metadata is unmapped, not kept. lg_extent_max_active_fit:63 lets any freed
// extent serve any smaller request: by default jemalloc will not split an extent more than 64x
// the request, counting on purging to return it; pinpool never purges, so freed memory that had
// coalesced into large extents was never reused and the pool grew until its budget ran out.
extern "C" {
__attribute__((visibility("hidden"))) const char* pinpool_je_malloc_conf =
    "tcache:false,retain:false,lg_extent_max_active_fit:63";
}

namespace pinpool::internal {

constinit thread_local bool tls_caches_gone __attribute__((tls_model("initial-exec"))) = false;
constinit thread_local ThreadCacheSlots tls_cache_slots
    __attribute__((tls_model("initial-exec"))) = {};

namespace {

// Live heaps by id, so that a thread's exit flushes its caches only into heaps still alive.
// Lock order: registry, then a heap's mu_.
struct Registry {
  Mutex mu;
  std::unordered_map<std::uint64_t, Heap*> heaps ABSL_GUARDED_BY(mu);
};
Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: threads may exit after static dtors
  return *r;
}
std::atomic<std::uint64_t> next_heap_id{1};

template <typename T>
int WriteCtl(const std::string& name, T value) {
  return pinpool_je_mallctl(name.c_str(), nullptr, nullptr, &value, sizeof value);
}
template <typename T>
T ReadCtl(const std::string& name) {
  T value{};
  std::size_t len = sizeof value;
  if (pinpool_je_mallctl(name.c_str(), &value, &len, nullptr, 0) != 0) return T{};
  return value;
}

struct ArenaConfig {  // jemalloc's arena_config_t (experimental.arenas_create_ext)
  extent_hooks_t* extent_hooks;
  bool metadata_use_hooks;
};

// jemalloc's inspect_extent_util_stats_t (experimental.utilization.batch_query, which takes no
// lock; the single query takes the bin's).
struct ExtentUtil {
  std::size_t nfree;
  std::size_t nregs;
  std::size_t size;  // bytes of the extent; 0 when jemalloc has no extent at the address
};

// A heap's free-mark secret: random, never 0 (so zeroed memory never looks free).
std::uint64_t NewSecret() {
  std::uint64_t s = 0;
  if (getrandom(&s, sizeof s, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof s)) {
    s = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) *
        0x9e3779b97f4a7c15u;
  }
  return s | 1;
}

}  // namespace

// Every cache this thread created; at thread exit each goes back to its heap, if still alive.
// The slots above are a most-recently-used window onto this list.
struct ThreadCacheOwner {
  std::vector<std::unique_ptr<ThreadCache>> caches;

  // Drops caches whose heap is gone (a thread that outlives many pools keeps no garbage).
  void Prune() {
    Registry& r = registry();
    MutexLock lock(&r.mu);
    std::erase_if(caches, [&](const auto& c) { return !r.heaps.contains(c->heap_id); });
  }

  ~ThreadCacheOwner() {
    {
      Registry& r = registry();
      MutexLock lock(&r.mu);
      for (auto& c : caches) {
        auto it = r.heaps.find(c->heap_id);
        if (it != r.heaps.end()) it->second->ReleaseCache(c.get());
      }
    }
    std::memset(&tls_cache_slots, 0, sizeof tls_cache_slots);
    tls_caches_gone = true;
  }
};
thread_local ThreadCacheOwner tls_cache_owner;

struct Heap::HookTable {
  extent_hooks_t hooks;  // first: jemalloc passes &hooks to every hook
  Heap* heap;
};

// The extent hooks. jemalloc's convention: bool-returning hooks return false on success.
struct Heap::Hooks {
  static Heap* From(extent_hooks_t* h) { return reinterpret_cast<HookTable*>(h)->heap; }

  static void* Alloc(extent_hooks_t* h, void* new_addr, size_t size, size_t alignment, bool* zero,
                     bool* commit, unsigned) {
    if (new_addr != nullptr) return nullptr;  // cannot extend in place: carving is first fit
    void* p = From(h)->arena_->Carve(size, alignment);
    if (p == nullptr) return nullptr;
    *zero = true;  // carved space is never reused: still the zero pages the kernel mapped
    *commit = true;
    return p;
  }
  // Refused: the extent stays with jemalloc as retained, still mapped and registered.
  static bool Dalloc(extent_hooks_t*, void*, size_t, bool, unsigned) { return true; }
  // Arena destruction: the pool unmaps whole chunks itself afterwards.
  static void Destroy(extent_hooks_t*, void*, size_t, bool, unsigned) {}
  static bool Commit(extent_hooks_t*, void*, size_t, size_t, size_t, unsigned) { return false; }
  static bool Decommit(extent_hooks_t*, void*, size_t, size_t, size_t, unsigned) { return true; }
  static bool Split(extent_hooks_t*, void*, size_t, size_t, size_t, bool, unsigned) {
    return false;
  }
  // Two extents of different chunks lie in different registrations: never one extent.
  static bool Merge(extent_hooks_t* h, void* a, size_t, void* b, size_t, bool, unsigned) {
    return !From(h)->arena_->SameChunk(a, b);
  }
};

Heap::Heap(Arena* arena, std::uint64_t id, bool debug_checks)
    : hooks_(new HookTable{
          {&Hooks::Alloc, &Hooks::Dalloc, &Hooks::Destroy, &Hooks::Commit, &Hooks::Decommit,
           /*purge_lazy=*/nullptr, /*purge_forced=*/nullptr, &Hooks::Split, &Hooks::Merge},
          this}),
      arena_(arena),
      id_(id),
      secret_(NewSecret()),
      debug_(debug_checks) {
  static_assert(offsetof(HookTable, hooks) == 0, "jemalloc passes &hooks");
}

absl::StatusOr<std::unique_ptr<Heap>> Heap::Create(Arena* arena, bool debug_checks) {
  std::unique_ptr<Heap> heap(new Heap(arena, next_heap_id.fetch_add(1), debug_checks));
  ArenaConfig config{&heap->hooks_->hooks, /*metadata_use_hooks=*/false};
  unsigned index = 0;
  std::size_t len = sizeof index;
  if (int err = pinpool_je_mallctl("experimental.arenas_create_ext", &index, &len, &config,
                                   sizeof config);
      err != 0) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("creating the heap's jemalloc arena failed: %s", std::strerror(err)));
  }
  heap->arena_index_ = index;
  heap->arena_created_ = true;
  heap->base_flags_ = MALLOCX_ARENA(index) | MALLOCX_TCACHE_NONE;
  const std::string prefix = absl::StrFormat("arena.%u.", index);
  // Never purge: a purge is MADV_DONTNEED on registered pages (notes/jemalloc.md, trap 7).
  // (opt.retain is off in pinpool's jemalloc: with it on, jemalloc never unmaps an arena's
  // metadata, and every pool created and destroyed would leave 2 MiB of address space behind.)
  const ssize_t never = -1;
  int err = WriteCtl(prefix + "dirty_decay_ms", never);
  if (err == 0) err = WriteCtl(prefix + "muzzy_decay_ms", never);
  heap->query_miblen_ = 3;
  if (err == 0) {
    err = pinpool_je_mallctlnametomib("experimental.utilization.batch_query", heap->query_mib_,
                                      &heap->query_miblen_);
  }
  if (err != 0) {
    return absl::InternalError(
        absl::StrFormat("configuring jemalloc arena %u failed: %s", index, std::strerror(err)));
  }
  Registry& r = registry();
  MutexLock lock(&r.mu);
  r.heaps.emplace(heap->id_, heap.get());
  return heap;
}

Heap::~Heap() {
  if (debug_) {
    const auto [blocks, bytes] = LiveBlocks();
    if (blocks != 0) {
      std::fprintf(stderr,
                   "pinpool: warning: a pool was destroyed with %zu live blocks (%s); they are "
                   "invalid now (their memory is deregistered and unmapped)\n",
                   blocks, FormatBytes(bytes).c_str());
    }
  }
  {
    Registry& r = registry();
    MutexLock lock(&r.mu);
    r.heaps.erase(id_);
  }
  // Threads' caches of this heap are left to their threads (who free them without touching
  // their blocks). Destroying the arena drops every block and jemalloc's metadata for it.
  if (!arena_created_) return;
  [[maybe_unused]] const int err = pinpool_je_mallctl(
      absl::StrFormat("arena.%u.destroy", arena_index_).c_str(), nullptr, nullptr, nullptr, 0);
  PINPOOL_DCHECK(err == 0);
}

ThreadCache& Heap::CacheSlow() noexcept {
  ThreadCacheSlots& t = tls_cache_slots;
  constexpr int kSlots = ThreadCacheSlots::kSlots;
  int i = 1;
  while (i < kSlots && t.heap_id[i] != id_) ++i;
  ThreadCache* cache;
  if (i < kSlots) {
    cache = t.cache[i];
  } else {
    i = kSlots - 1;  // evict the least recently used slot
    cache = nullptr;
    for (const auto& c : tls_cache_owner.caches) {
      if (c->heap_id == id_) cache = c.get();
    }
    if (cache == nullptr) {
      tls_cache_owner.Prune();
      tls_cache_owner.caches.push_back(std::make_unique<ThreadCache>(id_));
      cache = tls_cache_owner.caches.back().get();
      MutexLock lock(&mu_);
      caches_.push_back(cache);
    }
  }
  for (; i > 0; --i) {  // move to front
    t.heap_id[i] = t.heap_id[i - 1];
    t.cache[i] = t.cache[i - 1];
  }
  t.heap_id[0] = id_;
  t.cache[0] = cache;
  return *cache;
}

void* Heap::Mallocx(std::size_t size, int flags) noexcept {
  void* p = pinpool_je_mallocx(size, flags);
  if (p == nullptr) return nullptr;
  SetFirstWord(p, 0);  // it may carry the mark of an earlier life
  if (debug_) {
    MutexLock lock(&mu_);
    live_[reinterpret_cast<std::uintptr_t>(p)] = size;
  }
  return p;
}

void Heap::Dallocx(void* p) noexcept {
  if (debug_) {
    MutexLock lock(&mu_);
    live_.erase(reinterpret_cast<std::uintptr_t>(p));
  }
  pinpool_je_dallocx(p, base_flags_);
}

void* Heap::Allocate(std::size_t size, std::size_t alignment) noexcept {
  if (alignment <= kMinCachedSize && size <= kMaxCachedSize && !tls_caches_gone && !debug_) {
    const unsigned c = SizeClass(size);
    ThreadCache::Bin& bin = Cache().bins[c];
    void* p = bin.top != bin.bottom ? *--bin.top : Refill(bin, c);
    if (p != nullptr) SetFirstWord(p, 0);
    return p;
  }
  // Never below 16 bytes: every block is 16-byte aligned and holds the 8-byte free mark.
  return Mallocx(std::max(size, kMinCachedSize), base_flags_ | MALLOCX_ALIGN(alignment));
}

std::size_t Heap::CheckBlock(const void* p, std::size_t size, const char* what) const noexcept {
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  PINPOOL_CHECK(addr % kMinCachedSize == 0,
                "%s(%p): not the start of a block: every block is 16-byte aligned (an interior "
                "pointer?)",
                what, p);
  if (debug_) {
    MutexLock lock(&mu_);
    auto it = live_.find(addr);
    PINPOOL_CHECK(it != live_.end(),
                  "%s(%p): not a live block of this pool (an interior pointer, a double free, or "
                  "memory never allocated) [debug_checks]",
                  what, p);
    const std::size_t usable = pinpool_je_sallocx(p, 0);
    PINPOOL_CHECK(size <= usable,
                  "%s(%p, %zu): the size is larger than the block (allocated with %zu bytes) "
                  "[debug_checks]",
                  what, p, size, it->second);
    return usable;
  }
  PINPOOL_CHECK(arena_->Carved(p),
                "%s(%p): not the start of a block: no block was ever handed out there", what, p);
  // The mark first: a freed large block may have been merged into free space already.
  PINPOOL_CHECK(FirstWord(p) != FreeMark(secret_, p),
                "%s(%p): the block is free already (a double free, or a use after free)", what, p);
  ExtentUtil util{};
  std::size_t len = sizeof util;
  const void* query = p;
  const int err =
      pinpool_je_mallctlbymib(query_mib_, query_miblen_, &util, &len, &query, sizeof query);
  PINPOOL_CHECK(err == 0 && util.size != 0,
                "%s(%p): not the start of a block: it lies inside a larger block or in free space",
                what, p);
  // A slab of small blocks, unless it is one large block (a large block's usable size is its
  // extent less jemalloc's one-page pad; a one-region slab is all region).
  const std::size_t usable = util.nregs > 1 ? util.size / util.nregs : pinpool_je_sallocx(p, 0);
  if (util.nregs > 1 || usable == util.size) {
    // Regions of one size class laid out from a page-aligned slab: a region starts at a
    // multiple of the largest power of two dividing the class size (up to a page).
    const std::size_t region = usable;
    const std::size_t step =
        std::min<std::size_t>(std::size_t{1} << std::countr_zero(region), std::size_t{4096});
    PINPOOL_CHECK(addr % step == 0,
                  "%s(%p): not the start of a block: blocks of %zu bytes here start at multiples "
                  "of %zu (an interior pointer?)",
                  what, p, region, step);
  }
  return usable;
}

void Heap::Free(void* p, std::size_t size, const char* what) noexcept {
  PINPOOL_CHECK(reinterpret_cast<std::uintptr_t>(p) % kMinCachedSize == 0,
                "%s(%p): not the start of a block: every block is 16-byte aligned (an interior "
                "pointer?)",
                what, p);
  if (size == 0 || size > kMaxCachedSize || debug_) {
    const std::size_t usable = CheckBlock(p, size, what);
    if (size == 0) size = usable;
  }
  const std::uint64_t mark = FreeMark(secret_, p);
  PINPOOL_CHECK(FirstWord(p) != mark,
                "%s(%p): the block is free already (a double free, or a use after free)", what, p);
  SetFirstWord(p, mark);
  if (size <= kMaxCachedSize && !tls_caches_gone && !debug_) {
    ThreadCache::Bin& bin = Cache().bins[SizeClass(size)];
    if (bin.top == bin.limit) Flush(bin, bin.capacity() / 2);
    *bin.top++ = p;
    return;
  }
  Dallocx(p);
}

void* Heap::Reallocate(void* p, std::size_t size) noexcept {
  // Never below 16 bytes: jemalloc's 8-byte class is only 8-byte aligned, and a block of it
  // freed into the 16-byte bin would be handed out as 16 bytes (overlapping its neighbour).
  size = std::max(size, kMinCachedSize);
  const std::size_t old_size = UsableSize(p);
  // In place only when jemalloc resizes the block to exactly the class a new block of `size`
  // would have: a later sized free files the block by `size` (the thread cache bins by class), so
  // its real extent must be that class's. xallocx returns the old usable size when it cannot
  // resize (a large block cannot shrink into a small class): that is >= size, and taking it for
  // success left large extents in small bins, never reused (issue 13). Otherwise move, freeing
  // the old block through Free, so that it carries the free mark like any other free block
  // (rallocx would free it unmarked).
  if (pinpool_je_xallocx(p, size, 0, base_flags_) == pinpool_je_nallocx(size, base_flags_)) {
    if (debug_) {
      MutexLock lock(&mu_);
      live_[reinterpret_cast<std::uintptr_t>(p)] = size;
    }
    return p;
  }
  void* q = Allocate(size, kMinCachedSize);
  if (q == nullptr) return nullptr;
  std::memcpy(q, p, std::min(old_size, size));
  Free(p, old_size, "Reallocate");
  return q;
}

std::size_t Heap::UsableSize(const void* p) const noexcept { return pinpool_je_sallocx(p, 0); }

void* Heap::Refill(ThreadCache::Bin& bin, unsigned c) noexcept {
  const std::size_t size = ClassSize(c);
  const std::size_t want = bin.capacity() / 2;
  while (bin.count() < want) {
    void* p = pinpool_je_mallocx(size, base_flags_);
    if (p == nullptr) break;
    SetFirstWord(p, FreeMark(secret_, p));  // free, in a cache
    *bin.top++ = p;
  }
  return bin.top == bin.bottom ? nullptr : *--bin.top;
}

void Heap::Flush(ThreadCache::Bin& bin, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) pinpool_je_dallocx(bin.bottom[i], base_flags_);
  std::memmove(bin.bottom, bin.bottom + n, (bin.count() - n) * sizeof(void*));
  bin.top -= n;
}

void Heap::ReleaseCache(ThreadCache* cache) noexcept {
  for (ThreadCache::Bin& bin : cache->bins) Flush(bin, bin.count());
  MutexLock lock(&mu_);
  std::erase(caches_, cache);
}

std::pair<std::size_t, std::size_t> Heap::LiveBlocks() const {
  MutexLock lock(&mu_);
  std::size_t bytes = 0;
  for (const auto& [p, size] : live_) bytes += size;
  return {live_.size(), bytes};
}

std::size_t Heap::ThreadCacheCount() const {
  MutexLock lock(&mu_);
  return caches_.size();
}

Heap::ByteCounts Heap::Counts() const {
  WriteCtl<std::uint64_t>("epoch", 1);
  const std::string prefix = absl::StrFormat("stats.arenas.%u.", arena_index_);
  ByteCounts c;
  c.allocated = ReadCtl<std::size_t>(prefix + "small.allocated") +
                ReadCtl<std::size_t>(prefix + "large.allocated");
  c.active = ReadCtl<std::size_t>(prefix + "pactive") * ReadCtl<std::size_t>("arenas.page");
  return c;
}

}  // namespace pinpool::internal
