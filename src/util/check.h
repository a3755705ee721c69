// Checks in two tiers (as scudo and mimalloc do):
//  PINPOOL_CHECK(cond, fmt, ...)  always on: guards against corruption (foreign frees, broken
//                                 invariants a user can trigger). Prints and aborts.
//  PINPOOL_DCHECK(cond)           debug builds only; in release it is type-checked, never run.
#ifndef PINPOOL_UTIL_CHECK_H_
#define PINPOOL_UTIL_CHECK_H_

namespace pinpool::internal {
[[noreturn]] void Die(const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
}  // namespace pinpool::internal

#define PINPOOL_CHECK(cond, ...)                                                            \
  (__builtin_expect(!(cond), 0) ? ::pinpool::internal::Die(__FILE__, __LINE__, __VA_ARGS__) \
                                : (void)0)

#ifdef NDEBUG
#define PINPOOL_DCHECK(cond)  \
  do {                        \
    while (false && (cond)) { \
    }                         \
  } while (false)
#else
#define PINPOOL_DCHECK(cond) PINPOOL_CHECK(cond, "internal invariant violated: %s", #cond)
#endif

#endif  // PINPOOL_UTIL_CHECK_H_
