// The verbs domain on a real RDMA device (rxe0 in the soft-RoCE guest): how one is opened or
// wrapped, what Register hands back and Deregister releases, which access requests the device
// refuses up front (on-demand paging on rxe: kUnimplemented), what a refused pin says
// (RLIMIT_MEMLOCK, in a child without CAP_IPC_LOCK), and that one domain serves several pools
// and threads at once. Every test skips with the reason when there is no device, and fails
// instead when PINPOOL_REQUIRE_RDMA=1 (verbs_test_support.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "pinpool/pool.h"
#include "pinpool/verbs.h"
#include "providers/verbs/device.h"
#include "verbs_test_support.h"

namespace pinpool {
namespace {

using ::testing::HasSubstr;
using testing::MakePool;
using ::testing::MatchesRegex;
using testing::VerbsTest;

// An anonymous, populated mapping, unmapped on scope exit.
class Mapping {
 public:
  explicit Mapping(std::size_t length, int prot = PROT_READ | PROT_WRITE) : length_(length) {
    void* p = ::mmap(nullptr, length, prot,
                     MAP_PRIVATE | MAP_ANONYMOUS | (prot == PROT_NONE ? 0 : MAP_POPULATE), -1, 0);
    data_ = p == MAP_FAILED ? nullptr : p;
  }
  ~Mapping() {
    if (data_ != nullptr) ::munmap(data_, length_);
  }
  void* data() const { return data_; }
  std::size_t length() const { return length_; }

 private:
  void* data_;
  std::size_t length_;
};

TEST_F(VerbsTest, OpenTakesTheFirstActiveDeviceWithItsOwnContextAndPd) {
  EXPECT_EQ(domain_->kind(), DomainKind::kVerbs);
  EXPECT_EQ(domain_->pinning(), Pinning::kLongTerm);
  EXPECT_THAT(domain_->name(), MatchesRegex(domain_->device_name() + "/pd[0-9]+"));
  ASSERT_NE(domain_->context(), nullptr);
  ASSERT_NE(domain_->pd(), nullptr);
  EXPECT_EQ(domain_->pd()->context, domain_->context());
  EXPECT_GT(domain_->max_mr_size(), 2 * kMiB);
  // The device it picked has a port ACTIVE (what "first ACTIVE" promises).
  ibv_port_attr port{};
  ASSERT_EQ(ibv_query_port(domain_->context(), 1, &port), 0);
  EXPECT_EQ(port.state, IBV_PORT_ACTIVE);

  // Two domains on one device are two contexts and two PDs, with different names.
  std::shared_ptr<VerbsDomain> other = OpenDomain({});
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(other->device_name(), domain_->device_name());
  EXPECT_NE(other->context(), domain_->context());
  EXPECT_NE(other->name(), domain_->name());
}

TEST_F(VerbsTest, AnUnknownDeviceNameIsNotFoundAndTheDevicesThereAreListed) {
  const absl::StatusOr<std::shared_ptr<VerbsDomain>> d =
      VerbsDomain::Open({.device = "no_such_device"});
  ASSERT_FALSE(d.ok());
  EXPECT_TRUE(absl::IsNotFound(d.status())) << d.status();
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("\"no_such_device\""));
  EXPECT_THAT(std::string(d.status().message()), HasSubstr(domain_->device_name()));
}

TEST_F(VerbsTest, WrapRegistersIntoTheApplicationsPdAndLeavesItOwnedByTheApplication) {
  ibv_pd* pd = ibv_alloc_pd(domain_->context());
  ASSERT_NE(pd, nullptr);
  {
    absl::StatusOr<std::shared_ptr<VerbsDomain>> wrapped =
        VerbsDomain::Wrap(pd, {.trusted_whole_chunk = {.read = true}});
    ASSERT_TRUE(wrapped.ok()) << wrapped.status();
    EXPECT_EQ((*wrapped)->pd(), pd);
    EXPECT_EQ((*wrapped)->context(), domain_->context());
    EXPECT_THAT((*wrapped)->name(), MatchesRegex(domain_->device_name() + "/app-pd[0-9]+"));
    std::unique_ptr<Pool> pool = MakePool({*wrapped});
    ASSERT_NE(pool, nullptr);
    const Block b = pool->Allocate(100);
    ASSERT_TRUE(b);
    EXPECT_EQ(static_cast<ibv_mr*>(b.keys().handle)->pd, pd);
    pool->Deallocate(b);
  }
  // The domain and its pool are gone, the PD is still ours and holds no region any more:
  // deallocating it succeeds (EBUSY if a region were left, or a crash if it had been freed).
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);

  const absl::StatusOr<std::shared_ptr<VerbsDomain>> none = VerbsDomain::Wrap(nullptr);
  EXPECT_TRUE(absl::IsInvalidArgument(none.status())) << none.status();
}

TEST_F(VerbsTest, RegisterReturnsTheRegionsKeysAndDeregisterReleasesIt) {
  const Mapping m(1 * kMiB);
  ASSERT_NE(m.data(), nullptr);
  const std::uint64_t live = domain_->live_registrations();
  const std::uint64_t total = domain_->total_registrations();
  absl::StatusOr<Keys> keys = domain_->Register(m.data(), m.length());
  ASSERT_TRUE(keys.ok()) << keys.status();
  const auto* mr = static_cast<const ibv_mr*>(keys->handle);
  ASSERT_NE(mr, nullptr);
  EXPECT_EQ(keys->base, reinterpret_cast<std::uintptr_t>(m.data()));
  EXPECT_EQ(keys->length, m.length());
  EXPECT_EQ(ToUnderlying(keys->lkey), mr->lkey);
  EXPECT_EQ(ToUnderlying(keys->rkey), mr->rkey);
  EXPECT_EQ(mr->pd, domain_->pd());
  EXPECT_EQ(mr->addr, m.data());
  EXPECT_EQ(mr->length, m.length());
  EXPECT_EQ(domain_->live_registrations(), live + 1);
  EXPECT_EQ(domain_->total_registrations(), total + 1);
  domain_->Deregister(*keys);
  EXPECT_EQ(domain_->live_registrations(), live);
  EXPECT_EQ(domain_->failed_deregistrations(), 0u);
}

TEST_F(VerbsTest, APoolOnAVerbsDomainCarriesTheRegionsKeysInEveryBlock) {
  std::unique_ptr<Pool> pool = MakePool({domain_}, 2 * kMiB, 8 * kMiB, 4 * kMiB);
  ASSERT_NE(pool, nullptr);
  const PoolStats stats = pool->GetStats();
  ASSERT_EQ(stats.domains.size(), 1u);
  EXPECT_EQ(stats.domains[0].name, domain_->name());
  EXPECT_EQ(stats.domains[0].kind, DomainKind::kVerbs);
  EXPECT_EQ(stats.domains[0].registrations, 2u);
  EXPECT_EQ(stats.domains[0].registered_bytes, 4 * kMiB);
  for (std::size_t size : {1ul, 4096ul, 300000ul, 1ul << 20}) {
    const Block b = pool->Allocate(size);
    ASSERT_TRUE(b) << size;
    const auto* mr = static_cast<const ibv_mr*>(b.keys().handle);
    EXPECT_EQ(ToUnderlying(b.lkey()), mr->lkey);
    EXPECT_EQ(ToUnderlying(b.rkey()), mr->rkey);
    // The region is the whole chunk, registered at its virtual address.
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(mr->addr), b.chunk().base);
    EXPECT_EQ(mr->length, b.chunk().size);
    pool->Deallocate(b);
  }
}

// rxe has no on-demand paging: asking for it must fail at Open (and Wrap) with kUnimplemented
// and say what to change, not later with ibv_reg_mr's bare EINVAL. On a device with ODP for RC
// READ and WRITE the same request must work.
TEST_F(VerbsTest, OnDemandPagingOnADeviceWithoutItIsUnimplementedWithTheReason) {
  absl::StatusOr<internal::VerbsDeviceCaps> caps = internal::QueryVerbsCaps(domain_->context());
  ASSERT_TRUE(caps.ok()) << caps.status();
  const bool has_odp = caps->odp && (caps->rc_odp_caps & IBV_ODP_SUPPORT_READ) &&
                       (caps->rc_odp_caps & IBV_ODP_SUPPORT_WRITE);
  RecordProperty("device_has_odp", has_odp ? "yes" : "no");
  const VerbsAccess odp{.trusted_whole_chunk = {.read = true, .write = true}, .on_demand = true};

  const absl::StatusOr<std::shared_ptr<VerbsDomain>> opened =
      VerbsDomain::Open({.device = domain_->device_name(), .access = odp});
  const absl::StatusOr<std::shared_ptr<VerbsDomain>> wrapped =
      VerbsDomain::Wrap(domain_->pd(), odp);
  if (has_odp) {
    EXPECT_TRUE(opened.ok()) << opened.status();
    EXPECT_TRUE(wrapped.ok()) << wrapped.status();
    return;
  }
  for (const absl::Status& s : {opened.status(), wrapped.status()}) {
    EXPECT_TRUE(absl::IsUnimplemented(s)) << s;
    EXPECT_THAT(std::string(s.message()),
                HasSubstr(domain_->device_name() + " has no on-demand paging (ODP)"));
    EXPECT_THAT(std::string(s.message()), HasSubstr("leave VerbsAccess::on_demand false"));
  }
  // The device really refuses it: the check is not stricter than the device.
  const Mapping m(64 * kKiB);
  ibv_mr* mr = ibv_reg_mr(domain_->pd(), m.data(), m.length(), odp.ibv_flags());
  EXPECT_EQ(mr, nullptr) << "the device registered ODP memory although it reports no ODP";
  if (mr != nullptr) ibv_dereg_mr(mr);
}

TEST_F(VerbsTest, RemoteWriteWithoutLocalWriteIsRefusedAtOpen) {
  const absl::StatusOr<std::shared_ptr<VerbsDomain>> d =
      VerbsDomain::Open({.device = domain_->device_name(),
                         .access = {.local_write = false, .trusted_whole_chunk = {.write = true}}});
  EXPECT_TRUE(absl::IsInvalidArgument(d.status())) << d.status();
}

TEST_F(VerbsTest, UnmappedMemoryIsRefusedWithTheReason) {
  const Mapping m(1 * kMiB, PROT_NONE);
  ASSERT_NE(m.data(), nullptr);
  const absl::StatusOr<Keys> keys = domain_->Register(m.data(), m.length());
  ASSERT_FALSE(keys.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(keys.status())) << keys.status();
  EXPECT_THAT(std::string(keys.status().message()), HasSubstr("not memory the kernel can pin"));
  EXPECT_EQ(domain_->live_registrations(), 0u);
}

// Runs `body` in a child process that has dropped CAP_IPC_LOCK and lowered RLIMIT_MEMLOCK to
// `limit`, so that the kernel enforces the limit on pinning (root, as in the guest, is otherwise
// exempt). Returns what the child wrote to the pipe, or a failure note.
std::string InUnprivilegedChild(rlim_t limit, const std::function<std::string()>& body) {
  int fds[2];
  if (::pipe(fds) != 0) return "pipe failed";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2] = {};
    std::string out;
    if (::syscall(SYS_capget, &header, data) != 0) {
      out = "capget failed";
    } else {
      const unsigned bit = 1u << CAP_IPC_LOCK;
      data[0].effective &= ~bit;
      data[0].permitted &= ~bit;
      data[0].inheritable &= ~bit;
      const rlimit rl{limit, limit};
      if (::syscall(SYS_capset, &header, data) != 0) {
        out = "capset failed";
      } else if (::setrlimit(RLIMIT_MEMLOCK, &rl) != 0) {
        out = "setrlimit failed";
      } else {
        out = body();
      }
    }
    (void)!::write(fds[1], out.data(), out.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof(buf))) > 0;) out.append(buf, n);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) out += " (child did not exit cleanly)";
  return out;
}

// What a user without CAP_IPC_LOCK gets when the kernel refuses to pin a chunk for RDMA: the
// limit, the numbers and the fix, as kResourceExhausted. Done in a child, which drops the
// capability for good.
TEST_F(VerbsTest, APinRefusedUnderRlimitMemlockSaysSoAndHowToFixIt) {
  const std::string device = domain_->device_name();
  const std::string got = InUnprivilegedChild(64 * kKiB, [&device] {
    absl::StatusOr<std::shared_ptr<VerbsDomain>> d = VerbsDomain::Open({.device = device});
    if (!d.ok()) return "Open: " + d.status().ToString();
    const Mapping m(1 * kMiB);
    absl::StatusOr<Keys> keys = (*d)->Register(m.data(), m.length());
    if (keys.ok()) {
      (*d)->Deregister(*keys);
      return std::string("registered 1 MiB under a 64 KiB RLIMIT_MEMLOCK without CAP_IPC_LOCK");
    }
    return keys.status().ToString();
  });
  EXPECT_THAT(got, HasSubstr("RESOURCE_EXHAUSTED"));
  EXPECT_THAT(got, HasSubstr("ibv_reg_mr of 1 MiB failed"));
  EXPECT_THAT(got, HasSubstr("RLIMIT_MEMLOCK is 64 KiB"));
  EXPECT_THAT(got, HasSubstr("ulimit -l"));
  EXPECT_THAT(got, HasSubstr("VmPin"));
}

// One domain serving two pools grown from two threads at once, while a third thread registers
// and deregisters buffers directly: every registration gets its own keys and the counts add up.
TEST_F(VerbsTest, OneDomainServesSeveralPoolsAndThreadsAtOnce) {
  constexpr int kRawRegistrations = 40;
  std::unique_ptr<Pool> pools[2];
  absl::Status grown[2];
  std::vector<Keys> raw;
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      pools[i] = MakePool({domain_}, 2 * kMiB, 16 * kMiB);
      if (pools[i] != nullptr) grown[i] = pools[i]->Reserve(8 * kMiB);
    });
  }
  threads.emplace_back([&] {
    const Mapping m(64 * kKiB);
    for (int i = 0; i < kRawRegistrations; ++i) {
      absl::StatusOr<Keys> k = domain_->Register(m.data(), m.length());
      if (!k.ok()) return;
      raw.push_back(*k);
    }
    for (const Keys& k : raw) domain_->Deregister(k);
  });
  for (auto& t : threads) t.join();
  ASSERT_EQ(raw.size(), static_cast<std::size_t>(kRawRegistrations));
  std::set<std::uint32_t> pool_lkeys;
  for (int i = 0; i < 2; ++i) {
    ASSERT_NE(pools[i], nullptr);
    ASSERT_TRUE(grown[i].ok()) << grown[i];
    const PoolStats s = pools[i]->GetStats();
    EXPECT_EQ(s.domains[0].registrations, 4u);
    for (const ChunkStats& c : s.chunks) {
      const std::optional<Location> at = pools[i]->Lookup(reinterpret_cast<void*>(c.base));
      ASSERT_TRUE(at);
      pool_lkeys.insert(ToUnderlying(at->lkey()));
    }
  }
  // Every chunk of both pools is its own region. (The raw registrations were deregistered along
  // the way, so the device may have reused their keys for the pools' later chunks.)
  EXPECT_EQ(pool_lkeys.size(), 8u);
  EXPECT_EQ(domain_->live_registrations(), 8u);
  EXPECT_EQ(domain_->total_registrations(), 8u + kRawRegistrations);
  pools[0].reset();
  pools[1].reset();
  EXPECT_EQ(domain_->live_registrations(), 0u);
}

}  // namespace
}  // namespace pinpool
