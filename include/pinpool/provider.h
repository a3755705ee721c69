// The implementer's interface: what a writer of a Domain (a registration backend) or of a grant
// mechanism needs from pinpool, and an application does not. pinpool's own provider libraries
// (libpinpool_ucx, libpinpool_fabric) are written against this header and the users' headers
// only; a backend of yours gets the same tools and the same wording of errors. Applications
// include the users' headers (pinpool/pinpool.h, pinpool/verbs.h, pinpool/ucx.h, ...), never this
// one: the split is rdma-core's, verbs.h for applications and driver.h for providers.
//
// What is here:
//  - PinRefusedError: the error for a registration whose pin the kernel refused, in the words of
//    pinpool's own domains (RLIMIT_MEMLOCK, VmPin, VmLck, the fix).
//  - FormatBytes (declared in pinpool/stats.h, which users print stats with too): sizes in
//    messages, as pinpool prints them ("64 MiB").
//  - CheckBlockDomain, CheckTransferRanges: the checks a one-sided transfer (or any call taking
//    a block and a domain number) makes before it posts anything.
//  - ChunkRecord, ChunkHandles: a domain's per-chunk record on Keys::handle, handed to the pool
//    and taken back checked, with the domain's registration counters.
//  - For grant mechanisms: pinpool/grant_lock.h (GrantLock, GrantHolder), included here. Its
//    protocol is what keeps a block a peer can still reach from being handed out again.
//  - Test-only: InjectedProviderFault, the fault-injection seam the provider libraries ask before
//    each backend call that can fail (pinpool's fault sweeps make every one fail in turn).
// The Domain contract itself is in pinpool/domain.h.
//
// The functions are exported by libpinpool (src/domain/provider.cc, memlock.cc; FormatBytes in
// src/report/stats_text.cc) and need nothing beyond what pinpool::pinpool links; ChunkHandles is a
// template compiled into the implementer's own library, where hidden visibility (as pinpool's
// providers are built) keeps it out of that library's exports.
//
// Thread safety: the functions are pure but for PinRefusedError (which reads /proc/self/status).
// ChunkHandles is safe to use from several threads at once (atomic counters); each record is
// touched by one Register or one Deregister at a time, as the Domain contract guarantees.
#ifndef PINPOOL_PROVIDER_H_
#define PINPOOL_PROVIDER_H_

#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "pinpool/abi.h"
#include "pinpool/block.h"
#include "pinpool/domain.h"
#include "pinpool/export.h"
#include "pinpool/grant_lock.h"
#include "pinpool/keys.h"
#include "pinpool/stats.h"  // FormatBytes

namespace pinpool {
PINPOOL_ABI_BEGIN

// The error for a registration whose pin the kernel refused (`err`: ENOMEM or EAGAIN from the
// call `what`, e.g. "ibv_reg_mr", for `bytes` bytes), in the words pinpool's own domains use:
// RLIMIT_MEMLOCK, what this process holds long-term pinned (VmPin) and locked (VmLck), and the
// fix. Always kResourceExhausted. Return it from Domain::Register when your backend's
// registration failed for want of pinnable memory; the pool reports it as the growth error.
PINPOOL_EXPORT absl::Status PinRefusedError(const char* what, int err, std::size_t bytes);

// OK when `block` is a block (not empty) and its pool has a domain number `domain`; otherwise
// kInvalidArgument naming `what` (the caller, e.g. "FabricWrite").
PINPOOL_EXPORT absl::Status CheckBlockDomain(const char* what, const Block& block,
                                             std::size_t domain);

// True when [offset, offset + length) lies in `size` bytes (no overflow).
constexpr bool RangeInside(std::uint64_t offset, std::uint64_t length,
                           std::uint64_t size) noexcept {
  return offset <= size && length <= size - offset;
}

// The peer's side of a one-sided transfer: how many bytes it granted, and how to name them in
// errors.
struct RemoteRange {
  std::uint64_t length = 0;
  const char* key_kind = "key";  // "key" (libfabric), "address" (UCX), "rkey" ...
  std::uint64_t key = 0;
};

// The checks every one-sided transfer makes before posting: CheckBlockDomain, a length, the
// local range [offset, offset + length) inside the block and [remote_offset, + length) inside
// what the peer granted, with no overflow. Errors name `what`, both ranges and the peer's key,
// and say that nothing was posted: kInvalidArgument (no block, no such domain, length 0),
// kOutOfRange (a range outside its bounds). Add your transport's own checks after these.
PINPOOL_EXPORT absl::Status CheckTransferRanges(const char* what, const Block& block,
                                                std::size_t offset, std::size_t length,
                                                const RemoteRange& remote,
                                                std::size_t remote_offset, std::size_t domain);

// --- test-only: fault injection ----------------------------------------------------------------
// pinpool's tests make every call the library makes that can fail fail in turn, through one hook
// (nothing in pinpool or in an application sets it: it is set by the test programs, which link
// pinpool's internals). The provider libraries, which see only public headers, ask it here
// before each backend call that can fail, and take a non-zero answer as that call's failure with
// that errno (its status: ENOMEM is UCS_ERR_NO_MEMORY, -FI_ENOMEM...). With no hook set it
// returns 0 at the cost of one relaxed load; never on an allocation path.
enum class ProviderCall : std::uint8_t {
  kUcxMap,          // ucp_mem_map of a chunk
  kUcxPack,         // ucp_rkey_pack of a chunk's rkey
  kFabricRegister,  // fi_mr_regattr of a chunk or a granted range
  kFabricBind,      // fi_mr_bind / fi_mr_enable to an endpoint
  kFabricPost,      // fi_writemsg / fi_readmsg of a transfer
};
// 0, or the errno a test's hook chose for this call of `length` bytes.
PINPOOL_EXPORT int InjectedProviderFault(ProviderCall call, std::size_t length) noexcept;

// What a domain's per-chunk record (the object Keys::handle points to) must have for
// ChunkHandles: a tag of its own type, set while the chunk is registered and cleared after, and
// the chunk's range. UcxChunk and FabricChunk (pinpool/ucx.h, pinpool/fabric.h) are two.
template <typename Record>
concept ChunkRecord = requires(Record& r) {
  requires std::same_as<decltype(Record::kMagic), const std::uint64_t>;
  requires std::same_as<decltype(r.magic), std::uint64_t>;
  requires std::same_as<decltype(r.base), std::uintptr_t>;
  requires std::same_as<decltype(r.length), std::size_t>;
};

// A domain's registered chunks, one Record each: Publish hands a record to the pool as
// Keys::handle when Register succeeds; Take gets it back, checked, in Deregister. Counts what
// pinpool's domains report (live, total, failed deregistrations) so that a test can see that a
// pool registers once per chunk and deregisters everything.
//
// Invariants: live() == Publish calls - successful Take calls; a record is owned by the pool
// (through Keys) between its Publish and its Take, and carries Record::kMagic exactly then.
// (Unconstrained so that a domain's public header can forward-declare it and hold one by
// pointer without including this header; the constraint is checked on instantiation.)
template <typename Record>
class ChunkHandles {
  static_assert(ChunkRecord<Record>, "ChunkHandles: Record needs kMagic, magic, base, length");

 public:
  // `kind` names a record in messages ("UCX mapping", "libfabric registration").
  explicit ChunkHandles(const char* kind) noexcept : kind_(kind) {}
  ChunkHandles(const ChunkHandles&) = delete;
  ChunkHandles& operator=(const ChunkHandles&) = delete;

  // After a successful registration of [record->base, + record->length): the Keys to return
  // from Register (base, length, handle = the record, which the pool now holds). Fill the
  // kind-specific keys (lkey, rkey...) of the result before returning it.
  Keys Publish(std::unique_ptr<Record> record) noexcept {
    record->magic = Record::kMagic;
    Keys keys;
    keys.base = record->base;
    keys.length = record->length;
    keys.handle = record.release();
    live_.fetch_add(1, std::memory_order_relaxed);
    total_.fetch_add(1, std::memory_order_relaxed);
    return keys;
  }

  // In Deregister: the record of `keys`, back in the caller's hands (freed with it), its tag
  // cleared and no longer counted live. Null when keys.handle is no live Record (keys of
  // another domain, or deregistered twice): then reported on stderr as the misuse of `domain`
  // (the domain's name) and counted as a failed deregistration; Deregister must do nothing
  // more (it cannot fail).
  std::unique_ptr<Record> Take(const Keys& keys, const std::string& domain) noexcept {
    auto* record = static_cast<Record*>(keys.handle);
    if (record == nullptr || record->magic != Record::kMagic) {
      std::fprintf(stderr, "pinpool: %s: Deregister of keys that are not a %s\n", domain.c_str(),
                   kind_);
      failed_.fetch_add(1, std::memory_order_relaxed);
      return nullptr;
    }
    record->magic = 0;
    live_.fetch_sub(1, std::memory_order_relaxed);
    return std::unique_ptr<Record>(record);
  }

  // The backend refused to release `record` (`call` failed with `why`): reported on stderr and
  // counted; the chunk is gone from the pool either way.
  void ReleaseFailed(const std::string& domain, const char* call, const Record& record,
                     const char* why) noexcept {
    std::fprintf(stderr, "pinpool: %s: %s of the %s chunk %s at %#lx failed: %s\n", domain.c_str(),
                 call, FormatBytes(record.length).c_str(), kind_,
                 static_cast<unsigned long>(record.base), why);
    failed_.fetch_add(1, std::memory_order_relaxed);
  }

  // Chunks registered now; ever; Deregister calls that failed (foreign keys, refused release).
  std::uint64_t live() const noexcept { return live_.load(std::memory_order_relaxed); }
  std::uint64_t total() const noexcept { return total_.load(std::memory_order_relaxed); }
  std::uint64_t failed() const noexcept { return failed_.load(std::memory_order_relaxed); }

 private:
  const char* const kind_;
  std::atomic<std::uint64_t> live_{0};
  std::atomic<std::uint64_t> total_{0};
  std::atomic<std::uint64_t> failed_{0};
};

PINPOOL_ABI_END
}  // namespace pinpool

#endif  // PINPOOL_PROVIDER_H_
