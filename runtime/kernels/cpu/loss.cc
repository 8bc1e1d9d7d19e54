// cross_entropy, embedding and their gradients; AdamW.

#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "runtime/kernels/cpu/cpu_kernels.h"

namespace {

// First position (1-based) of an id outside [0, bound), or 0.
int64_t BadId(const int32_t* ids, int64_t n, int64_t bound) {
  for (int64_t i = 0; i < n; ++i)
    if (ids[i] < 0 || ids[i] >= bound) return i + 1;
  return 0;
}

// The largest of a row's n values (a vector reduction).
inline float RowMax(const float* x, int64_t n) {
  float max = -INFINITY;
#pragma omp simd reduction(max : max)
  for (int64_t j = 0; j < n; ++j) max = x[j] > max ? x[j] : max;
  return max;
}

// log Σ exp(x[j]) over one row: max and sum as vector reductions, exp
// through libmvec (cpu_kernels.h), in float as PyTorch's kernel.
inline float RowLogSumExp(const float* x, int64_t n) {
  const float max = RowMax(x, n);
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) sum += expf(x[j] - max);
  return max + logf(sum);
}

// RowLogSumExp's max and sum (the same additions: its log-sum-exp to the
// bit), keeping each exp(x[j] - max) in e: the gradient's softmax is then
// e[j] / sum, one expf per logit instead of two (llama-s's [8192, 32000]
// logits were bound by them).
inline float RowExpSum(const float* x, int64_t n, float* e, float& lse) {
  const float max = RowMax(x, n);
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) {
    e[j] = expf(x[j] - max);
    sum += e[j];
  }
  lse = max + logf(sum);
  return sum;
}

// The target's gradient a·e - scale, the product rounded to float first
// (as the other elements' a·e are; no multiply-add), so that the f32 and
// bf16 kernels make the same f32 value.
inline float TargetGrad(float a, float e, float scale) {
  volatile float product = a * e;
  return product - scale;
}

}  // namespace

extern "C" int64_t stepc_cpu_cross_entropy(const float* logits, const int32_t* targets,
                                           int64_t n, int64_t classes, float* loss) {
  if (int64_t bad = BadId(targets, n, classes)) return bad;
  double total = 0;
#pragma omp parallel for reduction(+ : total)
  for (int64_t i = 0; i < n; ++i) {
    const float* row = logits + i * classes;
    total += static_cast<double>(RowLogSumExp(row, classes)) - row[targets[i]];
  }
  *loss = static_cast<float>(total / n);
  return 0;
}

// dlogits = dloss · (softmax - onehot) / N: one pass over each row (in
// cache) for its log-sum-exp, one to write it.
extern "C" int64_t stepc_cpu_cross_entropy_grad(const float* dloss, const float* logits,
                                                const int32_t* targets, int64_t n,
                                                int64_t classes, float* dlogits) {
  if (int64_t bad = BadId(targets, n, classes)) return bad;
  const float scale = static_cast<float>(static_cast<double>(*dloss) / n);
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) {
    const float* row = logits + i * classes;
    float* out = dlogits + i * classes;
    float lse;
    const float a = scale / RowExpSum(row, classes, out, lse);
    const float target = TargetGrad(a, out[targets[i]], scale);
#pragma omp simd
    for (int64_t j = 0; j < classes; ++j) out[j] *= a;
    out[targets[i]] = target;
  }
  return 0;
}

namespace {

// Both at once (compiler/lib/FusedCrossEntropy.cpp): each row read once,
// its log-sum-exp taken once; the same rounding as the two kernels above.
// Into bf16 (the gradient only rounded for the output layer's GEMMs): each
// row made in f32 exactly so, in a per-thread buffer, then rounded.
template <typename Out>
int64_t CrossEntropyFused(const float* logits, const int32_t* targets, const float* dloss,
                          int64_t n, int64_t classes, float* loss, Out* dlogits) {
  if (int64_t bad = BadId(targets, n, classes)) return bad;
  const float scale = static_cast<float>(static_cast<double>(*dloss) / n);
  double total = 0;
#pragma omp parallel reduction(+ : total)
  {
    std::vector<float> buffer(std::is_same_v<Out, float> ? 0 : classes);
#pragma omp for
    for (int64_t i = 0; i < n; ++i) {
      const float* row = logits + i * classes;
      // Row i + 4's logits and gradient, asked for now: from memory they
      // came late ([4096, 512] bf16: 1.33 -> 1.13 ms).
      stepc_prefetch_r(logits, (i + 4) * classes, (i + 5) * classes, n * classes, sizeof(float));
      stepc_prefetch_w(dlogits, (i + 4) * classes, (i + 5) * classes, n * classes, sizeof(Out));
      float* out;
      if constexpr (std::is_same_v<Out, float>)
        out = dlogits + i * classes;
      else
        out = buffer.data();
      float lse;
      const float a = scale / RowExpSum(row, classes, out, lse);
      const int32_t t = targets[i];
      total += static_cast<double>(lse) - row[t];
      const float target = TargetGrad(a, out[t], scale);
      if constexpr (std::is_same_v<Out, float>) {
#pragma omp simd
        for (int64_t j = 0; j < classes; ++j) out[j] *= a;
        out[t] = target;
      } else {
        Out* rounded = dlogits + i * classes;
#pragma omp simd
        for (int64_t j = 0; j < classes; ++j) rounded[j] = stepc_f32_to_bf16(a * out[j]);
        rounded[t] = stepc_f32_to_bf16(target);
      }
    }
  }
  *loss = static_cast<float>(total / n);
  return 0;
}

}  // namespace

extern "C" int64_t stepc_cpu_cross_entropy_fused(const float* logits, const int32_t* targets,
                                                 const float* dloss, int64_t n,
                                                 int64_t classes, float* loss,
                                                 float* dlogits) {
  return CrossEntropyFused(logits, targets, dloss, n, classes, loss, dlogits);
}

extern "C" int64_t stepc_cpu_cross_entropy_fused_bf16(const float* logits,
                                                      const int32_t* targets,
                                                      const float* dloss, int64_t n,
                                                      int64_t classes, float* loss,
                                                      stepc_bf16* dlogits) {
  return CrossEntropyFused(logits, targets, dloss, n, classes, loss, dlogits);
}

namespace {

// First position (1-based) of a counted target outside [0, bound), or 0.
int64_t BadCountedId(const int32_t* ids, int64_t n, int64_t bound, int64_t ignore) {
  for (int64_t i = 0; i < n; ++i)
    if (ids[i] != ignore && (ids[i] < 0 || ids[i] >= bound)) return i + 1;
  return 0;
}

// The options of one masked cross-entropy, in float as the kernels round.
struct MaskedLoss {
  int64_t classes, ignore;
  float smoothing, z, scale;  // scale: dloss / count (0 for a zero count)

  // One counted row's loss: lse - (1-ε)·x_t - (ε/V)·Σx + z·lse².
  float RowLoss(const float* row, int32_t target, float lse) const {
    float sum = 0.0f;
    if (smoothing != 0.0f) {
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < classes; ++j) sum += row[j];
    }
    return lse - (1.0f - smoothing) * row[target] - smoothing / classes * sum + z * lse * lse;
  }

  // One counted row's gradient, in place over its exp(x[j] - max) (RowExpSum):
  // scale·((1 + 2z·lse)·softmax - (1-ε)·onehot - ε/V).
  void RowGrad(int32_t target, float lse, float sum, float* out) const {
    const float a = scale * (1.0f + 2.0f * z * lse) / sum, b = scale * smoothing / classes;
#pragma omp simd
    for (int64_t j = 0; j < classes; ++j) out[j] = a * out[j] - b;
    out[target] -= scale * (1.0f - smoothing);
  }
};

MaskedLoss Options(const float* count, const float* dloss, int64_t classes, int64_t ignore,
                   double smoothing, double z_loss) {
  const double c = *count, d = dloss ? *dloss : 1.0;
  return MaskedLoss{classes, ignore, static_cast<float>(smoothing), static_cast<float>(z_loss),
                    c != 0.0 ? static_cast<float>(d / c) : 0.0f};
}

}  // namespace

extern "C" void stepc_cpu_target_mask(const int32_t* targets, int64_t n, int64_t ignore,
                                      int32_t* ids, float* mask) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const bool counted = targets[i] != ignore;
    ids[i] = counted ? targets[i] : 0;
    mask[i] = counted ? 1.0f : 0.0f;
  }
}

extern "C" void stepc_cpu_token_count(const int32_t* targets, int64_t n, int64_t ignore,
                                      float* count) {
  int64_t counted = 0;
#pragma omp simd reduction(+ : counted)
  for (int64_t i = 0; i < n; ++i) counted += targets[i] != ignore;
  *count = static_cast<float>(counted);
}

extern "C" int64_t stepc_cpu_cross_entropy_masked(const float* logits, const int32_t* targets,
                                                  const float* count, int64_t n, int64_t classes,
                                                  int64_t ignore, double smoothing,
                                                  double z_loss, float* loss) {
  if (int64_t bad = BadCountedId(targets, n, classes, ignore)) return bad;
  const MaskedLoss o = Options(count, nullptr, classes, ignore, smoothing, z_loss);
  double total = 0;
#pragma omp parallel for reduction(+ : total)
  for (int64_t i = 0; i < n; ++i) {
    if (targets[i] == ignore) continue;
    const float* row = logits + i * classes;
    total += o.RowLoss(row, targets[i], RowLogSumExp(row, classes));
  }
  *loss = static_cast<float>(*count != 0.0f ? total / *count : 0.0);
  return 0;
}

extern "C" int64_t stepc_cpu_cross_entropy_masked_grad(const float* dloss, const float* logits,
                                                       const int32_t* targets,
                                                       const float* count, int64_t n,
                                                       int64_t classes, int64_t ignore,
                                                       double smoothing, double z_loss,
                                                       float* dlogits) {
  if (int64_t bad = BadCountedId(targets, n, classes, ignore)) return bad;
  const MaskedLoss o = Options(count, dloss, classes, ignore, smoothing, z_loss);
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) {
    float* out = dlogits + i * classes;
    if (targets[i] == ignore) {
      std::memset(out, 0, classes * sizeof(float));
      continue;
    }
    float lse;
    const float sum = RowExpSum(logits + i * classes, classes, out, lse);
    o.RowGrad(targets[i], lse, sum, out);
  }
  return 0;
}

extern "C" int64_t stepc_cpu_cross_entropy_masked_fused(const float* logits,
                                                        const int32_t* targets,
                                                        const float* count, const float* dloss,
                                                        int64_t n, int64_t classes,
                                                        int64_t ignore, double smoothing,
                                                        double z_loss, float* loss,
                                                        float* dlogits) {
  if (int64_t bad = BadCountedId(targets, n, classes, ignore)) return bad;
  const MaskedLoss o = Options(count, dloss, classes, ignore, smoothing, z_loss);
  double total = 0;
#pragma omp parallel for reduction(+ : total)
  for (int64_t i = 0; i < n; ++i) {
    const float* row = logits + i * classes;
    float* out = dlogits + i * classes;
    if (targets[i] == ignore) {
      std::memset(out, 0, classes * sizeof(float));
      continue;
    }
    float lse;
    const float sum = RowExpSum(row, classes, out, lse);
    total += o.RowLoss(row, targets[i], lse);
    o.RowGrad(targets[i], lse, sum, out);
  }
  *loss = static_cast<float>(*count != 0.0f ? total / *count : 0.0);
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
namespace {

// dtable[ids[i] - first] += dy[i] for the ids in [first, first + rows), in
// token order for every element (deterministic, no atomics): threads take
// blocks of 16 columns (a cache line of each row), each adding a row's
// block as one vector.
void ScatterAddRows(const float* dy, const int32_t* ids, int64_t n, int64_t first, int64_t rows,
                    int64_t d, float* dtable) {
  constexpr int64_t kColumns = 16;
#pragma omp parallel for
  for (int64_t c0 = 0; c0 < d; c0 += kColumns) {
    const int64_t width = d - c0 < kColumns ? d - c0 : kColumns;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t row = static_cast<int64_t>(ids[i]) - first;
      if (row < 0 || row >= rows) continue;
      float* out = dtable + row * d + c0;
      const float* in = dy + i * d + c0;
#pragma omp simd
      for (int64_t c = 0; c < width; ++c) out[c] += in[c];
    }
  }
}

}  // namespace

extern "C" int64_t stepc_cpu_embedding_grad(const float* dy, const int32_t* ids, int64_t n,
                                            int64_t rows, int64_t d, float* dtable) {
  if (int64_t bad = BadId(ids, n, rows)) return bad;
  std::memset(dtable, 0, rows * d * sizeof(float));
  ScatterAddRows(dy, ids, n, 0, rows, d, dtable);
  return 0;
}


extern "C" int64_t stepc_cpu_embedding_shard(const float* table, const int32_t* ids,
                                             const int32_t* first_row, int64_t n, int64_t rows,
                                             int64_t num_ids, int64_t d, float* out) {
  if (int64_t bad = BadId(ids, n, num_ids)) return bad;
  const int64_t first = *first_row;
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) {
    const int64_t row = static_cast<int64_t>(ids[i]) - first;
    if (row >= 0 && row < rows)
      std::memcpy(out + i * d, table + row * d, d * sizeof(float));
    else
      std::memset(out + i * d, 0, d * sizeof(float));
  }
  return 0;
}

extern "C" int64_t stepc_cpu_embedding_shard_grad(const float* dy, const int32_t* ids,
                                                  const int32_t* first_row, int64_t n,
                                                  int64_t rows, int64_t num_ids, int64_t d,
                                                  float* dtable) {
  if (int64_t bad = BadId(ids, n, num_ids)) return bad;
  const int64_t first = *first_row;
  std::memset(dtable, 0, rows * d * sizeof(float));
  ScatterAddRows(dy, ids, n, first, rows, d, dtable);
  return 0;
}
