// The mixture-of-experts kernels on the GPU (step.top_k, moe_dispatch,
// moe_combine, grouped_matmul and their gradients), as the CPU's of
// kernels/cpu/moe.cc. The routing (moe_routing.h) runs in one thread into
// the scratch the compiler planned (3E + pairs + G i32: counts, next,
// seen, slots, each group's block's taken rows); the rest is a thread per element,
// and the grouped products 16x16 shared-memory tiles, one expert's per
// tile. Capturable in a CUDA graph (no host sync), not tuned: cuBLASLt's
// grouped GEMMs belong there once a GPU has measured them.

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

// The routing's shape: tokens with k experts each, E experts in G groups,
// at most `capacity` pairs per expert of each `segment` tokens (0: dropless).
struct Routing {
  int64_t tokens, k, num_experts, groups, capacity, segment;
  __host__ __device__ int64_t pairs() const { return tokens * k; }
  __host__ __device__ int64_t block() const {
    return stepc_moe_block_rows(tokens, k, num_experts, groups, capacity, segment);
  }
};

// scratch: counts (E; the dispatch's own output when given), next (E),
// seen (E), slots (pairs), taken (G: the rows each block holds).
struct RouteScratch {
  int32_t *counts, *next, *seen, *slots, *taken;
};
__host__ __device__ RouteScratch Carve(float* scratch, const Routing& g, int32_t* counts) {
  int32_t* s = reinterpret_cast<int32_t*>(scratch);
  const int64_t e = g.num_experts;
  return {counts ? counts : s, s + e, s + 2 * e, s + 3 * e, s + 3 * e + g.pairs()};
}

__global__ void RouteKernel(const int32_t* experts, Routing g, RouteScratch r) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  stepc_moe_route(experts, g.pairs(), g.num_experts, g.groups, g.block(), g.capacity,
                  g.segment * g.k, r.counts, r.next, r.seen, r.slots, r.taken);
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

// The grouped products in 16x16 tiles staged in shared memory. A row tile
// holds one expert's rows (a segment: block b's rows of expert e), so a
// block reads one expert's matrix; grid row t is the t-th tile of the
// segments laid end to end, found on the device from the counts (no host
// sync: the step stays one CUDA graph). Rows no segment holds are zeroed
// before.
constexpr int kTile = 16;

// Grid row `t`'s segment: its expert and its rows [*row0, *row_end);
// false past the segments' tiles (the grid has room for the worst case).
__device__ bool SegmentTile(const int32_t* counts, int64_t experts, int64_t blocks,
                            int64_t block_rows, int64_t t, int64_t* expert, int64_t* row0,
                            int64_t* row_end) {
  for (int64_t b = 0; b < blocks; ++b) {
    int64_t begin = 0;
    for (int64_t e = 0; e < experts; ++e) {
      const int64_t rows = counts[b * experts + e] > 0 ? counts[b * experts + e] : 0;
      const int64_t first = min(begin, block_rows), last = min(begin + rows, block_rows);
      const int64_t tiles = (last - first + kTile - 1) / kTile;
      if (t < tiles) {
        *expert = e;
        *row0 = b * block_rows + first + t * kTile;
        *row_end = b * block_rows + last;
        return true;
      }
      t -= tiles;
      begin += rows;
    }
  }
  return false;
}

__global__ void GroupedMatmulKernel(const float* lhs, const float* rhs, const int32_t* counts,
                                    int64_t m, int64_t k, int64_t n, int64_t experts,
                                    int64_t blocks, int transpose_b, float* out) {
  __shared__ float as[kTile][kTile + 1], bs[kTile][kTile + 1];
  int64_t e, row0, row_end;
  // (The same answer for every thread of the block.)
  if (!SegmentTile(counts, experts, blocks, m / blocks, blockIdx.y, &e, &row0, &row_end)) return;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t c = blockIdx.x * (int64_t)kTile + tx;
  const float* w = rhs + e * k * n;
  float acc = 0.0f;
  for (int64_t k0 = 0; k0 < k; k0 += kTile) {
    as[ty][tx] = row0 + ty < row_end && k0 + tx < k ? lhs[(row0 + ty) * k + k0 + tx] : 0.0f;
    const int64_t kk = k0 + ty;
    bs[ty][tx] = kk < k && c < n ? (transpose_b ? w[c * k + kk] : w[kk * n + c]) : 0.0f;
    __syncthreads();
    for (int q = 0; q < kTile; ++q) acc += as[ty][q] * bs[q][tx];
    __syncthreads();
  }
  if (row0 + ty < row_end && c < n) out[(row0 + ty) * n + c] = acc;
}

// dW_e (blockIdx.z = e): X_eᵀ dY_e over expert e's rows of every block, a
// [k, n] tile per block ([n, k] stored with transpose_b).
__global__ void WeightGradKernel(const float* lhs, const float* dy, const int32_t* counts,
                                 int64_t m, int64_t k, int64_t n, int64_t experts,
                                 int64_t blocks, int transpose_b, float* dw) {
  __shared__ float xs[kTile][kTile + 1], gs[kTile][kTile + 1];
  const int64_t e = blockIdx.z, block_rows = m / blocks;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t k0 = blockIdx.y * (int64_t)kTile, j = blockIdx.x * (int64_t)kTile + tx;
  float acc = 0.0f;
  for (int64_t b = 0; b < blocks; ++b) {
    int64_t begin, end;
    stepc_moe_rows(counts + b * experts, e, block_rows, &begin, &end);
    const int64_t last = b * block_rows + end;
    for (int64_t r0 = b * block_rows + begin; r0 < last; r0 += kTile) {
      const bool row = r0 + ty < last;
      xs[ty][tx] = row && k0 + tx < k ? lhs[(r0 + ty) * k + k0 + tx] : 0.0f;
      gs[ty][tx] = row && j < n ? dy[(r0 + ty) * n + j] : 0.0f;
      __syncthreads();
      for (int q = 0; q < kTile; ++q) acc += xs[q][ty] * gs[q][tx];
      __syncthreads();
    }
  }
  const int64_t kk = k0 + ty;
  if (kk < k && j < n) dw[e * k * n + (transpose_b ? j * k + kk : kk * n + j)] = acc;
}

int Route(stepc_cuda_ctx* ctx, const int32_t* experts, const Routing& g, const RouteScratch& r) {
  STEPC_LAUNCH(1, 1, 0, ctx->stream, RouteKernel)(experts, g, r);
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
                                       int64_t capacity, int64_t segment, float* scratch,
                                       float* rows, int32_t* counts) {
  const Routing g{tokens, k, num_experts, groups, capacity, segment};
  const RouteScratch r = Carve(scratch, g, counts);
  if (int rc = Route(ctx, experts, g, r)) return rc;
  if (int rc = ZeroPadding(ctx, groups, g.block(), width, r, rows)) return rc;
  STEPC_LAUNCH(ElementwiseBlocks(tokens * k * width), kThreads, 0, ctx->stream, DispatchKernel)(
      x, tokens * k, k, width, r, rows);
  return STEPC_LAUNCHED(ctx, "DispatchKernel(moe)");
}

extern "C" int stepc_cuda_moe_combine(stepc_cuda_ctx* ctx, const float* rows, const float* gates,
                                      const int32_t* experts, int64_t tokens, int64_t k,
                                      int64_t width, int64_t num_experts, int64_t groups,
                                      int64_t capacity, int64_t segment, float* scratch,
                                      float* out) {
  const Routing g{tokens, k, num_experts, groups, capacity, segment};
  const RouteScratch r = Carve(scratch, g, nullptr);
  if (int rc = Route(ctx, experts, g, r)) return rc;
  STEPC_LAUNCH(ElementwiseBlocks(tokens * width), kThreads, 0, ctx->stream, CombineKernel)(
      rows, gates, tokens, k, width, r, out);
  return STEPC_LAUNCHED(ctx, "CombineKernel(moe)");
}

extern "C" int stepc_cuda_moe_combine_grad(stepc_cuda_ctx* ctx, const float* dy,
                                           const float* rows, const float* gates,
                                           const int32_t* experts, int64_t tokens, int64_t k,
                                           int64_t width, int64_t num_experts, int64_t groups,
                                           int64_t capacity, int64_t segment, float* scratch,
                                           float* drows, float* dgates) {
  const Routing g{tokens, k, num_experts, groups, capacity, segment};
  const RouteScratch r = Carve(scratch, g, nullptr);
  if (int rc = Route(ctx, experts, g, r)) return rc;
  if (int rc = ZeroPadding(ctx, groups, g.block(), width, r, drows)) return rc;
  STEPC_LAUNCH(ElementwiseBlocks(tokens * k), kThreads, 0, ctx->stream, CombineGradKernel)(
      dy, rows, gates, tokens * k, k, width, r, drows, dgates);
  return STEPC_LAUNCHED(ctx, "CombineGradKernel(moe)");
}

extern "C" int stepc_cuda_grouped_matmul(stepc_cuda_ctx* ctx, const float* lhs, const float* rhs,
                                         const int32_t* counts, int64_t m, int64_t k, int64_t n,
                                         int64_t num_experts, int64_t blocks, int transpose_b,
                                         float* out) {
  STEPC_CUDA_TRY(ctx, cudaMemsetAsync(out, 0, m * n * sizeof(float), ctx->stream));
  // At most one partial tile per segment beyond the full ones.
  const dim3 grid((n + kTile - 1) / kTile, (m + kTile - 1) / kTile + num_experts * blocks);
  STEPC_LAUNCH_COOPERATIVE(grid, dim3(kTile, kTile), 0, ctx->stream, GroupedMatmulKernel)(
      lhs, rhs, counts, m, k, n, num_experts, blocks, transpose_b, out);
  return STEPC_LAUNCHED(ctx, "GroupedMatmulKernel");
}

extern "C" int stepc_cuda_grouped_matmul_weight_grad(stepc_cuda_ctx* ctx, const float* lhs,
                                                     const float* dy, const int32_t* counts,
                                                     int64_t m, int64_t k, int64_t n,
                                                     int64_t num_experts, int64_t blocks,
                                                     int transpose_b, float* dw) {
  const dim3 grid((n + kTile - 1) / kTile, (k + kTile - 1) / kTile, num_experts);
  STEPC_LAUNCH_COOPERATIVE(grid, dim3(kTile, kTile), 0, ctx->stream, WeightGradKernel)(
      lhs, dy, counts, m, k, n, num_experts, blocks, transpose_b, dw);
  return STEPC_LAUNCHED(ctx, "WeightGradKernel(moe)");
}
