// Status macros for the runtime. Abseil's LTS 20220623 ships none, so they
// are defined once here.

#ifndef STEPC_RUNTIME_STATUS_MACROS_H_
#define STEPC_RUNTIME_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace stepc {

// The status of a failed native call (CUDA, NCCL, MPI): "<call> failed at
// <file>:<line>: <detail>". Each API's STEPC_<API>_RETURN_IF_ERROR
// (cuda_status.h, nccl_status.h, mpi_status.h) builds on this one.
inline absl::Status NativeCallError(absl::StatusCode code, const char* call, const char* file,
                                    int line, absl::string_view detail) {
  return absl::Status(code, absl::StrCat(call, " failed at ", file, ":", line, ": ", detail));
}

}  // namespace stepc

#define STEPC_STATUS_CONCAT_INNER_(a, b) a##b
#define STEPC_STATUS_CONCAT_(a, b) STEPC_STATUS_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define STEPC_RETURN_IF_ERROR(expr)                          \
  do {                                                       \
    ::absl::Status stepc_status_ = (expr);                   \
    if (!stepc_status_.ok()) return stepc_status_;           \
  } while (0)

// `STEPC_ASSIGN_OR_RETURN(auto x, F());` assigns the value of the
// absl::StatusOr `F()` to `x`, or returns its error.
#define STEPC_ASSIGN_OR_RETURN(lhs, expr)                                    \
  STEPC_ASSIGN_OR_RETURN_IMPL_(                                              \
      STEPC_STATUS_CONCAT_(stepc_statusor_, __LINE__), lhs, expr)

#define STEPC_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                 \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

#endif  // STEPC_RUNTIME_STATUS_MACROS_H_
