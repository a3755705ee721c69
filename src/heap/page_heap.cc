// PageHeap's implementation (page_heap.h has the contract): the segregated free lists and their
// bitmap, carving and merging spans inside one chunk, growth by a chunk with the lock let go,
// giving idle chunks back for Trim, and Verify, which the tests run after random operations.
#include "heap/page_heap.h"

#include <bit>

#include "util/check.h"

namespace pinpool::internal {

PageHeap::PageHeap(std::uintptr_t base, unsigned chunk_shift, std::size_t max_chunks,
                   ChunkSource* source, MetadataArena* metadata)
    : source_(source),
      chunk_size_(std::size_t{1} << chunk_shift),
      map_(base, chunk_shift, max_chunks, metadata),
      spans_(metadata) {}

PageHeap::~PageHeap() = default;

// Exact lists for 1..32 pages, then four per doubling: [33, 40), [40, 48), [48, 56), [56, 64),
// [64, 80), ...
unsigned PageHeap::BucketOf(std::size_t pages) noexcept {
  if (pages <= 32) return static_cast<unsigned>(pages - 1);
  const unsigned lg = static_cast<unsigned>(std::bit_width(pages)) - 1;
  return 32 + (lg - 5) * 4 + static_cast<unsigned>((pages >> (lg - 2)) & 3);
}

std::size_t PageHeap::BucketMin(unsigned b) noexcept {
  if (b < 32) return b + 1;
  const unsigned lg = 5 + (b - 32) / 4, k = (b - 32) % 4;
  const std::size_t min = std::size_t{4 + k} << (lg - 2);
  return min < 33 ? 33 : min;
}

void PageHeap::InsertFreeLocked(Span* s) {
  s->state = Span::State::kFree;
  const unsigned b = BucketOf(s->pages);
  s->bucket = static_cast<std::uint8_t>(b);
  s->prev = nullptr;
  s->next = lists_[b];
  if (s->next != nullptr) s->next->prev = s;
  lists_[b] = s;
  nonempty_[b / 64] |= std::uint64_t{1} << (b % 64);
  free_pages_ += s->pages;
  ++free_spans_;
}

void PageHeap::RemoveFreeLocked(Span* s) {
  const unsigned b = s->bucket;
  if (s->prev != nullptr) {
    s->prev->next = s->next;
  } else {
    lists_[b] = s->next;
    if (s->next == nullptr) nonempty_[b / 64] &= ~(std::uint64_t{1} << (b % 64));
  }
  if (s->next != nullptr) s->next->prev = s->prev;
  s->prev = s->next = nullptr;
  free_pages_ -= s->pages;
  --free_spans_;
}

Span* PageHeap::NewFreeLocked(std::uintptr_t start, std::size_t pages) {
  Span* s = spans_.New();
  s->start = start;
  s->pages = static_cast<std::uint32_t>(pages);
  map_.SetSpanAt(s->start, s);
  map_.SetSpanAt(s->last_page(), s);
  InsertFreeLocked(s);
  return s;
}

Span* PageHeap::FindFitLocked(std::size_t pages) {
  const unsigned b = BucketOf(pages);
  int scanned = 0;
  for (Span* s = lists_[b]; s != nullptr && scanned < 16; s = s->next, ++scanned) {
    if (s->pages >= pages) return s;
  }
  // Any span on a later list is at least BucketMin(b + 1) > pages.
  for (unsigned w = (b + 1) / 64; w < 2; ++w) {
    std::uint64_t bits = nonempty_[w];
    if (w == (b + 1) / 64) bits &= ~std::uint64_t{0} << ((b + 1) % 64);
    if (bits != 0) return lists_[w * 64 + static_cast<unsigned>(std::countr_zero(bits))];
  }
  return nullptr;
}

Span* PageHeap::FindAlignedLocked(std::size_t pages, std::size_t alignment) {
  const std::size_t align_pages = alignment >> kPageShift;
  const std::size_t padded = pages + align_pages - 1;
  if (padded <= map_.pages_per_chunk()) {
    if (Span* s = FindFitLocked(padded)) return s;  // holds an aligned run wherever it starts
  }
  // Rare (large alignments): any free span with an aligned run of `pages` inside.
  for (unsigned b = BucketOf(pages); b < kBuckets; ++b) {
    for (Span* s = lists_[b]; s != nullptr; s = s->next) {
      const std::uintptr_t at = (s->start + alignment - 1) & ~(alignment - 1);
      if (at < s->end() && (s->end() - at) >> kPageShift >= pages) return s;
    }
  }
  return nullptr;
}

Span* PageHeap::CarveLocked(Span* s, std::uintptr_t at, std::size_t pages) {
  RemoveFreeLocked(s);
  const std::uintptr_t end = s->end();
  const std::uintptr_t used_end = at + (pages << kPageShift);
  if (at > s->start) NewFreeLocked(s->start, (at - s->start) >> kPageShift);
  if (used_end < end) NewFreeLocked(used_end, (end - used_end) >> kPageShift);
  s->start = at;
  s->pages = static_cast<std::uint32_t>(pages);
  map_.SetSpanAt(s->start, s);
  map_.SetSpanAt(s->last_page(), s);
  return s;
}

bool PageHeap::GrowLocked() {
  // The chunk's page map and its first span record first: once carved, a chunk must be usable.
  if (!map_.Prepare() || !spans_.Reserve(1)) return false;
  // Not under this lock: growing may map and register a chunk (milliseconds) or wait for a chunk
  // another thread is adding; meanwhile the page heap serves what it has.
  mu_.Unlock();
  void* chunk = source_->NewChunk();
  mu_.Lock();
  if (chunk == nullptr) return false;
  if (!map_.Prepare() || !spans_.Reserve(1)) {  // another growth used what was prepared
    source_->ReturnChunk(chunk);
    return false;
  }
  const auto start = reinterpret_cast<std::uintptr_t>(chunk);
  PINPOOL_CHECK(start % chunk_size_ == 0 && start - map_.base() < map_.max_chunks() * chunk_size_,
                "internal: a chunk outside the pool's range (%p)", chunk);
  const std::size_t index = (start - map_.base()) / chunk_size_;
  if (map_.HasChunk(index)) {
    // Released earlier (ReleaseIdleChunks) and handed out again: its arrays are still there, every
    // entry 0 and no span recorded. A chunk taken twice without a release would have spans.
    PINPOOL_CHECK(released_ != 0 && map_.SpanAt(start) == nullptr,
                  "internal: chunk %zu taken twice", index);
    --released_;
  } else {
    map_.AddChunk(index);
  }
  NewFreeLocked(start, map_.pages_per_chunk());
  ++chunks_;
  return true;
}

Span* PageHeap::Allocate(std::size_t pages, unsigned cls, std::size_t alignment, bool grow) {
  PINPOOL_DCHECK(pages >= 1 && pages <= map_.pages_per_chunk());
  PINPOOL_DCHECK(alignment >= kPageSize && alignment <= chunk_size_);
  // A slab's pages carry their distance from its start in 4 bits (PageMap).
  PINPOOL_DCHECK(!IsSlabClass(cls) || pages <= PageMap::kMaxDelta + 1);
  SpinLockHolder lock(&mu_);
  Span* s;
  std::uintptr_t at;
  for (;;) {
    // Splitting a free span makes up to two new records: have them before touching anything.
    if (!spans_.Reserve(2)) return nullptr;
    s = alignment > kPageSize ? FindAlignedLocked(pages, alignment) : FindFitLocked(pages);
    if (s != nullptr) {
      at = (s->start + alignment - 1) & ~(alignment - 1);
      break;
    }
    if (!grow || !GrowLocked()) return nullptr;
  }
  s = CarveLocked(s, at, pages);
  s->cls = static_cast<std::uint8_t>(cls);
  if (IsSlabClass(cls)) {
    s->state = Span::State::kSlab;
    map_.SetSlab(s->start, pages, cls);
  } else {
    s->state = Span::State::kLarge;
    map_.SetLarge(s->start, cls);
  }
  used_pages_ += pages;
  return s;
}

void PageHeap::FreeLocked(Span* s) {
  const std::uintptr_t chunk_start = s->start & ~(chunk_size_ - 1);
  if (s->start != chunk_start) {
    Span* left = map_.SpanAt(s->start - kPageSize);
    if (left != nullptr && left->state == Span::State::kFree) {
      RemoveFreeLocked(left);
      map_.SetSpanAt(left->last_page(), nullptr);
      map_.SetSpanAt(s->start, nullptr);
      s->start = left->start;
      s->pages += left->pages;
      spans_.Put(left);
    }
  }
  if (s->end() != chunk_start + chunk_size_) {
    Span* right = map_.SpanAt(s->end());
    if (right != nullptr && right->state == Span::State::kFree) {
      RemoveFreeLocked(right);
      map_.SetSpanAt(s->last_page(), nullptr);
      map_.SetSpanAt(right->start, nullptr);
      s->pages += right->pages;
      spans_.Put(right);
    }
  }
  map_.SetSpanAt(s->start, s);
  map_.SetSpanAt(s->last_page(), s);
  InsertFreeLocked(s);
}

std::size_t PageHeap::ReleaseIdleChunks() {
  SpinLockHolder lock(&mu_);
  const std::size_t whole = map_.pages_per_chunk();
  std::size_t n = 0;
  // A free span never crosses a chunk boundary, so one of a chunk's pages is exactly a chunk.
  const unsigned b = BucketOf(whole);
  for (Span* s = lists_[b]; s != nullptr;) {
    Span* next = s->next;
    if (s->pages == whole) {
      RemoveFreeLocked(s);
      map_.SetSpanAt(s->start, nullptr);
      map_.SetSpanAt(s->last_page(), nullptr);
      void* chunk = reinterpret_cast<void*>(s->start);
      spans_.Put(s);
      --chunks_;
      ++released_;
      ++n;
      source_->ReturnChunk(chunk);
    }
    s = next;
  }
  return n;
}

void PageHeap::Free(Span* s) {
  SpinLockHolder lock(&mu_);
  PINPOOL_DCHECK(s->state != Span::State::kFree);
  map_.Clear(s->start, s->state == Span::State::kSlab ? s->pages : 1);
  used_pages_ -= s->pages;
  FreeLocked(s);
}

void PageHeap::FreeLarge(std::uintptr_t p) {
  SpinLockHolder lock(&mu_);
  Span* s = map_.SpanAt(p);
  PINPOOL_DCHECK(s != nullptr && s->start == p && s->state == Span::State::kLarge);
  map_.Clear(s->start, 1);
  used_pages_ -= s->pages;
  FreeLocked(s);
}

PageHeap::Where PageHeap::Find(std::uintptr_t p) {
  SpinLockHolder lock(&mu_);
  Where w;
  const std::size_t index = (p - map_.base()) / chunk_size_;
  if (index >= map_.max_chunks() || !map_.HasChunk(index)) return w;
  const std::uintptr_t chunk_start = map_.base() + index * chunk_size_;
  for (std::uintptr_t q = p & ~(kPageSize - 1);; q -= kPageSize) {
    if (const Span* s = map_.SpanAt(q)) {
      w.span = s;
      w.state = s->state;
      w.start = s->start;
      w.bytes = std::size_t{s->pages} << kPageShift;
      return w;
    }
    if (q == chunk_start) return w;  // cannot happen while the invariants hold
  }
}

PageHeap::Counts PageHeap::GetCounts() const {
  SpinLockHolder lock(&mu_);
  Counts c;
  c.chunks = chunks_;
  c.used_pages = used_pages_;
  c.free_pages = free_pages_;
  c.free_spans = free_spans_;
  c.metadata_bytes = map_.metadata_bytes() + spans_.bytes();
  return c;
}

void PageHeap::Verify() const {
  SpinLockHolder lock(&mu_);
  std::size_t used = 0, free = 0, free_spans = 0, released = 0;
  for (std::size_t index = 0; index < map_.max_chunks(); ++index) {
    if (!map_.HasChunk(index)) continue;
    const std::uintptr_t chunk_start = map_.base() + index * chunk_size_;
    const std::uintptr_t chunk_end = chunk_start + chunk_size_;
    if (map_.SpanAt(chunk_start) == nullptr) {  // released (ReleaseIdleChunks): nothing in it
      for (std::uintptr_t q = chunk_start; q < chunk_end; q += kPageSize) {
        PINPOOL_CHECK((map_.EntryAt(q) & ~PageMap::kGrantTag) == 0 && map_.SpanAt(q) == nullptr,
                      "page heap: released chunk %zu has an entry at %#lx", index,
                      static_cast<unsigned long>(q));
      }
      ++released;
      continue;
    }
    bool previous_free = false;
    for (std::uintptr_t q = chunk_start; q < chunk_end;) {
      const Span* s = map_.SpanAt(q);
      PINPOOL_CHECK(s != nullptr && s->start == q && s->pages > 0 && s->end() <= chunk_end,
                    "page heap: no span starts at %#lx", static_cast<unsigned long>(q));
      PINPOOL_CHECK(map_.SpanAt(s->last_page()) == s, "page heap: span %#lx: last page unset",
                    static_cast<unsigned long>(q));
      for (std::uintptr_t r = s->start + kPageSize; r < s->last_page(); r += kPageSize) {
        PINPOOL_CHECK(map_.SpanAt(r) == nullptr, "page heap: span %#lx: stale interior page %#lx",
                      static_cast<unsigned long>(q), static_cast<unsigned long>(r));
      }
      for (std::size_t i = 0; i < s->pages; ++i) {
        const std::uintptr_t page = s->start + (i << kPageShift);
        std::uint32_t want = 0;
        if (s->state == Span::State::kSlab) want = PageMap::Encode(s->cls, i, page);
        if (s->state == Span::State::kLarge && i == 0) want = PageMap::Encode(s->cls, 0, page);
        const std::uint32_t entry = map_.EntryAt(page) & ~PageMap::kGrantTag;
        PINPOOL_CHECK(entry == want, "page heap: page %#lx: entry %#x, want %#x",
                      static_cast<unsigned long>(page), entry, want);
      }
      if (s->state == Span::State::kFree) {
        PINPOOL_CHECK(!previous_free, "page heap: free spans side by side at %#lx",
                      static_cast<unsigned long>(q));
        PINPOOL_CHECK(s->bucket == BucketOf(s->pages), "page heap: span %#lx on the wrong list",
                      static_cast<unsigned long>(q));
        bool listed = false;
        for (const Span* t = lists_[s->bucket]; t != nullptr; t = t->next) listed |= t == s;
        PINPOOL_CHECK(listed, "page heap: free span %#lx not on its list",
                      static_cast<unsigned long>(q));
        free += s->pages;
        ++free_spans;
      } else {
        used += s->pages;
      }
      previous_free = s->state == Span::State::kFree;
      q = s->end();
    }
  }
  for (unsigned b = 0; b < kBuckets; ++b) {
    const bool bit = (nonempty_[b / 64] >> (b % 64)) & 1;
    PINPOOL_CHECK(bit == (lists_[b] != nullptr), "page heap: list %u bitmap bit wrong", b);
    for (const Span* t = lists_[b]; t != nullptr; t = t->next) {
      PINPOOL_CHECK(t->state == Span::State::kFree && t->pages >= BucketMin(b),
                    "page heap: list %u holds a span of %u pages", b, t->pages);
    }
  }
  PINPOOL_CHECK(used == used_pages_ && free == free_pages_ && free_spans == free_spans_,
                "page heap: counts used %zu/%zu free %zu/%zu spans %zu/%zu", used, used_pages_,
                free, free_pages_, free_spans, free_spans_);
  PINPOOL_CHECK(released == released_, "page heap: %zu chunks released, %zu counted", released,
                released_);
}

}  // namespace pinpool::internal
