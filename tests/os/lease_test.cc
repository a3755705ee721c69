// The write lease on a chunk's file (src/os/lease.h), on the host's real kernel: the facts the
// policy in docs/backing.md rests on, kept checked.
//  - a write lease is taken on a file this process alone has open (O_RDWR, mapped shared and
//    writable), and refused (kFailedPrecondition) when another open file description exists,
//    and on a memfd;
//  - another process's truncate by path, O_TRUNC open, and even read-only open break it: LeaseHeld
//    turns false at once, no SIGIO reaches this process (F_SETOWN 0), and the other process waits
//    in the kernel until ReleaseLease, then proceeds;
//  - a hole punch through a descriptor that shares the lease's open file description (a forked
//    child's copy) does not break it: the lease does not protect against descriptor holders.
#include "os/lease.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/falloc.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

namespace pinpool::internal::os {
namespace {

constexpr std::size_t kLength = 2 << 20;

std::atomic<int> sigio_count{0};

// A file in /dev/shm, open O_RDWR and mapped shared and writable, as a chunk's file is.
class LeasedFile {
 public:
  LeasedFile() {
    char tmpl[] = "/dev/shm/pinpool-lease-test-XXXXXX";
    fd_ = mkstemp(tmpl);
    path_ = tmpl;
    if (fd_ < 0 || ftruncate(fd_, kLength) != 0) std::abort();
    map_ = mmap(nullptr, kLength, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (map_ == MAP_FAILED) std::abort();
  }
  ~LeasedFile() {
    ReleaseLease(fd_);
    munmap(map_, kLength);
    close(fd_);
    unlink(path_.c_str());
  }
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
  void* map_ = nullptr;
};

// Runs `what` in a child process that first closes its copy of `fd` (else the child itself would
// hold the lease's file open); returns the child's pid. Its exit status is 0 when `what` did.
template <typename F>
pid_t InChild(int fd, F what) {
  const pid_t pid = fork();
  if (pid == 0) {
    close(fd);
    _exit(what() ? 0 : 1);
  }
  return pid;
}

bool WaitBroken(int fd) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (LeaseHeld(fd)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

class LeaseBreak : public ::testing::TestWithParam<int> {};

TEST_P(LeaseBreak, AnotherProcessWaitsUntilTheLeaseIsReleasedAndNoSignalIsSent) {
  struct sigaction count = {}, old = {};
  count.sa_handler = [](int) { sigio_count.fetch_add(1); };
  ASSERT_EQ(sigaction(SIGIO, &count, &old), 0);
  sigio_count = 0;
  LeasedFile file;
  ASSERT_TRUE(TakeWriteLease(file.fd(), file.path().c_str()).ok());
  EXPECT_TRUE(LeaseHeld(file.fd()));
  const std::string path = file.path();
  const int how = GetParam();
  const pid_t child = InChild(file.fd(), [&] {
    if (how == 0) return truncate(path.c_str(), 0) == 0;
    if (how == 1) return open(path.c_str(), O_WRONLY | O_TRUNC) >= 0;
    return open(path.c_str(), O_RDONLY) >= 0;
  });
  ASSERT_TRUE(WaitBroken(file.fd())) << "the lease did not break";
  // The child waits in the kernel while the lease stands.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  int status = 0;
  EXPECT_EQ(waitpid(child, &status, WNOHANG), 0) << "the other process did not wait";
  const auto released = std::chrono::steady_clock::now();
  ReleaseLease(file.fd());
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_LT(std::chrono::steady_clock::now() - released, std::chrono::seconds(2));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(sigio_count.load(), 0) << "a lease break signalled the process";
  sigaction(SIGIO, &old, nullptr);
}

INSTANTIATE_TEST_SUITE_P(TruncateOTruncReadOnly, LeaseBreak, ::testing::Values(0, 1, 2));

TEST(Lease, RefusedWhileAnotherOpenFileDescriptionExistsAndOnAMemfd) {
  LeasedFile file;
  const int other = open(file.path().c_str(), O_RDONLY);
  ASSERT_GE(other, 0);
  const absl::Status s = TakeWriteLease(file.fd(), file.path().c_str());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("another process has it open"), std::string::npos) << s;
  EXPECT_FALSE(LeaseHeld(file.fd()));
  close(other);
  EXPECT_TRUE(TakeWriteLease(file.fd(), file.path().c_str()).ok());

  const int memfd = memfd_create("pinpool-lease-test", MFD_CLOEXEC);
  ASSERT_GE(memfd, 0);
  ASSERT_EQ(ftruncate(memfd, kLength), 0);
  EXPECT_EQ(TakeWriteLease(memfd, "a memfd").code(), absl::StatusCode::kFailedPrecondition);
  close(memfd);
}

TEST(Lease, AHolePunchThroughAnInheritedDescriptorDoesNotBreakIt) {
  LeasedFile file;
  ASSERT_TRUE(TakeWriteLease(file.fd(), file.path().c_str()).ok());
  const int fd = file.fd();
  const pid_t child = fork();
  if (child == 0) {
    _exit(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096) == 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the punch failed";
  EXPECT_TRUE(LeaseHeld(fd)) << "a punch broke the lease";
}

}  // namespace
}  // namespace pinpool::internal::os
