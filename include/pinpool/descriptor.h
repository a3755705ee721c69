// Compact descriptors: what a peer needs to reach the elements of an array (or one block, or a
// set of equal blocks) by RDMA, in bytes that grow with the chunk runs, not with the elements.
//
// A descriptor lists runs; run r describes `count` elements numbered from `first`, element
// first + k at remote address base + k * stride, with one 64-bit key per domain the writer chose
// (for verbs, the rkey a peer puts in its work request). Elements are numbered 0 .. size() - 1,
// run after run, with no gap.
//
// Wire format, version 1: little endian, fixed layout, no padding (docs/arrays.md):
//   offset  bytes  field
//   0       4      magic "PPDS"
//   4       2      version (1)
//   6       2      header bytes (40)
//   8       2      run bytes (32 + 8 x key count)
//   10      2      key count (1 .. kMaxDomains)
//   12      4      run count (>= 1)
//   16      8      element size (>= 1)
//   24      8      element count (the runs' counts added up)
//   32      8      flags (0: reserved)
//   40      ...    runs: base, stride, first, count (8 bytes each), then the keys (8 each)
// A reader of version 1 refuses any other version, header size, run size or flags, so a later
// version that adds fields changes them and is never misread.
//
// Decoding treats the bytes as untrusted (they come from a peer): Descriptor::Decode checks
// every field and every run (lengths, counts, numbering, stride >= element size, no address
// overflow) and never reads past the span, so an element it returns always lies inside the runs
// the descriptor declares. It says nothing about whether the peer's keys are valid: the remote
// device decides that (a stale key fails there with a remote access error).
//
// Which keys to put in: a descriptor of an Array by its chunks' own keys (Describe) gives a peer
// access to the whole of those chunks, which is the chunk-wide opt-in of docs/remote-access.md,
// for trusted peers only; a grant's keys give exactly the granted runs.
//
// Thread safety: everything here is a pure function or a const value.
#ifndef PINPOOL_DESCRIPTOR_H_
#define PINPOOL_DESCRIPTOR_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pinpool/abi.h"
#include "pinpool/array.h"
#include "pinpool/block.h"
#include "pinpool/export.h"
#include "pinpool/keys.h"

namespace pinpool {
PINPOOL_ABI_BEGIN

inline constexpr std::uint16_t kDescriptorVersion = 1;
inline constexpr std::size_t kDescriptorHeaderBytes = 40;
// Bytes of one run with `keys` keys.
constexpr std::size_t DescriptorRunBytes(std::size_t keys) noexcept { return 32 + 8 * keys; }

struct DescriptorRun {
  std::uint64_t base = 0;
  std::uint64_t stride = 0;
  std::uint64_t first = 0;
  std::uint64_t count = 0;
  std::uint64_t keys[kMaxDomains] = {};  // the first key_count are meaningful
};

// One element as a peer addresses it.
struct RemoteElement {
  std::uint64_t address = 0;
  std::uint64_t length = 0;             // the element size
  const std::uint64_t* keys = nullptr;  // key_count keys, in the Descriptor that returned it
};

// Builds a descriptor run by run (the encoder). Runs are numbered in the order they are added.
class PINPOOL_EXPORT DescriptorWriter {
 public:
  // kInvalidArgument unless element_size >= 1 and 1 <= key_count <= kMaxDomains (checked by
  // AddRun and Finish: the constructor cannot fail).
  DescriptorWriter(std::uint64_t element_size, std::size_t key_count);
  // `count` (>= 1) elements from `base`, `stride` (>= element size) apart, with `keys` (exactly
  // key_count of them). kInvalidArgument otherwise, or when the run's last byte would pass 2^64,
  // or the element count 2^64, or the run count 2^32 - 1.
  absl::Status AddRun(std::uint64_t base, std::uint64_t stride, std::uint64_t count,
                      std::span<const std::uint64_t> keys);
  // The bytes; kFailedPrecondition when no run was added (or an AddRun failed).
  absl::StatusOr<std::vector<std::byte>> Finish() const;

 private:
  std::uint64_t element_size_;
  std::size_t key_count_;
  std::uint64_t elements_ = 0;
  absl::Status error_;
  std::vector<std::byte> runs_;
  std::uint32_t run_count_ = 0;
};

// Elements [first, first + count) of `array` (the whole array by default), renumbered from 0,
// with the rkeys its chunks have in the pool's domains `domains` (by index, PoolOptions order).
// kInvalidArgument for an empty array, an empty or out-of-range subrange, no or too many domains,
// or a domain index the array's chunks do not have.
PINPOOL_EXPORT absl::StatusOr<std::vector<std::byte>> Describe(const Array& array,
                                                               std::span<const std::size_t> domains,
                                                               std::uint64_t first = 0,
                                                               std::uint64_t count = UINT64_MAX);
// Blocks of one size (each its own run of one element), with their chunks' rkeys in `domains`.
// kInvalidArgument for none, an empty block, blocks of different sizes, or a bad domain.
PINPOOL_EXPORT absl::StatusOr<std::vector<std::byte>> Describe(
    std::span<const Block> blocks, std::span<const std::size_t> domains);

// One range of whole elements of an array that a grant gives a peer, with the grant's key: what
// each provider's DescribeGrants makes of its grants (pinpool/verbs_remote_access.h,
// pinpool/fabric.h), and what a transport of your own describes its grants with.
struct GrantedRange {
  std::uint64_t address = 0;  // what the peer passes as the remote address of the first element
  std::uint64_t key = 0;
  std::uint64_t length = 0;  // bytes: whole strides of the array
};
// A descriptor of `ranges` of `array`'s elements, one run each, in order, with one key each;
// elements renumbered from 0. kInvalidArgument for an empty array, no ranges, or a range whose
// length is not a positive multiple of the array's stride (or one AddRun refuses).
PINPOOL_EXPORT absl::StatusOr<std::vector<std::byte>> DescribeRanges(
    const Array& array, std::span<const GrantedRange> ranges);

// A decoded, validated descriptor (the peer's side).
class PINPOOL_EXPORT Descriptor {
 public:
  // Errors: kInvalidArgument naming the first field that is wrong (length, magic, sizes, key
  // count, flags, a run's count, numbering, stride or address range, the element count);
  // kUnimplemented for a version this reader does not know.
  static absl::StatusOr<Descriptor> Decode(std::span<const std::byte> bytes);

  std::uint64_t size() const noexcept { return elements_; }  // elements
  std::uint64_t element_size() const noexcept { return element_size_; }
  std::size_t key_count() const noexcept { return key_count_; }
  std::span<const DescriptorRun> runs() const noexcept { return runs_; }
  // Element i: its remote address and keys; nullopt when i >= size(). O(1) for what Describe
  // and DescribeGrants write of an array (every run holds the same count but the first and the
  // last, which hold no more), O(log runs) for any other valid descriptor.
  std::optional<RemoteElement> Element(std::uint64_t i) const noexcept;

 private:
  std::uint64_t element_size_ = 0;
  std::uint64_t elements_ = 0;
  std::size_t key_count_ = 0;
  std::uint64_t uniform_count_ = 0;  // the count of every middle run when uniform, else 0
  std::vector<DescriptorRun> runs_;
};

PINPOOL_ABI_END
}  // namespace pinpool

#endif  // PINPOOL_DESCRIPTOR_H_
