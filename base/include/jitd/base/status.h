// The one way jitd code passes an error up.
//
//   JITD_RETURN_IF_ERROR(cache->Flush());
//       returns the absl::Status of the expression when it is not OK (the
//       enclosing function returns absl::Status or any absl::StatusOr<T>).
//
//   JITD_ASSIGN_OR_RETURN(std::string bytes, files::ReadWholeFile(path));
//       evaluates an absl::StatusOr<T> once; on error returns its status,
//       else moves the value into the declaration (or assignment) on the
//       left. One per line: the temporary is named after the line.
#pragma once

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define JITD_RETURN_IF_ERROR(expr)                                  \
  do {                                                              \
    if (::absl::Status jitd_status_ = (expr); !jitd_status_.ok()) { \
      return jitd_status_;                                          \
    }                                                               \
  } while (false)

#define JITD_STATUS_CONCAT_INNER_(a, b) a##b
#define JITD_STATUS_CONCAT_(a, b) JITD_STATUS_CONCAT_INNER_(a, b)
#define JITD_ASSIGN_OR_RETURN(lhs, expr) \
  JITD_ASSIGN_OR_RETURN_IMPL_(JITD_STATUS_CONCAT_(jitd_statusor_, __LINE__), lhs, expr)
#define JITD_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr)   \
  auto statusor = (expr);                                  \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = *std::move(statusor)
