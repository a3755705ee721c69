// libFuzzer target: the descriptor decoder (pinpool/descriptor.h) on untrusted bytes.
//
// The first byte picks the input's shape: even, the rest is decoded as it is (random bytes; the
// committed corpus, tests/fuzz/descriptor_corpus, holds valid descriptors with a 0 before them, so
// libFuzzer's own mutations start from real ones); odd, the rest drives a DescriptorWriter to a
// valid descriptor (element size, key count, runs of any base, stride and count the writer
// accepts), which must decode to exactly what was written, and then overwrites a few of its bytes
// at chosen offsets (a structure-aware mutation: every field gets hit, not only the first bytes).
//
// Checked for every descriptor the decoder accepts: the runs number the elements from 0 without
// gap and their counts add up to size(); for each run's first and last element, and for indices
// the input picks, Element(i) lies in the run holding i (found by a linear walk, independently of
// the decoder's binary search) and its last byte does not pass 2^64; Element(size()) and beyond are
// refused. A violation traps. The decoder must never crash or read past its span (ASan).
//
// Build and run: the `fuzz` preset (clang), `ctest --preset fuzz`, or
//   build-fuzz/tests/fuzz/descriptor_fuzzer -max_total_time=60 scratch/
//   tests/fuzz/descriptor_corpus/
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "pinpool/descriptor.h"

namespace {

using pinpool::Descriptor;
using pinpool::DescriptorRun;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

// The run holding element i, by walking the runs (not the decoder's search).
const DescriptorRun* RunOf(const Descriptor& d, std::uint64_t i) {
  for (const DescriptorRun& r : d.runs()) {
    if (i >= r.first && i - r.first < r.count) return &r;
  }
  return nullptr;
}

void CheckElement(const Descriptor& d, std::uint64_t i) {
  const auto e = d.Element(i);
  if (i >= d.size()) {
    Check(!e.has_value());
    return;
  }
  Check(e.has_value());
  const DescriptorRun* r = RunOf(d, i);
  Check(r != nullptr);
  Check(e->length == d.element_size());
  Check(e->address >= r->base);
  Check((e->address - r->base) % r->stride == 0);
  Check((e->address - r->base) / r->stride == i - r->first);
  std::uint64_t last = 0;
  Check(!__builtin_add_overflow(e->address, d.element_size() - 1, &last));
  Check(e->keys == r->keys);
}

void CheckDescriptor(const Descriptor& d, FuzzedDataProvider& in) {
  std::uint64_t next = 0;
  for (const DescriptorRun& r : d.runs()) {
    Check(r.first == next && r.count != 0 && r.stride >= d.element_size());
    next += r.count;
  }
  Check(next == d.size());
  Check(d.key_count() >= 1 && d.key_count() <= pinpool::kMaxDomains);
  for (const DescriptorRun& r : d.runs()) {
    CheckElement(d, r.first);
    CheckElement(d, r.first + r.count - 1);
  }
  CheckElement(d, d.size());
  CheckElement(d, UINT64_MAX);
  for (int k = 0; k < 16 && in.remaining_bytes() != 0; ++k) {
    CheckElement(d, in.ConsumeIntegral<std::uint64_t>() % (d.size() + 2));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  FuzzedDataProvider in(data + 1, size - 1);
  if ((data[0] & 1) == 0) {
    const std::vector<std::uint8_t> bytes = in.ConsumeBytes<std::uint8_t>(in.remaining_bytes());
    const auto d = Descriptor::Decode(
        std::span(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()));
    if (d.ok()) {
      FuzzedDataProvider none(nullptr, 0);
      CheckDescriptor(*d, none);
    }
    return 0;
  }
  // A valid descriptor from the input, then a few bytes of it overwritten.
  const std::uint64_t element_size = in.ConsumeIntegralInRange<std::uint64_t>(0, 1 << 20);
  const std::size_t keys = in.ConsumeIntegralInRange<std::size_t>(0, pinpool::kMaxDomains + 1);
  pinpool::DescriptorWriter w(element_size, keys);
  const int runs = in.ConsumeIntegralInRange<int>(0, 64);
  std::vector<DescriptorRun> written;
  for (int r = 0; r < runs; ++r) {
    DescriptorRun run;
    run.base = in.ConsumeBool() ? in.ConsumeIntegral<std::uint64_t>()
                                : in.ConsumeIntegral<std::uint32_t>() * std::uint64_t{4096};
    run.stride = element_size + in.ConsumeIntegralInRange<std::uint64_t>(0, 4096);
    run.count = in.ConsumeBool() ? in.ConsumeIntegral<std::uint64_t>()
                                 : in.ConsumeIntegralInRange<std::uint64_t>(0, 1 << 16);
    std::uint64_t k[pinpool::kMaxDomains] = {};
    for (std::size_t j = 0; j < keys && j < pinpool::kMaxDomains; ++j) {
      k[j] = run.keys[j] = in.ConsumeIntegral<std::uint32_t>();
    }
    if (w.AddRun(run.base, run.stride, run.count,
                 std::span<const std::uint64_t>(k, keys <= pinpool::kMaxDomains ? keys : 0))
            .ok()) {
      written.push_back(run);
    } else {
      break;  // the writer refuses everything after a refusal
    }
  }
  auto bytes = w.Finish();
  if (!bytes.ok()) return 0;
  {
    // What the writer wrote decodes, and to exactly that.
    const auto d = Descriptor::Decode(*bytes);
    Check(d.ok());
    Check(d->runs().size() == written.size());
    for (std::size_t r = 0; r < written.size(); ++r) {
      Check(d->runs()[r].base == written[r].base && d->runs()[r].stride == written[r].stride &&
            d->runs()[r].count == written[r].count);
      for (std::size_t j = 0; j < keys; ++j) Check(d->runs()[r].keys[j] == written[r].keys[j]);
    }
    CheckDescriptor(*d, in);
  }
  for (int m = in.ConsumeIntegralInRange<int>(0, 4); m > 0; --m) {
    const std::size_t at = in.ConsumeIntegralInRange<std::size_t>(0, bytes->size() - 1);
    (*bytes)[at] = static_cast<std::byte>(in.ConsumeIntegral<std::uint8_t>());
  }
  if (in.ConsumeBool()) bytes->resize(in.ConsumeIntegralInRange<std::size_t>(0, bytes->size()));
  const auto d = Descriptor::Decode(*bytes);
  if (d.ok()) CheckDescriptor(*d, in);
  return 0;
}
