// common.cuh - what the CUDA kernel library's files share: error statuses,
// bf16/f32 loads and stores, shapes passed by value, warp reductions and the
// device-side id check.

#ifndef STEPC_RUNTIME_KERNELS_CUDA_COMMON_CUH_
#define STEPC_RUNTIME_KERNELS_CUDA_COMMON_CUH_

#ifdef STEPC_CUDA_EMULATION
#include "runtime/kernels/cuda/emulation.h"
#else
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#endif

#include <cstdint>

#include "runtime/kernels/cuda/cuda_kernels.h"
#include "runtime/kernels/cuda/launch_config.h"
#include "runtime/kernels/cuda/vector_access.cuh"

// A device function every caller runs the same compiled code of (the same
// arithmetic, whatever the caller lets the compiler fuse).
#ifdef STEPC_CUDA_EMULATION
#define STEPC_NOINLINE __attribute__((noinline))
#else
#define STEPC_NOINLINE __noinline__
#endif

namespace stepc::cuda {

// Formats "call failed at file:line: why" into ctx->error; returns 1.
int Fail(stepc_cuda_ctx* ctx, const char* call, const char* file, int line, const char* why);
// The status of the launch just made (cudaGetLastError).
int Launched(stepc_cuda_ctx* ctx, const char* kernel, const char* file, int line);

#define STEPC_LAUNCHED(ctx, kernel) ::stepc::cuda::Launched(ctx, kernel, __FILE__, __LINE__)
#define STEPC_CUDA_TRY(ctx, call)                                                         \
  do {                                                                                    \
    cudaError_t stepc_rc_ = (call);                                                       \
    if (stepc_rc_ != cudaSuccess)                                                         \
      return ::stepc::cuda::Fail(ctx, #call, __FILE__, __LINE__, cudaGetErrorString(stepc_rc_)); \
  } while (0)

// Dynamic shared memory above 48 KiB must be allowed per kernel (cheap to
// repeat: the launch wrappers ask before every launch).
template <typename Kernel>
cudaError_t AllowSharedMemory(Kernel kernel, int64_t bytes) {
  if (bytes <= 48 * 1024) return cudaSuccess;
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(bytes));
}

__device__ __forceinline__ float Load(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float Load(const __nv_bfloat16* p, int64_t i) {
  return __bfloat162float(p[i]);
}
__device__ __forceinline__ void Store(float* p, int64_t i, float x) { p[i] = x; }
__device__ __forceinline__ void Store(__nv_bfloat16* p, int64_t i, float x) {
  p[i] = __float2bfloat16(x);
}
// Stores to a buffer whose element type is known at run time.
__device__ __forceinline__ void StoreAs(void* p, int type, int64_t i, float x) {
  if (type == STEPC_CUDA_BF16)
    Store(static_cast<__nv_bfloat16*>(p), i, x);
  else
    Store(static_cast<float*>(p), i, x);
}

// Shapes travel to kernels by value; ranks above kMaxRank are refused.
constexpr int kMaxRank = kMaxTensorRank;
struct Dims {
  int rank = 0;
  int64_t size[kMaxRank] = {};
  int64_t stride[kMaxRank] = {};  // of the tensor the offsets index
};

__device__ __forceinline__ float WarpSum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}
__device__ __forceinline__ float WarpMax(float x) {
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}

// First failing id check wins: [site, position, id, bound].
__device__ __forceinline__ void ReportBadId(int32_t* status, int32_t site, int64_t position,
                                            int32_t id, int64_t bound) {
  if (atomicCAS(status, 0, site) == 0) {
    status[1] = static_cast<int32_t>(position);
    status[2] = id;
    status[3] = static_cast<int32_t>(bound);
  }
}

// out[o] = Σ (kind 0, 2) or max (kind 1) of partial[c · outputs + o] over
// the chunks, times `scale`: the second stage of every chunked reduction.
int FinishChunks(stepc_cuda_ctx* ctx, const float* partial, int64_t chunks, int64_t outputs,
                 int kind, float scale, float* out);
// out[c] = Σ over r of in[r · cols + c], in a fixed order (a reduction's
// kernels; scratch: ReduceScratchFloats(cols, rows)).
int SumRows(stepc_cuda_ctx* ctx, const float* in, int64_t rows, int64_t cols, float* scratch,
            float* out);

}  // namespace stepc::cuda

#endif  // STEPC_RUNTIME_KERNELS_CUDA_COMMON_CUH_
