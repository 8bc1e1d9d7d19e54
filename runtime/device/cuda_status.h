// CUDA runtime results as statuses (on a GPU, or on the host emulation).

#ifndef STEPC_RUNTIME_CUDA_STATUS_H_
#define STEPC_RUNTIME_CUDA_STATUS_H_

#ifdef STEPC_CUDA_EMULATION
#include "runtime/kernels/cuda/emulation.h"
#else
#include <cuda_runtime.h>
#endif

#include "runtime/status_macros.h"

// Returns an Internal status naming the call, file and line if `call` fails.
#define STEPC_CUDA_RETURN_IF_ERROR(call)                                                 \
  do {                                                                                   \
    cudaError_t stepc_cuda_rc_ = (call);                                                 \
    if (stepc_cuda_rc_ != cudaSuccess)                                                   \
      return ::stepc::NativeCallError(absl::StatusCode::kInternal, #call, __FILE__,      \
                                      __LINE__, cudaGetErrorString(stepc_cuda_rc_));     \
  } while (0)

#endif  // STEPC_RUNTIME_CUDA_STATUS_H_
