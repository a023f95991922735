// SPDX-License-Identifier: MIT
// Internal: early-return helpers for absl::Status (the installed Abseil,
// 20220623, predates ABSL_RETURN_IF_ERROR / ABSL_ASSIGN_OR_RETURN).

#ifndef URAID_SRC_STATUS_MACROS_H_
#define URAID_SRC_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define URAID_CONCAT_INNER_(a, b) a##b
#define URAID_CONCAT_(a, b) URAID_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status) and returns it from the enclosing
// function when it is not OK.
#define RETURN_IF_ERROR(expr)                      \
  do {                                             \
    ::absl::Status uraid_status_ = (expr);         \
    if (!uraid_status_.ok()) return uraid_status_; \
  } while (0)

// `lhs = value of rexpr` (an absl::StatusOr), or returns its error.
#define ASSIGN_OR_RETURN(lhs, rexpr) \
  ASSIGN_OR_RETURN_IMPL_(URAID_CONCAT_(uraid_statusor_, __LINE__), lhs, rexpr)
#define ASSIGN_OR_RETURN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                           \
  if (!tmp.ok()) return tmp.status();           \
  lhs = std::move(tmp).value()

#endif  // URAID_SRC_STATUS_MACROS_H_
