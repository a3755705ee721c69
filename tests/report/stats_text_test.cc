// PoolStats: the derived figures (memlock headroom, fragmentation) and the two printed forms.
// ToJson must parse, carry every field with the value the struct holds, give each chunk the keys
// its domains really returned (checked against a counting fake domain), and say null where a
// limit does not apply or a key does not exist for the domain's kind. Pinned (long-term, VmPin)
// and locked (mlock, VmLck) bytes are kept apart, for the pool and for the process.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pinpool/pool.h"
#include "support/counting_domain.h"
#include "support/json_parse.h"

namespace pinpool {
namespace {

using testing::CountingDomain;
using ::testing::HasSubstr;
using testing::JsonValue;
using testing::ParseOrFail;

// `v[key]` is present and holds exactly `expected`.
void ExpectUint(const JsonValue& v, const char* key, std::uint64_t expected) {
  ASSERT_TRUE(v.Has(key)) << "missing field " << key;
  EXPECT_EQ(v[key].Uint(), expected) << key << " is " << v[key].text;
}

TEST(StatsJsonTest, ParsesAndHoldsEveryFieldOfARealPool) {
  auto plain = std::make_shared<CountingDomain>("fake-a");
  auto pinning = std::make_shared<CountingDomain>("fake-b", Pinning::kLongTerm);
  PoolOptions o;
  o.chunk_size = 2 * kMiB;
  o.budget = 8 * kMiB;
  o.initial_size = 4 * kMiB;
  o.page_size = PageSize::k4K;
  o.domains = {plain, pinning};
  auto pool = Pool::Create(o).value();
  std::vector<Block> blocks;
  for (int i = 0; i < 10; ++i) blocks.push_back(pool->Allocate(1000));
  blocks.push_back(pool->Allocate(1 * kMiB));
  for (const Block& b : blocks) ASSERT_TRUE(b);

  const PoolStats s = pool->GetStats();
  const JsonValue v = ParseOrFail(s.ToJson());
  ASSERT_EQ(v.type, JsonValue::Type::kObject);

  // Against the pool as configured...
  EXPECT_EQ(v["mapped_bytes"].Uint(), 4 * kMiB);
  EXPECT_EQ(v["budget_bytes"].Uint(), 8 * kMiB);
  EXPECT_EQ(v["pinned_bytes"].Uint(), 4 * kMiB);  // fake-b claims a long-term pin
  EXPECT_EQ(v["locked_bytes"].Uint(), 0u);        // and nothing claims mlock
  EXPECT_EQ(v["growths"].Uint(), 2u);
  EXPECT_EQ(v["growth_failures"].Uint(), 0u);
  EXPECT_GE(*v["live_bytes"].Uint(), 10 * 1000 + kMiB);
  EXPECT_GE(*v["thread_caches"].Uint(), 1u);
  // ...and field by field against the snapshot it was printed from.
  ExpectUint(v, "reserved_bytes", s.reserved_bytes);
  ExpectUint(v, "live_bytes", s.live_bytes);
  ExpectUint(v, "cached_bytes", s.cached_bytes);
  ExpectUint(v, "heap_active_bytes", s.heap_active_bytes);
  ExpectUint(v, "thread_caches", s.thread_caches);
  ExpectUint(v, "pinned_bytes", s.pinned_bytes);
  ExpectUint(v, "locked_bytes", s.locked_bytes);
  ExpectUint(v, "process_pinned_bytes", s.process_pinned_bytes);
  ExpectUint(v, "process_locked_bytes", s.process_locked_bytes);
  ASSERT_TRUE(v.Has("memlock_exempt"));
  EXPECT_EQ(v["memlock_exempt"].boolean, s.memlock_exempt);
  ASSERT_TRUE(v.Has("memlock_limit"));
  if (s.memlock_limit == SIZE_MAX) {
    EXPECT_TRUE(v["memlock_limit"].is_null());
  } else {
    ExpectUint(v, "memlock_limit", s.memlock_limit);
  }
  for (const auto& [key, headroom] : {std::pair{"pin_headroom", s.pin_headroom()},
                                      std::pair{"lock_headroom", s.lock_headroom()}}) {
    ASSERT_TRUE(v.Has(key));
    if (headroom) {
      ExpectUint(v, key, *headroom);
    } else {
      EXPECT_TRUE(v[key].is_null()) << key;
    }
  }
  EXPECT_DOUBLE_EQ(v["heap_fragmentation"].Number(), s.heap_fragmentation());
  EXPECT_DOUBLE_EQ(v["heap_fragmentation"].Number(),
                   1 - static_cast<double>(s.live_bytes + s.cached_bytes) / s.heap_active_bytes);
  ExpectUint(v, "mapped_unused_bytes", s.mapped_bytes - s.live_bytes - s.cached_bytes);
  EXPECT_DOUBLE_EQ(
      v["mapped_unused_fraction"].Number(),
      static_cast<double>(s.mapped_bytes - s.live_bytes - s.cached_bytes) / s.mapped_bytes);

  ASSERT_EQ(v["chunks"].array.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    const JsonValue& c = v["chunks"][i];
    ExpectUint(c, "index", s.chunks[i].index);
    ExpectUint(c, "base", s.chunks[i].base);
    ExpectUint(c, "size", 2 * kMiB);
    EXPECT_EQ(c["page_size"].text, "4K");
    ExpectUint(c, "huge_bytes", 0);
  }

  ASSERT_EQ(v["domains"].array.size(), 2u);
  const char* names[] = {"fake-a", "fake-b"};
  for (std::size_t d = 0; d < 2; ++d) {
    const JsonValue& j = v["domains"][d];
    ExpectUint(j, "index", d);
    EXPECT_EQ(j["name"].text, names[d]);
    EXPECT_EQ(j["kind"].text, "custom");
    EXPECT_EQ(j["pinning"].text, d == 0 ? "none" : "long-term");
    ExpectUint(j, "registrations", 2);
    ExpectUint(j, "registered_bytes", 4 * kMiB);
    EXPECT_DOUBLE_EQ(j["register_seconds"].Number(), s.domains[d].register_seconds);
    EXPECT_DOUBLE_EQ(j["max_register_seconds"].Number(), s.domains[d].max_register_seconds);
    EXPECT_GT(j["max_register_seconds"].Number(), 0);
    EXPECT_DOUBLE_EQ(j["mean_register_seconds"].Number(), s.domains[d].register_seconds / 2);
  }
  for (const Block& b : blocks) pool->Deallocate(b);
}

TEST(StatsJsonTest, EachChunkCarriesTheKeysItsDomainsReturned) {
  auto a = std::make_shared<CountingDomain>("fake-a");
  auto b = std::make_shared<CountingDomain>("fake-b");
  PoolOptions o;
  o.chunk_size = 2 * kMiB;
  o.budget = 8 * kMiB;
  o.initial_size = 6 * kMiB;
  o.page_size = PageSize::k4K;
  o.domains = {a, b};
  auto pool = Pool::Create(o).value();
  const PoolStats s = pool->GetStats();
  const JsonValue v = ParseOrFail(s.ToJson());
  ASSERT_EQ(v["chunks"].array.size(), 3u);
  const std::shared_ptr<CountingDomain> domains[] = {a, b};
  for (std::size_t i = 0; i < 3; ++i) {
    const JsonValue& chunk = v["chunks"][i];
    const std::uint64_t base = *chunk["base"].Uint();
    ASSERT_EQ(s.chunks[i].keys.size(), 2u);
    ASSERT_EQ(chunk["registrations"].array.size(), 2u);
    for (std::size_t d = 0; d < 2; ++d) {
      Keys real;
      ASSERT_TRUE(domains[d]->KeysFor(base, &real)) << "chunk " << i << " not in domain " << d;
      const JsonValue& r = chunk["registrations"][d];
      ExpectUint(r, "domain", d);
      ExpectUint(r, "base", real.base);
      ExpectUint(r, "length", real.length);
      // A custom domain's keys may be any of them: all three are printed.
      ExpectUint(r, "lkey", ToUnderlying(real.lkey));
      ExpectUint(r, "rkey", ToUnderlying(real.rkey));
      ExpectUint(r, "buffer_index", ToUnderlying(real.buffer_index));
    }
  }
}

// Hand-made stats: the kinds of domain and the limits the machine running the test may not have.
PoolStats MadeUp() {
  PoolStats s;
  s.mapped_bytes = 8 * kMiB;
  s.live_bytes = 2 * kMiB;
  s.cached_bytes = 1 * kMiB;
  s.heap_active_bytes = 4 * kMiB;
  s.memlock_limit = 8 * kMiB;
  s.pinned_bytes = 2 * kMiB;
  s.locked_bytes = 2 * kMiB;
  s.process_locked_bytes = 1 * kMiB;
  s.process_pinned_bytes = 3 * kMiB;
  s.domains = {{"mlock (resident, not pinned)", DomainKind::kHost, Pinning::kResident, 1, 2 * kMiB,
                0.001, 0.001},
               {"rxe0/pd0", DomainKind::kVerbs, Pinning::kLongTerm, 1, 2 * kMiB, 0.002, 0.002},
               {"io_uring/fd3", DomainKind::kIoUring, Pinning::kLongTerm, 0, 0, 0, 0}};
  ChunkStats c;
  c.base = 0x7f0000000000;
  c.size = 2 * kMiB;
  c.page_size = PageSize::k2M;
  c.huge_bytes = 2 * kMiB;
  Keys host, verbs, ring;
  verbs.lkey = LKey{0x1234};
  verbs.rkey = RKey{0x5678};
  ring.buffer_index = BufferIndex{7};
  c.keys = {host, verbs, ring};
  s.chunks = {c};
  return s;
}

TEST(StatsDerivedTest, MemlockHeadroomIsTheLimitMinusEachCounterOnItsOwn) {
  PoolStats s = MadeUp();
  EXPECT_EQ(s.pin_headroom(), 5 * kMiB);   // 8 - VmPin 3
  EXPECT_EQ(s.lock_headroom(), 7 * kMiB);  // 8 - VmLck 1
  s.process_locked_bytes = 6 * kMiB;
  EXPECT_EQ(s.pin_headroom(), 5 * kMiB) << "mlock does not use up what can be pinned";
  EXPECT_EQ(s.lock_headroom(), 2 * kMiB);
  s.process_pinned_bytes = 9 * kMiB;
  EXPECT_EQ(s.pin_headroom(), 0u) << "over the limit is no headroom, not a wrap-around";
  s.memlock_exempt = true;
  EXPECT_EQ(s.pin_headroom(), std::nullopt);
  EXPECT_EQ(s.lock_headroom(), std::nullopt);
  s.memlock_exempt = false;
  s.memlock_limit = SIZE_MAX;
  EXPECT_EQ(s.pin_headroom(), std::nullopt);
  const JsonValue v = ParseOrFail(s.ToJson());
  EXPECT_TRUE(v["memlock_limit"].is_null()) << "unlimited must be null, not SIZE_MAX";
  EXPECT_TRUE(v["pin_headroom"].is_null());
  EXPECT_TRUE(v["lock_headroom"].is_null());
  const JsonValue made_up = ParseOrFail(MadeUp().ToJson());
  EXPECT_EQ(made_up["pin_headroom"].Uint(), 5 * kMiB);
  EXPECT_EQ(made_up["lock_headroom"].Uint(), 7 * kMiB);
}

TEST(StatsDerivedTest, FragmentationOfTheHeapAndOfWhatIsMapped) {
  PoolStats s = MadeUp();
  EXPECT_DOUBLE_EQ(s.heap_fragmentation(), 0.25);  // 3 MiB of 4 MiB active in blocks
  EXPECT_EQ(s.mapped_unused_bytes(), 5 * kMiB);
  EXPECT_DOUBLE_EQ(s.mapped_unused_fraction(), 5.0 / 8);
  s.cached_bytes = 512 * kKiB;
  s.grants.held_bytes = 512 * kKiB;  // held blocks are in blocks too: the same figures
  EXPECT_DOUBLE_EQ(s.heap_fragmentation(), 0.25);
  EXPECT_EQ(s.mapped_unused_bytes(), 5 * kMiB);
  s.heap_active_bytes = 0;
  s.live_bytes = s.cached_bytes = 0;
  s.mapped_bytes = 0;
  EXPECT_EQ(s.heap_fragmentation(), 0);
  EXPECT_EQ(s.mapped_unused_fraction(), 0);
  s.live_bytes = 2 * kMiB;  // more than active (a racy snapshot): never negative
  s.heap_active_bytes = 1 * kMiB;
  EXPECT_EQ(s.heap_fragmentation(), 0);
  EXPECT_EQ(s.mapped_unused_bytes(), 0u);
}

TEST(StatsJsonTest, KeysAreNullWhereTheDomainKindHasNone) {
  const JsonValue v = ParseOrFail(MadeUp().ToJson());
  const JsonValue& regs = v["chunks"][0]["registrations"];
  ASSERT_EQ(regs.array.size(), 3u);
  for (const char* key : {"lkey", "rkey", "buffer_index"}) {
    EXPECT_TRUE(regs[0].Has(key));
    EXPECT_TRUE(regs[0][key].is_null()) << "a host domain has no " << key;
  }
  EXPECT_EQ(regs[1]["lkey"].Uint(), 0x1234u);
  EXPECT_EQ(regs[1]["rkey"].Uint(), 0x5678u);
  EXPECT_TRUE(regs[1]["buffer_index"].is_null());
  EXPECT_TRUE(regs[2]["lkey"].is_null());
  EXPECT_EQ(regs[2]["buffer_index"].Uint(), 7u);
  EXPECT_EQ(v["chunks"][0]["page_size"].text, "2M");
  EXPECT_EQ(v["domains"][0]["kind"].text, "host");
  EXPECT_EQ(v["domains"][0]["pinning"].text, "resident");
  EXPECT_EQ(v["domains"][1]["kind"].text, "verbs");
  EXPECT_EQ(v["domains"][1]["pinning"].text, "long-term");
  EXPECT_EQ(v["domains"][2]["kind"].text, "io_uring");
  EXPECT_TRUE(v["domains"][2]["mean_register_seconds"].is_null()) << "no registration, no mean";
}

TEST(StatsJsonTest, EmptyStatsAreValidJson) {
  const JsonValue v = ParseOrFail(PoolStats{}.ToJson());
  EXPECT_TRUE(v["chunks"].array.empty());
  EXPECT_TRUE(v["domains"].array.empty());
  EXPECT_EQ(v["heap_fragmentation"].Number(), 0);
}

// The value ToString gives `name` on its own line ("  name   value   help"), or "" without one.
std::string LineValue(const std::string& text, const std::string& name) {
  const std::string head = "\n  " + name + " ";
  const std::size_t at = text.find(head);
  if (at == std::string::npos) return "";
  const std::size_t value = text.find_first_not_of(' ', at + head.size());
  const std::size_t end = text.find("  ", value);
  return text.substr(value, end - value);
}

TEST(StatsStringTest, SaysHeadroomFragmentationAndEachChunksKeys) {
  const std::string text = MadeUp().ToString();
  EXPECT_EQ(LineValue(text, "pin_headroom"), "5 MiB") << text;
  EXPECT_EQ(LineValue(text, "lock_headroom"), "7 MiB");
  EXPECT_EQ(LineValue(text, "heap_fragmentation"), "25.0%");
  EXPECT_EQ(LineValue(text, "mapped_unused_bytes"), "5 MiB");
  EXPECT_EQ(LineValue(text, "mapped_unused_fraction"), "62.5%");
  EXPECT_THAT(text, HasSubstr("rxe0/pd0 lkey 0x1234 rkey 0x5678"));
  EXPECT_THAT(text, HasSubstr("io_uring/fd3 buffer 7"));
  EXPECT_THAT(text, HasSubstr("mlock (resident, not pinned) (no keys)"));
  PoolStats exempt = MadeUp();
  exempt.memlock_exempt = true;
  EXPECT_EQ(LineValue(exempt.ToString(), "pin_headroom"), "no limit");
  EXPECT_EQ(LineValue(exempt.ToString(), "memlock_exempt"), "yes");
}

TEST(StatsStringTest, SaysWhatIsPinnedAndWhatIsOnlyLockedAndWhatEachDomainDoes) {
  const std::string text = MadeUp().ToString();
  EXPECT_EQ(LineValue(text, "pinned_bytes"), "2 MiB");
  EXPECT_EQ(LineValue(text, "locked_bytes"), "2 MiB");
  EXPECT_EQ(LineValue(text, "process_pinned_bytes"), "3 MiB");
  EXPECT_EQ(LineValue(text, "process_locked_bytes"), "1 MiB");
  EXPECT_THAT(text, HasSubstr("domain mlock (resident, not pinned): kind host, pinning [resident, "
                              "not pinned: the physical address may change; not for DMA],"));
  EXPECT_THAT(text, HasSubstr("domain rxe0/pd0: kind verbs, pinning [long-term pinned: physical "
                              "addresses fixed (counted in VmPin)],"));
  EXPECT_THAT(text, HasSubstr("mean_register_seconds none yet"))
      << "io_uring/fd3 registered nothing";
  EXPECT_THAT(text, HasSubstr("\ngrants: all zero\n"));
}

TEST(StatsTest, APoolOnTheDefaultDomainCountsItsChunksAsPinnedNotLocked) {
  PoolOptions o;
  o.chunk_size = 2 * kMiB;
  o.budget = 8 * kMiB;
  o.initial_size = 4 * kMiB;
  auto pool = Pool::Create(o).value();
  const PoolStats s = pool->GetStats();
  EXPECT_EQ(s.pinned_bytes, 4 * kMiB);
  EXPECT_EQ(s.locked_bytes, 0u);
  EXPECT_GE(s.process_pinned_bytes, 4 * kMiB);
  ASSERT_EQ(s.domains.size(), 1u);
  EXPECT_EQ(s.domains[0].name, "long-term pin");
  EXPECT_EQ(s.domains[0].kind, DomainKind::kHost);
  EXPECT_EQ(s.domains[0].pinning, Pinning::kLongTerm);
  const JsonValue v = ParseOrFail(s.ToJson());
  EXPECT_EQ(v["domains"][0]["pinning"].text, "long-term");
  EXPECT_TRUE(v["chunks"][0]["registrations"][0]["buffer_index"].is_null())
      << "the default domain's private ring slots are not keys anyone can use";

  PoolOptions resident = o;
  resident.domains = {MakeResidentNotPinnedDomain()};
  const PoolStats r = Pool::Create(resident).value()->GetStats();
  EXPECT_EQ(r.pinned_bytes, 0u) << "mlocked bytes are not pinned";
  EXPECT_EQ(r.locked_bytes, 4 * kMiB);
  EXPECT_EQ(r.domains[0].pinning, Pinning::kResident);
}

}  // namespace
}  // namespace pinpool
