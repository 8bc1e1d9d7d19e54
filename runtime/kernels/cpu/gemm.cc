// f32 GEMMs: oneDNN's matmul (its AVX-512 brgemm kernels ran the step's
// shapes 1.1-1.5x faster than OpenBLAS's sgemm, which also zeroes C in a
// pass of its own first), OpenBLAS's cblas_sgemm where oneDNN has no
// primitive for the operands, and for weight gradients on CPUs without
// AVX-512 (where oneDNN's f32 matmul is its older gemm:jit). The CUDA
// kernels' reference library (stepc_kernels_cpu_reference) builds it
// without oneDNN, on a naive cblas_sgemm.

#include "runtime/kernels/cpu/cpu_kernels.h"
#if STEPC_GEMM_ONEDNN
#include "runtime/kernels/cpu/onednn_matmul.h"
#endif

#include <cblas.h>

#include <algorithm>

extern "C" void stepc_cpu_matmul_bias(const float* a, const float* b, float* c, int64_t batch,
                                      int64_t m, int64_t n, int64_t k, int transpose_a,
                                      int transpose_b, int shared_rhs, const float* bias) {
#if STEPC_GEMM_ONEDNN
  using stepc::onednn::Matrices;
  using stepc::onednn::Type;
  // A weight gradient (Aᵀ·B, K every token) on a CPU where oneDNN's f32
  // matmul is gemm:jit: OpenBLAS's sgemm ran gpt-capstone's four shapes
  // 1.0-1.3x faster there, the whole step 8% (an AVX2 EPYC).
  const bool blas_weight_gradient =
      transpose_a && !transpose_b && batch == 1 && !stepc::onednn::HasF32Brgemm();
  if (!blas_weight_gradient) {
    // [batch, M, K] x [K, N] with a shared B is one [batch·M, K] x [K, N].
    int64_t rows = m, entries = batch;
    if (shared_rhs && !transpose_a && batch > 1) {
      rows *= batch;
      entries = 1;
    }
    if (!bias && entries == 1 &&
        stepc::onednn::SplitKMatmul(Type::kF32, a, b, c, rows, n, k, transpose_a, transpose_b))
      return;
    if (stepc::onednn::Matmul(Matrices(entries, rows, k, transpose_a, Type::kF32), a,
                              Matrices(shared_rhs ? 1 : entries, k, n, transpose_b, Type::kF32),
                              b, Matrices(entries, rows, n, false, Type::kF32), c,
                              /*accumulate=*/false, bias))
      return;
  }
#endif
  // sgemm adds the bias as C (beta = 1): the sum plus the bias rounded once
  // where K fits one of OpenBLAS's panels (each panel's sum is added to C).
  const float beta = bias ? 1.0f : 0.0f;
  if (bias)
    for (int64_t r = 0; r < batch * m; ++r)
      std::copy(bias, bias + n, c + r * n);
  CBLAS_TRANSPOSE ta = transpose_a ? CblasTrans : CblasNoTrans;
  CBLAS_TRANSPOSE tb = transpose_b ? CblasTrans : CblasNoTrans;
  const int lda = transpose_a ? m : k, ldb = transpose_b ? k : n;
  if (shared_rhs && !transpose_a) {
    // The leading dims of A are rows of one [batch*M, K] matrix.
    cblas_sgemm(CblasRowMajor, ta, tb, batch * m, n, k, 1.0f, a, lda, b, ldb, beta, c, n);
    return;
  }
  for (int64_t p = 0; p < batch; ++p)
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, a + p * m * k, lda,
                b + (shared_rhs ? 0 : p * k * n), ldb, beta, c + p * m * n, n);
}

extern "C" void stepc_cpu_matmul(const float* a, const float* b, float* c, int64_t batch,
                                 int64_t m, int64_t n, int64_t k, int transpose_a,
                                 int transpose_b, int shared_rhs) {
  stepc_cpu_matmul_bias(a, b, c, batch, m, n, k, transpose_a, transpose_b, shared_rhs, nullptr);
}
