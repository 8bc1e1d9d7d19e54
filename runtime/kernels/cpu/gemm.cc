// GEMMs through OpenBLAS's cblas_sgemm.

#include "runtime/kernels/cpu/cpu_kernels.h"

#include <cblas.h>

extern "C" void stepc_cpu_matmul(const float* a, const float* b, float* c, int64_t batch,
                                 int64_t m, int64_t n, int64_t k, int transpose_a,
                                 int transpose_b, int shared_rhs) {
  CBLAS_TRANSPOSE ta = transpose_a ? CblasTrans : CblasNoTrans;
  CBLAS_TRANSPOSE tb = transpose_b ? CblasTrans : CblasNoTrans;
  const int lda = transpose_a ? m : k, ldb = transpose_b ? k : n;
  if (shared_rhs && !transpose_a) {
    // The leading dims of A are rows of one [batch*M, K] matrix.
    cblas_sgemm(CblasRowMajor, ta, tb, batch * m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, n);
    return;
  }
  for (int64_t p = 0; p < batch; ++p)
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, a + p * m * k, lda,
                b + (shared_rhs ? 0 : p * k * n), ldb, 0.0f, c + p * m * n, n);
}
