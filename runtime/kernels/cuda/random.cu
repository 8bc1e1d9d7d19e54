// dropout: one Philox draw per element (runtime/kernels/philox.h, the header
// the CPU kernel and the interpreter include), grid-stride over elements.
// The seed, step and first row live in device memory: read in the kernel.

#include "runtime/kernels/cuda/common.cuh"
#include "runtime/kernels/philox.h"

namespace stepc::cuda {
namespace {

__global__ void DropoutKernel(const float* x, const int32_t* seed, const float* step,
                              const int32_t* first_row, int64_t n, int64_t row_size,
                              uint32_t threshold, float scale, uint32_t stream, float* y) {
  const uint32_t key_seed = (uint32_t)*seed, step_number = (uint32_t)*step;
  const int64_t first = first_row ? (int64_t)*first_row * row_size : 0;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    y[i] = stepc_dropout_keep(key_seed, stream, step_number, (uint64_t)(first + i), threshold)
               ? x[i] * scale
               : 0.0f;
}

int Dropout(stepc_cuda_ctx* ctx, const float* x, const int32_t* seed, const float* step,
            const int32_t* first_row, int64_t n, int64_t row_size, double rate, int64_t stream,
            float* y) {
  STEPC_LAUNCH(ElementwiseBlocks(n), kThreads, 0, ctx->stream, DropoutKernel)(
      x, seed, step, first_row, n, row_size, stepc_dropout_threshold(rate),
      stepc_dropout_scale(rate), (uint32_t)stream, y);
  return STEPC_LAUNCHED(ctx, "DropoutKernel");
}

}  // namespace
}  // namespace stepc::cuda

extern "C" int stepc_cuda_dropout(stepc_cuda_ctx* ctx, const float* x, const int32_t* seed,
                                  const float* step, int64_t n, int64_t row_size, double rate,
                                  int64_t stream, float* y) {
  return stepc::cuda::Dropout(ctx, x, seed, step, nullptr, n, row_size, rate, stream, y);
}

extern "C" int stepc_cuda_dropout_rows(stepc_cuda_ctx* ctx, const float* x, const int32_t* seed,
                                       const float* step, const int32_t* first_row, int64_t n,
                                       int64_t row_size, double rate, int64_t stream, float* y) {
  return stepc::cuda::Dropout(ctx, x, seed, step, first_row, n, row_size, rate, stream, y);
}
