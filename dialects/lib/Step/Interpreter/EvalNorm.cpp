//===- EvalNorm.cpp - norms and line ops (softmax, cumsum), gradients -----===//

#include "Eval.h"

#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace stepc::interp;
using namespace stepc::step;

namespace {

/// The max of a line of n values `stride` apart from `base`, and
/// Σ exp(x - max) over it (softmax's and log_softmax's).
std::pair<double, double> lineExpSum(const Tensor &x, int64_t base, int64_t stride, int64_t n) {
  double max = -INFINITY, sum = 0;
  for (int64_t j = 0; j < n; ++j)
    max = std::fmax(max, x.data[base + j * stride]);
  for (int64_t j = 0; j < n; ++j)
    sum += std::exp(x.data[base + j * stride] - max);
  return {max, sum};
}

/// Mean and 1/sqrt(σ² + ε) of a row of d values (biased variance).
std::pair<double, double> rowStats(const double *xr, int64_t d, double eps) {
  double mean = 0, var = 0;
  for (int64_t i = 0; i < d; ++i)
    mean += xr[i];
  mean /= d;
  for (int64_t i = 0; i < d; ++i)
    var += (xr[i] - mean) * (xr[i] - mean);
  return {mean, 1.0 / std::sqrt(var / d + eps)};
}

// y = (x - μ)·r·w + b, r = 1/sqrt(σ² + ε) per row of D (biased variance)
void layerNorm(const Tensor &x, const Tensor &w, const Tensor &b, double eps, Tensor &y) {
  int64_t d = x.shape.back(), rows = x.numel() / d;
  for (int64_t r = 0; r < rows; ++r) {
    const double *xr = &x.data[r * d];
    auto [mean, rstd] = rowStats(xr, d, eps);
    for (int64_t i = 0; i < d; ++i)
      y.data[r * d + i] = (xr[i] - mean) * rstd * w.data[i] + b.data[i];
  }
}

// g = dy·w: dx = r·(g - mean(g) - x̂·mean(g·x̂)); dw = Σ dy·x̂; db = Σ dy
void layerNormGrad(const Tensor &dy, const Tensor &x, const Tensor &w, double eps,
                   Tensor &dx, Tensor &dw, Tensor &db) {
  int64_t d = x.shape.back(), rows = x.numel() / d;
  std::vector<double> xhat(d), g(d);
  for (int64_t r = 0; r < rows; ++r) {
    const double *xr = &x.data[r * d], *dyr = &dy.data[r * d];
    auto [mean, rstd] = rowStats(xr, d, eps);
    double meanG = 0, meanGX = 0;
    for (int64_t i = 0; i < d; ++i) {
      xhat[i] = (xr[i] - mean) * rstd;
      g[i] = dyr[i] * w.data[i];
      meanG += g[i];
      meanGX += g[i] * xhat[i];
      dw.data[i] += dyr[i] * xhat[i];
      db.data[i] += dyr[i];
    }
    meanG /= d;
    meanGX /= d;
    for (int64_t i = 0; i < d; ++i)
      dx.data[r * d + i] = rstd * (g[i] - meanG - xhat[i] * meanGX);
  }
}

double rmsScale(const double *x, int64_t d, double eps) {
  double ms = 0;
  for (int64_t i = 0; i < d; ++i)
    ms += x[i] * x[i];
  return 1.0 / std::sqrt(ms / d + eps);
}

// y = x·r·w, r = 1/sqrt(mean(x²) + ε)
void rmsNorm(const Tensor &x, const Tensor &w, double eps, Tensor &y) {
  int64_t d = x.shape.back(), rows = x.numel() / d;
  for (int64_t r = 0; r < rows; ++r) {
    double s = rmsScale(&x.data[r * d], d, eps);
    for (int64_t i = 0; i < d; ++i)
      y.data[r * d + i] = x.data[r * d + i] * s * w.data[i];
  }
}

// g = dy·w: dx = r·g - x·r³·mean(g·x); dw = Σ dy·x·r
void rmsNormGrad(const Tensor &dy, const Tensor &x, const Tensor &w, double eps,
                 Tensor &dx, Tensor &dw) {
  int64_t d = x.shape.back(), rows = x.numel() / d;
  for (int64_t r = 0; r < rows; ++r) {
    const double *xr = &x.data[r * d], *dyr = &dy.data[r * d];
    double s = rmsScale(xr, d, eps), meanGX = 0;
    for (int64_t i = 0; i < d; ++i) {
      meanGX += dyr[i] * w.data[i] * xr[i];
      dw.data[i] += dyr[i] * xr[i] * s;
    }
    meanGX /= d;
    for (int64_t i = 0; i < d; ++i)
      dx.data[r * d + i] = s * dyr[i] * w.data[i] - xr[i] * s * s * s * meanGX;
  }
}

/// Calls f(base, stride, n) for every line of `shape` along `dim`.
template <typename F>
void forEachLine(ArrayRef<int64_t> shape, int64_t dim, F f) {
  int64_t inner = product(shape, dim + 1, shape.size());
  int64_t outer = product(shape, 0, dim);
  int64_t n = shape[dim];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i)
      f(o * n * inner + i, inner, n);
}

} // namespace

Evaluated stepc::interp::evalNorm(Operation *op, Operands in, Results out) {
  return llvm::TypeSwitch<Operation *, Evaluated>(op)
      .Case([&](LayerNormGradOp g) {
        layerNormGrad(*in[0], *in[1], *in[2], g.getEpsilon().convertToDouble(),
                      out[0], out[1], out[2]);
        return success();
      })
      .Case([&](LayerNormOp n) {
        layerNorm(*in[0], *in[1], *in[2], n.getEpsilon().convertToDouble(), out[0]);
        return success();
      })
      .Case([&](RmsNormGradOp g) {
        rmsNormGrad(*in[0], *in[1], *in[2], g.getEpsilon().convertToDouble(), out[0],
                    out[1]);
        return success();
      })
      .Case([&](RmsNormOp n) {
        rmsNorm(*in[0], *in[1], n.getEpsilon().convertToDouble(), out[0]);
        return success();
      })
      // dx = y·(dy - Σ dy·y)
      .Case([&](SoftmaxGradOp s) {
        const Tensor &dy = *in[0], &y = *in[1];
        forEachLine(y.shape, s.getDim(), [&](int64_t base, int64_t stride, int64_t n) {
          double dot = 0;
          for (int64_t j = 0; j < n; ++j)
            dot += dy.data[base + j * stride] * y.data[base + j * stride];
          for (int64_t j = 0; j < n; ++j) {
            int64_t p = base + j * stride;
            out[0].data[p] = y.data[p] * (dy.data[p] - dot);
          }
        });
        return success();
      })
      // y = exp(x - max) / Σ exp(x - max)
      .Case([&](SoftmaxOp s) {
        const Tensor &x = *in[0];
        forEachLine(x.shape, s.getDim(), [&](int64_t base, int64_t stride, int64_t n) {
          auto [max, sum] = lineExpSum(x, base, stride, n);
          for (int64_t j = 0; j < n; ++j)
            out[0].data[base + j * stride] = std::exp(x.data[base + j * stride] - max) / sum;
        });
        return success();
      })
      // dx = dy - exp(y)·Σ dy
      .Case([&](LogSoftmaxGradOp s) {
        const Tensor &dy = *in[0], &y = *in[1];
        forEachLine(y.shape, s.getDim(), [&](int64_t base, int64_t stride, int64_t n) {
          double sum = 0;
          for (int64_t j = 0; j < n; ++j)
            sum += dy.data[base + j * stride];
          for (int64_t j = 0; j < n; ++j) {
            int64_t p = base + j * stride;
            out[0].data[p] = dy.data[p] - std::exp(y.data[p]) * sum;
          }
        });
        return success();
      })
      // y = x - max - log Σ exp(x - max)
      .Case([&](LogSoftmaxOp s) {
        const Tensor &x = *in[0];
        forEachLine(x.shape, s.getDim(), [&](int64_t base, int64_t stride, int64_t n) {
          auto [max, sum] = lineExpSum(x, base, stride, n);
          double lse = max + std::log(sum);
          for (int64_t j = 0; j < n; ++j)
            out[0].data[base + j * stride] = x.data[base + j * stride] - lse;
        });
        return success();
      })
      // y_i = Σ_{j <= i} x_j; its gradient dx_i = Σ_{j >= i} dy_j
      .Case<CumsumOp, CumsumGradOp>([&](auto c) {
        const Tensor &x = *in[0];
        bool reverse = isa<CumsumGradOp>(c.getOperation());
        forEachLine(x.shape, c.getDim(), [&](int64_t base, int64_t stride, int64_t n) {
          double sum = 0;
          for (int64_t k = 0; k < n; ++k) {
            int64_t p = base + (reverse ? n - 1 - k : k) * stride;
            sum += x.data[p];
            out[0].data[p] = sum;
          }
        });
        return success();
      })
      .Default([](Operation *) { return std::nullopt; });
}
