// layer_norm, rms_norm, softmax and their gradients: one row per iteration,
// rows split across threads; weight gradients summed over rows in a second
// pass split across columns (no atomics).

#include <cmath>
#include <vector>

#include "runtime/kernels/cpu/cpu_kernels.h"

namespace {

// Mean and 1/sqrt(var + eps) of each row (biased variance), in double.
void RowStats(const float* x, int64_t rows, int64_t d, double eps, std::vector<double>& mean,
              std::vector<double>& rstd) {
  mean.resize(rows);
  rstd.resize(rows);
#pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * d;
    double m = 0, v = 0;
    for (int64_t i = 0; i < d; ++i) m += xr[i];
    m /= d;
    for (int64_t i = 0; i < d; ++i) v += (xr[i] - m) * (xr[i] - m);
    mean[r] = m;
    rstd[r] = 1.0 / std::sqrt(v / d + eps);
  }
}

}  // namespace

extern "C" void stepc_cpu_layer_norm(const float* x, const float* w, const float* b,
                                     int64_t rows, int64_t d, double eps, float* y) {
  std::vector<double> mean, rstd;
  RowStats(x, rows, d, eps, mean, rstd);
#pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < d; ++i)
      y[r * d + i] = static_cast<float>((x[r * d + i] - mean[r]) * rstd[r]) * w[i] + b[i];
}

// dx = r·(g - mean(g) - x̂·mean(g·x̂)), g = dy·w; dw = Σ dy·x̂; db = Σ dy
extern "C" void stepc_cpu_layer_norm_grad(const float* dy, const float* x, const float* w,
                                          int64_t rows, int64_t d, double eps, float* dx,
                                          float* dw, float* db) {
  std::vector<double> mean, rstd;
  RowStats(x, rows, d, eps, mean, rstd);
#pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * d, *dyr = dy + r * d;
    double mg = 0, mgx = 0;
    for (int64_t i = 0; i < d; ++i) {
      double g = dyr[i] * w[i], xhat = (xr[i] - mean[r]) * rstd[r];
      mg += g;
      mgx += g * xhat;
    }
    mg /= d;
    mgx /= d;
    for (int64_t i = 0; i < d; ++i) {
      double xhat = (xr[i] - mean[r]) * rstd[r];
      dx[r * d + i] = static_cast<float>(rstd[r] * (dyr[i] * w[i] - mg - xhat * mgx));
    }
  }
#pragma omp parallel for
  for (int64_t i = 0; i < d; ++i) {
    double sw = 0, sb = 0;
    for (int64_t r = 0; r < rows; ++r) {
      sw += dy[r * d + i] * ((x[r * d + i] - mean[r]) * rstd[r]);
      sb += dy[r * d + i];
    }
    dw[i] = static_cast<float>(sw);
    db[i] = static_cast<float>(sb);
  }
}

namespace {

std::vector<double> RmsScales(const float* x, int64_t rows, int64_t d, double eps) {
  std::vector<double> s(rows);
#pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r) {
    double ms = 0;
    for (int64_t i = 0; i < d; ++i) ms += static_cast<double>(x[r * d + i]) * x[r * d + i];
    s[r] = 1.0 / std::sqrt(ms / d + eps);
  }
  return s;
}

}  // namespace

extern "C" void stepc_cpu_rms_norm(const float* x, const float* w, int64_t rows, int64_t d,
                                   double eps, float* y) {
  std::vector<double> s = RmsScales(x, rows, d, eps);
#pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < d; ++i)
      y[r * d + i] = static_cast<float>(x[r * d + i] * s[r]) * w[i];
}

// dx = r·g - x·r³·mean(g·x), g = dy·w; dw = Σ dy·x·r
extern "C" void stepc_cpu_rms_norm_grad(const float* dy, const float* x, const float* w,
                                        int64_t rows, int64_t d, double eps, float* dx,
                                        float* dw) {
  std::vector<double> s = RmsScales(x, rows, d, eps);
#pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r) {
    double mgx = 0;
    for (int64_t i = 0; i < d; ++i) mgx += static_cast<double>(dy[r * d + i]) * w[i] * x[r * d + i];
    mgx /= d;
    double s3 = s[r] * s[r] * s[r];
    for (int64_t i = 0; i < d; ++i)
      dx[r * d + i] =
          static_cast<float>(s[r] * dy[r * d + i] * w[i] - x[r * d + i] * s3 * mgx);
  }
#pragma omp parallel for
  for (int64_t i = 0; i < d; ++i) {
    double acc = 0;
    for (int64_t r = 0; r < rows; ++r) acc += dy[r * d + i] * (x[r * d + i] * s[r]);
    dw[i] = static_cast<float>(acc);
  }
}

extern "C" void stepc_cpu_softmax(const float* x, int64_t outer, int64_t n, int64_t inner,
                                  float* y) {
#pragma omp parallel for collapse(2)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const float* xl = x + o * n * inner + i;
      float* yl = y + o * n * inner + i;
      float max = -INFINITY;
      for (int64_t j = 0; j < n; ++j) max = std::fmax(max, xl[j * inner]);
      double sum = 0;
      for (int64_t j = 0; j < n; ++j) sum += std::exp(static_cast<double>(xl[j * inner]) - max);
      for (int64_t j = 0; j < n; ++j)
        yl[j * inner] = static_cast<float>(std::exp(static_cast<double>(xl[j * inner]) - max) / sum);
    }
}

extern "C" void stepc_cpu_softmax_grad(const float* dy, const float* y, int64_t outer,
                                       int64_t n, int64_t inner, float* dx) {
#pragma omp parallel for collapse(2)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t base = o * n * inner + i;
      double dot = 0;
      for (int64_t j = 0; j < n; ++j) dot += static_cast<double>(dy[base + j * inner]) * y[base + j * inner];
      for (int64_t j = 0; j < n; ++j)
        dx[base + j * inner] = static_cast<float>(y[base + j * inner] * (dy[base + j * inner] - dot));
    }
}
