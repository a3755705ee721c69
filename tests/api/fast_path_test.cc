// The fast path makes no system call and no registration: counted, not assumed.
//
// 1. Counters: once the pool is warm, 10^6 allocate/free pairs change neither the number of
//    registrations (counting fake domain) nor of mmap/munmap/madvise calls (os room counters).
// 2. The kernel's word for it: a child process warms a pool, then installs a seccomp filter that
//    kills it on ANY system call but exit, and runs 10^6 allocate/free pairs. A single system
//    call anywhere below Allocate/Deallocate (every layer of the heap) kills the child with SIGSYS
//    and the test reports which call it was.
#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <random>
#include <vector>

#include "os/os.h"
#include "pinpool/pool.h"
#include "support/counting_domain.h"

namespace pinpool {
namespace {

using testing::CountingDomain;

constexpr int kPairs = 1'000'000;

PoolOptions Options(std::shared_ptr<Domain> domain) {
  PoolOptions o;
  o.chunk_size = 16 * kMiB;
  o.budget = 256 * kMiB;
  o.page_size = PageSize::kTransparent;
  o.domains.push_back(std::move(domain));
  return o;
}

// The same mixed sequence each time it is called with the same seed: sizes 64 B .. 64 KiB and a
// window of up to 64 live blocks, so frees are not always of the last block allocated.
void Churn(Pool& pool, int pairs, std::uint64_t seed, bool* ok) {
  static constexpr std::size_t kSizes[] = {64, 200, 512, 1024, 4096, 9000, 16384, 65536};
  std::mt19937_64 rng(seed);
  Block window[64] = {};
  for (int i = 0; i < pairs; ++i) {
    Block& slot = window[rng() % 64];
    if (slot) pool.Deallocate(slot);
    slot = pool.Allocate(kSizes[rng() % 8]);
    if (!slot) *ok = false;
  }
  for (Block& b : window) pool.Deallocate(b);
}

TEST(FastPathTest, NoRegistrationAndNoMappingAcrossAMillionPairsOnceWarm) {
  auto domain = std::make_shared<CountingDomain>();
  auto pool = Pool::Create(Options(domain)).value();
  bool ok = true;
  Churn(*pool, kPairs, 42, &ok);  // warm: the same sequence as below
  ASSERT_TRUE(ok);
  const std::uint64_t registrations = domain->register_calls();
  auto& os = internal::os::counters();
  const std::uint64_t mmaps = os.mmap, munmaps = os.munmap, madvises = os.madvise;
  ASSERT_GT(registrations, 0u);

  Churn(*pool, kPairs, 42, &ok);
  ASSERT_TRUE(ok);
  EXPECT_EQ(domain->register_calls(), registrations);
  EXPECT_EQ(domain->deregister_calls(), 0u);
  EXPECT_EQ(os.mmap.load(), mmaps);
  EXPECT_EQ(os.munmap.load(), munmaps);
  EXPECT_EQ(os.madvise.load(), madvises);
}

// Set by the SIGSYS handler in the child: the system call that was attempted.
volatile int* g_blocked_syscall = nullptr;

void OnSigsys(int, siginfo_t* info, void*) {
  *g_blocked_syscall = info->si_syscall;
  syscall(SYS_exit_group, 3);
}

// Allows exit and exit_group; any other system call raises SIGSYS.
int InstallExitOnlyFilter() {
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_exit_group, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_exit, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
  };
  struct sock_fprog prog = {static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
  return static_cast<int>(syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog));
}

TEST(FastPathTest, KernelSeesNoSystemCallDuringAMillionPairs) {
  // Shared with the child: pool memory itself is MADV_DONTFORK, so the pool is made in the child.
  auto* shared = static_cast<int*>(
      mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(shared, MAP_FAILED);
  shared[0] = -1;
  g_blocked_syscall = shared;

  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto pool = Pool::Create(Options(std::make_shared<CountingDomain>()));
    if (!pool.ok()) _exit(10);
    bool ok = true;
    Churn(**pool, kPairs, 7, &ok);  // warm with the same sequence
    if (!ok) _exit(11);
    struct sigaction sa = {};
    sa.sa_sigaction = OnSigsys;
    sa.sa_flags = SA_SIGINFO;
    if (sigaction(SIGSYS, &sa, nullptr) != 0) _exit(12);
    if (InstallExitOnlyFilter() != 0) _exit(13);
    Churn(**pool, kPairs, 7, &ok);
    syscall(SYS_exit_group, ok ? 0 : 14);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child died with signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "exit 3 = a system call was made on the fast path: number "
                                    << shared[0] << " (see /usr/include/asm/unistd_64.h); "
                                    << "10-14 = setup failed";
  munmap(shared, 4096);
}

}  // namespace
}  // namespace pinpool
