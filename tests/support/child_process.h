// A forked child process for tests that need another process (an attached client, a process
// truncating a chunk's file, a predecessor handing a pool over), and the one way they attach to
// a shared pool. The child runs a function and exits with its return value, never returning
// into the test (so GoogleTest's state is not run twice); the parent waits for it or kills it.
// A child the test forgets is killed and reaped when its handle goes.
//
// Pool memory is MADV_DONTFORK: a forked child sees none of the parent's chunks, so a child
// reaches pool memory only by attaching (AttachedChild) or through a pool of its own.
#ifndef PINPOOL_TESTS_SUPPORT_CHILD_PROCESS_H_
#define PINPOOL_TESTS_SUPPORT_CHILD_PROCESS_H_

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <memory>
#include <utility>

#include "pinpool/share.h"
#include "support/socket_pair.h"

namespace pinpool::testing {

class ChildProcess {
 public:
  // Forks; the child runs `body` and _exits with what it returns.
  explicit ChildProcess(const std::function<int()>& body) : pid_(::fork()) {
    EXPECT_GE(pid_, 0) << "fork";
    if (pid_ == 0) _exit(body());
  }
  ~ChildProcess() {
    if (pid_ > 0 && status_ < 0) Kill();
  }
  ChildProcess(ChildProcess&& other) noexcept
      : pid_(std::exchange(other.pid_, -1)), status_(other.status_) {}
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const noexcept { return pid_; }
  // Waits for the child to end; its wait status.
  int Wait() {
    if (status_ < 0 && pid_ > 0) {
      int status = 0;
      EXPECT_EQ(::waitpid(pid_, &status, 0), pid_);
      status_ = status;
    }
    return status_;
  }
  // SIGKILL, then Wait.
  int Kill() {
    if (status_ < 0 && pid_ > 0) ::kill(pid_, SIGKILL);
    return Wait();
  }
  // Waits; true when the child exited with `code`.
  bool ExitsWith(int code) {
    const int status = Wait();
    return WIFEXITED(status) && WEXITSTATUS(status) == code;
  }

 private:
  pid_t pid_;
  int status_ = -1;  // the wait status once reaped
};

// A child that attaches to the pool the parent shares on `pair.a` (Pool::Share): it closes the
// parent's end, receives the Attachment on `pair.b` (exit status 2 when that fails) and returns
// body(attachment, socket). The parent closes `pair.b` and calls Share on `pair.a`.
inline ChildProcess AttachedChild(SocketPair& pair,
                                  const std::function<int(Attachment&, int socket)>& body) {
  return ChildProcess([&] {
    pair.a.reset();
    absl::StatusOr<std::unique_ptr<Attachment>> attachment = Attachment::Receive(pair.b.get());
    if (!attachment.ok()) return 2;
    return body(**attachment, pair.b.get());
  });
}

}  // namespace pinpool::testing

#endif  // PINPOOL_TESTS_SUPPORT_CHILD_PROCESS_H_
