// NCCL results as statuses.

#ifndef STEPC_RUNTIME_NCCL_STATUS_H_
#define STEPC_RUNTIME_NCCL_STATUS_H_

#include <nccl.h>

#include "runtime/status_macros.h"

// Returns an Unavailable status naming the call, file and line if `call`
// fails (a peer or the network, usually).
#define STEPC_NCCL_RETURN_IF_ERROR(call)                                                 \
  do {                                                                                   \
    ncclResult_t stepc_nccl_rc_ = (call);                                                \
    if (stepc_nccl_rc_ != ncclSuccess)                                                   \
      return ::stepc::NativeCallError(absl::StatusCode::kUnavailable, #call, __FILE__,   \
                                      __LINE__, ncclGetErrorString(stepc_nccl_rc_));     \
  } while (0)

#endif  // STEPC_RUNTIME_NCCL_STATUS_H_
