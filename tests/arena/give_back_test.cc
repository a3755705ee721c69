// Giving a chunk back at the arena (src/arena/give_back.cc): a withdrawn chunk is never carved,
// trimmed or handed back by the heap, its chunk table entry keeps the slow-free tag whatever the
// grants do, and once finished it is deregistered and a PROT_NONE reservation again, with its
// slot never reused (the budget has one chunk fewer); what is not a ready chunk is refused; a
// chunk whose file another process opens shows in BrokenLeases (which checks a bounded number of
// chunks per call, round robin), and FinishGiveBack lets that
// process through (lease released, file unlinked), after what the pool does before that (its
// report) and after the chunk is deregistered and unmapped.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "arena/arena.h"
#include "pinpool/options.h"
#include "support/counting_domain.h"
#include "support/maps.h"

namespace pinpool {
namespace {

using pinpool::testing::CountingDomain;
using pinpool::testing::MappingsIn;

constexpr std::size_t kChunk = 2 * kMiB;

TEST(GiveBack, AWithdrawnChunkIsNeverCarvedTrimmedOrReusedAndItsFreesStayOnTheSlowPath) {
  auto d = std::make_shared<CountingDomain>();
  internal::ArenaConfig config{.chunk_size = kChunk, .max_chunks = 3, .domains = {d}};
  auto arena = internal::Arena::Create(std::move(config)).value();
  ASSERT_TRUE(arena->Reserve(2 * kChunk).ok());
  const std::uintptr_t base = arena->range_base();
  auto* chunk0 = reinterpret_cast<void*>(base);
  ASSERT_EQ(arena->Carve(4096, 4096), chunk0);

  ASSERT_TRUE(arena->BeginGiveBack(0).ok());
  EXPECT_EQ(arena->BeginGiveBack(0).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(arena->BeginGiveBack(2).status().code(), absl::StatusCode::kFailedPrecondition)
      << "empty";
  EXPECT_EQ(arena->BeginGiveBack(99).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(arena->Withdrawn(chunk0));
  EXPECT_FALSE(arena->Withdrawn(reinterpret_cast<void*>(base + kChunk)));
  EXPECT_NE(arena->EntryOf(chunk0) & internal::Arena::kSlowFreeTag, 0u);
  arena->SetGranted(chunk0, true);
  arena->SetGranted(chunk0, false);
  EXPECT_NE(arena->EntryOf(chunk0) & internal::Arena::kSlowFreeTag, 0u) << "the tag was cleared";
  arena->ReturnChunk(chunk0);  // the heap letting go of it: ignored
  // Still mapped and registered until FinishGiveBack; never carved, never trimmed.
  EXPECT_NE(arena->ChunkOf(chunk0), nullptr);
  EXPECT_EQ(arena->Carve(kChunk, kChunk), reinterpret_cast<void*>(base + kChunk));
  EXPECT_EQ(arena->Trim(0), 0u);
  EXPECT_EQ(d->live_registrations(), 2u);

  arena->FinishGiveBack(0);
  EXPECT_EQ(d->live_registrations(), 1u);
  EXPECT_EQ(arena->ChunkOf(chunk0), nullptr);
  EXPECT_TRUE(arena->Withdrawn(chunk0));
  EXPECT_EQ(arena->EntryOf(chunk0), internal::Arena::kSlowFreeTag);
  const auto maps = MappingsIn(base, base + kChunk);
  EXPECT_EQ(maps.none, kChunk) << "not a PROT_NONE reservation again";
  EXPECT_EQ(arena->Stats().chunks.size(), 1u);
  // The budget has one chunk fewer: slot 2 is the last one that grows.
  EXPECT_EQ(arena->Carve(kChunk, kChunk), reinterpret_cast<void*>(base + 2 * kChunk));
  EXPECT_EQ(arena->Carve(kChunk, kChunk), nullptr);
  EXPECT_EQ(arena->last_growth_error().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(arena->BelowWatermark());
}

std::string FileOf(const internal::Arena& arena, std::size_t i) {
  const std::string d = arena.Stats().backings.at(i).description;
  return d.rfind("file ", 0) == 0 ? d.substr(5) : "";
}

TEST(GiveBack, BrokenLeasesNamesTheChunkWhoseFileAnotherProcessOpenedAndFinishLetsItThrough) {
  char tmpl[] = "/dev/shm/pinpool-give-back-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  auto d = std::make_shared<CountingDomain>();
  internal::ArenaConfig config{
      .chunk_size = kChunk,
      .max_chunks = 2,
      .domains = {d},
      .backing = {.kind = internal::os::BackingSpec::Kind::kFile, .directory = dir, .name = {}}};
  auto arena = internal::Arena::Create(std::move(config)).value();
  ASSERT_TRUE(arena->Reserve(2 * kChunk).ok());
  EXPECT_TRUE(arena->BrokenLeases().empty());
  const std::string path = FileOf(*arena, 1);
  const std::uintptr_t base1 = arena->range_base() + kChunk;
  ASSERT_FALSE(path.empty());
  const pid_t child = fork();
  if (child == 0) _exit(open(path.c_str(), O_RDONLY) >= 0 ? 0 : 1);  // waits for the lease
  std::vector<std::uint32_t> broken;
  for (int i = 0; i < 5000 && broken.empty(); ++i) {
    broken = arena->BrokenLeases();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(broken, std::vector<std::uint32_t>{1});
  // One check per call: round robin, each chunk in turn.
  const std::vector<std::uint32_t> first = arena->BrokenLeases(1);
  const std::vector<std::uint32_t> second = arena->BrokenLeases(1);
  EXPECT_EQ(first.size() + second.size(), 1u);
  EXPECT_EQ(first.empty() ? second : first, std::vector<std::uint32_t>{1});
  ASSERT_TRUE(arena->BeginGiveBack(1).ok());
  EXPECT_TRUE(arena->BrokenLeases().empty()) << "a withdrawn chunk is not named again";
  int status = 0;
  EXPECT_EQ(waitpid(child, &status, WNOHANG), 0) << "the opener did not wait for the lease";
  // What the pool does in between (records the chunk's report) comes after the deregistration
  // and the unmapping, and before the lease and the file go.
  bool called = false;
  arena->FinishGiveBack(1, [&] {
    called = true;
    EXPECT_EQ(d->live_registrations(), 1u) << "called before the deregistration";
    EXPECT_EQ(MappingsIn(base1, base1 + kChunk).none, kChunk) << "called before the unmapping";
    EXPECT_EQ(waitpid(child, &status, WNOHANG), 0) << "called after the lease went";
    EXPECT_EQ(access(path.c_str(), F_OK), 0) << "called after the file went";
  });
  EXPECT_TRUE(called);
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_NE(access(path.c_str(), F_OK), 0) << "the file is still there";
  EXPECT_EQ(d->live_registrations(), 1u);
  arena.reset();
  EXPECT_EQ(rmdir(dir.c_str()), 0) << "a chunk file was left behind";
}

}  // namespace
}  // namespace pinpool
