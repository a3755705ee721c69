// Sharing a pool's chunks with another process and handing a pool over (pinpool/share.h,
// docs/sharing.md), on the host: memfd and tmpfs-file backings, the default (long-term pin)
// domain and an io_uring domain. The same in the soft-RoCE guest with verbs and a peer:
// tests/providers/verbs/verbs_share_test.cc.
#include "pinpool/share.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "os/fd_passing.h"
#include "os/os.h"
#include "pinpool/grant_lock.h"
#include "pinpool/io_uring.h"
#include "pinpool/pool.h"
#include "pinpool/take_back.h"
#include "support/child_process.h"
#include "support/proc_status.h"
#include "support/sanitizers.h"
#include "support/scan_hook.h"
#include "support/socket_pair.h"
#include "support/unprivileged.h"
#include "support/wait_until.h"
#include "wire/share_message.h"

namespace pinpool {
namespace {

using internal::os::UniqueFd;
using testing::SocketPair;

constexpr std::size_t kChunk = 4 * kMiB;

internal::WireChunk Chunk(std::uint32_t index) {
  internal::WireChunk c;
  c.index = index;
  return c;
}

long long VmPin() { return testing::ProcStatusBytes("VmPin"); }

// A directory in /dev/shm (tmpfs) for file-backed pools, removed with what is left in it.
struct ShmDir {
  std::string path;
  ShmDir() {
    char tmpl[] = "/dev/shm/pinpool-share-test-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~ShmDir() { std::filesystem::remove_all(path); }
  std::size_t files() const {
    return static_cast<std::size_t>(std::distance(std::filesystem::directory_iterator(path),
                                                  std::filesystem::directory_iterator()));
  }
};

PoolOptions Options(BackingKind kind, const std::string& dir = "") {
  PoolOptions o;
  o.chunk_size = kChunk;
  o.budget = 16 * kChunk;
  o.initial_size = 2 * kChunk;
  o.page_size = PageSize::k4K;
  o.backing.kind = kind;
  o.backing.directory = kind == BackingKind::kFiles ? dir : "";
  return o;
}

void Fill(std::span<std::byte> bytes, unsigned seed) {
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = std::byte((i * 31 + seed) & 0xff);
}
bool Holds(const void* p, std::size_t n, unsigned seed) {
  const auto* b = static_cast<const std::byte*>(p);
  for (std::size_t i = 0; i < n; ++i) {
    if (b[i] != std::byte((i * 31 + seed) & 0xff)) return false;
  }
  return true;
}

class ShareTest : public ::testing::TestWithParam<BackingKind> {
 protected:
  PoolOptions Opts() const { return Options(GetParam(), dir_.path); }
  ShmDir dir_;
};

INSTANTIATE_TEST_SUITE_P(Backings, ShareTest,
                         ::testing::Values(BackingKind::kMemfd, BackingKind::kFiles),
                         [](const auto& info) {
                           return info.param == BackingKind::kMemfd ? "Memfd" : "Files";
                         });

// --- attach -------------------------------------------------------------------------------------

TEST_P(ShareTest, AnAttachedProcessSeesAndWritesTheOwnersBlocksByHandle) {
  auto pool = Pool::Create(Opts());
  ASSERT_TRUE(pool.ok()) << pool.status();
  std::vector<Block> blocks;
  std::vector<BlockHandle> handles;
  for (std::size_t size : {64u, 4096u, 100000u, 3u << 20}) {
    blocks.push_back((*pool)->Allocate(size));
    ASSERT_TRUE(blocks.back());
    absl::StatusOr<BlockHandle> h = (*pool)->HandleOf(blocks.back());
    ASSERT_TRUE(h.ok()) << h.status();
    EXPECT_EQ(h->size, size);
    handles.push_back(*h);
  }
  SocketPair s;
  ASSERT_TRUE((*pool)->Share(s.a.get()).ok());
  auto att = Attachment::Receive(s.b.get());
  ASSERT_TRUE(att.ok()) << att.status();
  EXPECT_EQ((*att)->pool_id(), (*pool)->id());
  EXPECT_EQ((*att)->chunks_mapped(), 2u);
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    absl::StatusOr<std::span<std::byte>> view = (*att)->Map(handles[i]);
    ASSERT_TRUE(view.ok()) << view.status();
    ASSERT_EQ(view->size(), blocks[i].size());
    EXPECT_NE(static_cast<void*>(view->data()), blocks[i].data());  // another mapping
    Fill(*view, static_cast<unsigned>(i));
    EXPECT_TRUE(Holds(blocks[i].data(), blocks[i].size(), static_cast<unsigned>(i)));
    std::memset(blocks[i].data(), 0x5a, 16);  // and the other way
    EXPECT_EQ((*view)[15], std::byte{0x5a});
  }
  EXPECT_EQ((*pool)->GetStats().sharing.shares, 1u);
  for (const Block& b : blocks) (*pool)->Deallocate(b);
}

TEST_P(ShareTest, UpdateMapsChunksAddedAfterTheShare) {
  auto pool = Pool::Create(Opts());
  ASSERT_TRUE(pool.ok()) << pool.status();
  SocketPair s;
  ASSERT_TRUE((*pool)->Share(s.a.get()).ok());
  auto att = Attachment::Receive(s.b.get());
  ASSERT_TRUE(att.ok()) << att.status();
  ASSERT_TRUE((*pool)->Reserve(4 * kChunk).ok());
  // The first chunk ever at index 3: generation 1.
  const BlockHandle late{.chunk = 3, .generation = 1, .offset = 0, .size = 4096};
  EXPECT_EQ((*att)->Map(late).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE((*pool)->Share(s.a.get()).ok());
  ASSERT_TRUE((*att)->Update(s.b.get()).ok());
  EXPECT_EQ((*att)->chunks_mapped(), 4u);
  EXPECT_TRUE((*att)->Map(late).ok());
  EXPECT_EQ((*pool)->GetStats().sharing.attached_processes, 1u);  // one socket, one process
}

TEST_P(ShareTest, AClientKilledMidRunLeavesThePoolItsGrantsAndOtherBlocksIntact) {
  auto pool = Pool::Create(Opts());
  ASSERT_TRUE(pool.ok()) << pool.status();
  Block mine = (*pool)->Allocate(65536);
  Block theirs = (*pool)->Allocate(65536);
  ASSERT_TRUE(mine && theirs);
  Fill({static_cast<std::byte*>(mine.data()), mine.size()}, 7);
  const BlockHandle handle = *(*pool)->HandleOf(theirs);
  SocketPair s;
  // The client: maps the pool, then writes its block until it is killed.
  testing::ChildProcess child = testing::AttachedChild(s, [&](Attachment& att, int) {
    std::span<std::byte> view = *att.Map(handle);
    for (unsigned round = 0;; ++round) Fill(view, round);
    return 0;
  });
  s.b.reset();
  ASSERT_TRUE((*pool)->Share(s.a.get()).ok());
  EXPECT_EQ((*pool)->GetStats().sharing.attached_processes, 1u);
  // Wait until the client is writing, then kill it mid-write.
  testing::WaitUntil([&] { return static_cast<std::byte*>(theirs.data())[1] != std::byte{0}; },
                     std::chrono::seconds(10));
  EXPECT_NE(static_cast<std::byte*>(theirs.data())[1], std::byte{0}) << "the client never wrote";
  EXPECT_TRUE(WIFSIGNALED(child.Kill()));
  EXPECT_TRUE(Holds(mine.data(), mine.size(), 7));
  const PoolStats stats = (*pool)->GetStats();
  EXPECT_EQ(stats.sharing.attached_processes, 0u);
  EXPECT_EQ(stats.chunks.size(), 2u);
  // The pool goes on: its blocks, allocation, free.
  Block more = (*pool)->Allocate(1 << 20);
  EXPECT_TRUE(more);
  (*pool)->Deallocate(more);
  (*pool)->Deallocate(theirs);
  (*pool)->Deallocate(mine);
}

TEST(Share, AnAnonymousPoolRefusesEveryCall) {
  auto pool = Pool::Create(Options(BackingKind::kAnonymous));
  ASSERT_TRUE(pool.ok()) << pool.status();
  Block b = (*pool)->Allocate(64);
  SocketPair s;
  EXPECT_EQ((*pool)->HandleOf(b).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*pool)->Share(s.a.get()).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*pool)->Quiesce().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*pool)->HandOver(s.a.get(), {}).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Pool::Adopt(Options(BackingKind::kAnonymous), s.b.get()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE((*pool)->Allocate(64));  // still serving
  (*pool)->Deallocate(b);
}

TEST(Share, HandleOfAndMapRefuseWhatIsNotInsideOneChunk) {
  auto pool = Pool::Create(Options(BackingKind::kMemfd));
  ASSERT_TRUE(pool.ok()) << pool.status();
  char outside[64];
  EXPECT_EQ((*pool)->HandleOf(Block(outside, sizeof outside, nullptr)).status().code(),
            absl::StatusCode::kInvalidArgument);
  Block b = (*pool)->Allocate(64);
  const Location at = *(*pool)->Lookup(b.data());
  EXPECT_EQ((*pool)->HandleOf(Block(b.data(), kChunk, &at.chunk())).status().code(),
            absl::StatusCode::kInvalidArgument);  // runs past its chunk
  SocketPair s;
  ASSERT_TRUE((*pool)->Share(s.a.get()).ok());
  auto att = Attachment::Receive(s.b.get());
  ASSERT_TRUE(att.ok());
  EXPECT_EQ((*att)->Map({.chunk = 0, .offset = kChunk - 8, .size = 16}).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ((*att)->Map({.chunk = 0, .offset = 0, .size = 0}).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ((*att)->Map({.chunk = 1000, .offset = 0, .size = 8}).status().code(),
            absl::StatusCode::kOutOfRange);
  (*pool)->Deallocate(b);
}

// What a receiver gets from a sender that is not pinpool, or lies: each a clear error, nothing
// mapped, no descriptor kept.
class BadShare : public ::testing::Test {
 protected:
  // Sends `m` with `fds` on a new pair and returns the receiving end.
  UniqueFd Send(const internal::WireMessage& m, std::vector<int> fds) {
    SocketPair s;
    const std::vector<std::byte> bytes = internal::Encode(m);
    EXPECT_TRUE(internal::os::SendMessage(s.a.get(), bytes, fds).ok());
    return std::move(s.b);
  }
  internal::WireMessage Share(std::size_t chunks) {
    internal::WireMessage m;
    m.kind = internal::WireMessage::Kind::kShare;
    m.chunk_size = kChunk;
    m.max_chunks = 16;
    for (std::uint32_t i = 0; i < chunks; ++i) m.chunks.push_back(Chunk(i));
    return m;
  }
  // Shared mappings (a chunk's view), counted by the kernel, and the address space in use: an
  // error must leave neither a view nor the reservation behind (the allocator's own mappings,
  // under a sanitizer, move VmSize by less than kVmSlackBytes).
  static std::size_t SharedMappings() {
    std::size_t n = 0;
    std::ifstream maps("/proc/self/maps");
    for (std::string line; std::getline(maps, line);) {
      const std::size_t perms = line.find(' ') + 1;
      if (perms + 3 < line.size() && line[perms + 3] == 's') ++n;
    }
    return n;
  }
  static std::size_t OpenFds() {
    return static_cast<std::size_t>(
        std::distance(std::filesystem::directory_iterator("/proc/self/fd"),
                      std::filesystem::directory_iterator()));
  }
  void ExpectRefused(UniqueFd socket, absl::StatusCode code, const std::string& says) {
    const std::size_t shared = SharedMappings(), fds = OpenFds();
    const long long vm = testing::ProcStatusBytes("VmSize");
    absl::StatusOr<std::unique_ptr<Attachment>> att = Attachment::Receive(socket.get());
    ASSERT_FALSE(att.ok());
    EXPECT_EQ(att.status().code(), code) << att.status();
    EXPECT_NE(att.status().message().find(says), std::string::npos) << att.status();
    EXPECT_EQ(SharedMappings(), shared);
    EXPECT_LT(std::llabs(testing::ProcStatusBytes("VmSize") - vm), testing::kVmSlackBytes);
    EXPECT_EQ(OpenFds(), fds);
  }
  static int SealedMemfd(std::size_t size) {
    const int fd = ::memfd_create("pinpool-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    EXPECT_EQ(::ftruncate(fd, static_cast<off_t>(size)), 0);
    EXPECT_EQ(::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
    return fd;
  }
};

TEST_F(BadShare, GarbageIsNotADescription) {
  SocketPair s;
  const std::string junk = "GET / HTTP/1.1\r\n\r\n";
  ASSERT_TRUE(internal::os::SendMessage(s.a.get(), std::as_bytes(std::span(junk)), {}).ok());
  ExpectRefused(std::move(s.b), absl::StatusCode::kInvalidArgument, "magic");
  SocketPair raw;  // not even a frame: a frame announcing more than it carries
  const char bytes[8] = {8, 0, 0, 0, 3, 0, 0, 0};
  ASSERT_EQ(::send(raw.a.get(), bytes, sizeof bytes, 0), 8);
  ExpectRefused(std::move(raw.b), absl::StatusCode::kInvalidArgument, "descriptors");
}

TEST_F(BadShare, AnotherVersionIsRefusedByName) {
  UniqueFd fd(SealedMemfd(kChunk));
  std::vector<std::byte> bytes = internal::Encode(Share(1));
  bytes[8] = std::byte{3};  // version 3
  SocketPair s;
  const int fds[] = {fd.get()};
  ASSERT_TRUE(internal::os::SendMessage(s.a.get(), bytes, fds).ok());
  ExpectRefused(std::move(s.b), absl::StatusCode::kInvalidArgument, "version 3");
}

TEST_F(BadShare, DescriptorsThatDoNotMatchTheDescription) {
  UniqueFd fd(SealedMemfd(kChunk));
  ExpectRefused(Send(Share(2), {fd.get()}), absl::StatusCode::kInvalidArgument,
                "2 chunks described, 1 descriptors");
}

TEST_F(BadShare, AForeignDescriptor) {
  UniqueFd efd(::eventfd(0, EFD_CLOEXEC));
  ExpectRefused(Send(Share(1), {efd.get()}), absl::StatusCode::kInvalidArgument,
                "not a chunk's file");
}

TEST_F(BadShare, AFileOfTheWrongSize) {
  UniqueFd fd(SealedMemfd(kChunk / 2));
  ExpectRefused(Send(Share(1), {fd.get()}), absl::StatusCode::kInvalidArgument, "the wrong file");
}

TEST_F(BadShare, AnUnsealedMemfd) {
  UniqueFd fd(::memfd_create("pinpool-test", MFD_CLOEXEC));
  ASSERT_EQ(::ftruncate(fd.get(), kChunk), 0);
  ExpectRefused(Send(Share(1), {fd.get()}), absl::StatusCode::kInvalidArgument, "seals");
}

TEST_F(BadShare, AChunkOutsideTheBudgetOrTwice) {
  UniqueFd fd(SealedMemfd(kChunk));
  internal::WireMessage m = Share(1);
  m.chunks[0].index = 16;
  ExpectRefused(Send(m, {fd.get()}), absl::StatusCode::kInvalidArgument, "index 16 of 16");
  m = Share(2);
  m.chunks[1].index = 0;
  ExpectRefused(Send(m, {fd.get(), fd.get()}), absl::StatusCode::kInvalidArgument,
                "described twice");
}

TEST_F(BadShare, AHandoverWhereAShareIsExpectedAndTheOwnerGone) {
  UniqueFd fd(SealedMemfd(kChunk));
  internal::WireMessage m = Share(1);
  m.kind = internal::WireMessage::Kind::kHandOver;
  ExpectRefused(Send(m, {fd.get()}), absl::StatusCode::kInvalidArgument, "handover arrived");
  SocketPair s;
  s.a.reset();
  ExpectRefused(std::move(s.b), absl::StatusCode::kUnavailable, "closed");
}

TEST(ShareDeath, AnAttachedProcessCannotFreeABlock) {
  auto owner = Pool::Create(Options(BackingKind::kMemfd));
  ASSERT_TRUE(owner.ok());
  Block b = (*owner)->Allocate(4096);
  SocketPair s;
  ASSERT_TRUE((*owner)->Share(s.a.get()).ok());
  auto att = Attachment::Receive(s.b.get());
  ASSERT_TRUE(att.ok());
  std::span<std::byte> view = *(*att)->Map(*(*owner)->HandleOf(b));
  // The attached process's own pool, if it has one, knows nothing of the view: a free there is a
  // foreign pointer, caught.
  auto theirs = Pool::Create(Options(BackingKind::kMemfd));
  ASSERT_TRUE(theirs.ok());
  EXPECT_DEATH((*theirs)->Deallocate(view.data()), "not memory of this pool");
  (*owner)->Deallocate(b);
}

// --- warm restart -------------------------------------------------------------------------------

struct Filled {
  std::vector<Block> blocks;
  std::vector<BlockHandle> live;
};
Filled FillPool(Pool& pool, std::size_t count) {
  Filled f;
  const std::size_t sizes[] = {64, 1000, 4096, 65536, 300000};
  for (std::size_t i = 0; i < count; ++i) {
    Block b = pool.Allocate(sizes[i % 5]);
    EXPECT_TRUE(b);
    Fill({static_cast<std::byte*>(b.data()), b.size()}, static_cast<unsigned>(i));
    f.blocks.push_back(b);
    f.live.push_back(*pool.HandleOf(b));
  }
  return f;
}

// A slot trimmed and grown again holds another chunk (another file): an attached process that
// mapped the old one gets the new one at its next Update, and a handle of either chunk never maps
// the other (before: Update skipped every slot it had mapped, so the new block's handle mapped
// the trimmed chunk's file, whose bytes the owner no longer sees).
TEST_P(ShareTest, ASlotTrimmedAndGrownAgainReachesAnAttachedProcessAsItsNewChunk) {
  auto pool = Pool::Create(Opts());
  ASSERT_TRUE(pool.ok()) << pool.status();
  SocketPair s;
  ASSERT_TRUE((*pool)->Share(s.a.get()).ok());
  auto att = Attachment::Receive(s.b.get());
  ASSERT_TRUE(att.ok()) << att.status();
  Block old = (*pool)->Allocate(1 << 20);
  ASSERT_TRUE(old);
  const BlockHandle old_handle = *(*pool)->HandleOf(old);
  ASSERT_TRUE((*pool)->Reserve(3 * kChunk).ok());
  ASSERT_TRUE((*pool)->Share(s.a.get()).ok());
  ASSERT_TRUE((*att)->Update(s.b.get()).ok());
  EXPECT_EQ((*att)->chunks_mapped(), 3u);
  (*pool)->Deallocate(old);
  (*pool)->Trim(0);
  ASSERT_EQ((*pool)->GetStats().mapped_bytes, 0u);
  std::vector<Block> blocks;
  for (unsigned i = 0; i < 3; ++i) {
    blocks.push_back((*pool)->Allocate(1 << 20));
    ASSERT_TRUE(blocks.back());
    Fill({static_cast<std::byte*>(blocks.back().data()), blocks.back().size()}, 40 + i);
  }
  const BlockHandle handle = *(*pool)->HandleOf(blocks[0]);
  ASSERT_EQ(handle.chunk, old_handle.chunk) << "the slot is used again";
  // Before the update, the new chunk is not mapped here: its handle maps nothing (never the old
  // chunk's view).
  EXPECT_EQ((*att)->Map(handle).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE((*pool)->Share(s.a.get()).ok());
  ASSERT_TRUE((*att)->Update(s.b.get()).ok());
  EXPECT_EQ((*att)->chunks_mapped(), 1u) << "the trimmed chunks are unmapped here too";
  for (unsigned i = 0; i < 3; ++i) {
    absl::StatusOr<std::span<std::byte>> view = (*att)->Map(*(*pool)->HandleOf(blocks[i]));
    ASSERT_TRUE(view.ok()) << view.status();
    EXPECT_TRUE(Holds(view->data(), view->size(), 40 + i)) << "block " << i << ": stale bytes";
    Fill(*view, 50 + i);
    EXPECT_TRUE(Holds(blocks[i].data(), blocks[i].size(), 50 + i))
        << "block " << i << ": the attached process's writes do not reach the owner";
  }
  // The trimmed chunk's handle names a chunk that is gone: it maps nothing.
  EXPECT_EQ((*att)->Map(old_handle).status().code(), absl::StatusCode::kNotFound);
  for (const Block& b : blocks) (*pool)->Deallocate(b);
}

// Descriptors running out while a pool is sent (RLIMIT_NOFILE just above what is open): Share and
// HandOver fail saying so rather than send part of the pool, and the failed handover leaves the
// pool able to hand over again, every block intact (before: both skipped the chunks whose dup
// failed and said OK; the successor then refused the handover and every block was lost).
TEST_P(ShareTest, RunningOutOfDescriptorsFailsShareAndHandOverAndTheHandOverCanBeRepeated) {
  PoolOptions o = Opts();
  o.initial_size = 6 * kChunk;
  auto a = Pool::Create(o);
  ASSERT_TRUE(a.ok()) << a.status();
  Filled f = FillPool(**a, 30);
  SocketPair s;
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  const auto limit_to_two_more = [&] {
    const int probe = ::fcntl(0, F_DUPFD_CLOEXEC, 0);  // the lowest free descriptor
    ASSERT_GE(probe, 0);
    ::close(probe);
    rlimit low = saved;
    low.rlim_cur = static_cast<rlim_t>(probe) + 2;
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  };
  limit_to_two_more();
  const absl::Status shared = (*a)->Share(s.a.get());
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  EXPECT_EQ(shared.code(), absl::StatusCode::kResourceExhausted) << shared;
  EXPECT_EQ((*a)->GetStats().sharing.shares, 0u);
  ASSERT_TRUE((*a)->Quiesce().ok());
  limit_to_two_more();
  const absl::Status handed = (*a)->HandOver(s.a.get(), f.live);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  EXPECT_EQ(handed.code(), absl::StatusCode::kResourceExhausted) << handed;
  EXPECT_NE(handed.message().find("ulimit -n"), std::string::npos) << handed;
  // Nothing reached the other end: the next handover is the first message there.
  ASSERT_TRUE((*a)->HandOver(s.a.get(), f.live).ok());
  a->reset();
  auto b = Pool::Adopt(Opts(), s.b.get());
  ASSERT_TRUE(b.ok()) << b.status();
  for (std::size_t i = 0; i < f.live.size(); ++i) {
    absl::StatusOr<Block> block = (*b)->Claim(f.live[i]);
    ASSERT_TRUE(block.ok()) << block.status();
    EXPECT_TRUE(Holds(block->data(), block->size(), static_cast<unsigned>(i))) << i;
    (*b)->Deallocate(*block);
  }
}

TEST_P(ShareTest, AHandedOverPoolIsAdoptedWithItsBlocksIntact) {
  const long long pinned_before = VmPin();
  auto a = Pool::Create(Opts());
  ASSERT_TRUE(a.ok()) << a.status();
  Filled f = FillPool(**a, 40);
  // Some blocks freed before the handover: not handed over.
  for (std::size_t i = 0; i < 40; i += 4) (*a)->Deallocate(f.blocks[i]);
  std::vector<BlockHandle> live;
  for (std::size_t i = 0; i < 40; ++i) {
    if (i % 4 != 0) live.push_back(f.live[i]);
  }
  const PoolId id = (*a)->id();
  const std::size_t chunks = (*a)->GetStats().chunks.size();
  ASSERT_TRUE((*a)->Quiesce().ok());
  EXPECT_FALSE((*a)->Allocate(64));  // quiesced: no more blocks
  EXPECT_EQ((*a)->Trim(), 0u);
  EXPECT_TRUE((*a)->GetStats().sharing.quiesced);
  EXPECT_EQ(VmPin(), pinned_before);  // nothing registered
  SocketPair s;
  ASSERT_TRUE((*a)->HandOver(s.a.get(), live).ok());
  a->reset();  // the predecessor exits before the successor adopts
  if (GetParam() == BackingKind::kFiles) {
    EXPECT_EQ(dir_.files(), chunks);  // names kept
  }

  auto b = Pool::Adopt(Opts(), s.b.get());
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->id(), id);
  EXPECT_EQ((*b)->AdoptedBlocks(), live);
  std::vector<Block> claimed;
  for (std::size_t i = 0, j = 0; i < 40; ++i) {
    if (i % 4 == 0) continue;
    absl::StatusOr<Block> block = (*b)->Claim(live[j++]);
    ASSERT_TRUE(block.ok()) << block.status();
    EXPECT_TRUE(Holds(block->data(), block->size(), static_cast<unsigned>(i))) << i;
    EXPECT_EQ((*b)->UsableSize(block->data()), block->size());
    claimed.push_back(*block);
  }
  ASSERT_TRUE((*b)->AwaitInitialSize(std::chrono::seconds(30)).ok());
  EXPECT_TRUE((*b)->Ready());
  PoolStats stats = (*b)->GetStats();
  EXPECT_EQ(stats.sharing.adopted_chunks, chunks);
  EXPECT_EQ(stats.sharing.adopted_blocks, live.size());
  EXPECT_EQ(stats.sharing.reclaimed_live_blocks, live.size());
  EXPECT_EQ(stats.chunks.size(), 2u);  // initial_size: the adopted chunks count
  EXPECT_EQ(VmPin(), pinned_before + static_cast<long long>(2 * kChunk));  // registered again
  // New blocks come from elsewhere than the handed-over ones.
  Block fresh = (*b)->Allocate(4096);
  ASSERT_TRUE(fresh);
  for (const Block& c : claimed) {
    EXPECT_TRUE(fresh.data() < c.data() || fresh.data() >= static_cast<char*>(c.data()) + c.size());
  }
  EXPECT_TRUE((*b)->Reallocate(claimed[0], 2 * claimed[0].size()));  // moved, bytes kept
  claimed.erase(claimed.begin());
  for (const Block& c : claimed) (*b)->Deallocate(c);
  EXPECT_EQ((*b)->Claim(live[1]).status().code(), absl::StatusCode::kNotFound);  // freed
  stats = (*b)->GetStats();
  EXPECT_EQ(stats.sharing.reclaimed_live_blocks, 0u);
  EXPECT_EQ(stats.sharing.reclaimed_live_bytes, 0u);
  // The chunks the handed-over blocks held are the heap's now: the pool fills them.
  std::vector<Block> all;
  for (Block x; (x = (*b)->Allocate(1 << 20));) all.push_back(x);
  EXPECT_GE(all.size(), 16u * 3);
  for (const Block& x : all) (*b)->Deallocate(x);
  (*b)->Deallocate(fresh);
}

// A successor that fails to adopt (here: options that do not match) leaves the chunks' ownership
// locks free: the predecessor, still alive, hands the pool over again, every block intact. Once a
// successor adopted, it holds the locks and the predecessor's next HandOver is refused.
TEST_P(ShareTest, AHandOverNoSuccessorAdoptedIsSentAgainAndAnAdoptedOneIsNot) {
  auto a = Pool::Create(Opts());
  ASSERT_TRUE(a.ok()) << a.status();
  Filled f = FillPool(**a, 12);
  ASSERT_TRUE((*a)->Quiesce().ok());
  SocketPair first;
  ASSERT_TRUE((*a)->HandOver(first.a.get(), f.live).ok());
  PoolOptions wrong = Opts();
  wrong.chunk_size = 2 * kMiB;
  EXPECT_FALSE(Pool::Adopt(wrong, first.b.get()).ok());
  SocketPair second;
  ASSERT_TRUE((*a)->HandOver(second.a.get(), f.live).ok()) << "no successor adopted the pool";
  auto b = Pool::Adopt(Opts(), second.b.get());
  ASSERT_TRUE(b.ok()) << b.status();
  SocketPair third;
  const absl::Status again = (*a)->HandOver(third.a.get(), f.live);
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition) << again;
  EXPECT_NE(again.message().find("adopted"), std::string::npos) << again;
  a->reset();
  for (std::size_t i = 0; i < f.live.size(); ++i) {
    absl::StatusOr<Block> block = (*b)->Claim(f.live[i]);
    ASSERT_TRUE(block.ok()) << block.status();
    EXPECT_TRUE(Holds(block->data(), block->size(), static_cast<unsigned>(i))) << i;
    (*b)->Deallocate(*block);
  }
}

// An adopted chunk of small pages is read back from its own page tables (PAGEMAP_SCAN), not from
// smaps, whose cost grows with every chunk mapped before it; where the kernel cannot scan (here
// the injected ENOTTY), from smaps, with the same answer.

TEST_P(ShareTest, AnAdoptedChunkOfSmallPagesIsReadFromItsPageTablesOrElseFromSmaps) {
  for (const bool fail_scan : {false, true}) {
    auto a = Pool::Create(Opts());
    ASSERT_TRUE(a.ok()) << a.status();
    const std::vector<BlockHandle> live = FillPool(**a, 4).live;
    const std::size_t chunks = (*a)->GetStats().chunks.size();
    ASSERT_TRUE((*a)->Quiesce().ok());
    SocketPair s;
    ASSERT_TRUE((*a)->HandOver(s.a.get(), live).ok());
    a->reset();

    std::optional<testing::ScanHook> hook(std::in_place, fail_scan);
    auto b = Pool::Adopt(Opts(), s.b.get());
    ASSERT_TRUE(b.ok()) << b.status();
    // Adopt returns before it maps a chunk: the pool's thread maps them all.
    ASSERT_TRUE((*b)->AwaitInitialSize(std::chrono::seconds(30)).ok());
    const int scans = hook->scans();
    hook.reset();
    EXPECT_EQ(static_cast<std::size_t>(scans), chunks) << "one scan per adopted chunk";
    for (const ChunkStats& c : (*b)->GetStats().chunks) {
      EXPECT_EQ(c.page_size, PageSize::k4K) << "chunk " << c.index << (fail_scan ? ", smaps" : "");
    }
    absl::StatusOr<Block> block = (*b)->Claim(live[0]);
    ASSERT_TRUE(block.ok()) << block.status();
    (*b)->Deallocate(*block);
  }
}

// A pool handed over on a new socket: the successor's end, and the blocks named live.
struct HandedOver {
  UniqueFd socket;
  std::vector<BlockHandle> live;
  PoolId id{};
};
HandedOver HandOverNewPool(const PoolOptions& options, std::size_t blocks = 5) {
  HandedOver h;
  auto a = Pool::Create(options);
  EXPECT_TRUE(a.ok()) << a.status();
  if (!a.ok()) return h;
  h.live = FillPool(**a, blocks).live;
  h.id = (*a)->id();
  EXPECT_TRUE((*a)->Quiesce().ok());
  SocketPair s;
  EXPECT_TRUE((*a)->HandOver(s.a.get(), h.live).ok());
  h.socket = std::move(s.b);
  return h;
}

// A chunk whose adoption fails once the successor owns it (its mapping refused, here until the
// fault is lifted) is kept, file and all: the start-up reports the failure, Claim says the block
// is kept, and a Claim after the cause is gone builds the chunk and returns the block intact.
std::atomic<bool> refuse_adopted_mappings{false};
TEST_P(ShareTest, AChunkWhoseAdoptionFailsIsKeptAndClaimBuildsItAgain) {
  HandedOver h = HandOverNewPool(Opts(), 8);
  refuse_adopted_mappings = true;
  const internal::os::FaultHook previous =
      internal::os::SetFaultHook([](internal::os::Call call, std::size_t) {
        return call == internal::os::Call::kMapAnonymous && refuse_adopted_mappings.load() ? ENOMEM
                                                                                           : 0;
      });
  PoolOptions o = Opts();
  o.initial_size = 0;
  auto b = Pool::Adopt(o, h.socket.get());
  ASSERT_TRUE(b.ok()) << b.status();
  const absl::Status startup = (*b)->AwaitInitialSize(std::chrono::seconds(30));
  EXPECT_EQ(startup.code(), absl::StatusCode::kResourceExhausted) << startup;
  absl::StatusOr<Block> kept = (*b)->Claim(h.live[0]);
  EXPECT_EQ(kept.status().code(), absl::StatusCode::kUnavailable) << kept.status();
  EXPECT_NE(kept.status().message().find("kept"), std::string::npos) << kept.status();
  refuse_adopted_mappings = false;
  internal::os::SetFaultHook(previous);
  for (std::size_t i = 0; i < h.live.size(); ++i) {
    absl::StatusOr<Block> block = (*b)->Claim(h.live[i]);
    ASSERT_TRUE(block.ok()) << block.status();
    EXPECT_TRUE(Holds(block->data(), block->size(), static_cast<unsigned>(i))) << i;
    (*b)->Deallocate(*block);
  }
  EXPECT_EQ((*b)->GetStats().sharing.reclaimed_live_blocks, 0u);
}

// Adopt fails with `code`, saying `says`, and leaves nothing registered, mapped or removed.
void ExpectAdoptRefused(const PoolOptions& options, int socket, absl::StatusCode code,
                        const std::string& says, const ShmDir& dir, std::size_t files) {
  const long long pinned = VmPin();
  const std::int64_t mapped = internal::os::counters().chunk_bytes.load();
  auto b = Pool::Adopt(options, socket);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), code) << b.status();
  EXPECT_NE(b.status().message().find(says), std::string::npos) << b.status();
  EXPECT_EQ(VmPin(), pinned);
  EXPECT_EQ(internal::os::counters().chunk_bytes.load(), mapped);
  EXPECT_EQ(dir.files(), files);
}

TEST_P(ShareTest, APoolMovesToAnotherProcessWhichAdoptsItAfterTheFirstExits) {
  SocketPair s;
  // Process A: builds a pool, fills blocks, hands the pool over and exits.
  testing::ChildProcess predecessor([&] {
    s.b.reset();
    auto a = Pool::Create(Opts());
    if (!a.ok()) return 2;
    Filled f = FillPool(**a, 20);
    if (!(*a)->Quiesce().ok() || !(*a)->HandOver(s.a.get(), f.live).ok()) return 3;
    a->reset();
    return 0;
  });
  s.a.reset();
  ASSERT_TRUE(predecessor.ExitsWith(0)) << predecessor.Wait();
  // Process B, after A is gone.
  auto b = Pool::Adopt(Opts(), s.b.get());
  ASSERT_TRUE(b.ok()) << b.status();
  const std::vector<BlockHandle> live = (*b)->AdoptedBlocks();
  ASSERT_EQ(live.size(), 20u);
  for (std::size_t i = 0; i < live.size(); ++i) {
    absl::StatusOr<Block> block = (*b)->Claim(live[i]);
    ASSERT_TRUE(block.ok()) << block.status();
    EXPECT_TRUE(Holds(block->data(), block->size(), static_cast<unsigned>(i))) << i;
    (*b)->Deallocate(*block);
  }
}

TEST_P(ShareTest, AdoptRefusesOptionsThatDoNotMatchTheHandedOverPool) {
  const std::size_t files = GetParam() == BackingKind::kFiles ? 2 : 0;
  {
    HandedOver h = HandOverNewPool(Opts());
    PoolOptions o = Opts();
    o.chunk_size = 2 * kMiB;
    ExpectAdoptRefused(o, h.socket.get(), absl::StatusCode::kInvalidArgument, "chunks of", dir_,
                       files);
  }
  {
    HandedOver h = HandOverNewPool(Opts());
    PoolOptions o = Opts();
    const bool memfd = GetParam() == BackingKind::kMemfd;
    o.backing.kind = memfd ? BackingKind::kFiles : BackingKind::kMemfd;
    o.backing.directory = memfd ? dir_.path : "";
    ExpectAdoptRefused(o, h.socket.get(), absl::StatusCode::kInvalidArgument, "chunks of", dir_,
                       2 * files);
  }
  {
    HandedOver h = HandOverNewPool(Opts());
    PoolOptions o = Opts();
    o.budget = kChunk;  // the pool had two chunks
    ExpectAdoptRefused(o, h.socket.get(), absl::StatusCode::kInvalidArgument, "budget must hold",
                       dir_, 3 * files);
  }
  {
    HandedOver h = HandOverNewPool(Opts());
    PoolOptions o = Opts();
    o.classes = {{.name = "rpc", .reserved = kChunk, .cap = 2 * kChunk, .scrub = Scrub::kNone}};
    ExpectAdoptRefused(o, h.socket.get(), absl::StatusCode::kFailedPrecondition, "classes", dir_,
                       4 * files);
  }
}

TEST_P(ShareTest, ASecondOwnerCannotAdoptThePool) {
  HandedOver h = HandOverNewPool(Opts());
  // Whatever sends the same handover twice (a relay, a bug): the second adoption finds the files
  // owned.
  absl::StatusOr<internal::os::Message> msg =
      internal::os::ReceiveMessage(h.socket.get(), internal::kMaxWireBytes);
  ASSERT_TRUE(msg.ok()) << msg.status();
  std::vector<int> fds;
  for (const UniqueFd& fd : msg->fds) fds.push_back(fd.get());
  SocketPair first, second;
  ASSERT_TRUE(internal::os::SendMessage(first.a.get(), msg->payload, fds).ok());
  ASSERT_TRUE(internal::os::SendMessage(second.a.get(), msg->payload, fds).ok());
  auto b = Pool::Adopt(Opts(), first.b.get());
  ASSERT_TRUE(b.ok()) << b.status();
  // Registered before the second try: ExpectAdoptRefused compares what is mapped and pinned.
  ASSERT_TRUE((*b)->AwaitInitialSize(std::chrono::seconds(30)).ok());
  ExpectAdoptRefused(Opts(), second.b.get(), absl::StatusCode::kFailedPrecondition,
                     "owned by another process", dir_, GetParam() == BackingKind::kFiles ? 2 : 0);
  ASSERT_TRUE((*b)->AwaitInitialSize(std::chrono::seconds(30)).ok());
  EXPECT_TRUE((*b)->Claim(h.live[0]).ok());
}

TEST_P(ShareTest, HandOverNeedsAQuiescedPoolWithoutGrantHoldersAndDisjointLiveBlocks) {
  auto a = Pool::Create(Opts());
  ASSERT_TRUE(a.ok());
  Filled f = FillPool(**a, 3);
  SocketPair s;
  EXPECT_EQ((*a)->HandOver(s.a.get(), f.live).code(), absl::StatusCode::kFailedPrecondition);
  {
    GrantLock lock(**a);
    lock.AddHolder();
  }
  const absl::Status held = (*a)->Quiesce();
  EXPECT_EQ(held.code(), absl::StatusCode::kFailedPrecondition) << held;
  EXPECT_NE(held.message().find("grant holder"), std::string::npos) << held;
  EXPECT_TRUE((*a)->Allocate(64));  // nothing changed
  {
    GrantLock lock(**a);
    lock.RemoveHolder();
  }
  ASSERT_TRUE((*a)->Quiesce().ok());
  ASSERT_TRUE((*a)->Quiesce().ok());  // idempotent
  std::vector<BlockHandle> overlapping = {f.live[0], f.live[0]};
  EXPECT_EQ((*a)->HandOver(s.a.get(), overlapping).code(), absl::StatusCode::kInvalidArgument);
  std::vector<BlockHandle> outside = {{.chunk = 9, .offset = 0, .size = 64}};
  EXPECT_EQ((*a)->HandOver(s.a.get(), outside).code(), absl::StatusCode::kInvalidArgument);
  std::vector<BlockHandle> stale = {f.live[0]};  // another chunk of the same index
  stale[0].generation += 1;
  const absl::Status refused = (*a)->HandOver(s.a.get(), stale);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("generation"), std::string::npos) << refused;
  SocketPair gone;
  gone.b.reset();
  EXPECT_EQ((*a)->HandOver(gone.a.get(), f.live).code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE((*a)->HandOver(s.a.get(), f.live).ok());  // still possible after those
  auto b = Pool::Adopt(Opts(), s.b.get());
  ASSERT_TRUE(b.ok()) << b.status();
}

TEST_P(ShareTest, ClaimFindsOnlyHandedOverBlocks) {
  HandedOver h = HandOverNewPool(Opts());
  auto b = Pool::Adopt(Opts(), h.socket.get());
  ASSERT_TRUE(b.ok()) << b.status();
  BlockHandle wrong = h.live[1];
  wrong.size += 1;
  EXPECT_EQ((*b)->Claim(wrong).status().code(), absl::StatusCode::kNotFound);
  BlockHandle other_chunk = h.live[1];  // another chunk at the same index (after a trim)
  other_chunk.generation += 1;
  EXPECT_EQ((*b)->Claim(other_chunk).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*b)->Claim({.chunk = 99, .offset = 0, .size = 64}).status().code(),
            absl::StatusCode::kNotFound);
  absl::StatusOr<Block> first = (*b)->Claim(h.live[1]);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ((*b)->Claim(h.live[1])->data(), first->data());  // the same block each time
  (*b)->Deallocate(*first);
  EXPECT_EQ((*b)->Claim(h.live[1]).status().code(), absl::StatusCode::kNotFound);
}

// Sharing meets taking back (docs/backing.md): a quiesced pool gives nothing back, a handover
// leaves no lease behind, a handed-over block is lost with its chunk, and the successor leases
// the files once the predecessor has let go of them.
TEST_P(ShareTest, AQuiescedPoolGivesNothingBack) {
  auto a = Pool::Create(Opts());
  ASSERT_TRUE(a.ok());
  Block b = (*a)->Allocate(4096);
  ASSERT_TRUE((*a)->Quiesce().ok());
  EXPECT_EQ((*a)->GiveBack(b.data()).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*a)->GetStats().chunks_given_back, 0u);
}

TEST(ShareLease, AHandoverReleasesTheLeasesBeforeTheDescriptorsLeave) {
  ShmDir dir;
  auto a = Pool::Create(Options(BackingKind::kFiles, dir.path));
  ASSERT_TRUE(a.ok()) << a.status();
  Filled f = FillPool(**a, 3);
  const std::string file = (*a)->GetStats().chunks.at(0).backing.substr(5);  // "file <path>"
  ASSERT_TRUE((*a)->Quiesce().ok());
  SocketPair s;
  ASSERT_TRUE((*a)->HandOver(s.a.get(), f.live).ok());
  // The predecessor is still alive: were its lease left, this open would wait (EWOULDBLOCK
  // without blocking), and every opener after it lease-break-time seconds.
  UniqueFd opened(::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  EXPECT_GE(opened.get(), 0) << file << ": " << std::strerror(errno);
}

TEST_P(ShareTest, AHandedOverBlockIsLostWithItsChunkWhenTheChunkIsGivenBack) {
  HandedOver h = HandOverNewPool(Opts());
  auto b = Pool::Adopt(Opts(), h.socket.get());
  ASSERT_TRUE(b.ok()) << b.status();
  absl::StatusOr<Block> block = (*b)->Claim(h.live[0]);
  ASSERT_TRUE(block.ok()) << block.status();
  ASSERT_TRUE((*b)->GiveBack(block->data()).ok());
  const std::vector<LostChunk> lost = (*b)->TakeLostChunks();
  ASSERT_EQ(lost.size(), 1u);
  std::size_t found = 0;
  for (const LostBlock& l : lost[0].blocks) found += l.data == block->data() ? 1 : 0;
  EXPECT_EQ(found, 1u) << "the handed-over block is not among the lost ones";
  EXPECT_EQ((*b)->Claim(h.live[0]).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*b)->GetStats().sharing.reclaimed_live_blocks, 0u);
  (*b)->Deallocate(*block);  // a lost block's free: accepted, nothing done
  EXPECT_EQ((*b)->GetStats().lost_block_frees, 1u);
}

// True when /proc/locks lists a lease of this process on `path`'s inode.
bool LeaseListed(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  const std::string pid = " " + std::to_string(::getpid()) + " ";
  const std::string inode = ":" + std::to_string(st.st_ino) + " ";
  std::ifstream locks("/proc/locks");
  for (std::string line; std::getline(locks, line);) {
    if (line.find("LEASE") != std::string::npos && line.find(pid) != std::string::npos &&
        line.find(inode) != std::string::npos) {
      return true;
    }
  }
  return false;
}

TEST(ShareLease, TheSuccessorLeasesTheFilesOnceThePredecessorIsGone) {
  ShmDir dir;
  const PoolOptions o = Options(BackingKind::kFiles, dir.path);
  HandedOver h = HandOverNewPool(o);  // the predecessor destroyed: its descriptions closed
  auto b = Pool::Adopt(o, h.socket.get());
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_TRUE((*b)->AwaitInitialSize(std::chrono::seconds(30)).ok());
  absl::StatusOr<Block> block = (*b)->Claim(h.live[0]);
  ASSERT_TRUE(block.ok());
  const std::string file = (*b)->GetStats().chunks.at(0).backing.substr(5);
  // The lease passes (every 10 ms) take it; a fixed 100 ms was not always enough under ASan.
  ASSERT_TRUE(testing::WaitUntil([&] { return LeaseListed(file); }, std::chrono::seconds(30)))
      << "the successor never leased " << file;
  // Another process truncates the adopted chunk's file: it waits until the chunk is given back.
  testing::ChildProcess child([&] { return ::truncate(file.c_str(), 0) == 0 ? 0 : 1; });
  EXPECT_TRUE(child.ExitsWith(0));
  const std::vector<LostChunk> lost = (*b)->TakeLostChunks();
  ASSERT_EQ(lost.size(), 1u) << "the truncate went through without a give back: no lease";
  EXPECT_EQ(lost[0].index, 0u);
}

TEST(ShareDeath, ADoubleFreeOfAHandedOverBlockIsCaught) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a forked child has no chunks (DONTFORK)
  HandedOver h = HandOverNewPool(Options(BackingKind::kMemfd));
  auto b = Pool::Adopt(Options(BackingKind::kMemfd), h.socket.get());
  ASSERT_TRUE(b.ok()) << b.status();
  absl::StatusOr<Block> block = (*b)->Claim(h.live[2]);
  ASSERT_TRUE(block.ok());
  (*b)->Deallocate(*block);
  EXPECT_DEATH((*b)->Deallocate(*block), "Deallocate");
}

TEST(ShareAdoptBad, ForgedHandoversAreRefusedWithNothingLeftBehind) {
  ShmDir dir;
  const auto forged = [](int fd, std::uint64_t chunk_size) {
    internal::WireMessage m;
    m.kind = internal::WireMessage::Kind::kHandOver;
    m.chunk_size = chunk_size;
    m.max_chunks = 16;
    m.chunks.push_back(Chunk(0));
    m.live.push_back({.chunk = 0, .generation = 1, .offset = 0, .size = 64});
    SocketPair s;
    const int fds[] = {fd};
    EXPECT_TRUE(internal::os::SendMessage(s.a.get(), internal::Encode(m), fds).ok());
    return std::move(s.b);
  };
  UniqueFd efd(::eventfd(0, EFD_CLOEXEC));
  ExpectAdoptRefused(Options(BackingKind::kMemfd), forged(efd.get(), kChunk).get(),
                     absl::StatusCode::kInvalidArgument, "not a chunk's file", dir, 0);
  UniqueFd small(::memfd_create("pinpool-test", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  ASSERT_EQ(::ftruncate(small.get(), kChunk / 2), 0);
  ASSERT_EQ(::fcntl(small.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
  ExpectAdoptRefused(Options(BackingKind::kMemfd), forged(small.get(), kChunk).get(),
                     absl::StatusCode::kInvalidArgument, "the wrong file", dir, 0);
  // A live block in a chunk the handover does not include.
  internal::WireMessage m;
  m.kind = internal::WireMessage::Kind::kHandOver;
  m.chunk_size = kChunk;
  m.max_chunks = 16;
  m.live.push_back({.chunk = 3, .generation = 1, .offset = 0, .size = 64});
  SocketPair s;
  ASSERT_TRUE(internal::os::SendMessage(s.a.get(), internal::Encode(m), {}).ok());
  ExpectAdoptRefused(Options(BackingKind::kMemfd), s.b.get(), absl::StatusCode::kInvalidArgument,
                     "does not include", dir, 0);
  // A live block of another chunk at an index the handover includes.
  UniqueFd sealed(::memfd_create("pinpool-test", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  ASSERT_EQ(::ftruncate(sealed.get(), kChunk), 0);
  ASSERT_EQ(::fcntl(sealed.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
  m.chunks.push_back(Chunk(3));  // generation 1
  m.live[0].generation = 2;
  SocketPair other;
  const int fds[] = {sealed.get()};
  ASSERT_TRUE(internal::os::SendMessage(other.a.get(), internal::Encode(m), fds).ok());
  ExpectAdoptRefused(Options(BackingKind::kMemfd), other.b.get(),
                     absl::StatusCode::kInvalidArgument, "of generation 2", dir, 0);
}

// A successor refused by RLIMIT_MEMLOCK names what the adoption needs: every handed-over chunk
// pinned (before: it said "pinning 12 MiB more" for a 24 MiB pool, the chunks it had claimed when
// the third one met the limit).
int successor_socket = -1;
TEST(ShareLimits, ASuccessorRefusedByTheMemlockLimitNamesTheWholeHandover) {
  PoolOptions o = Options(BackingKind::kMemfd);
  o.initial_size = 6 * kChunk;  // 24 MiB
  HandedOver h = HandOverNewPool(o);
  successor_socket = h.socket.get();
  testing::RunAsUnprivileged([] {  // RLIMIT_MEMLOCK 8 MiB
    // Dropping root made /proc/self root's; the successor reopens memfds through it.
    ASSERT_EQ(::prctl(PR_SET_DUMPABLE, 1), 0);
    PoolOptions successor = Options(BackingKind::kMemfd);
    successor.initial_size = 0;
    auto b = Pool::Adopt(successor, successor_socket);
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted) << b.status();
    const std::string says(b.status().message());
    EXPECT_NE(says.find("RLIMIT_MEMLOCK is 8 MiB"), std::string::npos) << says;
    EXPECT_NE(says.find("6 chunks of 4 MiB"), std::string::npos) << says;
    EXPECT_NE(says.find("pinning 24 MiB more"), std::string::npos) << says;
  });
}

TEST(ShareIoUring, AnAdoptedPoolRegistersWithAnIoUringDomainAndWritesTheHandedOverBytes) {
  PoolOptions o = Options(BackingKind::kMemfd);
  auto domain = IoUringDomain::Create(8);
  if (!domain.ok()) GTEST_SKIP() << "no io_uring here: " << domain.status();
  o.domains = {std::shared_ptr<Domain>(*domain)};
  HandedOver h = HandOverNewPool(o);
  auto b = Pool::Adopt(o, h.socket.get());
  ASSERT_TRUE(b.ok()) << b.status();
  absl::StatusOr<Block> block = (*b)->Claim(h.live[3]);  // 65536 bytes, seed 3
  ASSERT_TRUE(block.ok()) << block.status();
  EXPECT_TRUE(Holds(block->data(), block->size(), 3));
  EXPECT_EQ(block->keys(0).base, block->chunk().base);  // this pool's registration
  (*b)->Deallocate(*block);
}

}  // namespace
}  // namespace pinpool
