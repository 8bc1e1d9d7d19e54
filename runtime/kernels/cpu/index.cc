// argmax, gather and gather's gradient (a scatter-add): the index ops. A
// tensor is viewed as [outer, n, inner] around the op's dimension.

#include <cmath>
#include <cstring>

#include "runtime/kernels/cpu/cpu_kernels.h"

extern "C" void stepc_cpu_argmax(const float* x, int64_t outer, int64_t n, int64_t inner,
                                 int32_t* out) {
#pragma omp parallel for collapse(2) if (outer * inner >= 1024)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      const float* line = x + o * n * inner + j;
      int64_t best = 0;
      float top = line[0];
      // The first largest; a NaN is larger than every number (torch.argmax).
      for (int64_t k = 1; k < n && !std::isnan(top); ++k) {
        const float e = line[k * inner];
        if (e > top || std::isnan(e)) {
          top = e;
          best = k;
        }
      }
      out[o * inner + j] = static_cast<int32_t>(best);
    }
}

extern "C" void stepc_cpu_gather(const float* x, const int32_t* index, int64_t outer, int64_t n,
                                 int64_t inner, int64_t size, float* out) {
#pragma omp parallel for if (outer * n * inner >= 4096)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < n; ++k)
      for (int64_t j = 0; j < inner; ++j) {
        const int64_t i = (o * n + k) * inner + j, id = index[i];
        out[i] = id >= 0 && id < size ? x[(o * size + id) * inner + j] : 0.0f;
      }
}

// Each (o, j) line adds its k in order: deterministic, and lines are
// disjoint, so they run in parallel.
extern "C" void stepc_cpu_gather_grad(const float* dy, const int32_t* index, int64_t outer,
                                      int64_t n, int64_t inner, int64_t size, float* dx) {
  std::memset(dx, 0, sizeof(float) * outer * size * inner);
#pragma omp parallel for if (outer * n * inner >= 4096)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < n; ++k)
      for (int64_t j = 0; j < inner; ++j) {
        const int64_t i = (o * n + k) * inner + j, id = index[i];
        if (id >= 0 && id < size) dx[(o * size + id) * inner + j] += dy[i];
      }
}
