// Runs a test body in a child process that has dropped to an unprivileged user (no CAP_IPC_LOCK)
// with a given RLIMIT_MEMLOCK, as on a default Debian machine. The child's gtest failures become
// its exit code, which the parent checks.
//
// The user is one of its own, not `nobody`: a uid derived from the child's pid, with nogroup.
// io_uring counts pinned memory per user, across processes (and releases a dead process's
// rings from a worker, a little later), so tests pinning as one shared user at the same time
// (ctest -j, other checkouts on the machine) would use up each other's RLIMIT_MEMLOCK.
#ifndef PINPOOL_TESTS_SUPPORT_UNPRIVILEGED_H_
#define PINPOOL_TESTS_SUPPORT_UNPRIVILEGED_H_

#include <grp.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>

namespace pinpool::testing {

// A uid no account and no other running process uses: above the range of regular and system
// users (and of `nobody`, 65534), unique per live pid.
inline uid_t UnprivilegedUidFor(pid_t pid) { return 0x40000000u + static_cast<uid_t>(pid); }

inline void RunAsUnprivileged(void (*body)(), std::size_t memlock_limit = std::size_t{8} << 20) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const rlimit limit = {memlock_limit, memlock_limit};
    if (setrlimit(RLIMIT_MEMLOCK, &limit) != 0) _exit(20);
    if (geteuid() == 0) {
      const gid_t nogroup = 65534;
      const uid_t user = UnprivilegedUidFor(getpid());
      if (setgroups(0, nullptr) != 0 || setresgid(nogroup, nogroup, nogroup) != 0 ||
          setresuid(user, user, user) != 0) {
        _exit(21);
      }
    }
    body();
    std::fflush(nullptr);
    _exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child died with signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "see the child's output above (20/21: could not drop)";
}

}  // namespace pinpool::testing

#endif  // PINPOOL_TESTS_SUPPORT_UNPRIVILEGED_H_
