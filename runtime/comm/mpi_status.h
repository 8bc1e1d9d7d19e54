// MPI results as statuses (communicators use MPI_ERRORS_RETURN).

#ifndef STEPC_RUNTIME_MPI_STATUS_H_
#define STEPC_RUNTIME_MPI_STATUS_H_

#include <mpi.h>

#include <string>

#include "runtime/status_macros.h"

namespace stepc {

// MPI's text for an error code.
inline std::string MpiErrorText(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, length);
}

}  // namespace stepc

// Returns an Unavailable status naming the call, file and line if `call`
// fails.
#define STEPC_MPI_RETURN_IF_ERROR(call)                                                  \
  do {                                                                                   \
    int stepc_mpi_rc_ = (call);                                                          \
    if (stepc_mpi_rc_ != MPI_SUCCESS)                                                    \
      return ::stepc::NativeCallError(absl::StatusCode::kUnavailable, #call, __FILE__,   \
                                      __LINE__, ::stepc::MpiErrorText(stepc_mpi_rc_));   \
  } while (0)

#endif  // STEPC_RUNTIME_MPI_STATUS_H_
