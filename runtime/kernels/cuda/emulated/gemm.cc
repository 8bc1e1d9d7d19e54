// stepc_cuda_matmul for the host emulation: what cuBLASLt computes (f32
// accumulation of bf16 or f32 operands, bias, GELU/DGELU epilogues with the
// same tanh GELU, BGRADB's sums) on the same column-major problem, as plain
// loops. Only for emulated CUDA steps in tests.

#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "runtime/kernels/cuda/cuda_kernels.h"
#include "runtime/kernels/cuda/fp8_pack.h"
#include "runtime/kernels/cuda/launch_config.h"
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

// The column-major problem p (gemm_layout.h): result (i, j) of product q is
// the sum over depth t of first(q, i, t) · second(q, t, j), from zero in
// depth order, then the bias and epilogue, written as `out_type`. Each
// operand is read once into f32, so each result row is one pass of
// contiguous multiply-adds over its columns.
template <typename First, typename Second>
void RunColumnMajor(const stepc::cuda::ColumnMajorGemm& p, int64_t depth, First first_at,
                    Second second_at, void* c, int out_type, const float* bias, int epilogue,
                    float* auxf) {
  using stepc::cuda::ColumnMajor;
  auto at = [](const ColumnMajor& x, int64_t q, int64_t r, int64_t col) {
    return q * x.batch_stride + (x.transposed ? col + r * x.ld : r + col * x.ld);
  };
  const int64_t rows = p.result.rows, cols = p.result.cols;
  std::vector<float> first(rows * depth), second(depth * cols), acc(cols);
  for (int64_t q = 0; q < p.batch; ++q) {
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t t = 0; t < depth; ++t) first[i * depth + t] = first_at(q, i, t);
    for (int64_t t = 0; t < depth; ++t)
      for (int64_t j = 0; j < cols; ++j) second[t * cols + j] = second_at(q, t, j);
    if (epilogue == STEPC_EPILOGUE_BGRAD) {
      // BGRADB: the second operand (our A) summed over the depth, per
      // column of the result (one product).
      std::fill(auxf, auxf + cols, 0.0f);
      for (int64_t t = 0; t < depth; ++t)
        for (int64_t j = 0; j < cols; ++j) auxf[j] += second[t * cols + j];
    }
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
}

bool Refuse(stepc_cuda_ctx* ctx, int64_t batch, int64_t n, int out_type, const float* bias,
            int epilogue, const void* aux) {
  const char* why = stepc::cuda::BadEpilogue(batch, n, out_type, bias, epilogue, aux);
  if (why) std::snprintf(ctx->error, ctx->error_len, "%s", why);
  return why != nullptr;
}

}  // namespace

// Runs the column-major problem gemm.cu hands cuBLASLt (gemm_layout.h)
// literally, so the emulated steps exercise that mapping too.
extern "C" int stepc_cuda_matmul(stepc_cuda_ctx* ctx, const void* a, const void* b, void* c,
                                 int64_t batch, int64_t m, int64_t n, int64_t k, int transpose_a,
                                 int transpose_b, int shared_rhs, int in_type, int out_type,
                                 const float* bias, int epilogue, void* aux) {
  if (Refuse(ctx, batch, n, out_type, bias, epilogue, aux)) return 1;
  using stepc::cuda::ColumnMajor;
  const stepc::cuda::ColumnMajorGemm p = stepc::cuda::ToColumnMajor(stepc::cuda::GemmShape{
      batch, m, n, k, transpose_a != 0, transpose_b != 0, shared_rhs != 0});
  // Element (r, c) of op(x) for product q.
  auto at = [](const ColumnMajor& x, int64_t q, int64_t r, int64_t col) {
    return q * x.batch_stride + (x.transposed ? col + r * x.ld : r + col * x.ld);
  };
  const int64_t depth = p.first.transposed ? p.first.rows : p.first.cols;
  float* auxf = static_cast<float*>(aux);
  // On the stream: run now, or recorded while it is captured.
  stepc::emu::Enqueue(ctx->stream, [=] {
    RunColumnMajor(
        p, depth, [&](int64_t q, int64_t i, int64_t t) { return Read(b, in_type, at(p.first, q, i, t)); },
        [&](int64_t q, int64_t t, int64_t j) { return Read(a, in_type, at(p.second, q, t, j)); }, c,
        out_type, bias, epilogue, auxf);
  });
  return 0;
}

// The fp8 GEMM as gemm.cu runs it: BGRAD's sums of A's own values and the
// bf16 fallback shared with it (fp8.cu, layout.cu), the same packing
// kernels (on the emulation), then the product of the packed bytes times
// their block scales read as cuBLASLt reads them (fp8_pack.h's layouts), in
// the bf16 GEMM's order: the same bits as stepc_cuda_matmul when the packing
// is exact.
extern "C" int stepc_cuda_matmul_fp8_packed(stepc_cuda_ctx* ctx, const void* a,
                                            const float* a_scales, const void* b,
                                            const float* b_scales, void* c, int64_t batch,
                                            int64_t m, int64_t n, int64_t k, int transpose_a,
                                            int transpose_b, int shared_rhs, int a_type,
                                            int b_type, int out_type, const float* bias,
                                            int epilogue, void* aux, int a_format, int b_format,
                                            int b_vector, void* scratch) {
  using namespace stepc::cuda;
  if (const char* why = BadFp8Operands(a_type, a_scales, b_type, b_scales, transpose_a,
                                       transpose_b, epilogue, scratch)) {
    std::snprintf(ctx->error, ctx->error_len, "%s", why);
    return 1;
  }
  if (Refuse(ctx, batch, n, out_type, bias, epilogue, aux)) return 1;
  if (epilogue == STEPC_EPILOGUE_BGRAD) {
    if (int rc = BiasGradOf(ctx, a, a_type, m, k, transpose_a != 0, static_cast<float*>(aux)))
      return rc;
    epilogue = STEPC_EPILOGUE_NONE;
    aux = nullptr;
  }
  if (!scratch || Fp8GemmsOff() ||
      !Fp8GemmRunsInFp8(batch, m, n, k, transpose_a, shared_rhs, a_format, b_format))
    return Fp8ValuesInBf16(ctx, a, a_scales, b, b_scales, c, batch, m, n, k, transpose_a,
                           transpose_b, shared_rhs, a_type, b_type, out_type, bias, epilogue,
                           aux, a_format, b_format, b_vector, scratch);
  const int64_t rows = batch * m;
  Fp8Packed packed;
  if (int rc = PackFp8Operands(ctx, a, a_type, b, b_type, rows, n, k, transpose_a != 0,
                               transpose_b != 0, a_format, b_format, b_vector != 0, scratch,
                               &packed))
    return rc;
  const uint8_t *packed_a = packed.a, *packed_b = packed.b;
  // Operands packed already keep the caller's scales.
  if (!a_scales) a_scales = packed.a_scales;
  if (!b_scales) b_scales = packed.b_scales;
  // cuBLASLt's problem: A = packed B as [N, K] (transposed), B = packed A.
  const ColumnMajorGemm p = ToColumnMajor(GemmShape{1, rows, n, k, false, true, false});
  const int64_t ld = packed.b_scale_ld;
  float* auxf = static_cast<float*>(aux);
  stepc::emu::Enqueue(ctx->stream, [=] {
    RunColumnMajor(
        p, k,
        [&](int64_t, int64_t i, int64_t t) {
          const float scale = b_vector ? b_scales[(t / kFp8Block) * n + i]
                                       : b_scales[(i / kFp8Block) * ld + t / kFp8Block];
          return stepc_fp8_value<float>(packed_b[i * k + t], b_format) * scale;
        },
        [&](int64_t, int64_t t, int64_t j) {
          return stepc_fp8_value<float>(packed_a[j * k + t], a_format) *
                 a_scales[(t / kFp8Block) * rows + j];
        },
        c, out_type, bias, epilogue, auxf);
  });
  CountFp8GemmRun();
  return 0;
}

extern "C" void stepc_cuda_release(void) {}
