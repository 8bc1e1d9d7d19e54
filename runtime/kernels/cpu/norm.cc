// layer_norm, rms_norm, (log_)softmax, cumsum and their gradients: one row per
// iteration, rows split across threads; the norms' weight gradients summed
// in per-thread partials during the row pass, combined in thread order (no
// atomics).

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/kernels/cpu/cpu_kernels.h"
#include "runtime/kernels/cpu/line_kernels.h"  // generated from the ops

namespace {

// Mean and 1/sqrt(var + eps) of one row (biased variance, two passes), as
// float vector reductions.
inline void RowMoments(const float* x, int64_t d, double eps, float& mean, float& rstd) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < d; ++i) sum += x[i];
  const float m = sum / d;
  float var = 0.0f;
#pragma omp simd reduction(+ : var)
  for (int64_t i = 0; i < d; ++i) var += (x[i] - m) * (x[i] - m);
  mean = m;
  rstd = static_cast<float>(1.0 / std::sqrt(static_cast<double>(var) / d + eps));
}

// A norm's output stored as f32, or rounded to bf16 (its "_bf16" variant,
// for a GEMM operand under --precision=bf16).
inline void Put(float* y, float v) { *y = v; }
inline void Put(stepc_bf16* y, float v) { *y = stepc_f32_to_bf16(v); }

// Rows are taken kRowGroup at a time, the group's statistics first: one
// row's chain (sum, mean, variance, square root) is all latency, so rows
// computed side by side overlap (layer_norm over [4096, 128]: 2x). The
// arithmetic per row is unchanged.
constexpr int64_t kRowGroup = 8;

template <typename Out>
void LayerNorm(const float* x, const float* w, const float* b, int64_t rows, int64_t d,
               double eps, Out* y) {
#pragma omp parallel for
  for (int64_t r0 = 0; r0 < rows; r0 += kRowGroup) {
    const int64_t group = std::min(kRowGroup, rows - r0);
    float mean[kRowGroup], rstd[kRowGroup];
    for (int64_t k = 0; k < group; ++k) RowMoments(x + (r0 + k) * d, d, eps, mean[k], rstd[k]);
    for (int64_t k = 0; k < group; ++k) {
      const float* xr = x + (r0 + k) * d;
      Out* yr = y + (r0 + k) * d;
#pragma omp simd
      for (int64_t i = 0; i < d; ++i) Put(yr + i, (xr[i] - mean[k]) * rstd[k] * w[i] + b[i]);
    }
  }
}

}  // namespace

extern "C" void stepc_cpu_layer_norm(const float* x, const float* w, const float* b,
                                     int64_t rows, int64_t d, double eps, float* y) {
  LayerNorm(x, w, b, rows, d, eps, y);
}

extern "C" void stepc_cpu_layer_norm_bf16(const float* x, const float* w, const float* b,
                                          int64_t rows, int64_t d, double eps, stepc_bf16* y) {
  LayerNorm(x, w, b, rows, d, eps, y);
}

// dx = r·(g - mean(g) - x̂·mean(g·x̂)), g = dy·w; dw = Σ dy·x̂; db = Σ dy.
// One pass over the rows: each row's statistics, its dx, and this thread's
// partial dw and db: f32 over kRowBlock rows (their statistics first, as
// LayerNorm's groups), then added to double partials
// (updating double sums for every row was half the kernel's work), combined
// in thread order (no atomics).
extern "C" void stepc_cpu_layer_norm_grad(const float* dy, const float* x, const float* w,
                                          int64_t rows, int64_t d, double eps, float* dx,
                                          float* dw, float* db) {
  constexpr int64_t kRowBlock = 16;
  std::vector<double> partial;
#pragma omp parallel
  {
#pragma omp single
    partial.assign(static_cast<size_t>(omp_get_num_threads()) * 2 * d, 0.0);
    double* pw = partial.data() + static_cast<size_t>(omp_get_thread_num()) * 2 * d;
    double* pb = pw + d;
    std::vector<float> block(2 * d);
    float *bw = block.data(), *bb = bw + d;
#pragma omp for
    for (int64_t r0 = 0; r0 < rows; r0 += kRowBlock) {
      std::fill(block.begin(), block.end(), 0.0f);
      const int64_t r1 = std::min(rows, r0 + kRowBlock);
      float means[kRowBlock], rstds[kRowBlock];
      for (int64_t r = r0; r < r1; ++r) RowMoments(x + r * d, d, eps, means[r - r0], rstds[r - r0]);
      for (int64_t r = r0; r < r1; ++r) {
        const float *xr = x + r * d, *dyr = dy + r * d;
        float* dxr = dx + r * d;
        const float mean = means[r - r0], rstd = rstds[r - r0];
        float mg = 0.0f, mgx = 0.0f;
#pragma omp simd reduction(+ : mg, mgx)
        for (int64_t i = 0; i < d; ++i) {
          const float g = dyr[i] * w[i], xhat = (xr[i] - mean) * rstd;
          mg += g;
          mgx += g * xhat;
        }
        mg /= d;
        mgx /= d;
#pragma omp simd
        for (int64_t i = 0; i < d; ++i) {
          const float xhat = (xr[i] - mean) * rstd;
          dxr[i] = rstd * (dyr[i] * w[i] - mg - xhat * mgx);
          bw[i] += dyr[i] * xhat;
          bb[i] += dyr[i];
        }
      }
#pragma omp simd
      for (int64_t i = 0; i < d; ++i) {
        pw[i] += bw[i];
        pb[i] += bb[i];
      }
    }
  }
  const size_t threads = partial.size() / (2 * d);
  for (int64_t i = 0; i < d; ++i) {
    double sw = 0, sb = 0;
    for (size_t t = 0; t < threads; ++t) {
      sw += partial[t * 2 * d + i];
      sb += partial[t * 2 * d + d + i];
    }
    dw[i] = static_cast<float>(sw);
    db[i] = static_cast<float>(sb);
  }
}

namespace {

// 1/sqrt(mean(x²) + eps) of one row, a double vector reduction.
inline double RowRmsScale(const float* x, int64_t d, double eps) {
  double ms = 0;
#pragma omp simd reduction(+ : ms)
  for (int64_t i = 0; i < d; ++i) ms += static_cast<double>(x[i]) * x[i];
  return 1.0 / std::sqrt(ms / d + eps);
}

template <typename Out>
void RmsNorm(const float* x, const float* w, int64_t rows, int64_t d, double eps, Out* y) {
#pragma omp parallel for
  for (int64_t r0 = 0; r0 < rows; r0 += kRowGroup) {
    const int64_t group = std::min(kRowGroup, rows - r0);
    double scale[kRowGroup];
    for (int64_t k = 0; k < group; ++k) scale[k] = RowRmsScale(x + (r0 + k) * d, d, eps);
    for (int64_t k = 0; k < group; ++k) {
      const int64_t r = r0 + k;
      const double s = scale[k];
#pragma omp simd
      for (int64_t i = 0; i < d; ++i)
        Put(y + r * d + i, static_cast<float>(x[r * d + i] * s) * w[i]);
    }
  }
}

}  // namespace

extern "C" void stepc_cpu_rms_norm(const float* x, const float* w, int64_t rows, int64_t d,
                                   double eps, float* y) {
  RmsNorm(x, w, rows, d, eps, y);
}

extern "C" void stepc_cpu_rms_norm_bf16(const float* x, const float* w, int64_t rows,
                                        int64_t d, double eps, stepc_bf16* y) {
  RmsNorm(x, w, rows, d, eps, y);
}

// dx = r·g - x·r³·mean(g·x), g = dy·w; dw = Σ dy·x·r. One pass over the
// rows, as layer_norm_grad: each row's scale, its dx, and this thread's
// partial dw (double, combined in thread order: no atomics). (Summing dw
// down each column in a second pass took 59 ms a call on llama-s's
// [8192, 768] in a profiled step.)
extern "C" void stepc_cpu_rms_norm_grad(const float* dy, const float* x, const float* w,
                                        int64_t rows, int64_t d, double eps, float* dx,
                                        float* dw) {
  std::vector<double> partial;
#pragma omp parallel
  {
#pragma omp single
    partial.assign(static_cast<size_t>(omp_get_num_threads()) * d, 0.0);
    double* pw = partial.data() + static_cast<size_t>(omp_get_thread_num()) * d;
#pragma omp for
    for (int64_t r = 0; r < rows; ++r) {
      const float *xr = x + r * d, *dyr = dy + r * d;
      float* dxr = dx + r * d;
      const double s = RowRmsScale(xr, d, eps);
      double mgx = 0;
#pragma omp simd reduction(+ : mgx)
      for (int64_t i = 0; i < d; ++i) mgx += static_cast<double>(dyr[i]) * w[i] * xr[i];
      mgx /= d;
      const double s3 = s * s * s;
#pragma omp simd
      for (int64_t i = 0; i < d; ++i) {
        dxr[i] = static_cast<float>(s * dyr[i] * w[i] - xr[i] * s3 * mgx);
        pw[i] += dyr[i] * (xr[i] * s);
      }
    }
  }
  const size_t threads = partial.size() / d;
  for (int64_t i = 0; i < d; ++i) {
    double sum = 0;
    for (size_t t = 0; t < threads; ++t) sum += partial[t * d + i];
    dw[i] = static_cast<float>(sum);
  }
}

namespace {

// Each line of n elements `inner` apart, in double: y = softmax(x), or
// log_softmax(x) = x - max - log Σ exp(x - max).
void SoftmaxLines(const float* x, int64_t outer, int64_t n, int64_t inner, bool as_log, float* y) {
#pragma omp parallel for collapse(2)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const float* xl = x + o * n * inner + i;
      float* yl = y + o * n * inner + i;
      float max = -INFINITY;
      for (int64_t j = 0; j < n; ++j) max = std::fmax(max, xl[j * inner]);
      double sum = 0;
      for (int64_t j = 0; j < n; ++j) sum += std::exp(static_cast<double>(xl[j * inner]) - max);
      const double lse = max + std::log(sum);
      for (int64_t j = 0; j < n; ++j) {
        const double shifted = static_cast<double>(xl[j * inner]) - max;
        yl[j * inner] = static_cast<float>(as_log ? xl[j * inner] - lse : std::exp(shifted) / sum);
      }
    }
}

// From the forward's output y: softmax dx = y·(dy - Σ dy·y); log_softmax
// dx = dy - exp(y)·Σ dy.
void SoftmaxGradLines(const float* dy, const float* y, int64_t outer, int64_t n, int64_t inner,
                      bool as_log, float* dx) {
#pragma omp parallel for collapse(2)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t base = o * n * inner + i;
      double dot = 0;
      for (int64_t j = 0; j < n; ++j)
        dot += static_cast<double>(dy[base + j * inner]) * (as_log ? 1.0f : y[base + j * inner]);
      for (int64_t j = 0; j < n; ++j) {
        const int64_t at = base + j * inner;
        dx[at] = static_cast<float>(as_log ? dy[at] - std::exp(static_cast<double>(y[at])) * dot
                                        : y[at] * (dy[at] - dot));
      }
    }
}

// Each line's running sum, in double, from its first element (or, reverse,
// its last: cumsum's gradient).
void CumsumLines(const float* x, int64_t outer, int64_t n, int64_t inner, bool reverse,
                 float* y) {
#pragma omp parallel for collapse(2)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * n * inner + i;
      double sum = 0;
      for (int64_t k = 0; k < n; ++k) {
        const int64_t at = base + (reverse ? n - 1 - k : k) * inner;
        sum += x[at];
        y[at] = static_cast<float>(sum);
      }
    }
}

}  // namespace

// The line ops' kernels, declared by their ops (line_kernels.h): a
// definition that disagrees with its op's operands does not compile.
extern "C" void stepc_cpu_cumsum(const float* x, int64_t outer, int64_t n, int64_t inner,
                                 float* y) {
  CumsumLines(x, outer, n, inner, /*reverse=*/false, y);
}

extern "C" void stepc_cpu_cumsum_grad(const float* dy, int64_t outer, int64_t n, int64_t inner,
                                      float* dx) {
  CumsumLines(dy, outer, n, inner, /*reverse=*/true, dx);
}

extern "C" void stepc_cpu_softmax(const float* x, int64_t outer, int64_t n, int64_t inner,
                                  float* y) {
  SoftmaxLines(x, outer, n, inner, /*as_log=*/false, y);
}

extern "C" void stepc_cpu_softmax_grad(const float* dy, const float* y, int64_t outer,
                                       int64_t n, int64_t inner, float* dx) {
  SoftmaxGradLines(dy, y, outer, n, inner, /*as_log=*/false, dx);
}

extern "C" void stepc_cpu_log_softmax(const float* x, int64_t outer, int64_t n, int64_t inner,
                                      float* y) {
  SoftmaxLines(x, outer, n, inner, /*as_log=*/true, y);
}

extern "C" void stepc_cpu_log_softmax_grad(const float* dy, const float* y, int64_t outer,
                                           int64_t n, int64_t inner, float* dx) {
  SoftmaxGradLines(dy, y, outer, n, inner, /*as_log=*/true, dx);
}
