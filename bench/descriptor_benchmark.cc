// Compact descriptors (pinpool/descriptor.h) against one (address, rkey, length) entry per
// element, in one run, for arrays of 10^3, 10^5 and 10^6 elements of 4 KiB in 64 MiB chunks:
//
//   encode/N            Describe(array, {domain 0}): a descriptor of the whole array
//   encode_per_elem/N   the baseline: a 16-byte (u64 address, u32 rkey, u32 length) entry per
//                       element, from Array::Element
//   decode/N            Descriptor::Decode of those bytes (every field checked)
//   decode_per_elem/N   the baseline: copying 16 N bytes of entries into a vector of structs
//   lookup/N            Descriptor::Element(i), i random: a peer's address and key for a page
//   lookup_per_elem/N   the baseline: a load from the per-element table
//   array_element/N     Array::Element(i), i random: the owner's address and keys
// Counters: descriptor_bytes (what the peer is sent) and per_elem_bytes (16 N).
//
// The pool uses a do-nothing domain (fake keys, no pinning) and does not populate its chunks, so
// 10^6 elements (3.8 GiB) only reserve address space: what is measured is the encoding, not the
// memory. scripts/run-benchmarks.sh-style use: run with --benchmark_repetitions and read medians.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "bench_pool.h"
#include "pinpool/descriptor.h"
#include "pinpool/domain.h"
#include "pinpool/pool.h"

namespace {

using pinpool::Array;

// Registers nothing: keys made up from the address.
class NoopDomain final : public pinpool::Domain {
 public:
  pinpool::DomainKind kind() const noexcept override { return pinpool::DomainKind::kCustom; }
  std::string name() const override { return "noop"; }
  pinpool::Pinning pinning() const noexcept override { return pinpool::Pinning::kNone; }
  absl::StatusOr<pinpool::Keys> Register(void* base, std::size_t length) override {
    pinpool::Keys k;
    k.base = reinterpret_cast<std::uintptr_t>(base);
    k.length = length;
    k.rkey = pinpool::RKey{static_cast<std::uint32_t>(k.base >> 26)};
    k.lkey = pinpool::LKey{static_cast<std::uint32_t>(k.base >> 26)};
    return k;
  }
  void Deregister(const pinpool::Keys&) noexcept override {}
};

pinpool::Pool& ThePool() {
  static pinpool::Pool& pool = []() -> pinpool::Pool& {
    pinpool::PoolOptions o;
    o.chunk_size = 64 * pinpool::kMiB;
    o.budget = 8 * pinpool::kGiB;
    o.page_size = pinpool::PageSize::k4K;
    o.populate = false;
    o.domains = {std::make_shared<NoopDomain>()};
    return pinpool::bench::LeakedPool(std::move(o));
  }();
  return pool;
}

const Array& ArrayOf(std::size_t n) {
  static std::map<std::size_t, Array> arrays;
  auto it = arrays.find(n);
  if (it == arrays.end()) {
    absl::StatusOr<Array> a = ThePool().AllocateArray(n, 4096, 4096);
    if (!a.ok()) {
      std::fprintf(stderr, "AllocateArray: %s\n", a.status().ToString().c_str());
      std::abort();
    }
    it = arrays.emplace(n, std::move(*a)).first;
  }
  return it->second;
}

constexpr std::size_t kDomain0[] = {0};

struct Entry {  // one element, as a peer gets it without descriptors
  std::uint64_t address;
  std::uint32_t rkey;
  std::uint32_t length;
};
static_assert(sizeof(Entry) == 16);

std::vector<Entry> PerElement(const Array& a) {
  std::vector<Entry> out(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    const pinpool::Block e = a.Element(i);
    out[i] = {reinterpret_cast<std::uintptr_t>(e.data()), pinpool::ToUnderlying(e.rkey()),
              static_cast<std::uint32_t>(e.size())};
  }
  return out;
}

std::vector<std::uint64_t> RandomIndices(std::size_t n) {
  std::mt19937_64 rng(42);
  std::vector<std::uint64_t> out(4096);
  for (auto& i : out) i = rng() % n;
  return out;
}

void SetBytes(benchmark::State& state, const Array& a) {
  state.counters["descriptor_bytes"] = static_cast<double>(Describe(a, kDomain0)->size());
  state.counters["per_elem_bytes"] = static_cast<double>(a.size() * sizeof(Entry));
}

void BM_Encode(benchmark::State& state) {
  const Array& a = ArrayOf(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(Describe(a, kDomain0));
  SetBytes(state, a);
}

void BM_EncodePerElement(benchmark::State& state) {
  const Array& a = ArrayOf(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(PerElement(a));
  SetBytes(state, a);
}

void BM_Decode(benchmark::State& state) {
  const Array& a = ArrayOf(static_cast<std::size_t>(state.range(0)));
  const std::vector<std::byte> bytes = Describe(a, kDomain0).value();
  for (auto _ : state) benchmark::DoNotOptimize(pinpool::Descriptor::Decode(bytes));
  SetBytes(state, a);
}

void BM_DecodePerElement(benchmark::State& state) {
  const Array& a = ArrayOf(static_cast<std::size_t>(state.range(0)));
  const std::vector<Entry> entries = PerElement(a);
  std::vector<std::byte> wire(entries.size() * sizeof(Entry));
  std::memcpy(wire.data(), entries.data(), wire.size());
  for (auto _ : state) {
    std::vector<Entry> got(wire.size() / sizeof(Entry));
    std::memcpy(got.data(), wire.data(), wire.size());
    benchmark::DoNotOptimize(got.data());
  }
  SetBytes(state, a);
}

void BM_Lookup(benchmark::State& state) {
  const Array& a = ArrayOf(static_cast<std::size_t>(state.range(0)));
  const pinpool::Descriptor d = pinpool::Descriptor::Decode(Describe(a, kDomain0).value()).value();
  const std::vector<std::uint64_t> idx = RandomIndices(a.size());
  std::size_t k = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(d.Element(idx[k++ & 4095])->address);
  }
}

void BM_LookupPerElement(benchmark::State& state) {
  const Array& a = ArrayOf(static_cast<std::size_t>(state.range(0)));
  const std::vector<Entry> entries = PerElement(a);
  const std::vector<std::uint64_t> idx = RandomIndices(a.size());
  std::size_t k = 0;
  for (auto _ : state) benchmark::DoNotOptimize(entries[idx[k++ & 4095]].address);
}

void BM_ArrayElement(benchmark::State& state) {
  const Array& a = ArrayOf(static_cast<std::size_t>(state.range(0)));
  const std::vector<std::uint64_t> idx = RandomIndices(a.size());
  std::size_t k = 0;
  for (auto _ : state) benchmark::DoNotOptimize(a.Element(idx[k++ & 4095]).data());
}

void Sizes(benchmark::internal::Benchmark* b) { b->Arg(1'000)->Arg(100'000)->Arg(1'000'000); }

BENCHMARK(BM_Encode)->Name("encode")->Apply(Sizes)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_EncodePerElement)
    ->Name("encode_per_elem")
    ->Apply(Sizes)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Decode)->Name("decode")->Apply(Sizes)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DecodePerElement)
    ->Name("decode_per_elem")
    ->Apply(Sizes)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Lookup)->Name("lookup")->Apply(Sizes);
BENCHMARK(BM_LookupPerElement)->Name("lookup_per_elem")->Apply(Sizes);
BENCHMARK(BM_ArrayElement)->Name("array_element")->Apply(Sizes);

}  // namespace

BENCHMARK_MAIN();
