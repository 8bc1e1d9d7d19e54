// A naive cblas_sgemm (row-major only, f64 accumulation) for the CPU
// reference kernels cuda_kernels_test compares against: the GPU machine then
// needs no OpenBLAS. Slow, exact enough, test-only.

#include <cblas.h>

#include <cstdint>

extern "C" void cblas_sgemm(const CBLAS_ORDER order, const CBLAS_TRANSPOSE ta,
                            const CBLAS_TRANSPOSE tb, const blasint m, const blasint n,
                            const blasint k, const float alpha, const float* a, const blasint lda,
                            const float* b, const blasint ldb, const float beta, float* c,
                            const blasint ldc) {
  (void)order;  // the CPU kernels only call CblasRowMajor
#pragma omp parallel for
  for (blasint i = 0; i < m; ++i)
    for (blasint j = 0; j < n; ++j) {
      double acc = 0;
      for (blasint p = 0; p < k; ++p) {
        const float x = ta == CblasNoTrans ? a[int64_t(i) * lda + p] : a[int64_t(p) * lda + i];
        const float y = tb == CblasNoTrans ? b[int64_t(p) * ldb + j] : b[int64_t(j) * ldb + p];
        acc += double(x) * y;
      }
      c[int64_t(i) * ldc + j] = float(alpha * acc + (beta == 0 ? 0.0 : beta * c[int64_t(i) * ldc + j]));
    }
}
