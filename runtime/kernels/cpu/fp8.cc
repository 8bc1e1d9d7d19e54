// step.quantize_fp8 on the CPU: each tile's largest magnitude, its
// power-of-two scale and the fp8 rounding, with the helpers of
// elementwise_math.h the interpreter and the CUDA kernel use too.

#include <algorithm>
#include <cmath>

#include "runtime/kernels/cpu/cpu_kernels.h"
#include "runtime/kernels/elementwise_math.h"

extern "C" void stepc_cpu_quantize_fp8(const float* x, int64_t matrices, int64_t rows,
                                       int64_t cols, int64_t tile_rows, int64_t tile_cols,
                                       int format, float* y) {
  const int64_t row_tiles = (rows + tile_rows - 1) / tile_rows;
  const int64_t col_tiles = (cols + tile_cols - 1) / tile_cols;
#pragma omp parallel for collapse(2)
  for (int64_t m = 0; m < matrices; ++m)
    for (int64_t t = 0; t < row_tiles * col_tiles; ++t) {
      const int64_t r0 = (t / col_tiles) * tile_rows, c0 = (t % col_tiles) * tile_cols;
      const int64_t r1 = std::min(rows, r0 + tile_rows), c1 = std::min(cols, c0 + tile_cols);
      const float* xm = x + m * rows * cols;
      float* ym = y + m * rows * cols;
      float amax = 0.0f;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) {
          const float v = std::fabs(xm[r * cols + c]);
          amax = std::isnan(v) || std::isnan(amax) ? NAN : std::max(amax, v);
        }
      const float s = stepc_fp8_tile_scale<float>(amax, format);
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c)
          ym[r * cols + c] = stepc_round_fp8<float>(xm[r * cols + c] * s, format) / s;
    }
}
