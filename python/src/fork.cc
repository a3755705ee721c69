// The fork generation (fork.h).
#include "fork.h"

#include <pthread.h>

#include <string>

#include "absl/strings/str_format.h"
#include "errors.h"

namespace pinpool::python {

std::atomic<std::uint64_t> fork_generation{1};

namespace {

void InChild() { fork_generation.fetch_add(1, std::memory_order_relaxed); }

std::string ForkedMessage(const char* what) {
  return absl::StrFormat(
      "this %s belongs to the parent process: a fork() child has no mapping of the pool's "
      "memory and may not use the parent's registrations; attach to the pool in the child "
      "instead (pinpool.Attachment), or start workers with the spawn or forkserver method "
      "(docs/python.md, \"fork\")",
      what);
}

}  // namespace

void WatchForks() {
  static const bool installed = pthread_atfork(nullptr, nullptr, InChild) == 0;
  (void)installed;
}

void CheckNotForked(std::uint64_t generation, const char* what) {
  if (Stale(generation)) ThrowForked(ForkedMessage(what));
}

bool NotForked(std::uint64_t generation, const char* what) {
  if (!Stale(generation)) return true;
  SetForkedError(ForkedMessage(what));
  return false;
}

}  // namespace pinpool::python
