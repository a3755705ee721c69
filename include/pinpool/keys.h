// Keys: what a registration domain hands back for one chunk, and the chunk record they live in;
// and the two things that describe a domain (its kind, and what it does to the pages: Pinning).
//
// Every key type is its own enum class so that an RDMA lkey cannot be passed where an rkey or an
// io_uring buffer index is expected without an explicit conversion (pinpool::ToUnderlying).
// ChunkInfo records are created when a chunk is registered and stay valid, unchanged, until the
// pool that owns them is destroyed; reading them needs no lock.
#ifndef PINPOOL_KEYS_H_
#define PINPOOL_KEYS_H_

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "pinpool/abi.h"
#include "pinpool/page_size.h"

namespace pinpool {
PINPOOL_ABI_BEGIN

// Local key of an RDMA memory region: goes into ibv_sge::lkey.
enum class LKey : std::uint32_t {};
// Remote key of an RDMA memory region: what a peer needs to READ/WRITE it.
enum class RKey : std::uint32_t {};
// Index of an io_uring fixed buffer: goes into sqe->buf_index.
enum class BufferIndex : std::uint32_t {};

template <typename E>
constexpr std::underlying_type_t<E> ToUnderlying(E e) noexcept {
  return static_cast<std::underlying_type_t<E>>(e);
}

enum class DomainKind : std::uint8_t {
  kHost,     // host memory only, no device keys (long-term pinned, or mlocked: see Pinning)
  kVerbs,    // RDMA protection domain: lkey/rkey
  kIoUring,  // io_uring fixed-buffer table: buffer index
  kCustom,   // a domain written by the application
};

// What registering a chunk with a domain does to its pages. Only a long-term pin keeps a page's
// physical address fixed: mlock keeps it in memory, but the kernel may still migrate it
// (compaction, NUMA balancing, memory hotplug). docs/pinning.md has the measurements.
enum class Pinning : std::uint8_t {
  kNone,      // nothing: the pages may be swapped or moved (a fake domain, on-demand paging)
  kResident,  // mlock: resident, not pinned: the physical address may change; not for DMA
  kLongTerm,  // pin_user_pages(FOLL_LONGTERM), as ibv_reg_mr and io_uring buffer registration
              // take it: physical addresses fixed until deregistration; counted in VmPin
};

constexpr const char* DomainKindName(DomainKind k) noexcept {
  switch (k) {
    case DomainKind::kHost:
      return "host";
    case DomainKind::kVerbs:
      return "verbs";
    case DomainKind::kIoUring:
      return "io_uring";
    case DomainKind::kCustom:
      return "custom";
  }
  return "?";
}

// "none", "resident", "long-term": for JSON and short labels.
constexpr const char* PinningName(Pinning p) noexcept {
  switch (p) {
    case Pinning::kNone:
      return "none";
    case Pinning::kResident:
      return "resident";
    case Pinning::kLongTerm:
      return "long-term";
  }
  return "?";
}

// What the pinning means for a device, in words (stats, the demo, pinpool-info).
constexpr const char* PinningDescription(Pinning p) noexcept {
  switch (p) {
    case Pinning::kNone:
      return "not pinned: the pages may be swapped out or moved";
    case Pinning::kResident:
      return "resident, not pinned: the physical address may change; not for DMA";
    case Pinning::kLongTerm:
      return "long-term pinned: physical addresses fixed (counted in VmPin)";
  }
  return "?";
}

// One domain's registration of one chunk. Fields that do not apply to the domain's kind are zero.
struct Keys {
  std::uintptr_t base = 0;     // first address covered by the registration
  std::size_t length = 0;      // bytes covered
  LKey lkey{};                 // kVerbs
  RKey rkey{};                 // kVerbs
  BufferIndex buffer_index{};  // kIoUring
  void* handle = nullptr;      // the domain's own object (ibv_mr*, ...); opaque to everyone else
};

// At most this many domains per pool (a block carries keys for each).
inline constexpr std::size_t kMaxDomains = 8;

// One mapped, registered chunk of a pool.
struct ChunkInfo {
  std::uintptr_t base = 0;
  std::size_t size = 0;
  std::uint32_t index = 0;  // position in the pool's reserved range
  // Which chunk of its position this is: 1 for the first published there, one more for each
  // after it (a position trimmed and grown again holds another chunk), kept across a handover.
  // Never 0. What a BlockHandle carries so that it names this chunk and no other
  // (pinpool/share.h).
  std::uint32_t generation = 0;
  PageSize page_size = PageSize::k4K;  // what the kernel actually gave (verified, not assumed)
  std::size_t huge_bytes = 0;  // bytes backed by huge pages (all of it unless THP fell short)
  std::uint32_t domain_count = 0;
  Keys keys[kMaxDomains];  // keys[d] is domain d's registration (pool option order)
};

PINPOOL_ABI_END
}  // namespace pinpool

#endif  // PINPOOL_KEYS_H_
