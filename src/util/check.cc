// The one place pinpool aborts. Writes with write(2) directly: the heap may be the thing that
// is broken, so no allocation happens here.
#include "util/check.h"

#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>

namespace pinpool::internal {

void Die(const char* file, int line, const char* fmt, ...) {
  char buf[1024];
  int n = std::snprintf(buf, sizeof buf, "pinpool: fatal: ");
  va_list ap;
  va_start(ap, fmt);
  n += std::vsnprintf(buf + n, sizeof buf - n, fmt, ap);
  va_end(ap);
  if (n > static_cast<int>(sizeof buf) - 64) n = sizeof buf - 64;
  n += std::snprintf(buf + n, sizeof buf - n, " (%s:%d)\n", file, line);
  [[maybe_unused]] ssize_t w = ::write(STDERR_FILENO, buf, static_cast<size_t>(n));
  std::abort();
}

}  // namespace pinpool::internal
