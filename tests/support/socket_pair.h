// A connected pair of Unix stream sockets (close-on-exec), each end closed with the pair: what the
// sharing tests pass chunks over (pinpool/share.h).
#ifndef PINPOOL_TESTS_SUPPORT_SOCKET_PAIR_H_
#define PINPOOL_TESTS_SUPPORT_SOCKET_PAIR_H_

#include <gtest/gtest.h>
#include <sys/socket.h>

#include "os/fd_passing.h"

namespace pinpool::testing {

struct SocketPair {
  internal::os::UniqueFd a, b;
  SocketPair() {
    int sv[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    a = internal::os::UniqueFd(sv[0]);
    b = internal::os::UniqueFd(sv[1]);
  }
};

}  // namespace pinpool::testing

#endif  // PINPOOL_TESTS_SUPPORT_SOCKET_PAIR_H_
