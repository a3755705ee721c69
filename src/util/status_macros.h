// Early-return helpers for absl::Status / absl::StatusOr (Debian 12's Abseil has none).
#ifndef PINPOOL_UTIL_STATUS_MACROS_H_
#define PINPOOL_UTIL_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define PINPOOL_CONCAT_INNER_(a, b) a##b
#define PINPOOL_CONCAT_(a, b) PINPOOL_CONCAT_INNER_(a, b)

// Returns the status from the enclosing function if `expr` is not OK.
#define PINPOOL_RETURN_IF_ERROR(expr)                  \
  do {                                                 \
    ::absl::Status pinpool_status_ = (expr);           \
    if (!pinpool_status_.ok()) return pinpool_status_; \
  } while (false)

// `lhs = value of expr`, or returns its status if it is an error.
#define PINPOOL_ASSIGN_OR_RETURN(lhs, expr) \
  PINPOOL_ASSIGN_OR_RETURN_IMPL_(PINPOOL_CONCAT_(pinpool_statusor_, __LINE__), lhs, expr)
#define PINPOOL_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return std::move(tmp).status();       \
  lhs = std::move(tmp).value()

#endif  // PINPOOL_UTIL_STATUS_MACROS_H_
