#include "heap/heap.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_format.h"
#include "util/check.h"

// Options for pinpool's private jemalloc only (the renamed copy reads this instead of
// malloc_conf; MALLOC_CONF in the environment still applies to it too). Large sizes up to 64 KiB
// stay in the tcache, so they do not split and merge extents on every call
// (notes/jemalloc.md, trap 2).
extern "C" {
__attribute__((visibility("hidden"))) const char* pinpool_je_malloc_conf =
    "tcache_max:65536,tcache_nslots_large:64,retain:false";
}

namespace pinpool::internal {

thread_local ThreadTcacheSlots tls_tcache_slots __attribute__((tls_model("initial-exec")));

namespace {

// Live heaps by id, so that a thread's exit destroys its tcaches only for heaps still alive.
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

// Every tcache this thread created, destroyed at thread exit. The slot array above is a cache
// of the most recent few of these.
struct ThreadTcacheOwner {
  std::vector<std::pair<std::uint64_t, int>> tcaches;  // heap id, tcache flag
  ~ThreadTcacheOwner() {
    Registry& r = registry();
    absl::MutexLock lock(&r.mu);
    for (const auto& [id, flag] : tcaches) {
      auto it = r.heaps.find(id);
      if (it != r.heaps.end() && flag != MALLOCX_TCACHE_NONE) {
        it->second->DestroyTcache(static_cast<unsigned>((flag >> 8) - 2));
      }
    }
    std::memset(&tls_tcache_slots, 0, sizeof tls_tcache_slots);
  }
};
thread_local ThreadTcacheOwner tls_tcache_owner;

// The extent hooks. jemalloc's convention: bool-returning hooks return false on success.
struct Heap::Hooks {
  static Heap* From(extent_hooks_t* h) { return reinterpret_cast<Heap*>(h); }

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

Heap::Heap(Arena* arena, std::uint64_t id) : arena_(arena), id_(id) {
  static_assert(offsetof(Heap, hooks_) == 0, "hooks_ must be first");
  hooks_ = extent_hooks_t{&Hooks::Alloc,  &Hooks::Dalloc, &Hooks::Destroy,
                          &Hooks::Commit, &Hooks::Decommit, /*purge_lazy=*/nullptr,
                          /*purge_forced=*/nullptr, &Hooks::Split, &Hooks::Merge};
}

absl::StatusOr<std::unique_ptr<Heap>> Heap::Create(Arena* arena) {
  std::unique_ptr<Heap> heap(new Heap(arena, next_heap_id.fetch_add(1)));
  ArenaConfig config{&heap->hooks_, /*metadata_use_hooks=*/false};
  unsigned index = 0;
  std::size_t len = sizeof index;
  if (int err = pinpool_je_mallctl("experimental.arenas_create_ext", &index, &len, &config,
                                   sizeof config);
      err != 0) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("creating the heap's jemalloc arena failed: %s", std::strerror(err)));
  }
  heap->arena_index_ = index;
  heap->base_flags_ = MALLOCX_ARENA(index);
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
  std::vector<unsigned> tcaches;
  {
    absl::MutexLock lock(&mu_);
    tcaches.swap(tcaches_);
  }
  for (unsigned t : tcaches) WriteCtl("tcache.destroy", t);
  // Drops every block and jemalloc's metadata for the arena; the hooks give nothing back.
  pinpool_je_mallctl(absl::StrFormat("arena.%u.destroy", arena_index_).c_str(), nullptr, nullptr,
                     nullptr, 0);
}

int Heap::TcacheFlagSlow() noexcept {
  ThreadTcacheSlots& t = tls_tcache_slots;
  constexpr int kSlots = ThreadTcacheSlots::kSlots;
  int i = 1;
  while (i < kSlots && t.heap_id[i] != id_) ++i;
  int flag;
  if (i < kSlots) {
    flag = t.tcache_flag[i];
  } else {
    i = kSlots - 1;  // evict the least recently used slot
    flag = ThreadTcacheFor(tls_tcache_owner);
  }
  for (; i > 0; --i) {  // move to front
    t.heap_id[i] = t.heap_id[i - 1];
    t.tcache_flag[i] = t.tcache_flag[i - 1];
  }
  t.heap_id[0] = id_;
  t.tcache_flag[0] = flag;
  return flag;
}

int Heap::ThreadTcacheFor(ThreadTcacheOwner& owner) noexcept {
  for (const auto& [id, flag] : owner.tcaches) {
    if (id == id_) return flag;
  }
  int flag = MALLOCX_TCACHE_NONE;  // out of jemalloc tcaches: correct, only slower
  unsigned index = 0;
  std::size_t len = sizeof index;
  if (pinpool_je_mallctl("tcache.create", &index, &len, nullptr, 0) == 0) {
    flag = MALLOCX_TCACHE(index);
    absl::MutexLock lock(&mu_);
    tcaches_.push_back(index);
  }
  owner.tcaches.emplace_back(id_, flag);
  return flag;
}

void Heap::DestroyTcache(unsigned tcache) noexcept {
  {
    absl::MutexLock lock(&mu_);
    auto it = std::find(tcaches_.begin(), tcaches_.end(), tcache);
    if (it == tcaches_.end()) return;
    tcaches_.erase(it);
  }
  WriteCtl("tcache.destroy", tcache);
}

std::size_t Heap::ThreadCacheCount() const {
  absl::MutexLock lock(&mu_);
  return tcaches_.size();
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
