// LayerNorm and RMSNorm, forward and backward; (log_)softmax and cumsum along any dim.
// A warp per row: Welford statistics merged by shuffles (tile_math.h, the
// math the host tests check). The weight/bias gradients are column sums over
// rows, reduced in chunks and finished in a fixed order (deterministic).

#include "runtime/kernels/cuda/common.cuh"

#include <type_traits>
#include "runtime/kernels/cuda/line_kernels.h"  // generated from the ops
#include "runtime/kernels/cuda/tile_math.h"

namespace stepc::cuda {
namespace {

constexpr int kRowsPerBlock = kThreads / 32;

// The row's Welford statistics, the same in every lane.
__device__ __forceinline__ tile::Welford RowStats(const float* x, int64_t d) {
  tile::Welford w = tile::WelfordStart();
  for (int64_t i = threadIdx.x % 32; i < d; i += 32) tile::WelfordAdd(w, x[i]);
  for (int o = 16; o > 0; o >>= 1) {
    tile::Welford other{__shfl_xor_sync(0xffffffffu, w.mean, o),
                        __shfl_xor_sync(0xffffffffu, w.m2, o),
                        __shfl_xor_sync(0xffffffffu, w.n, o)};
    w = tile::WelfordMerge(w, other);
  }
  return w;
}

// y of f32, or bf16: the norm rounded as it is stored (the GEMM operand it
// only fed, with no f32 copy written and read back).
template <typename T>
__device__ __forceinline__ void StoreNormed(T* y, int64_t i, float v) {
  if constexpr (std::is_same_v<T, float>)
    y[i] = v;
  else
    y[i] = __float2bfloat16(v);
}

template <typename T>
__global__ void LayerNormKernel(const float* x, const float* w, const float* b, int64_t rows,
                                int64_t d, float eps, T* y) {
  const int64_t row = blockIdx.x * (int64_t)kRowsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;
  const float* xr = x + row * d;
  tile::Welford st = RowStats(xr, d);
  const float rstd = rsqrtf(st.m2 / st.n + eps);
  for (int64_t i = threadIdx.x % 32; i < d; i += 32)
    StoreNormed(y, row * d + i, (xr[i] - st.mean) * rstd * w[i] + b[i]);
}

// dx = rstd · (g - mean(g) - x̂ · mean(g · x̂)), g = dy · w; keeps (mean, rstd).
__global__ void LayerNormGradKernel(const float* dy, const float* x, const float* w,
                                    int64_t rows, int64_t d, float eps, float* stats,
                                    float* dx) {
  const int64_t row = blockIdx.x * (int64_t)kRowsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;
  const float* xr = x + row * d;
  const float* dyr = dy + row * d;
  tile::Welford st = RowStats(xr, d);
  const float rstd = rsqrtf(st.m2 / st.n + eps);
  float mg = 0.0f, mgx = 0.0f;
  for (int64_t i = threadIdx.x % 32; i < d; i += 32) {
    const float g = dyr[i] * w[i];
    mg += g;
    mgx += g * (xr[i] - st.mean) * rstd;
  }
  mg = WarpSum(mg) / d;
  mgx = WarpSum(mgx) / d;
  for (int64_t i = threadIdx.x % 32; i < d; i += 32) {
    const float xhat = (xr[i] - st.mean) * rstd;
    dx[row * d + i] = rstd * (dyr[i] * w[i] - mg - xhat * mgx);
  }
  if (threadIdx.x % 32 == 0) {
    stats[2 * row] = st.mean;
    stats[2 * row + 1] = rstd;
  }
}

template <typename T>
__global__ void RmsNormKernel(const float* x, const float* w, int64_t rows, int64_t d, float eps,
                              T* y) {
  const int64_t row = blockIdx.x * (int64_t)kRowsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;
  const float* xr = x + row * d;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x % 32; i < d; i += 32) ss += xr[i] * xr[i];
  const float rstd = rsqrtf(WarpSum(ss) / d + eps);
  for (int64_t i = threadIdx.x % 32; i < d; i += 32) StoreNormed(y, row * d + i, xr[i] * rstd * w[i]);
}

// dx = rstd · (g - x̂ · mean(g · x̂)), g = dy · w; keeps (0, rstd).
__global__ void RmsNormGradKernel(const float* dy, const float* x, const float* w, int64_t rows,
                                  int64_t d, float eps, float* stats, float* dx) {
  const int64_t row = blockIdx.x * (int64_t)kRowsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;
  const float* xr = x + row * d;
  const float* dyr = dy + row * d;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x % 32; i < d; i += 32) ss += xr[i] * xr[i];
  const float rstd = rsqrtf(WarpSum(ss) / d + eps);
  float mgx = 0.0f;
  for (int64_t i = threadIdx.x % 32; i < d; i += 32) mgx += dyr[i] * w[i] * xr[i] * rstd;
  mgx = WarpSum(mgx) / d;
  for (int64_t i = threadIdx.x % 32; i < d; i += 32)
    dx[row * d + i] = rstd * (dyr[i] * w[i] - xr[i] * rstd * mgx);
  if (threadIdx.x % 32 == 0) {
    stats[2 * row] = 0.0f;
    stats[2 * row + 1] = rstd;
  }
}

// dw[c] = Σ_rows dy·x̂ and (with db) db[c] = Σ_rows dy over a chunk of rows;
// block (32 columns, 8 row lanes), grid (column tiles, chunks).
__global__ void NormColumnsKernel(const float* dy, const float* x, const float* stats,
                                  int64_t rows, int64_t d, int64_t per_chunk, float* dw,
                                  float* db) {
  __shared__ float part_w[kReduceRows][kReduceLanes], part_b[kReduceRows][kReduceLanes];
  const int64_t c = blockIdx.x * (int64_t)kReduceLanes + threadIdx.x;
  const int64_t begin = blockIdx.y * per_chunk, end = min(rows, begin + per_chunk);
  float sw = 0.0f, sb = 0.0f;
  if (c < d)
    for (int64_t r = begin + threadIdx.y; r < end; r += kReduceRows) {
      const float g = dy[r * d + c];
      sw += g * (x[r * d + c] - stats[2 * r]) * stats[2 * r + 1];
      sb += g;
    }
  part_w[threadIdx.y][threadIdx.x] = sw;
  part_b[threadIdx.y][threadIdx.x] = sb;
  __syncthreads();
  if (threadIdx.y == 0 && c < d) {
    for (int y = 1; y < kReduceRows; ++y) {
      sw += part_w[y][threadIdx.x];
      sb += part_b[y][threadIdx.x];
    }
    dw[blockIdx.y * d + c] = sw;
    if (db) db[blockIdx.y * d + c] = sb;
  }
}

int NormColumns(stepc_cuda_ctx* ctx, const float* dy, const float* x, int64_t rows, int64_t d,
                float* scratch, float* dw, float* db) {
  const NormGradPlan plan = PlanNormGrad(rows, d);
  const float* stats = scratch;
  float* part_w = scratch + plan.stats_floats;
  float* part_b = part_w + plan.columns.scratch_floats;
  const bool chunked = plan.columns.chunks > 1;
  dim3 grid(plan.columns.output_tiles, plan.columns.chunks), block(kReduceLanes, kReduceRows);
  STEPC_LAUNCH_COOPERATIVE(grid, block, 0, ctx->stream, NormColumnsKernel)(dy, x, stats, rows, d,
                                                     CeilDiv(rows, plan.columns.chunks),
                                                     chunked ? part_w : dw,
                                                     db ? (chunked ? part_b : db) : nullptr);
  if (int rc = STEPC_LAUNCHED(ctx, "NormColumnsKernel")) return rc;
  if (!chunked) return 0;
  if (int rc = FinishChunks(ctx, part_w, plan.columns.chunks, d, 0, 1.0f, dw)) return rc;
  return db ? FinishChunks(ctx, part_b, plan.columns.chunks, d, 0, 1.0f, db) : 0;
}

int64_t RowBlocks(int64_t rows) { return CeilDiv(rows, kRowsPerBlock); }

// A thread per line of `n` elements `inner` apart: y = softmax(x), or
// log_softmax(x) = x - lse.
template <bool kLog>
__global__ void SoftmaxKernel(const float* x, int64_t outer, int64_t n, int64_t inner,
                              float* y) {
  for (int64_t line = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; line < outer * inner;
       line += (int64_t)gridDim.x * blockDim.x) {
    const int64_t base = (line / inner) * n * inner + line % inner;
    tile::RowState st = tile::RowStart();
    for (int64_t j = 0; j < n; ++j) tile::RowFold(st, x + base + j * inner, 1);
    const float lse = tile::RowLse(st);
    for (int64_t j = 0; j < n; ++j) {
      const float shifted = x[base + j * inner] - lse;
      y[base + j * inner] = kLog ? shifted : expf(shifted);
    }
  }
}

// From the forward's output y: softmax dx = y · (dy - Σ dy·y); log_softmax
// dx = dy - exp(y) · Σ dy.
template <bool kLog>
__global__ void SoftmaxGradKernel(const float* dy, const float* y, int64_t outer, int64_t n,
                                  int64_t inner, float* dx) {
  for (int64_t line = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; line < outer * inner;
       line += (int64_t)gridDim.x * blockDim.x) {
    const int64_t base = (line / inner) * n * inner + line % inner;
    float dot = 0.0f;
    for (int64_t j = 0; j < n; ++j) dot += dy[base + j * inner] * (kLog ? 1.0f : y[base + j * inner]);
    for (int64_t j = 0; j < n; ++j) {
      const int64_t at = base + j * inner;
      dx[at] = kLog ? dy[at] - expf(y[at]) * dot : y[at] * (dy[at] - dot);
    }
  }
}

// A thread per line: its running sum from the first element (or, reverse,
// the last: cumsum's gradient), accumulated in double as the CPU's.
template <bool kReverse>
__global__ void CumsumKernel(const float* x, int64_t outer, int64_t n, int64_t inner, float* y) {
  for (int64_t line = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; line < outer * inner;
       line += (int64_t)gridDim.x * blockDim.x) {
    const int64_t base = (line / inner) * n * inner + line % inner;
    double sum = 0;
    for (int64_t k = 0; k < n; ++k) {
      const int64_t at = base + (kReverse ? n - 1 - k : k) * inner;
      sum += x[at];
      y[at] = (float)sum;
    }
  }
}

// y = rotate pairs (x[2i], x[2i+1]) of each head by t · theta^(-2i/Dh).
__global__ void RotaryKernel(const float* x, int64_t batch, int64_t len, int64_t width,
                             int64_t head_dim, float theta, float sign, float* y) {
  const int64_t pairs = batch * len * width / 2;
  for (int64_t p = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; p < pairs;
       p += (int64_t)gridDim.x * blockDim.x) {
    const int64_t at = 2 * p;
    const int64_t t = (at / width) % len, i = (at % width % head_dim) / 2;
    const double angle = t * pow((double)theta, -2.0 * i / head_dim) * sign;
    const float c = (float)cos(angle), s = (float)sin(angle);
    const float x0 = x[at], x1 = x[at + 1];
    y[at] = x0 * c - x1 * s;
    y[at + 1] = x0 * s + x1 * c;
  }
}

}  // namespace
}  // namespace stepc::cuda

using namespace stepc::cuda;

extern "C" int stepc_cuda_layer_norm(stepc_cuda_ctx* ctx, const float* x, const float* w,
                                     const float* b, int64_t rows, int64_t d, double eps,
                                     float* y) {
  STEPC_LAUNCH_COOPERATIVE(RowBlocks(rows), kThreads, 0, ctx->stream, LayerNormKernel<float>)(
      x, w, b, rows, d, (float)eps, y);
  return STEPC_LAUNCHED(ctx, "LayerNormKernel");
}

extern "C" int stepc_cuda_layer_norm_bf16(stepc_cuda_ctx* ctx, const float* x, const float* w,
                                          const float* b, int64_t rows, int64_t d, double eps,
                                          __nv_bfloat16* y) {
  STEPC_LAUNCH_COOPERATIVE(RowBlocks(rows), kThreads, 0, ctx->stream,
                           LayerNormKernel<__nv_bfloat16>)(x, w, b, rows, d, (float)eps, y);
  return STEPC_LAUNCHED(ctx, "LayerNormKernel");
}

extern "C" int stepc_cuda_layer_norm_grad(stepc_cuda_ctx* ctx, const float* dy, const float* x,
                                          const float* w, int64_t rows, int64_t d, double eps,
                                          float* scratch, float* dx, float* dw, float* db) {
  STEPC_LAUNCH_COOPERATIVE(RowBlocks(rows), kThreads, 0, ctx->stream, LayerNormGradKernel)(dy, x, w, rows, d,
                                                                     (float)eps, scratch, dx);
  if (int rc = STEPC_LAUNCHED(ctx, "LayerNormGradKernel")) return rc;
  return NormColumns(ctx, dy, x, rows, d, scratch, dw, db);
}

extern "C" int stepc_cuda_rms_norm(stepc_cuda_ctx* ctx, const float* x, const float* w,
                                   int64_t rows, int64_t d, double eps, float* y) {
  STEPC_LAUNCH_COOPERATIVE(RowBlocks(rows), kThreads, 0, ctx->stream, RmsNormKernel<float>)(
      x, w, rows, d, (float)eps, y);
  return STEPC_LAUNCHED(ctx, "RmsNormKernel");
}

extern "C" int stepc_cuda_rms_norm_bf16(stepc_cuda_ctx* ctx, const float* x, const float* w,
                                        int64_t rows, int64_t d, double eps, __nv_bfloat16* y) {
  STEPC_LAUNCH_COOPERATIVE(RowBlocks(rows), kThreads, 0, ctx->stream,
                           RmsNormKernel<__nv_bfloat16>)(x, w, rows, d, (float)eps, y);
  return STEPC_LAUNCHED(ctx, "RmsNormKernel");
}

extern "C" int stepc_cuda_rms_norm_grad(stepc_cuda_ctx* ctx, const float* dy, const float* x,
                                        const float* w, int64_t rows, int64_t d, double eps,
                                        float* scratch, float* dx, float* dw) {
  STEPC_LAUNCH_COOPERATIVE(RowBlocks(rows), kThreads, 0, ctx->stream, RmsNormGradKernel)(dy, x, w, rows, d,
                                                                   (float)eps, scratch, dx);
  if (int rc = STEPC_LAUNCHED(ctx, "RmsNormGradKernel")) return rc;
  return NormColumns(ctx, dy, x, rows, d, scratch, dw, nullptr);
}

namespace {

template <bool kLog>
int Softmax(stepc_cuda_ctx* ctx, const float* x, int64_t outer, int64_t n, int64_t inner,
            float* y) {
  STEPC_LAUNCH(ElementwiseBlocks(outer * inner), kThreads, 0, ctx->stream, SoftmaxKernel<kLog>)(
      x, outer, n, inner, y);
  return STEPC_LAUNCHED(ctx, kLog ? "LogSoftmaxKernel" : "SoftmaxKernel");
}

template <bool kLog>
int SoftmaxGrad(stepc_cuda_ctx* ctx, const float* dy, const float* y, int64_t outer, int64_t n,
                int64_t inner, float* dx) {
  STEPC_LAUNCH(ElementwiseBlocks(outer * inner), kThreads, 0, ctx->stream,
               SoftmaxGradKernel<kLog>)(dy, y, outer, n, inner, dx);
  return STEPC_LAUNCHED(ctx, kLog ? "LogSoftmaxGradKernel" : "SoftmaxGradKernel");
}

template <bool kReverse>
int Cumsum(stepc_cuda_ctx* ctx, const float* x, int64_t outer, int64_t n, int64_t inner,
           float* y) {
  STEPC_LAUNCH(ElementwiseBlocks(outer * inner), kThreads, 0, ctx->stream,
               CumsumKernel<kReverse>)(x, outer, n, inner, y);
  return STEPC_LAUNCHED(ctx, kReverse ? "CumsumGradKernel" : "CumsumKernel");
}

}  // namespace

// The line ops' kernels, declared by their ops (line_kernels.h): a
// definition that disagrees with its op's operands does not compile.
extern "C" int stepc_cuda_cumsum(stepc_cuda_ctx* ctx, const float* x, int64_t outer, int64_t n,
                                 int64_t inner, float* y) {
  return Cumsum<false>(ctx, x, outer, n, inner, y);
}

extern "C" int stepc_cuda_cumsum_grad(stepc_cuda_ctx* ctx, const float* dy, int64_t outer,
                                      int64_t n, int64_t inner, float* dx) {
  return Cumsum<true>(ctx, dy, outer, n, inner, dx);
}

extern "C" int stepc_cuda_softmax(stepc_cuda_ctx* ctx, const float* x, int64_t outer, int64_t n,
                                  int64_t inner, float* y) {
  return Softmax<false>(ctx, x, outer, n, inner, y);
}

extern "C" int stepc_cuda_softmax_grad(stepc_cuda_ctx* ctx, const float* dy, const float* y,
                                       int64_t outer, int64_t n, int64_t inner, float* dx) {
  return SoftmaxGrad<false>(ctx, dy, y, outer, n, inner, dx);
}

extern "C" int stepc_cuda_log_softmax(stepc_cuda_ctx* ctx, const float* x, int64_t outer,
                                      int64_t n, int64_t inner, float* y) {
  return Softmax<true>(ctx, x, outer, n, inner, y);
}

extern "C" int stepc_cuda_log_softmax_grad(stepc_cuda_ctx* ctx, const float* dy,
                                           const float* y, int64_t outer, int64_t n,
                                           int64_t inner, float* dx) {
  return SoftmaxGrad<true>(ctx, dy, y, outer, n, inner, dx);
}

extern "C" int stepc_cuda_rotary(stepc_cuda_ctx* ctx, const float* x, int64_t batch, int64_t len,
                                 int64_t width, int64_t head_dim, double theta, int inverse,
                                 float* y) {
  STEPC_LAUNCH(ElementwiseBlocks(batch * len * width / 2), kThreads, 0, ctx->stream, RotaryKernel)(
      x, batch, len, width, head_dim, (float)theta, inverse ? -1.0f : 1.0f, y);
  return STEPC_LAUNCHED(ctx, "RotaryKernel");
}
