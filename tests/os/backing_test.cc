// Memfd- and file-backed chunks (PoolOptions::backing, docs/backing.md), on the host's real kernel:
// every domain works on each backing (the default long-term pin, io_uring fixed buffers, the
// resident mlock domain, all on one pool), data written by the CPU is what io_uring's
// WRITE_FIXED sends and READ_FIXED's bytes are what the CPU reads after allocation churn, trim
// gives a chunk's file back (descriptor closed, file unlinked, VmPin down), a memfd chunk refuses
// truncation (sealed), pinned means pinned on a memfd pool (PFNs across forced compaction), and
// bad directories fail clearly, leaving nothing mapped and nothing on disk.
//
// Backings: memfd (4 KiB pages), memfd hugetlb 2M (reserves a few 2 MiB pages for the run, root),
// files in /dev/shm (tmpfs), files on a hugetlbfs mount (/dev/hugepages, else one mounted in a
// temporary directory for the run, root). A backing that cannot be set up here skips, saying why.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <liburing.h>
#include <linux/falloc.h>
#include <linux/magic.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "os/os.h"
#include "pinpool/io_uring.h"
#include "pinpool/pool.h"
#include "support/compaction.h"
#include "support/fixed_io.h"
#include "support/proc_status.h"
#include "support/sanitizers.h"

namespace pinpool {
namespace {

using testing::FixedIo;
using testing::ProcStatusBytes;
using testing::ScratchFile;

// --- the machine: huge pages and a hugetlbfs mount, for the run ----------------------------------

long ReadLong(const char* path) {
  std::ifstream in(path);
  long v = -1;
  in >> v;
  return v;
}
bool WriteLong(const char* path, long v) {
  std::ofstream out(path);
  out << v;
  out.flush();
  return static_cast<bool>(out);
}

constexpr const char* kNrHugepages = "/proc/sys/vm/nr_hugepages";
constexpr long kHugePagesWanted = 32;  // 64 MiB: the hugetlb pools below need at most 32 MiB each

// Reserves kHugePagesWanted more 2 MiB pages and mounts hugetlbfs (when /dev/hugepages is not
// one) for the whole run; undoes both at the end.
class HugePages : public ::testing::Environment {
 public:
  void SetUp() override {
    if (geteuid() != 0) {
      why_not_ = "needs root to reserve hugetlb pages (sysctl vm.nr_hugepages)";
      return;
    }
    before_ = ReadLong(kNrHugepages);
    const long free = ReadLong("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages");
    if (free < kHugePagesWanted) {
      WriteLong(kNrHugepages, before_ + kHugePagesWanted - free);
      raised_ = true;
    }
    if (ReadLong("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages") < kHugePagesWanted) {
      why_not_ = "could not reserve enough 2 MiB hugetlb pages (memory too fragmented?)";
    }
    struct statfs fs;
    if (statfs("/dev/hugepages", &fs) == 0 && fs.f_type == HUGETLBFS_MAGIC &&
        fs.f_bsize == 2 * static_cast<long>(kMiB)) {
      mount_ = "/dev/hugepages";
      return;
    }
    char dir[] = "/tmp/pinpool-backing-hugetlbfs-XXXXXX";
    if (mkdtemp(dir) == nullptr) return;
    if (::mount("none", dir, "hugetlbfs", 0, "pagesize=2M,mode=0700") != 0) {
      why_no_mount_ = std::string("mount -t hugetlbfs failed: ") + std::strerror(errno);
      rmdir(dir);
      return;
    }
    mount_ = dir;
    mounted_ = true;
  }
  void TearDown() override {
    if (mounted_) {
      umount(mount_.c_str());
      rmdir(mount_.c_str());
    }
    if (raised_) WriteLong(kNrHugepages, before_);
  }
  // Why hugetlb pages cannot be had, or "".
  static std::string why_not() { return instance->why_not_; }
  // A hugetlbfs mount of 2 MiB pages, or "" (why_no_mount says why).
  static std::string mount_point() { return instance->mount_; }
  static std::string why_no_mount() {
    return instance->why_not_.empty() ? instance->why_no_mount_ : instance->why_not_;
  }
  static HugePages* instance;

 private:
  std::string why_not_;
  std::string why_no_mount_ = "no hugetlbfs mount";
  std::string mount_;
  bool mounted_ = false;
  bool raised_ = false;
  long before_ = 0;
};
HugePages* HugePages::instance = nullptr;
[[maybe_unused]] ::testing::Environment* const kHugePagesEnv =
    ::testing::AddGlobalTestEnvironment(HugePages::instance = new HugePages);

// --- what the process and a directory hold -------------------------------------------------------

// Targets of this process's descriptors that name a chunk file of pinpool ("/memfd:pinpool-...",
// "/dev/shm/pinpool-...").
std::set<std::string> ChunkDescriptors() {
  std::set<std::string> out;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    char target[512];
    const std::string link = std::string("/proc/self/fd/") + e->d_name;
    const ssize_t n = readlink(link.c_str(), target, sizeof target - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    if (std::strstr(target, "pinpool-") != nullptr && std::strstr(target, "-chunk-") != nullptr) {
      out.insert(target);
    }
  }
  closedir(d);
  return out;
}

// A descriptor of ours whose target contains `name`, or -1.
int DescriptorNamed(const std::string& name) {
  DIR* d = opendir("/proc/self/fd");
  int found = -1;
  while (dirent* e = readdir(d)) {
    char target[512];
    const std::string link = std::string("/proc/self/fd/") + e->d_name;
    const ssize_t n = readlink(link.c_str(), target, sizeof target - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    if (std::strstr(target, name.c_str()) != nullptr) found = std::atoi(e->d_name);
  }
  closedir(d);
  return found;
}

std::set<std::string> Listing(const std::string& dir) {
  std::set<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (std::strncmp(e->d_name, "pinpool-", 8) == 0) out.insert(e->d_name);
    }
    closedir(d);
  }
  return out;
}

// Lines of /proc/self/maps. Under ASan or TSan their runtimes map memory of their own as the
// test runs, so there only the lines that name a chunk file or memfd ("pinpool-") are counted.
int MapsLines() {
  std::ifstream in("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    if (!(testing::kAsan || testing::kTsan) || line.find("pinpool-") != std::string::npos) ++n;
  }
  return n;
}

// --- the backings under test ---------------------------------------------------------------------

struct Case {
  const char* name;
  BackingKind kind;
  PageSize page_size;
  bool require;
  const char* expected;  // the start of ChunkStats::backing
};

// A directory of this test process's own under `parent` (made once, removed at exit): other
// test processes run at the same time (ctest -j) and make chunk files too, so a test that
// compares directory listings must not list a shared directory. Empty when it cannot be made.
std::string PrivateDir(const std::string& parent) {
  static std::map<std::string, std::string> made;
  if (auto it = made.find(parent); it != made.end()) return it->second;
  std::string tmpl = parent + "/pinpool-test-XXXXXX";
  std::string dir = mkdtemp(tmpl.data()) != nullptr ? tmpl : "";
  if (!dir.empty()) {
    static const bool cleanup = [] {
      return std::atexit([] {
               for (const auto& [p, d] : made) rmdir(d.c_str());
             }) == 0;
    }();
    (void)cleanup;
  }
  made[parent] = dir;
  return dir;
}

// Empty when the case can run here; else why not.
std::string Prepare(const Case& c, PoolOptions& o) {
  o.backing.kind = c.kind;
  o.page_size = c.page_size;
  o.require_page_size = c.require;
  const bool hugetlb = c.page_size == PageSize::k2M;
  if (hugetlb && !HugePages::why_not().empty()) return HugePages::why_not();
  if (c.kind == BackingKind::kFiles) {
    if (hugetlb && HugePages::mount_point().empty()) return HugePages::why_no_mount();
    o.backing.directory = PrivateDir(hugetlb ? HugePages::mount_point() : "/dev/shm");
    if (o.backing.directory.empty()) return "cannot make a private directory for chunk files";
  }
  return "";
}

const Case kCases[] = {
    {"Memfd", BackingKind::kMemfd, PageSize::k4K, true, "memfd"},
    {"MemfdHugetlb2M", BackingKind::kMemfd, PageSize::k2M, true, "memfd hugetlb 2M"},
    {"TmpfsFiles", BackingKind::kFiles, PageSize::k4K, true, "file /dev/shm/pinpool-"},
    {"HugetlbfsFiles", BackingKind::kFiles, PageSize::k2M, true, "file "},
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class BackingTest : public ::testing::TestWithParam<Case> {};

void Fill(const Block& b, unsigned seed) {
  std::mt19937 rng(seed);
  auto* p = static_cast<unsigned char*>(b.data());
  for (std::size_t i = 0; i < b.size(); ++i) p[i] = static_cast<unsigned char>(rng());
}

TEST_P(BackingTest, EveryDomainRegistersItAndIoUringMovesWhatTheCpuWroteAfterChurn) {
  const Case& c = GetParam();
  PoolOptions o;
  if (std::string why = Prepare(c, o); !why.empty()) GTEST_SKIP() << why;
  ScratchFile file("pinpool_backing_test");
  ASSERT_GE(file.fd(), 0) << "no non-tmpfs directory for a scratch file";
  auto pin = MakeLongTermPinDomain();
  ASSERT_TRUE(pin.ok()) << pin.status();
  auto ring = IoUringDomain::Create(8);
  ASSERT_TRUE(ring.ok()) << ring.status();
  o.chunk_size = 4 * kMiB;
  o.budget = 32 * kMiB;
  o.domains = {*pin, *ring, MakeResidentNotPinnedDomain()};
  const long long pinned_before = ProcStatusBytes("VmPin");
  auto pool = Pool::Create(o);
  ASSERT_TRUE(pool.ok()) << pool.status();

  std::mt19937_64 rng(11);
  std::vector<Block> live;
  for (int op = 0; op < 20'000; ++op) {  // allocate/free churn, 16 B .. 128 KiB
    if (!live.empty() && (live.size() > 100 || rng() % 3 == 0)) {
      std::swap(live[rng() % live.size()], live.back());
      (*pool)->Deallocate(live.back());
      live.pop_back();
    } else {
      const std::size_t size = std::size_t{16} << (rng() % 14);
      Block b = (*pool)->Allocate(size);
      ASSERT_TRUE(b) << (*pool)->last_growth_error();
      static_cast<unsigned char*>(b.data())[0] = 1;
      live.push_back(b);
    }
  }
  const PoolStats stats = (*pool)->GetStats();
  ASSERT_FALSE(stats.chunks.empty());
  for (const ChunkStats& chunk : stats.chunks) {
    EXPECT_EQ(chunk.backing.rfind(c.expected, 0), 0u) << chunk.backing;
    EXPECT_EQ(chunk.sealed, c.kind == BackingKind::kMemfd) << chunk.backing;
    EXPECT_EQ(chunk.page_size, c.page_size) << chunk.backing;
  }
  // Two long-term pinning domains: every chunk counts twice in VmPin.
  EXPECT_EQ(ProcStatusBytes("VmPin") - pinned_before,
            static_cast<long long>(2 * stats.mapped_bytes));
  off_t offset = 0;
  std::vector<unsigned char> back;
  for (std::size_t i = 0; i < live.size(); ++i) {
    const Block& b = live[i];
    Fill(b, 500 + static_cast<unsigned>(i));
    ASSERT_EQ(FixedIo((*ring)->ring(), true, file.fd(), b, 1, offset), static_cast<int>(b.size()));
    back.assign(b.size(), 0);
    ASSERT_EQ(pread(file.fd(), back.data(), back.size(), offset),
              static_cast<ssize_t>(back.size()));
    ASSERT_EQ(std::memcmp(back.data(), b.data(), b.size()), 0)
        << c.name << ": WRITE_FIXED of " << b.data() << " sent other bytes than the CPU wrote";
    std::memset(b.data(), 0, b.size());
    ASSERT_EQ(FixedIo((*ring)->ring(), false, file.fd(), b, 1, offset), static_cast<int>(b.size()));
    ASSERT_EQ(std::memcmp(back.data(), b.data(), b.size()), 0)
        << c.name << ": READ_FIXED into " << b.data() << " is not what the CPU sees";
    offset += static_cast<off_t>(b.size());
  }
  for (auto& b : live) (*pool)->Deallocate(b);
}

TEST_P(BackingTest, TrimAndDestructionCloseEveryFileAndGiveThePinsBack) {
  const Case& c = GetParam();
  PoolOptions o;
  if (std::string why = Prepare(c, o); !why.empty()) GTEST_SKIP() << why;
  o.chunk_size = 2 * kMiB;
  o.budget = 8 * kMiB;
  const std::set<std::string> fds_before = ChunkDescriptors();
  const std::set<std::string> files_before = Listing(o.backing.directory);
  const long long pinned_before = ProcStatusBytes("VmPin");
  auto pool = Pool::Create(o);
  ASSERT_TRUE(pool.ok()) << pool.status();
  ASSERT_TRUE((*pool)->Reserve(6 * kMiB).ok());
  EXPECT_EQ(ChunkDescriptors().size(), fds_before.size() + 3);
  if (c.kind == BackingKind::kFiles) {
    EXPECT_EQ(Listing(o.backing.directory).size(), files_before.size() + 3);
    for (const ChunkStats& chunk : (*pool)->GetStats().chunks) {
      struct stat st;
      const std::string path = chunk.backing.substr(5);
      ASSERT_EQ(stat(path.c_str(), &st), 0) << path;
      EXPECT_EQ(st.st_mode & 0777, 0600u) << path;
      EXPECT_EQ(static_cast<std::size_t>(st.st_size), chunk.size);
    }
  }
  EXPECT_EQ(ProcStatusBytes("VmPin") - pinned_before, static_cast<long long>(6 * kMiB));
  EXPECT_EQ((*pool)->Trim(2 * kMiB), 4 * kMiB);
  EXPECT_EQ(ChunkDescriptors().size(), fds_before.size() + 1) << "a trimmed chunk's fd is open";
  EXPECT_EQ(Listing(o.backing.directory).size(),
            files_before.size() + (c.kind == BackingKind::kFiles ? 1 : 0))
      << "a trimmed chunk's file is still there";
  // Linux 6.1 drops the pin of an emptied io_uring slot from a delayed worker, 1-1.5 s later
  // (docs/pinning.md); 6.18 at once.
  for (int i = 0;
       i < 50 && ProcStatusBytes("VmPin") - pinned_before > static_cast<long long>(2 * kMiB); ++i) {
    usleep(100'000);
  }
  EXPECT_EQ(ProcStatusBytes("VmPin") - pinned_before, static_cast<long long>(2 * kMiB));
  pool->reset();
  EXPECT_EQ(ChunkDescriptors(), fds_before);
  EXPECT_EQ(Listing(o.backing.directory), files_before);
  EXPECT_EQ(ProcStatusBytes("VmPin"), pinned_before);
}

INSTANTIATE_TEST_SUITE_P(Backings, BackingTest, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

// --- what can take the memory back --------------------------------------------------------------

TEST(MemfdHazard, TruncatingAChunksMemfdIsRefusedBySeals) {
  PoolOptions o;
  o.backing.kind = BackingKind::kMemfd;
  o.page_size = PageSize::k4K;
  o.chunk_size = 2 * kMiB;
  o.budget = 2 * kMiB;
  o.initial_size = 2 * kMiB;
  auto pool = Pool::Create(o);
  ASSERT_TRUE(pool.ok()) << pool.status();
  const int fd = DescriptorNamed("-chunk-0");
  ASSERT_GE(fd, 0) << "no descriptor of the chunk's memfd";
  EXPECT_EQ(fcntl(fd, F_GET_SEALS) & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
            F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  errno = 0;
  EXPECT_EQ(ftruncate(fd, 0), -1);
  EXPECT_EQ(errno, EPERM) << "truncating a registered chunk's memfd was not refused";
  EXPECT_EQ(ftruncate(fd, 4 * kMiB), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE), -1) << "F_SEAL_SEAL must keep the seals fixed";
  const PoolStats stats = (*pool)->GetStats();
  ASSERT_EQ(stats.chunks.size(), 1u);
  EXPECT_EQ(stats.chunks[0].backing, "memfd");
  EXPECT_TRUE(stats.chunks[0].sealed);
}

// A kernel fact docs/backing.md relies on, kept true here: the seals do not refuse a hole punch.
// Only a holder of the descriptor can punch one, and pinpool gives it to no one (yet): the part
// that hands descriptors out must refuse or detect this, and then change this test.
TEST(MemfdHazard, AHolePunchIsNotRefusedBySealsSoPinpoolKeepsTheDescriptorToItself) {
  PoolOptions o;
  o.backing.kind = BackingKind::kMemfd;
  o.chunk_size = 2 * kMiB;
  o.budget = 2 * kMiB;
  o.initial_size = 2 * kMiB;
  auto pool = Pool::Create(o);
  ASSERT_TRUE(pool.ok()) << pool.status();
  const int fd = DescriptorNamed("-chunk-0");
  ASSERT_GE(fd, 0);
  EXPECT_EQ(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096), 0)
      << "the kernel now refuses a hole punch of a sealed memfd (" << std::strerror(errno)
      << "): update docs/backing.md";
}

// --- bad input
// ------------------------------------------------------------------------------------

// Pool::Create fails with `code`, maps nothing, and leaves `dir` as it was.
void ExpectRefused(const PoolOptions& o, absl::StatusCode code, const char* words) {
  const int maps = MapsLines();
  const std::set<std::string> files = Listing(o.backing.directory);
  const std::set<std::string> fds = ChunkDescriptors();
  auto pool = Pool::Create(o);
  ASSERT_FALSE(pool.ok()) << o.backing.directory;
  EXPECT_EQ(pool.status().code(), code) << pool.status();
  EXPECT_NE(pool.status().message().find(words), std::string_view::npos) << pool.status();
  EXPECT_EQ(MapsLines(), maps) << "a refused pool left mappings";
  EXPECT_EQ(Listing(o.backing.directory), files) << "a refused pool left files";
  EXPECT_EQ(ChunkDescriptors(), fds);
}

PoolOptions FilesIn(std::string dir) {
  PoolOptions o;
  o.backing = {BackingKind::kFiles, std::move(dir)};
  o.chunk_size = 2 * kMiB;
  o.budget = 4 * kMiB;
  o.initial_size = 4 * kMiB;
  o.page_size = PageSize::k4K;
  return o;
}

TEST(BackingOptions, BadDirectoriesAreRefusedClearlyAndLeaveNothing) {
  ExpectRefused(FilesIn("/no/such/directory/anywhere"), absl::StatusCode::kInvalidArgument,
                "does not exist");
  ExpectRefused(FilesIn(""), absl::StatusCode::kInvalidArgument, "empty");
  ExpectRefused(FilesIn("/proc/self/status"), absl::StatusCode::kInvalidArgument,
                "not a directory");
  // An ordinary page-cache filesystem (the test's working directory, or /var/tmp).
  for (const char* dir : {".", "/var/tmp"}) {
    struct statfs fs;
    if (statfs(dir, &fs) != 0 || fs.f_type == TMPFS_MAGIC || fs.f_type == HUGETLBFS_MAGIC) {
      continue;
    }
    ExpectRefused(FilesIn(dir), absl::StatusCode::kFailedPrecondition,
                  "cannot be long-term pinned");
    break;
  }
  PoolOptions memfd_with_dir;
  memfd_with_dir.backing = {BackingKind::kMemfd, "/dev/shm"};
  ExpectRefused(memfd_with_dir, absl::StatusCode::kInvalidArgument, "kFiles");
  PoolOptions tmpfs_hugetlb = FilesIn("/dev/shm");
  tmpfs_hugetlb.page_size = PageSize::k2M;
  tmpfs_hugetlb.require_page_size = true;
  ExpectRefused(tmpfs_hugetlb, absl::StatusCode::kInvalidArgument, "no hugetlb pages");
  if (!HugePages::mount_point().empty()) {
    PoolOptions small_pages = FilesIn(HugePages::mount_point());  // 4 KiB pages on a 2M hugetlbfs
    ExpectRefused(small_pages, absl::StatusCode::kInvalidArgument, "hugetlbfs mount");
  }
}

TEST(BackingOptions, ReadOnlyDirectoryIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to mount a read-only tmpfs";
  char dir[] = "/tmp/pinpool-backing-ro-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  if (mount("none", dir, "tmpfs", MS_RDONLY, "size=4m") != 0) {
    rmdir(dir);
    GTEST_SKIP() << "cannot mount tmpfs: " << std::strerror(errno);
  }
  ExpectRefused(FilesIn(dir), absl::StatusCode::kFailedPrecondition, "not writable");
  umount(dir);
  rmdir(dir);
}

TEST(BackingOptions, AChunkFileThatExistsAlreadyIsRefusedAndLeftAlone) {
  // The next pool of this process is the one after `probe`: its first chunk's name follows.
  PoolOptions o = FilesIn(PrivateDir("/dev/shm"));
  o.budget = 2 * kMiB;
  o.initial_size = 2 * kMiB;
  std::string taken;
  {
    auto probe = Pool::Create(o);
    ASSERT_TRUE(probe.ok()) << probe.status();
    const std::string path = (*probe)->GetStats().chunks.at(0).backing.substr(5);
    // ".../pinpool-<pid>-<n>-chunk-0" -> n + 1
    const std::size_t dash = path.rfind("-chunk-");
    const std::size_t before = path.rfind('-', dash - 1);
    const long n = std::stol(path.substr(before + 1, dash - before - 1));
    taken = path.substr(0, before + 1) + std::to_string(n + 1) + "-chunk-0";
  }
  const int fd = open(taken.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(fd, 0) << taken << ": " << std::strerror(errno);
  ASSERT_EQ(write(fd, "mine", 4), 4);
  close(fd);
  ExpectRefused(o, absl::StatusCode::kAlreadyExists, "exists");
  char got[5] = {};
  const int again = open(taken.c_str(), O_RDONLY);
  ASSERT_GE(again, 0) << "the pool removed a file it did not create";
  EXPECT_EQ(read(again, got, 4), 4);
  EXPECT_STREQ(got, "mine");
  close(again);
  unlink(taken.c_str());
}

TEST(BackingOptions, AFailedMappingAfterTheFileWasMadeLeavesNoFileAndTheReservation) {
  PoolOptions o = FilesIn(PrivateDir("/dev/shm"));
  o.initial_size = 0;
  auto pool = Pool::Create(o);
  ASSERT_TRUE(pool.ok()) << pool.status();
  const std::set<std::string> files = Listing(o.backing.directory);
  const std::set<std::string> fds = ChunkDescriptors();
  internal::os::SetFaultHook([](internal::os::Call call, std::size_t) {
    return call == internal::os::Call::kMapAnonymous ? ENOMEM : 0;
  });
  const absl::Status s = (*pool)->Reserve(2 * kMiB);
  internal::os::SetFaultHook(nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_EQ(Listing(o.backing.directory), files) << "the chunk's file outlived its failed mapping";
  EXPECT_EQ(ChunkDescriptors(), fds);
  EXPECT_TRUE((*pool)->Reserve(2 * kMiB).ok()) << "the range was not a reservation again";
}

// --- pinned means pinned -------------------------------------------------------------------------

TEST(BackingPinning, MemfdAndTmpfsPoolsKeepTheirPagesWhereCompactionMovesMlockedOnes) {
  const std::string why_not = testing::WhyCompactionCannotBeObserved();
  if (!why_not.empty()) GTEST_SKIP() << why_not;
  PoolOptions memfd_options = testing::FourKiBPoolOptions({});
  memfd_options.backing.kind = BackingKind::kMemfd;
  PoolOptions files_options = testing::FourKiBPoolOptions({});
  files_options.backing = {BackingKind::kFiles, "/dev/shm"};
  auto memfd = Pool::Create(memfd_options);
  ASSERT_TRUE(memfd.ok()) << memfd.status();
  auto files = Pool::Create(files_options);
  ASSERT_TRUE(files.ok()) << files.status();
  // A memfd pool on the resident (mlock) domain: more mlocked pages that compaction may move.
  PoolOptions mlock_options = testing::FourKiBPoolOptions({MakeResidentNotPinnedDomain()});
  mlock_options.backing.kind = BackingKind::kMemfd;
  auto by_mlock = Pool::Create(mlock_options);
  ASSERT_TRUE(by_mlock.ok()) << by_mlock.status();
  const long long locked = ProcStatusBytes("VmLck");
  testing::InterleavedControl control(testing::kWatchedBytes);
  ASSERT_TRUE(testing::GrowInterleaved({memfd->get(), files->get(), by_mlock->get()}, control));
  // Mlocked too, unless a sanitizer made its mlock a no-op (as in pinning_test.cc).
  const testing::Claim resident =
      ProcStatusBytes("VmLck") - locked >= static_cast<long long>(2 * testing::kWatchedBytes)
          ? testing::Claim::kMlocked
          : testing::Claim::kNothing;
  testing::CompactionRun run;
  run.WatchPool("memfd (default long-term pin)", **memfd, testing::Claim::kLongTermPinned);
  run.WatchPool("tmpfs files (default long-term pin)", **files, testing::Claim::kLongTermPinned);
  run.WatchPool("memfd (mlock, resident)", **by_mlock, resident);
  run.WatchControl("mlocked control", control);
  run.CompactUntilTheControlMoves();
  run.Verify();
}

}  // namespace
}  // namespace pinpool
