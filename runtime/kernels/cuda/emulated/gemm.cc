// stepc_cuda_matmul for the host emulation: what cuBLASLt computes (f32
// accumulation of bf16 or f32 operands, bias, GELU/DGELU epilogues with the
// same tanh GELU) on the same column-major problem, as plain loops. Only for
// emulated CUDA steps in tests.

#include <cstdio>
#include <cstring>

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
  for (int64_t q = 0; q < p.batch; ++q)
    for (int64_t i = 0; i < p.result.rows; ++i)
      for (int64_t j = 0; j < p.result.cols; ++j) {
        float acc = 0;
        for (int64_t t = 0; t < depth; ++t)
          acc += Read(b, in_type, at(p.first, q, i, t)) * Read(a, in_type, at(p.second, q, t, j));
        const int64_t d = at(p.result, q, i, j);
        if (bias) acc += bias[i];  // a row of the column-major result: a feature
        if (epilogue == STEPC_EPILOGUE_GELU) {
          auxf[d] = acc;
          acc = stepc_gelu(acc, 1);
        } else if (epilogue == STEPC_EPILOGUE_DGELU) {
          acc = stepc_gelu_grad(acc, auxf[d], 1);
        }
        Write(c, out_type, d, acc);
      }
  });
  return 0;
}

extern "C" void stepc_cuda_release(void) {}
