// PoolStats from a program built against an earlier release (docs/abi.md, "PoolStats grows
// without breaking old callers"; src/report/stats_size.h): a PoolStats whose struct_size ends
// before its last members plays one. Pool::FillStats writes none of the members past it, the
// printers read none of them (they print the defaults), and a whole PoolStats is filled and
// printed whole.
#include "report/stats_size.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <memory>
#include <string>

#include "pinpool/pool.h"
#include "pinpool/stats.h"
#include "support/make_pool.h"

namespace pinpool {
namespace {

// Where member `m` of a PoolStats begins: a caller compiled before `m` was added ends there.
template <typename M>
std::uint32_t EndsBefore(M PoolStats::*m) {
  PoolStats s;
  return static_cast<std::uint32_t>(reinterpret_cast<const char*>(&(s.*m)) -
                                    reinterpret_cast<const char*>(&s));
}

TEST(StatsSize, TheLibraryFillsOnlyTheMembersTheCallerKnows) {
  std::unique_ptr<Pool> pool = testing::MakePool({.initial_size = 2 * kMiB});
  ASSERT_NE(pool, nullptr);
  PoolStats old;
  old.struct_size = EndsBefore(&PoolStats::growth);  // knows neither growth nor sharing
  old.growth.low_watermark = 12345;                  // sentinels in what it does not know
  old.sharing.pool_id = "sentinel";
  pool->FillStats(old);
  EXPECT_EQ(old.mapped_bytes, 2 * kMiB);  // what it knows is filled
  EXPECT_EQ(old.chunks.size(), 1u);
  EXPECT_FALSE(old.domains.empty());
  EXPECT_EQ(old.growth.low_watermark, 12345u) << "written past the caller's struct";
  EXPECT_EQ(old.sharing.pool_id, "sentinel") << "written past the caller's struct";
  EXPECT_EQ(old.struct_size, EndsBefore(&PoolStats::growth)) << "the caller's size is its own";

  const PoolStats whole = pool->GetStats();
  EXPECT_EQ(whole.struct_size, sizeof(PoolStats));
  EXPECT_EQ(whole.sharing.pool_id.size(), 32u);  // filled
  EXPECT_EQ(whole.growth.seconds_to_first_chunk >= 0, true);
}

TEST(StatsSize, ThePrintersReadNothingPastTheCallersStruct) {
  PoolStats old;
  old.mapped_bytes = 4 * kMiB;
  old.sharing.pool_id = "sentinel";
  old.growth.low_watermark = 12345;
  old.struct_size = EndsBefore(&PoolStats::growth);
  for (const std::string& text : {old.ToJson(), old.ToString(), old.ToOpenMetrics()}) {
    EXPECT_EQ(text.find("sentinel"), std::string::npos) << text;
    EXPECT_EQ(text.find("12345"), std::string::npos) << text;
  }
  EXPECT_NE(old.ToJson().find("\"mapped_bytes\": 4194304"), std::string::npos);
  // The same PoolStats, whole: the members are printed.
  old.struct_size = sizeof(PoolStats);
  EXPECT_NE(old.ToJson().find("sentinel"), std::string::npos);
  EXPECT_NE(old.ToJson().find("12345"), std::string::npos);
}

TEST(StatsSize, CompleteCopiesTheKnownMembersAndDefaultsTheRest) {
  PoolStats old;
  old.live_bytes = 77;
  old.sharing.attached_processes = 5;
  old.struct_size = EndsBefore(&PoolStats::sharing);
  PoolStats storage;
  const PoolStats& s = internal::Complete(old, storage);
  EXPECT_EQ(&s, &storage);
  EXPECT_EQ(s.live_bytes, 77u);
  EXPECT_EQ(s.sharing.attached_processes, 0u);
  old.struct_size = sizeof(PoolStats);
  EXPECT_EQ(&internal::Complete(old, storage), &old);  // a whole one is read in place
}

}  // namespace
}  // namespace pinpool
