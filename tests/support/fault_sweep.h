// Every failure point, tried in turn (docs/robustness.md, "Every failure point"): the machinery of
// the fault sweeps (tests/api/fault_sweep_test.cc on the host, the providers' sweeps, the verbs
// sweep in the soft-RoCE guest). SQLite tests every allocation and I/O failure this way.
//
// A scenario is a function that runs one operation of the library (create a pool, share it, hand
// it over...) from a clean state and back to it, and says how it ended. Sweep() runs it once with
// a hook that fails nothing and records every call that reached the fault hook (os::SetFaultHook:
// each system call and provider call the library makes that can fail, the failure points), then
// once per point and per errno that call really returns, with exactly that call failing. After
// every run it checks that nothing leaked: descriptors, threads, VmPin, VmLck, mapped chunk bytes
// reservations and metadata (os::counters, exact), shared mappings, address space (VmSize within
// kVmSlackBytes, without a sanitizer, whose allocator maps as it pleases) and the files of
// the scenario's directory are back to what they were before the run; the scenario itself checks
// that its live blocks kept their bytes and that the outcome is one its documentation allows.
//
// Runs must be deterministic up to the failing point: a scenario keeps background threads from
// reaching the hook (reserve_threads 1, no background growth or trim), and Sweep runs it once
// before counting, so that the library's one-time initializations (membarrier's registration)
// are behind it. A scenario pauses the hook (FaultPlan::Pause) around its setup, its checks and
// its teardown, so that the points are those of the operation under test.
#ifndef PINPOOL_TESTS_SUPPORT_FAULT_SWEEP_H_
#define PINPOOL_TESTS_SUPPORT_FAULT_SWEEP_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "os/os.h"
#include "pinpool/provider.h"
#include "support/proc_status.h"
#include "support/sanitizers.h"

namespace pinpool::testing {

using internal::os::Call;

// The errors each call really returns (its man page and the kernel), the most common first. A
// point fails once per errno here.
inline std::vector<int> ErrnosOf(Call call) {
  switch (call) {
    case Call::kReserve:
    case Call::kMapHugetlb:
    case Call::kMremap:
    case Call::kMapAnonymous:
    case Call::kMapMetadata:
    case Call::kDontFork:
      return {ENOMEM};
    case Call::kPopulate:
      return {ENOMEM, EINTR};  // EINTR: made again
    case Call::kMlock:
      return {ENOMEM, EAGAIN, EPERM};
    case Call::kPinBuffer:
      return {ENOMEM, EFAULT};
    case Call::kCloneBuffers:
      return {EINVAL, ENOMEM};
    case Call::kBindNode:
      return {EINVAL, ENOMEM};
    case Call::kCreateFile:
      return {EMFILE, ENOSPC};
    case Call::kPagemapScan:
      return {ENOTTY};  // no PAGEMAP_SCAN: smaps answers
    case Call::kTruncateFile:
      return {ENOSPC, EIO};
    case Call::kSealFile:
      return {EBUSY};
    case Call::kLeaseFile:
      return {EAGAIN};
    case Call::kLockFile:
      return {ENOLCK};
    case Call::kReopenFile:
      return {EMFILE, EACCES};
    case Call::kDupFd:
      return {EMFILE};
    case Call::kSendMessage:
      return {ENOBUFS, EINTR, EAGAIN};  // EINTR, EAGAIN: made again
    case Call::kReceiveMessage:
      return {ENOMEM, EINTR};
    case Call::kReadKernelFile:
      return {EMFILE};
    case Call::kMembarrier:
      return {EPERM};
    case Call::kThread:
      return {EAGAIN};
    case Call::kSocket:
      return {EMFILE};
    case Call::kBindSocket:
      return {EACCES};
    case Call::kRingSetup:
      return {ENOMEM, EMFILE, EPERM};
    case Call::kRegisterTable:
      return {ENOMEM};
    case Call::kVerbsRegister:
      return {ENOMEM, EFAULT};
    case Call::kVerbsWindow:
      return {ENOMEM};
    case Call::kVerbsPost:
      return {ENOMEM};
    case Call::kUcxMap:
      return {ENOMEM, EIO};
    case Call::kUcxPack:
      return {ENOMEM};
    case Call::kFabricRegister:
      return {ENOMEM, EAGAIN};
    case Call::kFabricBind:
      return {EINVAL};
    case Call::kFabricPost:
      return {EAGAIN};
  }
  return {EIO};
}

// What a process holds that a run must give back.
struct Holdings {
  std::size_t fds = 0;
  std::size_t threads = 0;
  long long vm_pin = 0;
  long long vm_lck = 0;
  long long vm_size = 0;
  std::int64_t chunk_bytes = 0;
  std::int64_t reserved_bytes = 0;
  std::int64_t metadata_bytes = 0;
  std::size_t shared_mappings = 0;
  std::set<std::string> files;  // in the scenario's directory

  static std::size_t Entries(const char* dir) {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++n;
    return n;
  }
  static Holdings Now(const std::string& directory) {
    Holdings h;
    h.fds = Entries("/proc/self/fd");
    h.threads = Entries("/proc/self/task");
    h.vm_pin = ProcStatusBytes("VmPin");
    h.vm_lck = ProcStatusBytes("VmLck");
    h.vm_size = ProcStatusBytes("VmSize");
    h.chunk_bytes = internal::os::counters().chunk_bytes.load();
    h.reserved_bytes = internal::os::counters().reserved_bytes.load();
    h.metadata_bytes = internal::os::counters().metadata_bytes.load();
    std::ifstream maps("/proc/self/maps");
    for (std::string line; std::getline(maps, line);) {
      const std::size_t perms = line.find(' ') + 1;
      if (perms + 3 < line.size() && line[perms + 3] == 's') ++h.shared_mappings;
    }
    if (!directory.empty()) {
      for (const auto& e : std::filesystem::directory_iterator(directory)) {
        h.files.insert(e.path().filename());
      }
    }
    return h;
  }
  // What differs from `before`, in words; empty when nothing does.
  std::string Leaks(const Holdings& before) const {
    std::string out;
    const auto add = [&](const char* what, long long was, long long is) {
      if (was != is) out += absl::StrFormat("%s %d -> %d; ", what, was, is);
    };
    add("descriptors", before.fds, fds);
    add("threads", before.threads, threads);
    add("VmPin", before.vm_pin, vm_pin);
    add("VmLck", before.vm_lck, vm_lck);
    add("chunk bytes mapped", before.chunk_bytes, chunk_bytes);
    add("shared mappings", before.shared_mappings, shared_mappings);
    add("address space reserved", before.reserved_bytes, reserved_bytes);
    add("metadata mapped", before.metadata_bytes, metadata_bytes);
    // A sanitizer's allocator grows and shrinks VmSize by megabytes a run: the exact counts above
    // stand for it there.
    if (!kMlockIsANoOp && std::llabs(vm_size - before.vm_size) > kVmSlackBytes) {
      add("VmSize", before.vm_size, vm_size);
    }
    for (const std::string& f : files) {
      if (!before.files.contains(f)) out += "file left: " + f + "; ";
    }
    for (const std::string& f : before.files) {
      if (!files.contains(f)) out += "file removed: " + f + "; ";
    }
    return out;
  }
};

// How a run ended, as the scenario saw it.
struct Outcome {
  absl::Status status;      // of the operation under test (OK: done, or recovered)
  std::size_t blocks = 0;   // live blocks checked at the end
  std::size_t changed = 0;  // of which lost or with other bytes
};

// One scenario's sweep: its failure points and what every run gave.
struct SweepReport {
  std::string scenario;
  std::vector<Call> points;                       // in the order reached
  std::size_t runs = 0;                           // failing runs (each point x each of its errnos)
  std::size_t leaks = 0;                          // runs that left something behind
  std::size_t lost_blocks = 0;                    // blocks lost or changed, over every run
  std::map<absl::StatusCode, std::size_t> codes;  // outcomes of the failing runs
  std::size_t not_failed = 0;                     // runs whose failing call was never reached

  std::string Summary() const {
    std::map<std::string, int> by_call;
    for (Call c : points) ++by_call[internal::os::CallName(c)];
    std::string calls, outcomes;
    for (const auto& [name, n] : by_call)
      calls += absl::StrFormat("%s%s %d", calls.empty() ? "" : ", ", name, n);
    for (const auto& [code, n] : codes) {
      outcomes += absl::StrFormat(
          "%s%s %d", outcomes.empty() ? "" : ", ",
          code == absl::StatusCode::kOk ? "recovered" : absl::StatusCodeToString(code), n);
    }
    return absl::StrFormat(
        "fault sweep %s: %d failure points (%s); %d runs (%s); %d leaks, %d lost blocks", scenario,
        points.size(), calls, runs, outcomes, leaks, lost_blocks);
  }
};

// The hook's state: one sweep at a time per process (the hook is process-wide).
class FaultPlan {
 public:
  static FaultPlan& Get() {
    static FaultPlan plan;
    return plan;
  }
  // Counts and records every call; fails none.
  void Record() {
    std::lock_guard<std::mutex> lock(mu_);
    seen_.clear();
    fail_at_ = -1;
    fired_ = false;
    recording_ = true;
  }
  // Fails call number `index` (from 0) with `err`, once.
  void FailAt(std::size_t index, int err) {
    std::lock_guard<std::mutex> lock(mu_);
    seen_.clear();
    fail_at_ = static_cast<long>(index);
    err_ = err;
    fired_ = false;
    recording_ = false;
  }
  void Off() {
    std::lock_guard<std::mutex> lock(mu_);
    recording_ = false;
    fail_at_ = -1;
  }
  std::vector<Call> seen() const {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }
  bool fired() const {
    std::lock_guard<std::mutex> lock(mu_);
    return fired_;
  }
  // The call that failed, once fired.
  Call failed_call() const {
    std::lock_guard<std::mutex> lock(mu_);
    return failed_;
  }

  static int Hook(Call call, std::size_t) { return Get().Ask(call); }

  // While one lives (a scenario's setup, its checks and its teardown), calls neither count nor
  // fail: the sweep covers the operation under test.
  class Pause {
   public:
    Pause() { Get().paused_.fetch_add(1); }
    ~Pause() { Get().paused_.fetch_sub(1); }
    Pause(const Pause&) = delete;
    Pause& operator=(const Pause&) = delete;
  };

 private:
  int Ask(Call call) {
    if (paused_.load() != 0) return 0;
    std::lock_guard<std::mutex> lock(mu_);
    const long index = static_cast<long>(seen_.size());
    if (recording_ || fail_at_ >= 0) seen_.push_back(call);
    if (index == fail_at_ && !fired_) {
      fired_ = true;
      failed_ = call;
      return err_;
    }
    return 0;
  }

  mutable std::mutex mu_;
  std::atomic<int> paused_{0};
  std::vector<Call> seen_;
  long fail_at_ = -1;
  int err_ = 0;
  bool fired_ = false;
  bool recording_ = false;
  Call failed_ = Call::kReserve;
};

// Installs the plan's hook for a scope. The hook is this program's: a test program links the
// library's internals statically, and a provider library (libpinpool_ucx, libpinpool_fabric)
// reaches it only through the program's own InjectedProviderFault (pinpool/provider.h), which
// the program exports (ENABLE_EXPORTS). Naming it here links it in; otherwise the provider
// library would bind to libpinpool.so's copy, whose hook nobody set.
class FaultHookScope {
 public:
  FaultHookScope() : previous_(internal::os::SetFaultHook(&FaultPlan::Hook)) {
    [[maybe_unused]] static auto* volatile const provider_seam = &InjectedProviderFault;
  }
  ~FaultHookScope() {
    FaultPlan::Get().Off();
    internal::os::SetFaultHook(previous_);
  }
  FaultHookScope(const FaultHookScope&) = delete;
  FaultHookScope& operator=(const FaultHookScope&) = delete;

 private:
  internal::os::FaultHook previous_;
};

// A run's outcome is allowed: OK (the operation succeeded, or recovered from the fault), or one of
// `documented` with a message.
using Allowed = std::set<absl::StatusCode>;

// Runs `scenario` as the file comment says and checks every run. `directory`: where the
// scenario's pools keep their files ("" when none). Returns the report (also printed).
inline SweepReport Sweep(const std::string& name, const std::function<Outcome()>& scenario,
                         const Allowed& documented, const std::string& directory = "") {
  SweepReport report;
  report.scenario = name;
  FaultHookScope hook;
  FaultPlan& plan = FaultPlan::Get();
  // The snapshots read /proc through the library's own reader, a failure point: paused.
  const auto holdings = [&] {
    FaultPlan::Pause pause;
    return Holdings::Now(directory);
  };
  const auto run_checked = [&](const std::string& what) -> Outcome {
    const Holdings before = holdings();
    Outcome o = scenario();
    const std::string leaks = holdings().Leaks(before);
    if (!leaks.empty()) {
      ++report.leaks;
      ADD_FAILURE() << name << ", " << what << ": left behind: " << leaks << "(status " << o.status
                    << ")";
    }
    if (o.changed != 0) {
      report.lost_blocks += o.changed;
      ADD_FAILURE() << name << ", " << what << ": " << o.changed << " of " << o.blocks
                    << " live blocks lost or changed (status " << o.status << ")";
    }
    return o;
  };
  plan.Off();
  // Not checked for leaks: the process's first thread, first arena of malloc... stay.
  const Outcome warm = scenario();
  EXPECT_TRUE(warm.status.ok()) << name << " fails with no fault: " << warm.status;
  plan.Record();
  const Outcome counted = run_checked("the counting run");
  EXPECT_TRUE(counted.status.ok()) << name << " fails with no fault: " << counted.status;
  report.points = plan.seen();
  for (std::size_t i = 0; i < report.points.size(); ++i) {
    for (int err : ErrnosOf(report.points[i])) {
      plan.FailAt(i, err);
      const std::string what =
          absl::StrFormat("point %d (%s) failing with %s", i,
                          internal::os::CallName(report.points[i]), std::strerror(err));
      const Outcome o = run_checked(what);
      ++report.runs;
      if (!plan.fired()) {
        ++report.not_failed;  // the path changed before reaching it (a retry, a cache)
      } else if (plan.failed_call() != report.points[i]) {
        ADD_FAILURE() << name << ", " << what << ": the run reached "
                      << internal::os::CallName(plan.failed_call())
                      << " there: the scenario is not deterministic";
      }
      ++report.codes[o.status.code()];
      if (!o.status.ok()) {
        EXPECT_TRUE(documented.contains(o.status.code()))
            << name << ", " << what << ": an undocumented error: " << o.status;
        EXPECT_FALSE(o.status.message().empty()) << name << ", " << what;
      }
    }
  }
  plan.Off();
  std::printf("%s\n", report.Summary().c_str());
  std::fflush(stdout);
  return report;
}

}  // namespace pinpool::testing

#endif  // PINPOOL_TESTS_SUPPORT_FAULT_SWEEP_H_
