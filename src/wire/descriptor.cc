// Compact descriptors (pinpool/descriptor.h): the writer, the Describe conveniences (by chunk
// keys, or by granted ranges: DescribeRanges), and the decoder that treats its input as
// untrusted. Byte order is written and read byte by byte, so the format is little endian whatever
// the host.
#include "pinpool/descriptor.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"
#include "util/check.h"
#include "wire/bytes.h"

namespace pinpool {
PINPOOL_ABI_BEGIN

namespace {

constexpr std::byte kMagic[4] = {std::byte{'P'}, std::byte{'P'}, std::byte{'D'}, std::byte{'S'}};

void Put(std::vector<std::byte>& out, std::uint64_t v, int bytes) {
  internal::ByteWriter(out).Put(v, bytes);
}

// The run's last byte, base + (count - 1) * stride + element_size - 1, fits 64 bits.
bool RunFits(std::uint64_t base, std::uint64_t stride, std::uint64_t count,
             std::uint64_t element_size) {
  std::uint64_t span = 0;
  std::uint64_t end = 0;
  return !__builtin_mul_overflow(count - 1, stride, &span) &&
         !__builtin_add_overflow(span, element_size - 1, &span) &&
         !__builtin_add_overflow(base, span, &end);
}

absl::Status Bad(const std::string& what) {
  return absl::InvalidArgumentError("descriptor: " + what);
}

}  // namespace

DescriptorWriter::DescriptorWriter(std::uint64_t element_size, std::size_t key_count)
    : element_size_(element_size), key_count_(key_count) {
  if (element_size == 0) error_ = Bad("element size 0");
  if (key_count == 0 || key_count > kMaxDomains) {
    error_ = Bad(absl::StrFormat("%zu keys per run (1 to %zu)", key_count, kMaxDomains));
  }
}

absl::Status DescriptorWriter::AddRun(std::uint64_t base, std::uint64_t stride, std::uint64_t count,
                                      std::span<const std::uint64_t> keys) {
  if (!error_.ok()) return error_;
  absl::Status s;
  std::uint64_t total = 0;
  if (count == 0) {
    s = Bad("a run of 0 elements");
  } else if (stride < element_size_) {
    s = Bad(absl::StrFormat("stride %u below the element size %u", stride, element_size_));
  } else if (keys.size() != key_count_) {
    s = Bad(absl::StrFormat("%zu keys for a descriptor of %zu", keys.size(), key_count_));
  } else if (!RunFits(base, stride, count, element_size_)) {
    s =
        Bad(absl::StrFormat("run at %#x of %u elements %u apart passes the end of the address "
                            "space",
                            base, count, stride));
  } else if (__builtin_add_overflow(elements_, count, &total) || run_count_ == UINT32_MAX - 1) {
    s = Bad("too many elements or runs");
  }
  if (!s.ok()) {
    error_ = s;
    return s;
  }
  Put(runs_, base, 8);
  Put(runs_, stride, 8);
  Put(runs_, elements_, 8);
  Put(runs_, count, 8);
  for (std::uint64_t k : keys) Put(runs_, k, 8);
  elements_ = total;
  ++run_count_;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::byte>> DescriptorWriter::Finish() const {
  if (!error_.ok()) return error_;
  if (run_count_ == 0) return absl::FailedPreconditionError("descriptor: no run added");
  std::vector<std::byte> out;
  out.reserve(kDescriptorHeaderBytes + runs_.size());
  out.insert(out.end(), std::begin(kMagic), std::end(kMagic));
  Put(out, kDescriptorVersion, 2);
  Put(out, kDescriptorHeaderBytes, 2);
  Put(out, DescriptorRunBytes(key_count_), 2);
  Put(out, key_count_, 2);
  Put(out, run_count_, 4);
  Put(out, element_size_, 8);
  Put(out, elements_, 8);
  Put(out, 0, 8);  // flags
  out.insert(out.end(), runs_.begin(), runs_.end());
  return out;
}

namespace {

// The keys of `chunk` for `domains` (checked against its domain count).
absl::Status ChunkKeys(const ChunkInfo& chunk, std::span<const std::size_t> domains,
                       std::uint64_t* keys) {
  for (std::size_t j = 0; j < domains.size(); ++j) {
    if (domains[j] >= chunk.domain_count) {
      return Bad(absl::StrFormat("domain %zu: the pool has %u", domains[j], chunk.domain_count));
    }
    keys[j] = ToUnderlying(chunk.keys[domains[j]].rkey);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::byte>> Describe(const Array& array,
                                                std::span<const std::size_t> domains,
                                                std::uint64_t first, std::uint64_t count) {
  if (!array) return Bad("an empty array");
  const std::vector<ArraySlice> slices = array.Slices(first, count);
  if (slices.empty()) {
    return Bad(
        absl::StrFormat("elements [%u, +%u) of an array of %zu", first, count, array.size()));
  }
  DescriptorWriter writer(array.element_size(), domains.size());
  std::uint64_t keys[kMaxDomains] = {};
  for (const ArraySlice& slice : slices) {
    const ArrayRun& run = array.runs()[slice.run];
    if (domains.size() <= kMaxDomains) {
      if (absl::Status s = ChunkKeys(*run.chunk, domains, keys); !s.ok()) return s;
    }
    const auto base = reinterpret_cast<std::uintptr_t>(run.base) + slice.offset;
    if (absl::Status s = writer.AddRun(base, array.stride(), slice.count,
                                       std::span<const std::uint64_t>(keys, domains.size()));
        !s.ok()) {
      return s;
    }
  }
  return writer.Finish();
}

absl::StatusOr<std::vector<std::byte>> Describe(std::span<const Block> blocks,
                                                std::span<const std::size_t> domains) {
  if (blocks.empty()) return Bad("no blocks");
  DescriptorWriter writer(blocks[0].size(), domains.size());
  std::uint64_t keys[kMaxDomains] = {};
  for (const Block& b : blocks) {
    if (!b) return Bad("an empty block");
    if (b.size() != blocks[0].size()) {
      return Bad(absl::StrFormat("blocks of %zu and %zu bytes: one size per descriptor",
                                 blocks[0].size(), b.size()));
    }
    if (domains.size() <= kMaxDomains) {
      if (absl::Status s = ChunkKeys(b.chunk(), domains, keys); !s.ok()) return s;
    }
    if (absl::Status s = writer.AddRun(reinterpret_cast<std::uintptr_t>(b.data()), b.size(), 1,
                                       std::span<const std::uint64_t>(keys, domains.size()));
        !s.ok()) {
      return s;
    }
  }
  return writer.Finish();
}

absl::StatusOr<std::vector<std::byte>> DescribeRanges(const Array& array,
                                                      std::span<const GrantedRange> ranges) {
  if (!array || ranges.empty()) return Bad("an empty array or no granted ranges");
  DescriptorWriter writer(array.element_size(), 1);
  for (const GrantedRange& r : ranges) {
    if (r.length == 0 || r.length % array.stride() != 0) {
      return Bad(absl::StrFormat("a granted range of %u bytes is not whole elements of stride %zu",
                                 r.length, array.stride()));
    }
    if (absl::Status s =
            writer.AddRun(r.address, array.stride(), r.length / array.stride(), {&r.key, 1});
        !s.ok()) {
      return s;
    }
  }
  return writer.Finish();
}

absl::StatusOr<Descriptor> Descriptor::Decode(std::span<const std::byte> in) {
  if (in.size() < kDescriptorHeaderBytes) {
    return Bad(absl::StrFormat("%zu bytes, shorter than the %zu-byte header", in.size(),
                               kDescriptorHeaderBytes));
  }
  if (std::memcmp(in.data(), kMagic, sizeof kMagic) != 0) return Bad("not a descriptor (magic)");
  internal::ByteReader r(in);
  r.Seek(sizeof kMagic);
  const std::uint64_t version = r.Get(2);
  if (version != kDescriptorVersion) {
    return absl::UnimplementedError(absl::StrFormat(
        "descriptor: version %u; this reader knows version %u", version, kDescriptorVersion));
  }
  const std::uint64_t header = r.Get(2);
  const std::uint64_t run_bytes = r.Get(2);
  const std::uint64_t keys = r.Get(2);
  const std::uint64_t runs = r.Get(4);
  Descriptor d;
  d.element_size_ = r.Get(8);
  d.elements_ = r.Get(8);
  const std::uint64_t flags = r.Get(8);
  if (header != kDescriptorHeaderBytes) return Bad(absl::StrFormat("header of %u bytes", header));
  if (keys == 0 || keys > kMaxDomains) return Bad(absl::StrFormat("%u keys per run", keys));
  if (run_bytes != DescriptorRunBytes(keys)) {
    return Bad(absl::StrFormat("runs of %u bytes for %u keys", run_bytes, keys));
  }
  if (flags != 0) return Bad(absl::StrFormat("flags %#x (none are defined)", flags));
  if (runs == 0) return Bad("no runs");
  if (d.element_size_ == 0) return Bad("element size 0");
  // runs < 2^32 and run_bytes <= 96: no overflow.
  if (in.size() != kDescriptorHeaderBytes + runs * run_bytes) {
    return Bad(absl::StrFormat("%zu bytes for %u runs of %u bytes", in.size(), runs, run_bytes));
  }
  d.key_count_ = keys;
  d.runs_.resize(runs);
  std::uint64_t next = 0;
  for (std::uint64_t i = 0; i < runs; ++i) {
    DescriptorRun& run = d.runs_[i];
    r.Seek(kDescriptorHeaderBytes + i * run_bytes);
    run.base = r.Get(8);
    run.stride = r.Get(8);
    run.first = r.Get(8);
    run.count = r.Get(8);
    for (std::uint64_t k = 0; k < keys; ++k) run.keys[k] = r.Get(8);
    PINPOOL_DCHECK(r.ok());  // the length test above makes every run fit
    if (run.count == 0) return Bad(absl::StrFormat("run %u has no elements", i));
    if (run.first != next) {
      return Bad(absl::StrFormat("run %u starts at element %u, not %u", i, run.first, next));
    }
    if (run.stride < d.element_size_) {
      return Bad(absl::StrFormat("run %u: stride %u below the element size %u", i, run.stride,
                                 d.element_size_));
    }
    if (!RunFits(run.base, run.stride, run.count, d.element_size_)) {
      return Bad(absl::StrFormat("run %u passes the end of the address space", i));
    }
    if (__builtin_add_overflow(next, run.count, &next)) {
      return Bad(absl::StrFormat("run %u: the element count overflows", i));
    }
  }
  if (next != d.elements_) {
    return Bad(absl::StrFormat("the runs hold %u elements, the header says %u", next, d.elements_));
  }
  // An array's runs (or a subrange's) all hold the same count but the first and the last, which
  // hold no more: then Element finds the run by one division.
  const std::size_t n = d.runs_.size();
  d.uniform_count_ = n >= 3 ? d.runs_[1].count : 0;
  for (std::size_t r = 1; r < n && d.uniform_count_ != 0; ++r) {
    if (r + 1 < n ? d.runs_[r].count != d.uniform_count_ : d.runs_[r].count > d.uniform_count_) {
      d.uniform_count_ = 0;
    }
  }
  return d;
}

std::optional<RemoteElement> Descriptor::Element(std::uint64_t i) const noexcept {
  if (i >= elements_) return std::nullopt;
  const DescriptorRun* run;
  if (i < runs_[0].count) {
    run = &runs_[0];
  } else if (uniform_count_ != 0) {
    run = &runs_[1 + (i - runs_[0].count) / uniform_count_];
  } else {
    // The last run starting at or before i (runs are numbered without gaps, from 0).
    run = &*(std::upper_bound(runs_.begin(), runs_.end(), i,
                              [](std::uint64_t v, const DescriptorRun& r) { return v < r.first; }) -
             1);
  }
  return RemoteElement{run->base + (i - run->first) * run->stride, element_size_, run->keys};
}

PINPOOL_ABI_END
}  // namespace pinpool
