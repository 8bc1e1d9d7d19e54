// cross_entropy, embedding and their gradients; AdamW.

#include <cmath>
#include <cstring>

#include "runtime/kernels/cpu/cpu_kernels.h"

namespace {

// First position (1-based) of an id outside [0, bound), or 0.
int64_t BadId(const int32_t* ids, int64_t n, int64_t bound) {
  for (int64_t i = 0; i < n; ++i)
    if (ids[i] < 0 || ids[i] >= bound) return i + 1;
  return 0;
}

double LogSumExp(const float* x, int64_t n) {
  float max = -INFINITY;
  for (int64_t j = 0; j < n; ++j) max = std::fmax(max, x[j]);
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += std::exp(static_cast<double>(x[j]) - max);
  return max + std::log(sum);
}

}  // namespace

extern "C" int64_t stepc_cpu_cross_entropy(const float* logits, const int32_t* targets,
                                           int64_t n, int64_t classes, float* loss) {
  if (int64_t bad = BadId(targets, n, classes)) return bad;
  double total = 0;
#pragma omp parallel for reduction(+ : total)
  for (int64_t i = 0; i < n; ++i) {
    const float* row = logits + i * classes;
    total += LogSumExp(row, classes) - row[targets[i]];
  }
  *loss = static_cast<float>(total / n);
  return 0;
}

// dlogits = dloss · (softmax - onehot) / N
extern "C" int64_t stepc_cpu_cross_entropy_grad(const float* dloss, const float* logits,
                                                const int32_t* targets, int64_t n,
                                                int64_t classes, float* dlogits) {
  if (int64_t bad = BadId(targets, n, classes)) return bad;
  double scale = static_cast<double>(*dloss) / n;
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) {
    const float* row = logits + i * classes;
    double lse = LogSumExp(row, classes);
    for (int64_t j = 0; j < classes; ++j)
      dlogits[i * classes + j] = static_cast<float>(
          scale * (std::exp(row[j] - lse) - (j == targets[i] ? 1.0 : 0.0)));
  }
  return 0;
}

extern "C" int64_t stepc_cpu_embedding(const float* table, const int32_t* ids, int64_t n,
                                       int64_t rows, int64_t d, float* out) {
  if (int64_t bad = BadId(ids, n, rows)) return bad;
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(out + i * d, table + static_cast<int64_t>(ids[i]) * d, d * sizeof(float));
  return 0;
}

// dtable[ids[i]] += dy[i]; threads split the columns, so repeated ids never race.
extern "C" int64_t stepc_cpu_embedding_grad(const float* dy, const int32_t* ids, int64_t n,
                                            int64_t rows, int64_t d, float* dtable) {
  if (int64_t bad = BadId(ids, n, rows)) return bad;
  std::memset(dtable, 0, rows * d * sizeof(float));
#pragma omp parallel
  {
#pragma omp for
    for (int64_t c = 0; c < d; ++c)
      for (int64_t i = 0; i < n; ++i) dtable[static_cast<int64_t>(ids[i]) * d + c] += dy[i * d + c];
  }
  return 0;
}

// torch.optim.AdamW (single-tensor path) on grad · grad_scale.
extern "C" void stepc_cpu_adamw(float* param, const float* grad, float* m, float* v,
                                int64_t n, const float* lr_ptr, const float* step_ptr,
                                const float* scale_ptr, double beta1, double beta2, double eps,
                                double weight_decay) {
  const float lr = *lr_ptr, scale = *scale_ptr;
  const double t = *step_ptr;
  const float decay = static_cast<float>(1.0 - lr * weight_decay);
  const float step_size = static_cast<float>(lr / (1.0 - std::pow(beta1, t)));
  const float bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(beta2, t)));
  const float b1 = static_cast<float>(beta1), b2 = static_cast<float>(beta2);
  const float e = static_cast<float>(eps);
#pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) {
    float g = grad[i] * scale;
    float mi = m[i] * b1 + (1.0f - b1) * g;
    float vi = v[i] * b2 + (1.0f - b2) * g * g;
    m[i] = mi;
    v[i] = vi;
    param[i] = param[i] * decay - step_size * mi / (std::sqrt(vi) / bc2_sqrt + e);
  }
}
