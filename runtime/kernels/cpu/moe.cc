// The mixture-of-experts kernels (step.top_k, moe_dispatch, moe_combine,
// grouped_matmul and their gradients) on the CPU. The routing is
// moe_routing.h's; each expert's product is one oneDNN matmul on its rows
// (an expert without rows none) whose row count (or, for a weight
// gradient, reduction length) is a runtime dimension: one primitive per
// weight shape, however the tokens split (a primitive per row count held
// 150 MB for gpt-small's 4 experts). OpenBLAS's sgemm where oneDNN has none.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include <cblas.h>

#include "runtime/kernels/cpu/cpu_kernels.h"
#if STEPC_GEMM_ONEDNN
#include "runtime/kernels/cpu/onednn_matmul.h"
#endif
#include "runtime/kernels/moe_routing.h"

namespace {

// One expert's product through oneDNN (onednn_matmul.h), or false: the
// reference kernels (no oneDNN) take the sgemm.
bool ExpertMatmul(const float* a, bool transpose_a, const float* b, bool transpose_b, float* c,
                  int64_t m, int64_t n, int64_t k, bool runtime_m, bool accumulate) {
#if STEPC_GEMM_ONEDNN
  return stepc::onednn::VariableMatmul(a, transpose_a, b, transpose_b, c, m, n, k, runtime_m,
                                       accumulate);
#else
  return false;
#endif
}

// The routing's shape: tokens with k experts each, E experts in G groups,
// at most `capacity` pairs per expert of each `segment` tokens (0: dropless).
struct Routing {
  int64_t tokens, k, num_experts, groups, capacity, segment;
  int64_t pairs() const { return tokens * k; }
  int64_t block() const {
    return stepc_moe_block_rows(tokens, k, num_experts, groups, capacity, segment);
  }
};

// Each pair's slot (and the counts and each block's rows, when asked).
std::vector<int32_t> Slots(const int32_t* experts, const Routing& r, int32_t* counts = nullptr,
                           std::vector<int32_t>* taken = nullptr) {
  std::vector<int32_t> slots(r.pairs()), next(r.num_experts), seen(r.num_experts),
      own(counts ? 0 : r.num_experts);
  if (taken) taken->resize(r.groups);
  stepc_moe_route(experts, r.pairs(), r.num_experts, r.groups, r.block(), r.capacity,
                  r.segment * r.k, counts ? counts : own.data(), next.data(), seen.data(),
                  slots.data(), taken ? taken->data() : nullptr);
  return slots;
}

// Zeros each block's rows past the `taken` it holds (blocks of `block` rows).
void ZeroPadding(float* rows, const std::vector<int32_t>& taken, int64_t block, int64_t width) {
  for (size_t g = 0; g < taken.size(); ++g)
    std::fill(rows + (g * block + taken[g]) * width, rows + (g + 1) * block * width, 0.0f);
}

}  // namespace

extern "C" void stepc_cpu_top_k(const float* x, int64_t rows, int64_t n, int64_t k,
                                float* values, int32_t* indices) {
#pragma omp parallel
  {
    std::vector<int32_t> order(n);
#pragma omp for
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = x + r * n;
      std::iota(order.begin(), order.end(), 0);
      // Larger first (NaN largest); among equals the lower index.
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
        const bool na = std::isnan(row[a]), nb = std::isnan(row[b]);
        if (na || nb) return na && (!nb || a < b);
        return row[a] > row[b] || (row[a] == row[b] && a < b);
      });
      for (int64_t j = 0; j < k; ++j) {
        values[r * k + j] = row[order[j]];
        indices[r * k + j] = order[j];
      }
    }
  }
}

extern "C" void stepc_cpu_moe_dispatch(const float* x, const int32_t* experts, int64_t tokens,
                                       int64_t k, int64_t width, int64_t num_experts,
                                       int64_t groups, int64_t capacity, int64_t segment,
                                       float* rows, int32_t* counts) {
  const Routing r{tokens, k, num_experts, groups, capacity, segment};
  const int64_t pairs = r.pairs();
  std::vector<int32_t> taken;
  const std::vector<int32_t> slots = Slots(experts, r, counts, &taken);
  ZeroPadding(rows, taken, r.block(), width);
#pragma omp parallel for
  for (int64_t p = 0; p < pairs; ++p)
    if (slots[p] >= 0) std::memcpy(rows + slots[p] * width, x + (p / k) * width, width * 4);
}

extern "C" void stepc_cpu_moe_combine(const float* rows, const float* gates,
                                      const int32_t* experts, int64_t tokens, int64_t k,
                                      int64_t width, int64_t num_experts, int64_t groups,
                                      int64_t capacity, int64_t segment, float* out) {
  const std::vector<int32_t> slots =
      Slots(experts, Routing{tokens, k, num_experts, groups, capacity, segment});
#pragma omp parallel for
  for (int64_t n = 0; n < tokens; ++n) {
    float* o = out + n * width;
    std::fill(o, o + width, 0.0f);
    for (int64_t j = 0; j < k; ++j) {
      const int64_t p = n * k + j;
      if (slots[p] < 0) continue;
      const float g = gates[p], *r = rows + slots[p] * width;
      for (int64_t c = 0; c < width; ++c) o[c] += g * r[c];
    }
  }
}

extern "C" void stepc_cpu_moe_combine_grad(const float* dy, const float* rows,
                                           const float* gates, const int32_t* experts,
                                           int64_t tokens, int64_t k, int64_t width,
                                           int64_t num_experts, int64_t groups,
                                           int64_t capacity, int64_t segment, float* drows,
                                           float* dgates) {
  const Routing r{tokens, k, num_experts, groups, capacity, segment};
  const int64_t pairs = r.pairs();
  std::vector<int32_t> taken;
  const std::vector<int32_t> slots = Slots(experts, r, nullptr, &taken);
  ZeroPadding(drows, taken, r.block(), width);
#pragma omp parallel for
  for (int64_t p = 0; p < pairs; ++p) {
    if (slots[p] < 0) {
      dgates[p] = 0.0f;
      continue;
    }
    const float* g = dy + (p / k) * width;
    const float* r = rows + slots[p] * width;
    float* d = drows + slots[p] * width;
    double dot = 0.0;
    for (int64_t c = 0; c < width; ++c) {
      d[c] = gates[p] * g[c];
      dot += double(g[c]) * r[c];
    }
    dgates[p] = static_cast<float>(dot);
  }
}

// grouped_matmul's operands hold `blocks` equal blocks of rows (one per
// expert-parallel source rank; 1 without), block b's experts' rows counted
// by counts[b·E, (b+1)·E).
extern "C" void stepc_cpu_grouped_matmul(const float* lhs, const float* rhs,
                                         const int32_t* counts, int64_t m, int64_t k, int64_t n,
                                         int64_t num_experts, int64_t blocks, int transpose_b,
                                         float* out) {
  const int64_t block = m / blocks;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t base = b * block;
    int64_t covered = 0;
    for (int64_t e = 0; e < num_experts; ++e) {
      int64_t begin, end;
      stepc_moe_rows(counts + b * num_experts, e, block, &begin, &end);
      covered = std::max(covered, end);
      if (end > begin &&
          !ExpertMatmul(lhs + (base + begin) * k, false, rhs + e * k * n, transpose_b,
                        out + (base + begin) * n, end - begin, n, k, /*runtime_m=*/true,
                        /*accumulate=*/false))
        cblas_sgemm(CblasRowMajor, CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans,
                    int(end - begin), int(n), int(k), 1.0f, lhs + (base + begin) * k, int(k),
                    rhs + e * k * n, transpose_b ? int(k) : int(n), 0.0f,
                    out + (base + begin) * n, int(n));
    }
    std::fill(out + (base + covered) * n, out + (base + block) * n, 0.0f);
  }
}

extern "C" void stepc_cpu_grouped_matmul_weight_grad(const float* lhs, const float* dy,
                                                     const int32_t* counts, int64_t m, int64_t k,
                                                     int64_t n, int64_t num_experts,
                                                     int64_t blocks, int transpose_b, float* dw) {
  const int64_t block = m / blocks;
  for (int64_t e = 0; e < num_experts; ++e) {
    float* d = dw + e * k * n;
    float beta = 0.0f;  // the first block with rows writes, the later add
    for (int64_t b = 0; b < blocks; ++b) {
      int64_t begin, end;
      stepc_moe_rows(counts + b * num_experts, e, block, &begin, &end);
      if (end == begin) continue;
      const int64_t rows = end - begin, at = b * block + begin;
      if (transpose_b ? ExpertMatmul(dy + at * n, true, lhs + at * k, false, d, n, k, rows,
                                     /*runtime_m=*/false, beta != 0.0f)
                      : ExpertMatmul(lhs + at * k, true, dy + at * n, false, d, k, n, rows,
                                     /*runtime_m=*/false, beta != 0.0f)) {
        beta = 1.0f;
        continue;
      }
      if (transpose_b)  // dW_e = dY_eᵀ X_e: [N, K]
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(n), int(k), int(rows), 1.0f,
                    dy + at * n, int(n), lhs + at * k, int(k), beta, d, int(k));
      else  // dW_e = X_eᵀ dY_e: [K, N]
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(k), int(n), int(rows), 1.0f,
                    lhs + at * k, int(k), dy + at * n, int(n), beta, d, int(n));
      beta = 1.0f;
    }
    if (beta == 0.0f) std::fill(d, d + k * n, 0.0f);
  }
}
