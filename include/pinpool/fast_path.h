// The allocation fast path that Pool's inline members (pinpool/pool.h) compile into the caller:
// a pop from, or a push onto, this thread's cache of the pool, with the checks of a free. Not an
// API: nothing here is for users to call or name.
//
// Why inline: a call into libpinpool.so costs a PLT jump, a call and a return each way, a Block
// returned through memory (24 bytes: not in registers) and the saving of the caller's registers;
// together they were half of an allocate + free pair. Inlined, a pair costs what tcmalloc's does
// (docs/instruction-counts.md). Everything that misses (no cache yet, an empty or full bin, a
// pending drain, sizes above kMaxFastSize or alignments above 16, anything a free check rejects)
// calls into the library, which decides and aborts on misuse naming the rule.
//
// ABI: what is here is compiled into programs, so its layout is part of libpinpool's ABI: the
// per-thread slots (slot 0's cache never null), a cache's handshake words, byte room (which the
// inline free charges and the inline allocation credits only above kMaxUncreditedSize) and
// bins, the class table's shape (32-byte rows, row 0 the page map's "no block here"), the free
// mark (secret ^ address, where MarkOf says), the page map's entry encoding (internal::PageMap)
// and the pool members the inline code reads (PoolHead). It is versioned as a whole by
// pinpool/abi.h: a change to any of it is a bump of PINPOOL_ABI_VERSION (docs/abi.md tells each
// earlier layout and why it changed), and tests/abi/ fails a layout that changes without one.
// The class table's contents (which sizes map to which class) are the library's: programs read
// them from libpinpool.so's exported `classes`, so a new library may change them without a
// rebuild.
//
// Thread safety: the slots are this thread's, but for the drain handshake with other threads
// (src/heap/heap.h): the owner sets slot 0's cache's `busy` around every touch of its bins and
// reads slot 0's heap id after setting it (another thread's membarrier orders the two); a
// drainer marks slot 0's id (under the library's per-thread lock) so that it no longer matches,
// then waits for `busy` to clear. A cache is its owner's.
#ifndef PINPOOL_FAST_PATH_H_
#define PINPOOL_FAST_PATH_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "pinpool/abi.h"
#include "pinpool/export.h"

// The fast path is forced inline: a compiler weighing it against a loop body may otherwise keep
// a copy out of line, and the call it then makes is what the path exists to avoid.
#define PINPOOL_FAST_INLINE inline __attribute__((always_inline))

namespace pinpool {
PINPOOL_ABI_BEGIN
namespace fast {

inline constexpr unsigned kNumClasses = 100;
// Sizes the inline path serves; larger ones call the library (their cost is not the call).
inline constexpr std::size_t kMaxFastSize = std::size_t{64} << 10;
// Sizes whose inline allocation does not give its block's bytes back to the cache's room (the
// free charged them): a pair of them touches the room once. Small enough that the recount this
// makes the library do (once the frees have charged a budget's worth) costs a pair at most
// about one instruction at the smallest budget, 2 MiB (2048 pairs a count); larger blocks pay
// for the credit instead (at 64 KiB a count would come every 32 pairs).
inline constexpr std::size_t kMaxUncreditedSize = 1024;

// A stack of free blocks: [bottom, top) held, top grows towards limit. 32 bytes, as a class
// table row: one shift of the class index addresses both. Written by the cache's owner (or a
// drainer under the handshake); top and bottom are also read by other threads counting what a
// cache holds (stats), hence atomics: relaxed, they are the plain moves they would be anyway.
struct Bin {
  std::atomic<void**> top{nullptr};
  void** limit = nullptr;
  std::atomic<void**> bottom{nullptr};
  // The class's MarkOf hash (its class row's mark_hash), set with the bin's storage: the pop
  // reads it from the line that holds top, not from the class table.
  std::uint64_t mark_hash = 0;
  void** Top() const noexcept { return top.load(std::memory_order_relaxed); }
  void** Bottom() const noexcept { return bottom.load(std::memory_order_relaxed); }
  void SetTop(void** t) noexcept { top.store(t, std::memory_order_relaxed); }
  std::size_t count() const noexcept { return static_cast<std::size_t>(Top() - Bottom()); }
};

// The head of a thread's cache of one pool (the rest is the library's: internal::ThreadCache).
struct CacheHead {
  std::atomic<std::uint32_t> busy{0};   // the owner is touching the bins
  std::atomic<std::uint32_t> drain{0};  // another thread wants them emptied (the library's)
  // Bytes the bins may still take, at most: the thread's budget less what they hold, less what
  // inline allocations of up to kMaxUncreditedSize took out since the library last counted
  // (such a pop leaves the word alone: one load and one store fewer, and no chain through it
  // from pair to pair). The library counts again (ThreadCache::Recount) before it lets a
  // shortfall flush anything.
  std::atomic<std::intptr_t> room{0};
  Bin bins[kNumClasses];
};

// The Pool members the inline paths read (pinpool/pool.h), as one struct: Pool's first member,
// aligned to a cache line so that a pair of allocate and free reads one line of the Pool. Copies
// of the default heap's id, free-mark secret and page map, and of the arena's chunk map, made
// when the pool is built: the fast path reads them here instead of chasing into the heap and the
// arena. Written before the pool is handed out and by its destructor only.
struct alignas(64) PoolHead {
  std::uint64_t heap_id = 0;      // the default class's heap
  std::uint64_t secret = 0;       // FreeMark's secret
  std::uintptr_t range_base = 0;  // the pool's reserved range, a multiple of the chunk size
  std::size_t range_size = 0;     // its bytes
  std::size_t max_block = 0;      // Pool::max_block_size()
  // The arena's chunk records (by chunk) and the default heap's page map (by page), as origins:
  // where element 0 would lie if the range began at address 0 (Pool::OriginOf).
  std::uintptr_t chunk_records_origin = 0;
  std::uintptr_t page_map_origin = 0;
  const std::atomic<std::uintptr_t>* chunk_table = nullptr;  // the arena's, by chunk
  // The named classes' heap ids, class order (class 0 is the default heap: &heap_id itself when
  // there are no named classes), and how many.
  const std::uint64_t* class_heap_ids = nullptr;
  std::uint32_t class_count = 1;
  std::uint32_t chunk_shift = 0;  // log2 of the chunk size
};

// This thread's most recently used (pool, cache) pairs; the inline path reads slot 0 only.
struct Slots {
  static constexpr int kSlots = 4;
  // A heap's id (0: none), or a drainer's mark on slot 0's, which matches no heap.
  std::atomic<std::uint64_t> heap_id[kSlots];
  // Never null: a slot without a cache holds the library's idle one, of which the handshake
  // below sets only `busy` (it sets `busy` before it tests the id).
  CacheHead* cache[kSlots];
};
// Initial-exec TLS: one %fs-relative load (and a GOT load of its offset), no call, no
// initialization check. libpinpool.so already uses static TLS, so this adds no restriction on
// how it is loaded.
extern PINPOOL_EXPORT constinit thread_local Slots tls_slots
    __attribute__((tls_model("initial-exec")));

struct ClassTable {
  // Row c + 1 is class c's (32 bytes, as a Bin: a page map entry >> kRowShift is the row's
  // byte offset); row 0 is all zero, for page map entries of 0, and fails every test below.
  struct Class {
    // Divisibility by `size` for offsets below 2^32: n is a multiple of size exactly when
    // n * magic < magic in 64-bit arithmetic (Lemire, Kaser and Kurz 2019). With magic 0
    // (row 0), nothing is.
    std::uint64_t magic;
    std::uint64_t size;  // bytes of a block
    // Always zero: an entry with the grant tag (kGrantTag) selects its row 16 bytes further on,
    // and reads this word as its magic, so that it fails every test below.
    std::uint64_t zero;
    // Where a free block of the class keeps its mark: MarkOf's `hash` (0: the first word).
    std::uint64_t mark_hash;
  } cls[kNumClasses + 1];
  // The row of `size` bytes (1 .. kMaxFastSize) is row[(size - 1) >> 4] (RowOfSize): its
  // class's row's byte offset in cls, (class + 1) * 32, which is also where the class's bin ends
  // in a cache's bins (BinOfRow). Stored as the offset, not the class: no arithmetic between
  // load and use. Indexed by size - 1, which the callers' range test has computed already.
  std::uint16_t row[kMaxFastSize / 16];
};
extern PINPOOL_EXPORT const ClassTable classes;
#ifdef PINPOOL_BUILDING_LIBRARY
// Inside libpinpool.so, the inline paths (the C API's, a named class's free) read an identical
// hidden copy: PC-relative, without the GOT load an exported symbol costs in a shared library.
extern __attribute__((visibility("hidden"))) const ClassTable library_classes;
PINPOOL_FAST_INLINE const ClassTable& Classes() noexcept { return library_classes; }
#else
PINPOOL_FAST_INLINE const ClassTable& Classes() noexcept { return classes; }
#endif

// A page map entry (internal::PageMap): 0 when no block starts on the page, else
//   (class + 1) << 25 | (pages into the span) << 16 | lead
// where lead, 16 bits, is (page's offset from its span's start mod class size - page's address)
// mod 2^16: added to an address on the page, it gives the address's offset from the span's
// start mod class size in the low 16 bits (SpanOffset). kGrantTag is added while a block
// starting on the page may be reached by a remote grant (or is held until its grants end):
// every free of a block starting on such a page goes to the library, which decides. The map is
// one array over the pool's whole reserved range, indexed by page.
using PageEntry = std::atomic<std::uint32_t>;
inline constexpr unsigned kPageShift = 12;
// entry >> kRowShift is the byte offset into ClassTable::cls of the entry's class's row (bits
// 20-23 of an entry are 0), 16 bytes further with the tag. One shift: no copy, no mask.
inline constexpr unsigned kRowShift = 20;
inline constexpr std::uint32_t kGrantTag = std::uint32_t{0x10} << kRowShift;
PINPOOL_FAST_INLINE std::uintptr_t RowOfEntry(std::uint32_t entry) noexcept {
  return entry >> kRowShift;
}
// The row of `size` bytes (1 .. kMaxFastSize).
PINPOOL_FAST_INLINE std::uintptr_t RowOfSize(std::size_t size) noexcept {
  return Classes().row[(size - 1) >> 4];
}

// True when `offset` (below 2^32: from a span's start) is a multiple of the class's size; never
// for row 0.
PINPOOL_FAST_INLINE bool AtBlockStart(const ClassTable::Class& k, std::uintptr_t offset) noexcept {
  return offset * k.magic < k.magic;
}

// What a free block at p holds where MarkOf says: the secret mixed with the address, so that a
// mark copied from another block is not one.
inline std::uint64_t FreeMark(std::uint64_t secret, const void* p) noexcept {
  return secret ^ reinterpret_cast<std::uintptr_t>(p);
}
using MarkWord = std::uint64_t __attribute__((may_alias));

// The multiplier of MarkOf's hash, for classes whose size is a multiple of the page.
inline constexpr std::uint64_t kMarkHash = 0x9e3779b97f4a7c15;  // 2^64 / the golden ratio
// Where the free mark of the block at p lies, with `hash` its class row's mark_hash: its first
// word (hash 0: classes below a page, and those not a multiple of it, whose blocks share pages),
// or, for a class whose size is a multiple of the page (its blocks start on pages), the word of
// the block's first page that the top 9 bits of p * kMarkHash name. The first words of such
// blocks would all fall in one set of an L1 cache (indexed by the address's bits 6-11), and
// those of blocks 64 KiB apart in a few sets of L2, so a window or batch of hundreds of them
// missed on the mark at every free; spread over the page's 64 lines, they stay cached. A free
// pays 4 instructions for it (the row's word, a multiplication, a shift, the address), an
// allocation above kMaxUncreditedSize 3 (the bin's copy of the word, a multiplication, a shift)
// (docs/instruction-counts.md).
PINPOOL_FAST_INLINE MarkWord* MarkOf(void* p, std::uint64_t hash) noexcept {
  return static_cast<MarkWord*>(p) + ((reinterpret_cast<std::uintptr_t>(p) * hash) >> 55);
}

// Inlined into a caller that frees the address of a smaller object (a misuse the push sends to
// the library), the compiler would warn about TryPush's 8-byte accesses to p: after this it no
// longer knows what p points to (no instruction). Done by the caller, before the push and the
// library call that may follow it, so that both use one register (done inside the push, the
// compiler kept p twice: one copy more).
PINPOOL_FAST_INLINE void* Launder(void* p) noexcept {
  asm("" : "+r"(p));
  return p;
}

// Owner side of the drain handshake: sets c's `busy`, then asks `undrained()` (what the drainer
// wrote before its membarrier); true (and c busy) when it says yes, else false (and c not busy).
template <typename Undrained>
PINPOOL_FAST_INLINE bool EnterIf(CacheHead* c, Undrained undrained) noexcept {
  c->busy.store(1, std::memory_order_relaxed);
  std::atomic_signal_fence(std::memory_order_seq_cst);  // the drainer's membarrier does the rest
  if (__builtin_expect(undrained(), 1)) return true;
  c->busy.store(0, std::memory_order_release);
  return false;
}
// The inline paths', for c = slot 0's cache: true when slot 0 is heap `id`'s and no drainer has
// marked it. The slot test every path makes anyway is the drain test too.
PINPOOL_FAST_INLINE bool Enter(const Slots& t, CacheHead* c, std::uint64_t id) noexcept {
  return EnterIf(c, [&] { return t.heap_id[0].load(std::memory_order_relaxed) == id; });
}
PINPOOL_FAST_INLINE void Leave(CacheHead* c) noexcept {
  c->busy.store(0, std::memory_order_release);
}

// A row's class and bin: the class's row is one after the bin's byte offset in the cache (row 0
// of the table is the page map's "no block here").
PINPOOL_FAST_INLINE const ClassTable::Class& ClassRow(std::uintptr_t row) noexcept {
  return *reinterpret_cast<const ClassTable::Class*>(
      reinterpret_cast<std::uintptr_t>(Classes().cls) + row);
}
PINPOOL_FAST_INLINE Bin& BinOfRow(CacheHead* c, std::uintptr_t row) noexcept {
  return *reinterpret_cast<Bin*>(reinterpret_cast<std::uintptr_t>(c->bins) - sizeof(Bin) + row);
}
// A block of `size` bytes (1 .. kMaxFastSize) from this thread's cache of heap `id`, or null.
PINPOOL_FAST_INLINE void* TryPop(std::uint64_t id, std::size_t size) noexcept {
  Slots& t = tls_slots;
  const std::uintptr_t row = RowOfSize(size);
  CacheHead* c = t.cache[0];
  if (!Enter(t, c, id)) return nullptr;
  Bin& bin = BinOfRow(c, row);
  void** top = bin.Top();
  if (__builtin_expect(top == bin.Bottom(), 0)) {
    Leave(c);
    return nullptr;
  }
  bin.SetTop(--top);
  void* const p = *top;
  // A bin holds blocks, never null: callers drop their null test (the mark's store below no
  // longer tells the compiler so).
  if (p == nullptr) __builtin_unreachable();
  if (size > kMaxUncreditedSize) {  // folded away when the size is a constant
    c->room.store(
        c->room.load(std::memory_order_relaxed) + static_cast<std::intptr_t>(ClassRow(row).size),
        std::memory_order_relaxed);
    Leave(c);
    *MarkOf(p, bin.mark_hash) = 0;  // no longer free
  } else {
    // Up to kMaxUncreditedSize, the class is below a page: the mark is the block's first word.
    // Each arm leaves and stores on its own: one store after the arms join cost the small
    // sizes a move (their mark's address and p in two registers).
    Leave(c);
    *static_cast<MarkWord*>(p) = 0;
  }
  return p;
}

// p's offset from its span's start, modulo the class size (below 2^16): p plus the entry's
// lead, modulo 2^16 (an addition and a zero extension; the entry's higher bits do not reach the
// low 16).
PINPOOL_FAST_INLINE std::uintptr_t SpanOffset(std::uint32_t entry, const void* p) noexcept {
  return static_cast<std::uint16_t>(reinterpret_cast<std::uintptr_t>(p) + entry);
}

// A free onto this thread's cache of heap `id`: true when done, false when the library must look
// (then nothing was changed). `slot` is the page map's entry for p's page (p is in the pool's
// range; its alignment is the block start test's). Checks, from the entry, that no grant may reach
// a block starting on the page, that p is exactly a block's start and that `size` (0: unknown)
// fits the block; then the free mark. Pool::Deallocate passes p through Launder first.
//
// Where the class's row (and so the bin) comes from is the one difference between the forms:
//   - kBySize (a size of 1 .. kMaxFastSize): from the size, as the pop's, and the entry must name
//     the same row, which also rejects the grant tag and "no block here"; the size's class holds
//     the size by construction. The bin does not wait for the page map's load: in a pair the
//     push's stores depend on p's load only, and the entry feeds a test. A block whose class is
//     not the size's (an alignment above 16 chose another, or Reallocate shrank it in place) goes
//     to the library, which files it under its own class.
//   - else (by address, or a size above kMaxFastSize): from the entry. Its top 7 bits are the
//     class + 1 (only the library writes entries), so entry >> kRowShift is the byte offset of
//     the class's row; an entry of 0 (no block starts on this page) selects row 0, which fails
//     the block start test, and so does an entry with the grant tag (the row's zero half). No
//     range test, no test for 0, no test of the tag.
// The entry is read inside the drain handshake (after Enter): a chunk the heap forgets
// (Heap::ForgetChunk, when its memory is given back) has its entries cleared while every cache's
// drain is held, so a free that passes Enter reads the cleared entry and goes to the library,
// and one that read the entry earlier is waited for by the drainer before anything is forgotten.
// Read before Enter, a free could check an entry, stall, and push a block of a chunk forgotten
// meanwhile.
template <bool kBySize>
PINPOOL_FAST_INLINE bool TryPush(std::uint64_t id, std::uint64_t secret, const PageEntry& slot,
                                 void* p, std::size_t size) noexcept {
  Slots& t = tls_slots;
  const std::uintptr_t size_row = kBySize ? RowOfSize(size) : 0;
  CacheHead* c = t.cache[0];
  if (!Enter(t, c, id)) return false;
  const std::uint32_t entry = slot.load(std::memory_order_relaxed);
  const std::uintptr_t row = kBySize ? size_row : RowOfEntry(entry);
  const ClassTable::Class& k = ClassRow(row);
  const bool fits = kBySize ? RowOfEntry(entry) == row : size <= k.size;
  if (__builtin_expect(!fits || !AtBlockStart(k, SpanOffset(entry, p)), 0)) {
    Leave(c);
    return false;
  }
  const std::uint64_t mark = FreeMark(secret, p);
  MarkWord* const at = MarkOf(p, k.mark_hash);
  if (__builtin_expect(*at == mark, 0)) {
    Leave(c);
    return false;
  }
  Bin& bin = BinOfRow(c, row);
  // The budget first: the subtraction's sign is the test.
  const std::intptr_t room =
      c->room.load(std::memory_order_relaxed) - static_cast<std::intptr_t>(k.size);
  void** top = bin.Top();
  if (__builtin_expect(room < 0 || top == bin.limit, 0)) {
    Leave(c);
    return false;
  }
  *at = mark;
  *top = p;
  bin.SetTop(top + 1);
  c->room.store(room, std::memory_order_relaxed);
  Leave(c);
  return true;
}

// A free of p with `size` as the caller gives it (0: unknown).
PINPOOL_FAST_INLINE bool TryFree(std::uint64_t id, std::uint64_t secret, const PageEntry& slot,
                                 void* p, std::size_t size) noexcept {
  if (__builtin_expect(size - 1 < kMaxFastSize, 1)) return TryPush<true>(id, secret, slot, p, size);
  return TryPush<false>(id, secret, slot, p, size);
}

}  // namespace fast
PINPOOL_ABI_END
}  // namespace pinpool

#endif  // PINPOOL_FAST_PATH_H_
