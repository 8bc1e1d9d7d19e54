// stepc_cuda_matmul for the host emulation: what cuBLASLt computes (f32
// accumulation of bf16 or f32 operands, bias, GELU/DGELU epilogues with the
// same tanh GELU), as plain loops. Only for emulated CUDA steps in tests.

#include <cstdio>
#include <cstring>

#include "runtime/kernels/cuda/cuda_kernels.h"
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

extern "C" int stepc_cuda_matmul(stepc_cuda_ctx* ctx, const void* a, const void* b, void* c,
                                 int64_t batch, int64_t m, int64_t n, int64_t k, int transpose_a,
                                 int transpose_b, int shared_rhs, int in_type, int out_type,
                                 const float* bias, int epilogue, void* aux) {
  if (epilogue != STEPC_EPILOGUE_NONE && (out_type != STEPC_CUDA_F32 || !aux || n % 8 != 0)) {
    std::snprintf(ctx->error, ctx->error_len,
                  "a GELU epilogue needs an f32 result, an aux buffer and N divisible by 8");
    return 1;
  }
  float* auxf = static_cast<float*>(aux);
  for (int64_t p = 0; p < batch; ++p)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float acc = 0;
        for (int64_t q = 0; q < k; ++q) {
          const int64_t ai = p * m * k + (transpose_a ? q * m + i : i * k + q);
          const int64_t bi = (shared_rhs ? 0 : p * k * n) + (transpose_b ? j * k + q : q * n + j);
          acc += Read(a, in_type, ai) * Read(b, in_type, bi);
        }
        const int64_t at = p * m * n + i * n + j;
        if (bias) acc += bias[j];
        if (epilogue == STEPC_EPILOGUE_GELU) {
          auxf[at] = acc;
          acc = stepc_gelu_tanh(acc);
        } else if (epilogue == STEPC_EPILOGUE_DGELU) {
          acc = stepc_gelu_tanh_grad(acc, auxf[at]);
        }
        Write(c, out_type, at, acc);
      }
  return 0;
}

extern "C" void stepc_cuda_release(void) {}
