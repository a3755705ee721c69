#include "heap/heap.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_format.h"
#include "heap/jemalloc.h"
#include "util/check.h"

// Options for pinpool's private jemalloc only (the renamed copy reads pinpool_je_malloc_conf, and
// PINPOOL_JEC from the environment, never MALLOC_CONF). Its automatic tcache is off: every call
// passes MALLOCX_TCACHE_NONE (pinpool's own thread caches stand in front). retain is off so that
// a destroyed arena's metadata is unmapped, not kept.
extern "C" {
__attribute__((visibility("hidden"))) const char* pinpool_je_malloc_conf =
    "tcache:false,retain:false";
}

namespace pinpool::internal {

constinit thread_local bool tls_caches_gone __attribute__((tls_model("initial-exec"))) = false;
constinit thread_local ThreadCacheSlots tls_cache_slots
    __attribute__((tls_model("initial-exec"))) = {};

namespace {

// Live heaps by id, so that a thread's exit flushes its caches only into heaps still alive.
// Lock order: registry, then a heap's mu_.
struct Registry {
  absl::Mutex mu;
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

}  // namespace

// Every cache this thread created; at thread exit each goes back to its heap, if still alive.
// The slots above are a most-recently-used window onto this list.
struct ThreadCacheOwner {
  std::vector<std::unique_ptr<ThreadCache>> caches;

  // Drops caches whose heap is gone (a thread that outlives many pools keeps no garbage).
  void Prune() {
    Registry& r = registry();
    absl::MutexLock lock(&r.mu);
    std::erase_if(caches, [&](const auto& c) { return !r.heaps.contains(c->heap_id); });
  }

  ~ThreadCacheOwner() {
    {
      Registry& r = registry();
      absl::MutexLock lock(&r.mu);
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

Heap::Heap(Arena* arena, std::uint64_t id)
    : hooks_(new HookTable{
          {&Hooks::Alloc, &Hooks::Dalloc, &Hooks::Destroy, &Hooks::Commit, &Hooks::Decommit,
           /*purge_lazy=*/nullptr, /*purge_forced=*/nullptr, &Hooks::Split, &Hooks::Merge},
          this}),
      arena_(arena),
      id_(id) {
  static_assert(offsetof(HookTable, hooks) == 0, "jemalloc passes &hooks");
}

absl::StatusOr<std::unique_ptr<Heap>> Heap::Create(Arena* arena) {
  std::unique_ptr<Heap> heap(new Heap(arena, next_heap_id.fetch_add(1)));
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
  if (err != 0) {
    return absl::InternalError(
        absl::StrFormat("configuring jemalloc arena %u failed: %s", index, std::strerror(err)));
  }
  Registry& r = registry();
  absl::MutexLock lock(&r.mu);
  r.heaps.emplace(heap->id_, heap.get());
  return heap;
}

Heap::~Heap() {
  {
    Registry& r = registry();
    absl::MutexLock lock(&r.mu);
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
      absl::MutexLock lock(&mu_);
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

void* Heap::Allocate(std::size_t size, std::size_t alignment) noexcept {
  if (alignment <= kMinCachedSize && size <= kMaxCachedSize && !tls_caches_gone) {
    const unsigned c = SizeClass(size);
    ThreadCache::Bin& bin = Cache().bins[c];
    if (bin.top != bin.bottom) return *--bin.top;
    return Refill(bin, c);
  }
  return pinpool_je_mallocx(size, base_flags_ | MALLOCX_ALIGN(alignment));
}

void Heap::Free(void* p, std::size_t size) noexcept {
  if (size == 0) size = UsableSize(p);
  if (size <= kMaxCachedSize && !tls_caches_gone) {
    ThreadCache::Bin& bin = Cache().bins[SizeClass(size)];
    if (bin.top == bin.limit) Flush(bin, bin.capacity() / 2);
    *bin.top++ = p;
    return;
  }
  pinpool_je_dallocx(p, base_flags_);
}

void* Heap::Reallocate(void* p, std::size_t size) noexcept {
  // Never below 16 bytes: jemalloc's 8-byte class is only 8-byte aligned, and a block of it
  // freed into the 16-byte bin would be handed out as 16 bytes (overlapping its neighbour).
  return pinpool_je_rallocx(p, std::max(size, kMinCachedSize), base_flags_);
}

std::size_t Heap::UsableSize(const void* p) const noexcept { return pinpool_je_sallocx(p, 0); }

void* Heap::Refill(ThreadCache::Bin& bin, unsigned c) noexcept {
  const std::size_t size = ClassSize(c);
  const std::size_t want = bin.capacity() / 2;
  while (bin.count() < want) {
    void* p = pinpool_je_mallocx(size, base_flags_);
    if (p == nullptr) break;
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
  absl::MutexLock lock(&mu_);
  std::erase(caches_, cache);
}

std::size_t Heap::ThreadCacheCount() const {
  absl::MutexLock lock(&mu_);
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
