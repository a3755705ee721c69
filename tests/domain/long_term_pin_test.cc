// The default domain (MakeLongTermPinDomain): it pins through private io_uring tables and opens
// another when one is full; where io_uring cannot be used (a seccomp filter, as container
// runtimes install, kernel.io_uring_disabled, an old kernel) Pool::Create fails naming the cause
// and the alternatives, and leaves nothing behind: it never falls back to mlock. The explanations
// themselves (domain/io_uring_refusal.h) are checked for every cause, including those this
// machine cannot show. That its pages really stay put is tests/domain/pinning_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "domain/io_uring_refusal.h"
#include "domain/long_term_pin_domain.h"
#include "os/os.h"
#include "pinpool/pinpool_c.h"
#include "pinpool/pool.h"
#include "support/proc_status.h"
#include "support/sanitizers.h"

namespace pinpool {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::ProcStatusBytes;

PoolOptions TwoMiBChunks(std::vector<std::shared_ptr<Domain>> domains) {
  PoolOptions o;
  o.chunk_size = 2 * kMiB;
  o.budget = 32 * kMiB;
  o.page_size = PageSize::k4K;
  o.domains = std::move(domains);
  return o;
}

TEST(LongTermPinDomainTest, SaysWhatItIsAndPinsIntoVmPin) {
  auto d = MakeLongTermPinDomain();
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ((*d)->name(), "long-term pin");
  EXPECT_EQ((*d)->kind(), DomainKind::kHost);
  EXPECT_EQ((*d)->pinning(), Pinning::kLongTerm);
  auto resident = MakeResidentNotPinnedDomain();
  EXPECT_EQ(resident->pinning(), Pinning::kResident);
  EXPECT_THAT(resident->name(), HasSubstr("not pinned"));
  EXPECT_THAT(PinningDescription(Pinning::kResident),
              AllOf(HasSubstr("not pinned"), HasSubstr("may change"), HasSubstr("not for DMA")));

  const long long pinned = ProcStatusBytes("VmPin");
  const long long locked = ProcStatusBytes("VmLck");
  PoolOptions o = TwoMiBChunks({*d});
  o.initial_size = 6 * kMiB;
  auto pool = Pool::Create(o).value();
  EXPECT_EQ(ProcStatusBytes("VmPin") - pinned, static_cast<long long>(6 * kMiB));
  EXPECT_EQ(ProcStatusBytes("VmLck"), locked) << "a long-term pin is not an mlock";
  Block b = pool->Allocate(100);
  ASSERT_TRUE(b);
  EXPECT_EQ(ToUnderlying(b.buffer_index()), 0u) << "no keys: the rings are private";
  EXPECT_EQ(ToUnderlying(b.lkey()), 0u);
  pool->Deallocate(b);
  pool.reset();
  EXPECT_EQ(ProcStatusBytes("VmPin"), pinned);
}

TEST(LongTermPinDomainTest, MoreChunksThanATableHoldsOpenAnotherTableAndFreedSlotsAreReused) {
  // Tables of 2 slots, so that 5 chunks need 3 tables (the real tables hold 1024).
  auto d = internal::MakeLongTermPinDomain(2);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(internal::LongTermPinTables(**d), 1u) << "the first table is made up front";
  const long long pinned = ProcStatusBytes("VmPin");
  {
    auto pool = Pool::Create(TwoMiBChunks({*d})).value();
    ASSERT_TRUE(pool->Reserve(10 * kMiB).ok()) << pool->last_growth_error();
    EXPECT_EQ(internal::LongTermPinTables(**d), 3u);
    EXPECT_EQ(ProcStatusBytes("VmPin") - pinned, static_cast<long long>(10 * kMiB));
    // A second pool on the same domain fills the free slot of the third table first.
    auto other = Pool::Create(TwoMiBChunks({*d})).value();
    ASSERT_TRUE(other->Reserve(2 * kMiB).ok());
    EXPECT_EQ(internal::LongTermPinTables(**d), 3u);
    ASSERT_TRUE(other->Reserve(4 * kMiB).ok());
    EXPECT_EQ(internal::LongTermPinTables(**d), 4u);
  }
  EXPECT_EQ(ProcStatusBytes("VmPin"), pinned) << "every slot of every table emptied";
  auto again = Pool::Create(TwoMiBChunks({*d})).value();
  ASSERT_TRUE(again->Reserve(14 * kMiB).ok());
  EXPECT_EQ(internal::LongTermPinTables(**d), 4u) << "7 chunks fit the 8 slots there are";
  EXPECT_EQ(ProcStatusBytes("VmPin") - pinned, static_cast<long long>(14 * kMiB));
}

// Makes io_uring_setup fail with `err` in this process from now on, as a container runtime's
// seccomp profile does. False when the filter cannot be installed.
bool ForbidIoUringSetup(int err) {
#if defined(__x86_64__)
  constexpr std::uint32_t kArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
  constexpr std::uint32_t kArch = AUDIT_ARCH_AARCH64;
#else
  return false;
#endif
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kArch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_io_uring_setup, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (static_cast<std::uint32_t>(err) & 0xffff)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {static_cast<unsigned short>(std::size(filter)), filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0;
}

// Runs `body` in a child process with io_uring_setup failing with `err`; the child's gtest
// failures fail the test.
void WithoutIoUring(int err, void (*body)(int err)) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (!ForbidIoUringSetup(err)) _exit(20);
    body(err);
    std::fflush(nullptr);
    _exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child died with signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "see the child's output above (20: no seccomp filter)";
}

void ExpectTheDefaultPoolToFailSayingWhyAndTheResidentOneToWork(int err) {
  const long long pinned = ProcStatusBytes("VmPin");
  const long long locked = ProcStatusBytes("VmLck");
  const long long size = ProcStatusBytes("VmSize");
  const std::int64_t chunk_bytes = internal::os::counters().chunk_bytes.load();
  PoolOptions o = TwoMiBChunks({});
  o.initial_size = 2 * kMiB;
  auto pool = Pool::Create(o);
  ASSERT_FALSE(pool.ok()) << "a pool on the default domain without io_uring";
  const std::string message(pool.status().message());
  std::fprintf(stderr, "as the user sees it (io_uring_setup: %s): %s\n", std::strerror(err),
               pool.status().ToString().c_str());
  EXPECT_EQ(pool.status().code(),
            err == ENOSYS ? absl::StatusCode::kUnimplemented : absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(message, AllOf(HasSubstr("long-term pinning is not available here"),
                             HasSubstr("io_uring_setup failed"), HasSubstr(std::strerror(err)),
                             HasSubstr("seccomp")));
  // The alternatives, with the caveat of the weaker one.
  EXPECT_THAT(message,
              AllOf(HasSubstr("VerbsDomain::Open()"), HasSubstr("MakeResidentNotPinnedDomain()"),
                    HasSubstr("resident, not pinned"), HasSubstr("not for DMA")));
  // Nothing left behind, and nothing quietly mlocked instead.
  EXPECT_EQ(internal::os::counters().chunk_bytes.load(), chunk_bytes);
  EXPECT_NEAR(ProcStatusBytes("VmSize"), size, testing::kVmSlackBytes);
  EXPECT_EQ(ProcStatusBytes("VmPin"), pinned);
  EXPECT_EQ(ProcStatusBytes("VmLck"), locked);

  // The C API, which always uses the default domain, says the same with an errno.
  pinpool_pool_t* c_pool = nullptr;
  char errbuf[1024];
  EXPECT_EQ(pinpool_create(nullptr, &c_pool, errbuf, sizeof errbuf), -err);
  EXPECT_EQ(c_pool, nullptr);
  EXPECT_THAT(std::string(errbuf), HasSubstr("long-term pinning is not available here"));

  // The alternative it names works here.
  o.domains = {MakeResidentNotPinnedDomain()};
  auto resident = Pool::Create(o);
  ASSERT_TRUE(resident.ok()) << resident.status();
  EXPECT_EQ((*resident)->GetStats().pinned_bytes, 0u);
  EXPECT_EQ((*resident)->GetStats().locked_bytes, 2 * kMiB);
}

TEST(LongTermPinDomainTest, SeccompForbiddingIoUringFailsCreateWithTheCauseAndTheAlternatives) {
  WithoutIoUring(EPERM, ExpectTheDefaultPoolToFailSayingWhyAndTheResidentOneToWork);
}

TEST(LongTermPinDomainTest, AKernelWithoutIoUringFailsCreateWithTheCauseAndTheAlternatives) {
  WithoutIoUring(ENOSYS, ExpectTheDefaultPoolToFailSayingWhyAndTheResidentOneToWork);
}

TEST(IoUringRefusalTest, EachCauseHasItsOwnCodeAndFix) {
  using internal::ExplainIoUringSetupFailure;
  const internal::IoUringRefusal off = ExplainIoUringSetupFailure(EPERM, 2);
  EXPECT_EQ(off.code, absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(off.cause, HasSubstr("kernel.io_uring_disabled is 2"));
  EXPECT_THAT(off.fix, HasSubstr("`sysctl kernel.io_uring_disabled=0`"));

  const internal::IoUringRefusal group = ExplainIoUringSetupFailure(EPERM, 1);
  EXPECT_THAT(group.cause, HasSubstr("kernel.io_uring_disabled is 1"));
  EXPECT_THAT(group.fix, HasSubstr("kernel.io_uring_group"));

  const internal::IoUringRefusal filtered = ExplainIoUringSetupFailure(EPERM, 0);
  EXPECT_THAT(filtered.cause,
              AllOf(HasSubstr("although kernel.io_uring_disabled is 0"), HasSubstr("seccomp")));
  EXPECT_THAT(filtered.fix, HasSubstr("seccomp profile"));
  EXPECT_THAT(ExplainIoUringSetupFailure(EACCES, std::nullopt).cause, HasSubstr("seccomp"));

  const internal::IoUringRefusal none = ExplainIoUringSetupFailure(ENOSYS, std::nullopt);
  EXPECT_EQ(none.code, absl::StatusCode::kUnimplemented);
  EXPECT_THAT(none.cause, HasSubstr("CONFIG_IO_URING"));
  EXPECT_THAT(none.fix, HasSubstr("Linux 5.19"));

  EXPECT_EQ(ExplainIoUringSetupFailure(ENOMEM, 0).code, absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(ExplainIoUringSetupFailure(EMFILE, 0).fix, HasSubstr("ulimit -n"));

  const internal::IoUringRefusal old = internal::ExplainSparseTableFailure(EINVAL, 1024);
  EXPECT_EQ(old.code, absl::StatusCode::kUnimplemented);
  EXPECT_THAT(old.Message(), AllOf(HasSubstr("1024 slots"), HasSubstr("Linux 5.19 or later")));
}

TEST(IoUringRefusalTest, TheSysctlIsReadAsTheKernelHasIt) {
  FILE* f = std::fopen("/proc/sys/kernel/io_uring_disabled", "r");
  if (f == nullptr) {
    EXPECT_EQ(internal::ReadIoUringDisabled(), std::nullopt) << "no sysctl on this kernel";
    return;
  }
  int value = -1;
  ASSERT_EQ(std::fscanf(f, "%d", &value), 1);
  std::fclose(f);
  EXPECT_EQ(internal::ReadIoUringDisabled(), value);
}

}  // namespace
}  // namespace pinpool
