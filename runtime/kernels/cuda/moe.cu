// The mixture-of-experts kernels on the GPU (step.top_k, moe_dispatch,
// moe_combine, grouped_matmul and their gradients), as the CPU's of
// kernels/cpu/moe.cc. The routing (moe_routing.h) runs in one thread into
// the scratch the compiler planned (2E + pairs + G i32: counts, next,
// slots, each group's block's taken rows); the rest is a thread per element. A first
// version: correct and capturable in a CUDA graph, not fast — the grouped
// products are plain loops, where cuBLASLt's grouped GEMMs belong.

#include "runtime/kernels/cuda/common.cuh"
#include "runtime/kernels/moe_routing.h"

namespace stepc::cuda {
namespace {

// Per row of n: the k largest (NaN largest, ties to the lower index).
__global__ void TopKKernel(const float* x, int64_t rows, int64_t n, int64_t k, float* values,
                           int32_t* indices) {
  for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < rows;
       r += (int64_t)gridDim.x * blockDim.x) {
    const float* row = x + r * n;
    for (int64_t j = 0; j < k; ++j) {
      int64_t best = -1;
      for (int64_t c = 0; c < n; ++c) {
        bool taken = false;
        for (int64_t i = 0; i < j; ++i) taken |= indices[r * k + i] == c;
        if (taken) continue;
        const float v = row[c];
        if (best < 0) {
          best = c;
          continue;
        }
        const float b = row[best];
        if ((v != v && b == b) || (b == b && v > b)) best = c;  // v != v: NaN
      }
      indices[r * k + j] = static_cast<int32_t>(best);
      values[r * k + j] = row[best];
    }
  }
}

// scratch: counts (E; the dispatch's own output when given), next (E),
// slots (pairs), taken (G: the rows each block holds).
struct RouteScratch {
  int32_t *counts, *next, *slots, *taken;
};
__host__ __device__ RouteScratch Carve(float* scratch, int64_t pairs, int64_t experts,
                                       int32_t* counts) {
  int32_t* s = reinterpret_cast<int32_t*>(scratch);
  return {counts ? counts : s, s + experts, s + 2 * experts, s + 2 * experts + pairs};
}

__global__ void RouteKernel(const int32_t* experts, int64_t pairs, int64_t num_experts,
                            int64_t groups, RouteScratch r) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  stepc_moe_route(experts, pairs, num_experts, groups, pairs, r.counts, r.next, r.slots,
                  r.taken);
}

// Rows of `groups` blocks of `block` rows past their block's taken: zero.
__global__ void ZeroPaddingKernel(int64_t groups, int64_t block, int64_t width, RouteScratch r,
                                  float* rows) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < groups * block * width;
       i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t row = i / width;
    if (row % block >= r.taken[row / block]) rows[i] = 0.0f;
  }
}

__global__ void DispatchKernel(const float* x, int64_t pairs, int64_t k, int64_t width,
                               RouteScratch r, float* rows) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < pairs * width;
       i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t p = i / width, c = i % width;
    if (r.slots[p] >= 0) rows[r.slots[p] * width + c] = x[(p / k) * width + c];
  }
}

__global__ void CombineKernel(const float* rows, const float* gates, int64_t tokens, int64_t k,
                              int64_t width, RouteScratch r, float* out) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < tokens * width;
       i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t n = i / width, c = i % width;
    float acc = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      const int32_t s = r.slots[n * k + j];
      if (s >= 0) acc += gates[n * k + j] * rows[s * width + c];
    }
    out[i] = acc;
  }
}

__global__ void CombineGradKernel(const float* dy, const float* rows, const float* gates,
                                  int64_t pairs, int64_t k, int64_t width, RouteScratch r,
                                  float* drows, float* dgates) {
  for (int64_t p = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; p < pairs;
       p += (int64_t)gridDim.x * blockDim.x) {
    const int32_t s = r.slots[p];
    if (s < 0) {
      dgates[p] = 0.0f;
      continue;
    }
    const float* g = dy + (p / k) * width;
    double dot = 0.0;
    for (int64_t c = 0; c < width; ++c) {
      drows[s * width + c] = gates[p] * g[c];
      dot += double(g[c]) * rows[s * width + c];
    }
    dgates[p] = static_cast<float>(dot);
  }
}

// Expert e's rows of an m-row operand (moe_routing.h's stepc_moe_rows) for
// row r: the e whose range holds it, or -1 past them all.
__device__ int64_t ExpertOfRow(const int32_t* counts, int64_t experts, int64_t r) {
  int64_t end = 0;
  for (int64_t e = 0; e < experts; ++e) {
    end += counts[e] > 0 ? counts[e] : 0;
    if (r < end) return e;
  }
  return -1;
}

// The operands hold `blocks` equal blocks of rows, block b's counted by
// counts[b·E, (b+1)·E).
__global__ void GroupedMatmulKernel(const float* lhs, const float* rhs, const int32_t* counts,
                                    int64_t m, int64_t k, int64_t n, int64_t experts,
                                    int64_t blocks, int transpose_b, float* out) {
  const int64_t block = m / blocks;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < m * n;
       i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = i / n, j = i % n;
    const int64_t e = ExpertOfRow(counts + (r / block) * experts, experts, r % block);
    float acc = 0.0f;
    if (e >= 0) {
      const float* w = rhs + e * k * n;
      for (int64_t c = 0; c < k; ++c) acc += lhs[r * k + c] * (transpose_b ? w[j * k + c] : w[c * n + j]);
    }
    out[i] = acc;
  }
}

__global__ void WeightGradKernel(const float* lhs, const float* dy, const int32_t* counts,
                                 int64_t m, int64_t k, int64_t n, int64_t experts,
                                 int64_t blocks, int transpose_b, float* dw) {
  const int64_t block = m / blocks;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < experts * k * n;
       i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t e = i / (k * n), within = i % (k * n);
    // transpose_b: dW_e [N, K] = dY_eᵀ X_e; else [K, N] = X_eᵀ dY_e.
    const int64_t c = transpose_b ? within % k : within / n;
    const int64_t j = transpose_b ? within / k : within % n;
    float acc = 0.0f;
    for (int64_t b = 0; b < blocks; ++b) {
      int64_t begin, end;
      stepc_moe_rows(counts + b * experts, e, block, &begin, &end);
      for (int64_t r = b * block + begin; r < b * block + end; ++r)
        acc += lhs[r * k + c] * dy[r * n + j];
    }
    dw[i] = acc;
  }
}

int Route(stepc_cuda_ctx* ctx, const int32_t* experts, int64_t pairs, int64_t num_experts,
          int64_t groups, const RouteScratch& r) {
  STEPC_LAUNCH(1, 1, 0, ctx->stream, RouteKernel)(experts, pairs, num_experts, groups, r);
  return STEPC_LAUNCHED(ctx, "RouteKernel(moe)");
}

int ZeroPadding(stepc_cuda_ctx* ctx, int64_t groups, int64_t block, int64_t width,
                const RouteScratch& r, float* rows) {
  STEPC_LAUNCH(ElementwiseBlocks(groups * block * width), kThreads, 0, ctx->stream,
               ZeroPaddingKernel)(groups, block, width, r, rows);
  return STEPC_LAUNCHED(ctx, "ZeroPaddingKernel(moe)");
}

}  // namespace
}  // namespace stepc::cuda

using namespace stepc::cuda;

extern "C" int stepc_cuda_top_k(stepc_cuda_ctx* ctx, const float* x, int64_t rows, int64_t n,
                                int64_t k, float* values, int32_t* indices) {
  STEPC_LAUNCH(ElementwiseBlocks(rows), kThreads, 0, ctx->stream, TopKKernel)(x, rows, n, k,
                                                                             values, indices);
  return STEPC_LAUNCHED(ctx, "TopKKernel");
}

extern "C" int stepc_cuda_moe_dispatch(stepc_cuda_ctx* ctx, const float* x,
                                       const int32_t* experts, int64_t tokens, int64_t k,
                                       int64_t width, int64_t num_experts, int64_t groups,
                                       float* scratch, float* rows, int32_t* counts) {
  const RouteScratch r = Carve(scratch, tokens * k, num_experts, counts);
  if (int rc = Route(ctx, experts, tokens * k, num_experts, groups, r)) return rc;
  if (int rc = ZeroPadding(ctx, groups, tokens * k, width, r, rows)) return rc;
  STEPC_LAUNCH(ElementwiseBlocks(tokens * k * width), kThreads, 0, ctx->stream, DispatchKernel)(
      x, tokens * k, k, width, r, rows);
  return STEPC_LAUNCHED(ctx, "DispatchKernel(moe)");
}

extern "C" int stepc_cuda_moe_combine(stepc_cuda_ctx* ctx, const float* rows, const float* gates,
                                      const int32_t* experts, int64_t tokens, int64_t k,
                                      int64_t width, int64_t num_experts, int64_t groups,
                                      float* scratch, float* out) {
  const RouteScratch r = Carve(scratch, tokens * k, num_experts, nullptr);
  if (int rc = Route(ctx, experts, tokens * k, num_experts, groups, r)) return rc;
  STEPC_LAUNCH(ElementwiseBlocks(tokens * width), kThreads, 0, ctx->stream, CombineKernel)(
      rows, gates, tokens, k, width, r, out);
  return STEPC_LAUNCHED(ctx, "CombineKernel(moe)");
}

extern "C" int stepc_cuda_moe_combine_grad(stepc_cuda_ctx* ctx, const float* dy,
                                           const float* rows, const float* gates,
                                           const int32_t* experts, int64_t tokens, int64_t k,
                                           int64_t width, int64_t num_experts, int64_t groups,
                                           float* scratch, float* drows, float* dgates) {
  const RouteScratch r = Carve(scratch, tokens * k, num_experts, nullptr);
  if (int rc = Route(ctx, experts, tokens * k, num_experts, groups, r)) return rc;
  if (int rc = ZeroPadding(ctx, groups, tokens * k, width, r, drows)) return rc;
  STEPC_LAUNCH(ElementwiseBlocks(tokens * k), kThreads, 0, ctx->stream, CombineGradKernel)(
      dy, rows, gates, tokens * k, k, width, r, drows, dgates);
  return STEPC_LAUNCHED(ctx, "CombineGradKernel(moe)");
}

extern "C" int stepc_cuda_grouped_matmul(stepc_cuda_ctx* ctx, const float* lhs, const float* rhs,
                                         const int32_t* counts, int64_t m, int64_t k, int64_t n,
                                         int64_t num_experts, int64_t blocks, int transpose_b,
                                         float* out) {
  STEPC_LAUNCH(ElementwiseBlocks(m * n), kThreads, 0, ctx->stream, GroupedMatmulKernel)(
      lhs, rhs, counts, m, k, n, num_experts, blocks, transpose_b, out);
  return STEPC_LAUNCHED(ctx, "GroupedMatmulKernel");
}

extern "C" int stepc_cuda_grouped_matmul_weight_grad(stepc_cuda_ctx* ctx, const float* lhs,
                                                     const float* dy, const int32_t* counts,
                                                     int64_t m, int64_t k, int64_t n,
                                                     int64_t num_experts, int64_t blocks,
                                                     int transpose_b, float* dw) {
  STEPC_LAUNCH(ElementwiseBlocks(num_experts * k * n), kThreads, 0, ctx->stream,
               WeightGradKernel)(lhs, dy, counts, m, k, n, num_experts, blocks, transpose_b, dw);
  return STEPC_LAUNCHED(ctx, "WeightGradKernel(moe)");
}
