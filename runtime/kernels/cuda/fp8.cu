// step.quantize_fp8 on the GPU, as kernels/cpu/fp8.cc: a thread per tile
// (its largest magnitude, its power-of-two scale, the fp8 rounding). A
// first version: correct, not a fused cast.

#include "runtime/kernels/cuda/common.cuh"
#include "runtime/kernels/elementwise_math.h"

namespace stepc::cuda {
namespace {

__global__ void QuantizeFp8Kernel(const float* x, int64_t matrices, int64_t rows, int64_t cols,
                                  int64_t tile_rows, int64_t tile_cols, int format, float* y) {
  const int64_t row_tiles = (rows + tile_rows - 1) / tile_rows;
  const int64_t col_tiles = (cols + tile_cols - 1) / tile_cols;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
       i < matrices * row_tiles * col_tiles; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t m = i / (row_tiles * col_tiles), t = i % (row_tiles * col_tiles);
    const int64_t r0 = (t / col_tiles) * tile_rows, c0 = (t % col_tiles) * tile_cols;
    const int64_t r1 = r0 + tile_rows < rows ? r0 + tile_rows : rows;
    const int64_t c1 = c0 + tile_cols < cols ? c0 + tile_cols : cols;
    const float* xm = x + m * rows * cols;
    float* ym = y + m * rows * cols;
    float amax = 0.0f;
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = c0; c < c1; ++c) {
        const float v = fabsf(xm[r * cols + c]);
        amax = (v != v || amax != amax) ? NAN : fmaxf(amax, v);
      }
    const float s = stepc_fp8_tile_scale<float>(amax, format);
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = c0; c < c1; ++c)
        ym[r * cols + c] = stepc_round_fp8<float>(xm[r * cols + c] * s, format) / s;
  }
}

}  // namespace
}  // namespace stepc::cuda

using namespace stepc::cuda;

extern "C" int stepc_cuda_quantize_fp8(stepc_cuda_ctx* ctx, const float* x, int64_t matrices,
                                       int64_t rows, int64_t cols, int64_t tile_rows,
                                       int64_t tile_cols, int format, float* y) {
  const int64_t tiles =
      matrices * ((rows + tile_rows - 1) / tile_rows) * ((cols + tile_cols - 1) / tile_cols);
  STEPC_LAUNCH(ElementwiseBlocks(tiles), kThreads, 0, ctx->stream, QuantizeFp8Kernel)(
      x, matrices, rows, cols, tile_rows, tile_cols, format, y);
  return STEPC_LAUNCHED(ctx, "QuantizeFp8Kernel");
}
