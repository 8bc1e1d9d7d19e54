// stepc_cuda_matmul for the host emulation: what cuBLASLt computes (f32
// accumulation of bf16 or f32 operands, bias, GELU/DGELU epilogues with the
// same tanh GELU) on the same column-major problem, as plain loops. Only for
// emulated CUDA steps in tests.

#include <cstdio>
#include <algorithm>
#include <cstring>
#include <vector>

#include "runtime/kernels/cuda/cuda_kernels.h"
#include "runtime/kernels/cuda/gemm_layout.h"
#include "runtime/kernels/elementwise_math.h"

namespace {

float Read(const void* p, int type, int64_t i) {
  return type == STEPC_CUDA_BF16 ? __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i])
                                 : static_cast<const float*>(p)[i];
}

void Write(void* p, int type, int64_t i, float x) {
  if (type == STEPC_CUDA_BF16)
    static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16(x);
  else
    static_cast<float*>(p)[i] = x;
}

}  // namespace

// Runs the column-major problem gemm.cu hands cuBLASLt (gemm_layout.h)
// literally, so the emulated steps exercise that mapping too.
extern "C" int stepc_cuda_matmul(stepc_cuda_ctx* ctx, const void* a, const void* b, void* c,
                                 int64_t batch, int64_t m, int64_t n, int64_t k, int transpose_a,
                                 int transpose_b, int shared_rhs, int in_type, int out_type,
                                 const float* bias, int epilogue, void* aux) {
  if (epilogue != STEPC_EPILOGUE_NONE && (out_type != STEPC_CUDA_F32 || !aux || n % 8 != 0)) {
    std::snprintf(ctx->error, ctx->error_len,
                  "a GELU epilogue needs an f32 result, an aux buffer and N divisible by 8");
    return 1;
  }
  using stepc::cuda::ColumnMajor;
  const stepc::cuda::ColumnMajorGemm p = stepc::cuda::ToColumnMajor(stepc::cuda::GemmShape{
      batch, m, n, k, transpose_a != 0, transpose_b != 0, shared_rhs != 0});
  // Element (r, c) of op(x) for product q.
  auto at = [](const ColumnMajor& x, int64_t q, int64_t r, int64_t c) {
    return q * x.batch_stride + (x.transposed ? c + r * x.ld : r + c * x.ld);
  };
  const int64_t depth = p.first.transposed ? p.first.rows : p.first.cols;
  float* auxf = static_cast<float*>(aux);
  // On the stream: run now, or recorded while it is captured.
  stepc::emu::Enqueue(ctx->stream, [=] {
    const int64_t rows = p.result.rows, cols = p.result.cols;
    // op(first) by rows and op(second) by depth, read once as f32, so each
    // result row is one pass of contiguous multiply-adds over its columns.
    // Every element still sums its products in depth order from zero, as
    // the plain loop over (i, j, t) did: the same bits, several times faster.
    std::vector<float> first(rows * depth), second(depth * cols), acc(cols);
    for (int64_t q = 0; q < p.batch; ++q) {
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t t = 0; t < depth; ++t)
          first[i * depth + t] = Read(b, in_type, at(p.first, q, i, t));
      for (int64_t t = 0; t < depth; ++t)
        for (int64_t j = 0; j < cols; ++j)
          second[t * cols + j] = Read(a, in_type, at(p.second, q, t, j));
      for (int64_t i = 0; i < rows; ++i) {
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t t = 0; t < depth; ++t) {
          const float x = first[i * depth + t];
          const float* y = &second[t * cols];
          for (int64_t j = 0; j < cols; ++j) acc[j] += x * y[j];
        }
        for (int64_t j = 0; j < cols; ++j) {
          float sum = acc[j];
          const int64_t d = at(p.result, q, i, j);
          if (bias) sum += bias[i];  // a row of the column-major result: a feature
          if (epilogue == STEPC_EPILOGUE_GELU) {
            auxf[d] = sum;
            sum = stepc_gelu(sum, 1);
          } else if (epilogue == STEPC_EPILOGUE_DGELU) {
            sum = stepc_gelu_grad(sum, auxf[d], 1);
          }
          Write(c, out_type, d, sum);
        }
      }
    }
  });
  return 0;
}

extern "C" void stepc_cuda_release(void) {}
