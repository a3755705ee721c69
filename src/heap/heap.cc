// Heap's implementation (heap.h has the contract): its creation and destruction, a thread's first
// call (the cache it gets, and the thread-exit hand-back of every cache to a heap still alive),
// the drain handshake, the slow paths of allocation and free (where misuse is caught and named),
// Reallocate and the stats. The fast paths are inline in heap.h, so that the pool calls no
// function for them.
#include "heap/heap.h"

#include <linux/membarrier.h>
#include <sched.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <new>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "heap/spin_lock.h"
#include "os/os.h"
#include "util/bytes.h"
#include "util/check.h"

namespace pinpool::internal {

constinit thread_local bool tls_caches_gone __attribute__((tls_model("initial-exec"))) = false;

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

// A heap's free-mark secret: random, never 0 (so zeroed memory never looks free).
std::uint64_t NewSecret() {
  std::uint64_t s = 0;
  if (getrandom(&s, sizeof s, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof s)) {
    s = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) *
        0x9e3779b97f4a7c15u;
  }
  return s | 1;
}

// membarrier(PRIVATE_EXPEDITED) for the drain handshake: registered once per process (the first
// heap's creation); false when the kernel or a sandbox refuses it.
bool RegisterMembarrier() {
  static const bool ok = [] {
    const long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    return cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0 &&
           syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
  }();
  return ok;
}
bool BarrierOnEveryCpu() {
  return RegisterMembarrier() && os::InjectedFault(os::Call::kMembarrier, 0) == 0 &&
         syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0;
}

// Each thread cache may hold 1/32 of the pool's budget, 2 to 64 MiB: deep enough for windows
// and batches of blocks of every size up to a few MiB, and a small share of what the pool may
// pin (a failing allocation drains every cache anyway).
std::size_t ThreadCacheBudget(std::size_t budget) {
  return std::clamp<std::size_t>(budget / 32, std::size_t{2} << 20, std::size_t{64} << 20);
}
// The transfer stacks together may hold 1/16 of the budget, 4 to 128 MiB.
std::size_t TransferBudget(std::size_t budget) {
  return std::clamp<std::size_t>(budget / 16, std::size_t{4} << 20, std::size_t{128} << 20);
}

}  // namespace

constinit fast::CacheHead idle_cache;

// Every cache this thread created, by heap id; at thread exit each goes back to its heap, if still
// alive. The slots above are a most-recently-used window onto this list. A cache's head lives
// outside its heap (ThreadCache::New; its bins' storage is in the heap's metadata): a slot may
// hold the head of a heap that is gone, whose `busy` the inline handshake still sets (it tests
// the id after), so the head lives until it leaves the slots (`orphans`); its bins are never
// touched again. Nothing here calls malloc or operator new with a lock held.
struct ThreadCacheOwner {
  struct Entry {
    std::uint64_t heap_id;
    ThreadCache* cache;
  };
  std::vector<Entry> caches;
  // This thread's slots (read by its inline paths without a lock). Their writers, this thread
  // moving caches between them and a drainer marking slot 0, hold `lock` (never while taking a
  // heap's lock: drainers hold theirs when they take this one).
  ThreadCacheSlots* const slots = &fast::tls_slots;
  SpinLock lock;
  // Heads of caches of destroyed heaps that were in a slot then (a list through next_free):
  // deleted when they leave them.
  ThreadCache* orphans ABSL_GUARDED_BY(lock) = nullptr;

  bool InSlots(const ThreadCache* c) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(lock) {
    for (int i = 0; i < ThreadCacheSlots::kSlots; ++i) {
      if (slots->cache[i] == c) return true;
    }
    return false;
  }
  // Heap destruction (holding the registry's lock): true when c is in a slot, and then this
  // thread deletes it once it leaves them.
  bool Adopt(ThreadCache* c) {
    SpinLockHolder hold(&lock);
    if (!InSlots(c)) return false;
    c->next_free = orphans;
    orphans = c;
    return true;
  }
  // After the slots changed: deletes the orphans no longer in them.
  void DeleteLeftOrphans() ABSL_EXCLUSIVE_LOCKS_REQUIRED(lock) {
    for (ThreadCache** at = &orphans; *at != nullptr;) {
      ThreadCache* c = *at;
      if (InSlots(c)) {
        at = &c->next_free;
      } else {
        *at = c->next_free;
        ThreadCache::Delete(c);
      }
    }
  }

  // Slot 0's heap id while a drainer of that heap has marked it: no heap has it (heap ids count
  // from 1; kDeadId is all ones).
  static constexpr std::uint64_t kDrainMark = std::uint64_t{1} << 63;
  static std::uint64_t Marked(std::uint64_t id) { return id | kDrainMark; }

  // A drainer of heap `id` (holding its lock): if slot 0 holds c, marks it, so that this thread's
  // next inline call of that heap goes to the library (CacheSlow), which waits out the drain.
  void Mark(std::uint64_t id, ThreadCache* c) {
    SpinLockHolder hold(&lock);
    if (slots->cache[0] == c && slots->heap_id[0].load(std::memory_order_relaxed) == id) {
      slots->heap_id[0].store(Marked(id), std::memory_order_relaxed);
    }
  }

  // Drops caches whose heap is gone (a thread that outlives many pools keeps no garbage).
  void Prune() {
    Registry& r = registry();
    MutexLock lock(&r.mu);
    std::erase_if(caches, [&](const Entry& e) { return !r.heaps.contains(e.heap_id); });
  }

  ~ThreadCacheOwner() {
    Registry& r = registry();
    MutexLock registry_lock(&r.mu);  // no heap is destroyed meanwhile (it would Adopt)
    for (const Entry& e : caches) {
      auto it = r.heaps.find(e.heap_id);
      if (it != r.heaps.end()) it->second->ReleaseCache(e.cache);
    }
    SpinLockHolder hold(&lock);  // no drainer finds this thread's caches any more
    for (int i = 0; i < ThreadCacheSlots::kSlots; ++i) {
      slots->heap_id[i].store(0, std::memory_order_relaxed);
      slots->cache[i] = &idle_cache;
    }
    DeleteLeftOrphans();
    tls_caches_gone = true;
  }
};
thread_local ThreadCacheOwner tls_cache_owner;

Heap::Heap(Arena* arena, std::uint64_t id, const Options& options)
    : arena_(arena),
      id_(id),
      secret_(NewSecret()),
      debug_(options.debug_checks),
      thread_cache_budget_(ThreadCacheBudget(arena->range_size())),
      chunks_(arena),
      pages_(arena->range_base(), arena->chunk_shift(), arena->range_size() >> arena->chunk_shift(),
             options.source != nullptr ? options.source : &chunks_, &metadata_),
      central_(&pages_, &metadata_, secret_, TransferBudget(arena->range_size()),
               options.zero_new_spans) {}

absl::StatusOr<std::unique_ptr<Heap>> Heap::Create(Arena* arena, const Options& options) {
  RegisterMembarrier();  // now, while system calls are allowed: a drain must not need one more
  std::unique_ptr<Heap> heap(new Heap(arena, next_heap_id.fetch_add(1), options));
  if (!heap->pages_.ok()) {
    return absl::ResourceExhaustedError(
        "cannot map the heap's page map (out of memory for allocator metadata)");
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
  Registry& r = registry();
  MutexLock registry_lock(&r.mu);  // no thread exits meanwhile (its owner is reached below)
  r.heaps.erase(id_);
  // Threads' caches of this heap: a head still in its thread's slots goes to the thread, which
  // deletes it when it leaves them (ThreadCacheOwner); the others are deleted now. Their blocks
  // and bins are not touched: the page map, spans, stacks and bins' storage go with the members.
  MutexLock lock(&mu_);
  for (ThreadCache* c : caches_) {
    if (!c->owner->Adopt(c)) ThreadCache::Delete(c);
  }
  while (ThreadCache* c = free_caches_) {
    free_caches_ = c->next_free;
    ThreadCache::Delete(c);
  }
}

ThreadCache* Heap::CacheSlow() noexcept {
  ThreadCacheOwner& owner = tls_cache_owner;
  ThreadCacheSlots& t = *owner.slots;
  constexpr int kSlots = ThreadCacheSlots::kSlots;
  // A slot may hold this heap's cache marked by a drainer (slot 0 when it was marked; moves
  // between slots keep the id as it is).
  const auto holds = [&](int i) {
    const std::uint64_t id = t.heap_id[i].load(std::memory_order_relaxed);
    return id == id_ || id == ThreadCacheOwner::Marked(id_);
  };
  int i = 0;
  while (i < kSlots && !holds(i)) ++i;
  ThreadCache* cache;
  if (i < kSlots) {
    cache = static_cast<ThreadCache*>(t.cache[i]);
  } else {
    i = kSlots - 1;  // evict the least recently used slot
    cache = nullptr;
    for (const auto& e : owner.caches) {
      if (e.heap_id == id_) cache = e.cache;
    }
    if (cache == nullptr) {
      owner.Prune();
      {
        MutexLock lock(&mu_);
        if (free_caches_ != nullptr) {  // an exited thread's, empty
          cache = free_caches_;
          free_caches_ = cache->next_free;
          cache->next_free = nullptr;
        } else if (!(cache = ThreadCache::New(id_, thread_cache_budget_, &metadata_))) {
          return nullptr;  // no metadata memory: this call goes around the caches
        }
        cache->owner = &owner;  // before a drainer can find it
        caches_.push_back(cache);
      }
      owner.caches.push_back({id_, cache});
    }
  }
  SpinLockHolder hold(&owner.lock);
  for (; i > 0; --i) {  // move to front
    t.heap_id[i].store(t.heap_id[i - 1].load(std::memory_order_relaxed), std::memory_order_relaxed);
    t.cache[i] = t.cache[i - 1];
  }
  // Unmarked even while a drain is pending: every caller goes through Acquire, which waits the
  // drain out, before this thread's next inline call reads the slot (the inline paths are not
  // async-signal-safe: a signal handler's call between the two could reach the bins).
  t.heap_id[0].store(id_, std::memory_order_relaxed);
  t.cache[0] = cache;
  if (owner.orphans != nullptr) owner.DeleteLeftOrphans();  // one may have been evicted
  return cache;
}

// --- the drain handshake ---------------------------------------------------------------------

void Heap::HonourDrain(ThreadCache* c) noexcept {
  // A drainer holds mu_ while it works: taking it waits for the drainer to finish. A request left
  // pending (no membarrier: the drainer could not empty this cache itself) is honoured here, with
  // no drainer active.
  MutexLock lock(&mu_);
  if (c->drain.load(std::memory_order_acquire) != 0) {
    c->FlushAll(central_);
    c->drain.store(0, std::memory_order_release);
  }
}

void Heap::Acquire(ThreadCache* c) noexcept {
  while (!Enter(c)) HonourDrain(c);
}

std::size_t Heap::DrainLocked(ThreadCache* own, bool hold, bool* every_cache) {
  drains_.fetch_add(1, std::memory_order_relaxed);
  for (ThreadCache* c : caches_) {
    c->drain.store(1, std::memory_order_relaxed);
    c->owner->Mark(id_, c);
  }
  // After the barrier, a cache whose `busy` reads 0 is not being touched, and its owner's next
  // touch sees slot 0 marked (inline) or `drain` set (the library): the owner then waits on mu_,
  // which this thread holds.
  const bool fenced = BarrierOnEveryCpu();
  if (every_cache != nullptr)
    *every_cache = fenced || caches_.empty() || caches_ == std::vector{own};
  std::size_t bytes = 0;
  for (ThreadCache* c : caches_) {
    if (c != own && !fenced) continue;  // left pending: its owner empties it at its next call
    while (c->busy.load(std::memory_order_acquire) != 0) sched_yield();
    bytes += c->FlushAll(central_);
    if (!hold) c->drain.store(0, std::memory_order_release);
  }
  return bytes + central_.DrainTransfer();
}

ThreadCache* Heap::OwnCache() const noexcept {
  ThreadCache* own = nullptr;
  if (!debug_ && !tls_caches_gone) {
    for (const auto& e : tls_cache_owner.caches) {
      if (e.heap_id == id_) own = e.cache;
    }
  }
  return own;
}

std::size_t Heap::DrainCaches() {
  ThreadCache* own = OwnCache();
  MutexLock lock(&mu_);
  return DrainLocked(own);
}

std::size_t Heap::ReleaseIdleChunks() {
  DrainCaches();
  return pages_.ReleaseIdleChunks();
}

// --- allocation --------------------------------------------------------------------------------

template <typename F>
void* Heap::WithReclaim(F attempt) noexcept {
  if (void* p = attempt(false)) return p;
  // No free span fits. Before mapping and registering another chunk, give back what this thread
  // holds and what waits on the transfer stacks: cached blocks must not make the pool grow.
  if (ThreadCache* c = Cache()) {
    Acquire(c);
    c->FlushAll(central_);
    Leave(c);
  }
  central_.DrainTransfer();
  if (void* p = attempt(false)) return p;
  if (void* p = attempt(true)) return p;
  // The budget is spent (or growth failed): every cache, then one last try with what that freed.
  DrainCaches();
  return attempt(false);
}

void* Heap::AllocateClass(unsigned c) noexcept {
  if (ThreadCache* tc = Cache()) {
    return WithReclaim([&](bool grow) {
      Acquire(tc);
      void* p = tc->Refill(central_, c, grow);
      Leave(tc);
      return p;
    });
  }
  return WithReclaim([&](bool grow) -> void* {
    void* p = nullptr;
    return central_.Take(c, &p, 1, grow) == 1 ? p : nullptr;
  });
}

void* Heap::HandOut(void* p, unsigned c, std::size_t size) noexcept {
  MarkLive(p, c);
  if (debug_) {
    MutexLock lock(&mu_);
    live_[reinterpret_cast<std::uintptr_t>(p)] = size;
  }
  return p;
}

void* Heap::Allocate(std::size_t size, std::size_t alignment) noexcept {
  void* p;
  unsigned c;
  if (alignment <= kPageSize) {
    c = alignment <= kMinBlock ? SizeClass(size) : AlignedSizeClass(size, alignment);
    p = AllocateClass(c);
  } else {
    // Aligned beyond a page: a large block of its own, placed by the page heap.
    c = std::max(SizeClass(size), kFirstLargeClass);
    p = WithReclaim([&](bool grow) { return central_.TakeAligned(c, alignment, grow); });
  }
  return p == nullptr ? nullptr : HandOut(p, c, size);
}

// --- free --------------------------------------------------------------------------------------

namespace {
constexpr const char* kFreeAlready =
    "%s(%p): the block is free already (a double free, a use after free, or a block never handed "
    "out)";
}  // namespace

std::size_t Heap::CheckBlock(const void* p, std::size_t size, const char* what) const noexcept {
  return ClassSize(CheckedClass(p, size, what));
}

Heap::BlockState Heap::Inspect(const void* p) const noexcept {
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  if (addr % kMinBlock != 0) return BlockState::kNotABlock;
  // A free block carries its mark whether it is cached, in a slab or back in the page heap
  // (where its class is no longer known).
  unsigned cls = 0;
  const bool start = BlockStartAt(p, &cls);
  if (start ? MarkedFree(secret_, p, cls) : MaybeMarkedFree(secret_, p)) return BlockState::kFree;
  if (!start) return BlockState::kNotABlock;
  if (debug_) {
    MutexLock lock(&mu_);
    if (!live_.contains(addr)) return BlockState::kNotABlock;  // never allocated
  }
  return BlockState::kLive;
}

unsigned Heap::CheckedClass(const void* p, std::size_t size, const char* what) const noexcept {
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  PINPOOL_CHECK(addr % kMinBlock == 0,
                "%s(%p): not the start of a block: every block is 16-byte aligned (an interior "
                "pointer?)",
                what, p);
  const std::uint32_t entry = pages_.page_map().EntryAt(addr);
  unsigned cls = 0;
  const bool start = PageMap::IsBlockStart(entry, addr, &cls);
  if (debug_) {
    MutexLock lock(&mu_);
    auto it = live_.find(addr);
    PINPOOL_CHECK(it != live_.end() && start,
                  "%s(%p): not a live block of this pool (an interior pointer, a double free, or "
                  "memory never allocated) [debug_checks]",
                  what, p);
    PINPOOL_CHECK(size <= ClassSize(cls),
                  "%s(%p, %zu): the size is larger than the block (allocated with %zu bytes) "
                  "[debug_checks]",
                  what, p, size, it->second);
    return cls;
  }
  if (start) {
    PINPOOL_CHECK(!MarkedFree(secret_, p, cls), kFreeAlready, what, p);
    PINPOOL_CHECK(size <= ClassSize(cls),
                  "%s(%p, %zu): the size is larger than the block (a block of %zu bytes)", what, p,
                  size, ClassSize(cls));
    return cls;
  }
  // Not a block start now. A block freed earlier whose span went back to the page heap still
  // carries its mark (nothing rewrites free pages): that is a double free.
  PINPOOL_CHECK(!MaybeMarkedFree(secret_, p), kFreeAlready, what, p);
  if (PageMap::ClassOf(entry) < kNumClasses) {
    const unsigned c = PageMap::ClassOf(entry);
    const std::uintptr_t span = PageMap::SpanStart(entry, addr);
    PINPOOL_CHECK(!IsSlabClass(c),
                  "%s(%p): not the start of a block: blocks of %zu bytes here start at multiples "
                  "of %zu from %#lx (an interior pointer?)",
                  what, p, ClassSize(c), ClassSize(c), static_cast<unsigned long>(span));
    Die(__FILE__, __LINE__,
        "%s(%p): not the start of a block: it lies inside a larger block (%zu bytes at %#lx)", what,
        p, ClassSize(c), static_cast<unsigned long>(span));
  }
  const PageHeap::Where where = const_cast<PageHeap&>(pages_).Find(addr);
  PINPOOL_CHECK(where.span != nullptr && where.state != Span::State::kFree,
                "%s(%p): not the start of a block: no block was ever handed out there (free "
                "space)",
                what, p);
  Die(__FILE__, __LINE__,
      "%s(%p): not the start of a block: it lies inside a larger block (%zu bytes at %#lx)", what,
      p, where.bytes, static_cast<unsigned long>(where.start));
}

void Heap::FreeBlock(void* p, unsigned c) noexcept {
  if (debug_) {
    MutexLock lock(&mu_);
    live_.erase(reinterpret_cast<std::uintptr_t>(p));
  }
  if (ThreadCache* tc = Cache()) {
    Acquire(tc);
    // Checked again inside the handshake: a chunk forgotten since the caller checked the block
    // (ForgetChunk, its memory being given back, holds every cache's drain while it clears the
    // chunk's entries) must not reach this cache, and its memory is not written. Before Acquire
    // the forget could not have started (it waits for this cache), so the chunk is still mapped.
    unsigned cls = 0;
    if (!BlockStartAt(p, &cls) || cls != c) {
      Leave(tc);
      return;
    }
    MarkFree(secret_, p, c);
    const bool cached = tc->Push(central_, c, p);
    Leave(tc);
    if (cached) return;
  } else {
    MarkFree(secret_, p, c);
  }
  central_.Put(c, &p, 1);
}

void Heap::Free(void* p, std::size_t size, const char* what) noexcept {
  FreeBlock(p, CheckedClass(p, size, what));
}

void* Heap::Reallocate(void* p, std::size_t size) noexcept {
  // Never below 16 bytes: every block holds the 8-byte free mark.
  size = std::max(size, kMinBlock);
  unsigned cls = 0;
  BlockStartAt(p, &cls);
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  // In place only when the block's own class is the class of the new size: a block is always
  // filed under the class of its real extent. A large block shrunk "in place" and then freed into
  // a small class's bin would never be reused (tests/heap/reallocate_test.cc).
  if (SizeClass(size) == cls) {
    if (debug_) {
      MutexLock lock(&mu_);
      live_[addr] = size;
    }
    return p;
  }
  void* q = Allocate(size, kMinBlock);
  if (q == nullptr) return nullptr;
  std::memcpy(q, p, std::min(ClassSize(cls), size));
  FreeBlock(p, cls);
  return q;
}

std::size_t Heap::UsableSize(const void* p) const noexcept {
  unsigned cls = 0;
  BlockStartAt(p, &cls);
  return ClassSize(cls);
}

// --- thread exit, stats ------------------------------------------------------------------------

void Heap::ReleaseCache(ThreadCache* cache) noexcept {
  MutexLock lock(&mu_);  // no drainer is active while this is held
  cache->FlushAll(central_);
  cache->drain.store(0, std::memory_order_relaxed);
  std::erase(caches_, cache);
  cache->owner = nullptr;
  cache->next_free = free_caches_;
  free_caches_ = cache;
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

Heap::Counts Heap::GetCounts() const {
  Counts c;
  {
    MutexLock lock(&mu_);
    for (const ThreadCache* tc : caches_) c.thread_cache_bytes += tc->held_bytes();
  }
  const CentralCache::Counts central = central_.GetCounts();
  const PageHeap::Counts pages = pages_.GetCounts();
  c.allocated = central.out_bytes + central.transfer_bytes;
  c.active = pages.used_pages << kPageShift;
  c.transfer_bytes = central.transfer_bytes;
  c.thread_cache_limit = debug_ ? 0 : thread_cache_budget_;
  c.transfer_limit = central_.transfer_limit();
  c.drains = drains_.load(std::memory_order_relaxed);
  c.metadata = metadata_.mapped_bytes();
  return c;
}

}  // namespace pinpool::internal

namespace pinpool {
PINPOOL_ABI_BEGIN
namespace fast {

static_assert(kNumClasses == internal::kNumClasses && kPageShift == internal::kPageShift);
// The entry's row is its class + 1 times a row's 32 bytes, with the tag as 16 more.
static_assert(kGrantTag == internal::PageMap::kGrantTag &&
              internal::PageMap::kClassShift - kRowShift == 5 && (kGrantTag >> kRowShift) == 16);
static_assert(std::is_same_v<PageEntry, internal::PageEntry>);
static_assert(sizeof(Bin) == 32 && sizeof(ClassTable::Class) == 32);
static_assert(internal::ComputeSizeClass(kMaxFastSize) < kNumClasses);
// The inline pop keeps the first word for sizes up to kMaxUncreditedSize without reading the row.
static_assert(internal::MarkHash(internal::ComputeSizeClass(kMaxUncreditedSize)) == 0);

constinit thread_local Slots tls_slots __attribute__((tls_model("initial-exec"))) = {
    .heap_id = {},
    .cache = {&internal::idle_cache, &internal::idle_cache, &internal::idle_cache,
              &internal::idle_cache}};

namespace {
constexpr ClassTable MakeClassTable() {
  ClassTable t{};
  for (unsigned c = 0; c < kNumClasses; ++c) {
    t.cls[c + 1] = {internal::Class(c).magic, internal::ClassSize(c), 0, internal::MarkHash(c)};
  }
  for (std::size_t i = 0; i < kMaxFastSize / 16; ++i) {
    const unsigned c = internal::ComputeSizeClass((i + 1) * 16);
    t.row[i] = static_cast<std::uint16_t>((c + 1) * sizeof(ClassTable::Class));
  }
  return t;
}
}  // namespace

constinit const ClassTable classes = MakeClassTable();
constinit const ClassTable library_classes = MakeClassTable();

}  // namespace fast
PINPOOL_ABI_END
}  // namespace pinpool
