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

// A warp's walk over its row: with kVec (d a multiple of 8, rows 16-byte
// aligned) each lane takes 8 adjacent elements a step (16-byte loads:
// gpt2-124m's d = 768 is 3 steps a lane instead of 24), else one.
// Unrolled by 2 so that a pass's loads (gpt2-124m's 768 is 3 steps, a
// 2048-wide Llama row 8) are issued together: the one-pass gradient runs
// 4 blocks an SM, half the warps the row kernels had to hide latency with.
template <bool kVec, typename F>
__device__ __forceinline__ void ForLane(int64_t d, F&& f) {
  const int lane = threadIdx.x % 32;
  if constexpr (kVec) {
#pragma unroll 2
    for (int64_t i = lane * 8; i < d; i += 32 * 8) f(i, 8);
  } else {
#pragma unroll 2
    for (int64_t i = lane; i < d; i += 32) f(i, 1);
  }
}
template <typename T>
__device__ __forceinline__ void LoadSome(const T* p, int64_t i, int k, float* v) {
  if (k == 8)
    LoadEight(p + i, v);
  else
    v[0] = Load(p, i);
}
template <typename T>
__device__ __forceinline__ void StoreSome(T* p, int64_t i, int k, const float* v) {
  if (k == 8)
    StoreEight(p + i, v);
  else
    Store(p, i, v[0]);
}

// A norm's input row: x, or the residual add x = a + b before the norm
// (b f32 or a bf16 GEMM result, or a table of rows repeated down the rows,
// GPT-2's position embeddings; the sum written to `sum` as the norm
// normalizes it): one pass where an add kernel wrote x and the norm read it
// back.
template <typename TB>
struct NormIn {
  const float* a;
  const TB* b;  // null: x = a
  float* sum;   // where x = a + b goes (the residual stream), with b
  int64_t b_span = 0;  // b's elements when it repeats (0: a row of b for each row)
  __device__ __forceinline__ void Load(int64_t at, int64_t i, int k, float* v) const {
    LoadSome(a + at, i, k, v);
    if (!b) return;
    float u[8];
    LoadSome(b + (b_span ? at % b_span : at), i, k, u);
    for (int j = 0; j < k; ++j) v[j] += u[j];
  }
};

// A norm gradient's dy: one array, f32 or bf16 (the input gradient a bf16
// GEMM left, read as it is), or (DySum) the f32 sum of two or three bf16
// arrays added as the step adds them, (t0 + t1) + t2: Llama's gate and up
// (or q, k and v) input gradients, where a kernel wrote the f32 sum and the
// norm read it back.
template <typename T>
struct DyOf {
  const T* p;
  __device__ __forceinline__ void Load(int64_t at, int64_t i, int k, float* v) const {
    LoadSome(p + at, i, k, v);
  }
  bool Aligned() const { return Aligned16(p); }
};
struct DySum {
  const __nv_bfloat16* t0;
  const __nv_bfloat16* t1;
  const __nv_bfloat16* t2;  // null: two terms
  __device__ __forceinline__ void Load(int64_t at, int64_t i, int k, float* v) const {
    float u[8];
    LoadSome(t0 + at, i, k, v);
    LoadSome(t1 + at, i, k, u);
    for (int j = 0; j < k; ++j) v[j] += u[j];
    if (!t2) return;
    LoadSome(t2 + at, i, k, u);
    for (int j = 0; j < k; ++j) v[j] += u[j];
  }
  bool Aligned() const { return Aligned16(t0) && Aligned16(t1) && Aligned16(t2); }
};

// The row's Welford statistics, the same in every lane.
template <bool kVec, typename TB>
__device__ __forceinline__ tile::Welford RowStats(const NormIn<TB>& x, int64_t at, int64_t d) {
  tile::Welford w = tile::WelfordStart();
  ForLane<kVec>(d, [&](int64_t i, int k) {
    float v[8];
    x.Load(at, i, k, v);
    for (int j = 0; j < k; ++j) tile::WelfordAdd(w, v[j]);
  });
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
template <bool kVec, typename T, typename TB>
__global__ void LayerNormKernel(NormIn<TB> x, const float* w, const float* b, int64_t rows,
                                int64_t d, float eps, T* y) {
  const int64_t row = blockIdx.x * (int64_t)kRowsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;
  tile::Welford st = RowStats<kVec>(x, row * d, d);
  const float rstd = rsqrtf(st.m2 / st.n + eps);
  ForLane<kVec>(d, [&](int64_t i, int k) {
    float xv[8], wv[8], bv[8], out[8];
    x.Load(row * d, i, k, xv);
    if (x.sum) StoreSome(x.sum + row * d, i, k, xv);
    LoadSome(w, i, k, wv);
    LoadSome(b, i, k, bv);
    for (int j = 0; j < k; ++j) out[j] = (xv[j] - st.mean) * rstd * wv[j] + bv[j];
    StoreSome(y + row * d, i, k, out);
  });
}

// Where a norm's input gradient goes: dx, or with `acc` the residual
// stream's gradient acc + dx (the add after the norm's backward), and with
// `rounded` also its bf16 copy for the GEMMs before it: one pass, where the
// separate add read dx and acc back and wrote both.
struct GradOut {
  const float* acc;
  float* dx;
  __nv_bfloat16* rounded;
  template <bool kVec>
  __device__ __forceinline__ void Put(int64_t at, int64_t i, int k, float* v) const {
    if (acc) {
      float a[8];
      LoadSome(acc + at, i, k, a);
      for (int j = 0; j < k; ++j) v[j] += a[j];
    }
    StoreSome(dx + at, i, k, v);
    if (rounded) StoreSome(rounded + at, i, k, v);
  }
};

// Where a row's weight (and bias) gradient terms go: nowhere in the
// two-pass row kernel (the column pass sums them), into the warp's own
// shared-memory rows in the one-pass kernel (no other thread touches them).
struct NoColumnSums {
  __device__ __forceinline__ void Add(int64_t, int, const float*, const float*) const {}
};
struct WarpColumnSums {
  float* w;  // [d]: Σ dy · x̂
  float* b;  // [d]: Σ dy (a layer norm's), or null
  __device__ __forceinline__ void Add(int64_t i, int k, const float* g,
                                      const float* xhat) const {
    for (int j = 0; j < k; ++j) {
      w[i + j] += g[j] * xhat[j];
      if (b) b[i + j] += g[j];
    }
  }
};

// One row of a layer norm's gradient, by a warp:
// dx = rstd · (g - mean(g) - x̂ · mean(g · x̂)), g = dy · w; with `stats`
// keeps (mean, rstd) for the column pass.
template <bool kVec, typename Dy, typename Sums>
__device__ __forceinline__ void LayerNormGradRow(const Dy& dy, const float* x, const float* w,
                                                 int64_t row, int64_t d, float eps,
                                                 const GradOut& dx, const Sums& sums,
                                                 float* stats) {
  const float* xr = x + row * d;
  tile::Welford st = RowStats<kVec>(NormIn<float>{x, nullptr, nullptr}, row * d, d);
  const float rstd = rsqrtf(st.m2 / st.n + eps);
  float mg = 0.0f, mgx = 0.0f;
  ForLane<kVec>(d, [&](int64_t i, int k) {
    float xv[8], gv[8], wv[8];
    LoadSome(xr, i, k, xv);
    dy.Load(row * d, i, k, gv);
    LoadSome(w, i, k, wv);
    for (int j = 0; j < k; ++j) {
      const float g = gv[j] * wv[j];
      mg += g;
      mgx += g * (xv[j] - st.mean) * rstd;
    }
  });
  mg = WarpSum(mg) / d;
  mgx = WarpSum(mgx) / d;
  ForLane<kVec>(d, [&](int64_t i, int k) {
    float xv[8], gv[8], wv[8], xhat[8], out[8];
    LoadSome(xr, i, k, xv);
    dy.Load(row * d, i, k, gv);
    LoadSome(w, i, k, wv);
    for (int j = 0; j < k; ++j) {
      xhat[j] = (xv[j] - st.mean) * rstd;
      out[j] = rstd * (gv[j] * wv[j] - mg - xhat[j] * mgx);
    }
    sums.Add(i, k, gv, xhat);
    dx.Put<kVec>(row * d, i, k, out);
  });
  if (stats && threadIdx.x % 32 == 0) {
    stats[2 * row] = st.mean;
    stats[2 * row + 1] = rstd;
  }
}

// The two-pass form's row kernel: a warp per row.
template <bool kVec, typename Dy>
__global__ void LayerNormGradKernel(Dy dy, const float* x, const float* w,
                                    int64_t rows, int64_t d, float eps, float* stats,
                                    GradOut dx) {
  const int64_t row = blockIdx.x * (int64_t)kRowsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;
  LayerNormGradRow<kVec>(dy, x, w, row, d, eps, dx, NoColumnSums{}, stats);
}

template <bool kVec, typename T, typename TB>
__global__ void RmsNormKernel(NormIn<TB> x, const float* w, int64_t rows, int64_t d, float eps,
                              T* y) {
  const int64_t row = blockIdx.x * (int64_t)kRowsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;
  float ss = 0.0f;
  ForLane<kVec>(d, [&](int64_t i, int k) {
    float xv[8];
    x.Load(row * d, i, k, xv);
    for (int j = 0; j < k; ++j) ss += xv[j] * xv[j];
  });
  const float rstd = rsqrtf(WarpSum(ss) / d + eps);
  ForLane<kVec>(d, [&](int64_t i, int k) {
    float xv[8], wv[8], out[8];
    x.Load(row * d, i, k, xv);
    if (x.sum) StoreSome(x.sum + row * d, i, k, xv);
    LoadSome(w, i, k, wv);
    for (int j = 0; j < k; ++j) out[j] = xv[j] * rstd * wv[j];
    StoreSome(y + row * d, i, k, out);
  });
}

// One row of an RMS norm's gradient, by a warp:
// dx = rstd · (g - x̂ · mean(g · x̂)), g = dy · w; with `stats` keeps (0, rstd).
template <bool kVec, typename Dy, typename Sums>
__device__ __forceinline__ void RmsNormGradRow(const Dy& dy, const float* x, const float* w,
                                               int64_t row, int64_t d, float eps,
                                               const GradOut& dx, const Sums& sums,
                                               float* stats) {
  const float* xr = x + row * d;
  float ss = 0.0f;
  ForLane<kVec>(d, [&](int64_t i, int k) {
    float xv[8];
    LoadSome(xr, i, k, xv);
    for (int j = 0; j < k; ++j) ss += xv[j] * xv[j];
  });
  const float rstd = rsqrtf(WarpSum(ss) / d + eps);
  float mgx = 0.0f;
  ForLane<kVec>(d, [&](int64_t i, int k) {
    float xv[8], gv[8], wv[8];
    LoadSome(xr, i, k, xv);
    dy.Load(row * d, i, k, gv);
    LoadSome(w, i, k, wv);
    for (int j = 0; j < k; ++j) mgx += gv[j] * wv[j] * xv[j] * rstd;
  });
  mgx = WarpSum(mgx) / d;
  ForLane<kVec>(d, [&](int64_t i, int k) {
    float xv[8], gv[8], wv[8], xhat[8], out[8];
    LoadSome(xr, i, k, xv);
    dy.Load(row * d, i, k, gv);
    LoadSome(w, i, k, wv);
    for (int j = 0; j < k; ++j) {
      xhat[j] = xv[j] * rstd;
      out[j] = rstd * (gv[j] * wv[j] - xhat[j] * mgx);
    }
    sums.Add(i, k, gv, xhat);
    dx.Put<kVec>(row * d, i, k, out);
  });
  if (stats && threadIdx.x % 32 == 0) {
    stats[2 * row] = 0.0f;
    stats[2 * row + 1] = rstd;
  }
}

template <bool kVec, typename Dy>
__global__ void RmsNormGradKernel(Dy dy, const float* x, const float* w, int64_t rows,
                                  int64_t d, float eps, float* stats, GradOut dx) {
  const int64_t row = blockIdx.x * (int64_t)kRowsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;
  RmsNormGradRow<kVec>(dy, x, w, row, d, eps, dx, NoColumnSums{}, stats);
}

// A norm's gradient in one pass (PlanNormGrad's `fused`): block b takes rows
// [b · per_block, (b + 1) · per_block), warp v every 8th of them from the
// v-th; each warp adds its rows' dy · x̂ (and dy) into its own shared rows,
// then the block writes the 8 warps' rows added in warp order as its partial
// row of part_w (part_b). Fixed chunks and orders: deterministic.
// (A layer norm's at most 64 registers: gpt2-124m's 48 KiB of shared rows
// fit four blocks an SM. An RMS norm's rows are Llama's 2048 wide: 64 KiB,
// three blocks.)
template <bool kLayer, bool kVec, typename Dy>
__global__ void __launch_bounds__(kThreads, kLayer ? 4 : 3) NormGradFusedKernel(Dy dy, const float* x, const float* w, int64_t rows,
                                    int64_t d, float eps, int64_t per_block, GradOut dx,
                                    float* part_w, float* part_b) {
  STEPC_DYNAMIC_SHARED(float, shared);
  constexpr int kTables = kLayer ? 2 : 1;
  const int warp = threadIdx.x / 32;
  float* mine = shared + warp * kTables * d;
  const WarpColumnSums sums{mine, kLayer ? mine + d : nullptr};
  ForLane<kVec>(d, [&](int64_t i, int k) {
    for (int j = 0; j < k; ++j) {
      mine[i + j] = 0.0f;
      if (kLayer) mine[d + i + j] = 0.0f;
    }
  });
  const int64_t begin = blockIdx.x * per_block, end = min(rows, begin + per_block);
  for (int64_t row = begin + warp; row < end; row += kRowsPerBlock) {
    if constexpr (kLayer)
      LayerNormGradRow<kVec>(dy, x, w, row, d, eps, dx, sums, nullptr);
    else
      RmsNormGradRow<kVec>(dy, x, w, row, d, eps, dx, sums, nullptr);
  }
  __syncthreads();
  for (int64_t c = threadIdx.x; c < kTables * d; c += blockDim.x) {
    float acc = shared[c];
    for (int v = 1; v < kRowsPerBlock; ++v) acc += shared[v * kTables * d + c];
    if (c < d)
      part_w[blockIdx.x * d + c] = acc;
    else
      part_b[blockIdx.x * d + c - d] = acc;
  }
}

// dw[c] = Σ_rows dy·x̂ and (with db) db[c] = Σ_rows dy over a chunk of rows;
// block (32 lanes, 8 row lanes), grid (column tiles, chunks); a lane takes
// kCols adjacent columns (8 with 16-byte loads, as PlanColumnSum's tiles).
template <int kCols, typename Dy>
__global__ void NormColumnsKernel(Dy dy, const float* x, const float* stats,
                                  int64_t rows, int64_t d, int64_t per_chunk, float* dw,
                                  float* db) {
  __shared__ float part_w[kReduceRows][kReduceLanes * kCols];
  __shared__ float part_b[kReduceRows][kReduceLanes * kCols];
  const int64_t c = (blockIdx.x * (int64_t)kReduceLanes + threadIdx.x) * kCols;
  const int64_t begin = blockIdx.y * per_chunk, end = min(rows, begin + per_chunk);
  float sw[kCols], sb[kCols];
  for (int j = 0; j < kCols; ++j) sw[j] = sb[j] = 0.0f;
  if (c < d)
#pragma unroll 2
    for (int64_t r = begin + threadIdx.y; r < end; r += kReduceRows) {
      float g[8], xv[8];
      dy.Load(r * d, c, kCols, g);
      LoadSome(x + r * d, c, kCols, xv);
      const float mean = stats[2 * r], rstd = stats[2 * r + 1];
      for (int j = 0; j < kCols; ++j) {
        sw[j] += g[j] * (xv[j] - mean) * rstd;
        sb[j] += g[j];
      }
    }
  for (int j = 0; j < kCols; ++j) {
    part_w[threadIdx.y][threadIdx.x * kCols + j] = sw[j];
    part_b[threadIdx.y][threadIdx.x * kCols + j] = sb[j];
  }
  __syncthreads();
  if (threadIdx.y != 0 || c >= d) return;
  for (int j = 0; j < kCols; ++j) {
    for (int y = 1; y < kReduceRows; ++y) {
      sw[j] += part_w[y][threadIdx.x * kCols + j];
      sb[j] += part_b[y][threadIdx.x * kCols + j];
    }
    dw[blockIdx.y * d + c + j] = sw[j];
    if (db) db[blockIdx.y * d + c + j] = sb[j];
  }
}

// Whether a norm's rows can take 16-byte steps: d a multiple of 8 and every
// pointer 16-byte aligned.
bool NormVectors(int64_t d, std::initializer_list<const void*> pointers) {
  if (d % 8 != 0) return false;
  for (const void* p : pointers)
    if (!Aligned16(p)) return false;
  return true;
}

template <typename Dy>
int NormColumns(stepc_cuda_ctx* ctx, Dy dy, const float* x, int64_t rows, int64_t d,
                const NormGradPlan& plan, float* scratch, float* dw, float* db) {
  const bool vectors = dy.Aligned() && NormVectors(d, {x});
  const ReducePlan columns = vectors ? PlanColumnSum(d, rows) : PlanReduce(d, rows);
  const float* stats = scratch;
  float* part_w = scratch + plan.stats_floats;
  float* part_b = part_w + plan.partial_floats;
  const bool chunked = columns.chunks > 1;
  dim3 grid(columns.output_tiles, columns.chunks), block(kReduceLanes, kReduceRows);
  const int64_t per_chunk = CeilDiv(rows, columns.chunks);
  float* w_out = chunked ? part_w : dw;
  float* b_out = db ? (chunked ? part_b : db) : nullptr;
  if (vectors)
    STEPC_LAUNCH_COOPERATIVE(grid, block, 0, ctx->stream, NormColumnsKernel<8, Dy>)(
        dy, x, stats, rows, d, per_chunk, w_out, b_out);
  else
    STEPC_LAUNCH_COOPERATIVE(grid, block, 0, ctx->stream, NormColumnsKernel<1, Dy>)(
        dy, x, stats, rows, d, per_chunk, w_out, b_out);
  if (int rc = STEPC_LAUNCHED(ctx, "NormColumnsKernel")) return rc;
  if (!chunked) return 0;
  if (int rc = FinishChunks(ctx, part_w, columns.chunks, d, 0, 1.0f, dw)) return rc;
  return db ? FinishChunks(ctx, part_b, columns.chunks, d, 0, 1.0f, db) : 0;
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
// cos(t·θ_i) and sin(t·θ_i) for t < len, i < pairs (t-major: [t][i] cos,
// then [t][i] sin), θ_i = theta^(-2i/Dh), in double rounded to float: the
// CPU kernel's table, rebuilt in scratch by each call (len · Dh floats, a
// few hundred KB that stay in L2), so that the rotation itself is only
// loads and stores.
__global__ void RotaryTableKernel(int64_t len, int64_t head_dim, double theta, double sign,
                                  float* table) {
  const int64_t pairs = head_dim / 2;
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < len * pairs;
       e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t t = e / pairs, i = e % pairs;
    const double angle = t * (pow(theta, -2.0 * i / head_dim) * sign);
    table[e] = (float)cos(angle);
    table[len * pairs + e] = (float)sin(angle);
  }
}

// Adjacent pairs of each head rotate by the table's angles; x and y of f32
// or bf16 (a rotation of a bf16 GEMM result feeding a bf16 operand: no f32
// copy either side).
template <typename TI, typename TO>
__global__ void RotaryKernel(const TI* x, int64_t batch, int64_t len, int64_t width,
                             int64_t head_dim, const float* table, TO* y) {
  const int64_t pairs = batch * len * width / 2, half = head_dim / 2;
  for (int64_t p = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; p < pairs;
       p += (int64_t)gridDim.x * blockDim.x) {
    const int64_t at = 2 * p;
    const int64_t t = (at / width) % len, i = (at % width % head_dim) / 2;
    const float c = table[t * half + i], s = table[len * half + t * half + i];
    const float x0 = Load(x, at), x1 = Load(x, at + 1);
    Store(y, at, x0 * c - x1 * s);
    Store(y, at + 1, x0 * s + x1 * c);
  }
}

}  // namespace
}  // namespace stepc::cuda

using namespace stepc::cuda;

template <typename T, typename TB>
int LayerNorm(stepc_cuda_ctx* ctx, NormIn<TB> x, const float* w, const float* b, int64_t rows,
              int64_t d, double eps, T* y) {
  auto* kernel = NormVectors(d, {x.a, x.b, x.sum, w, b, y}) ? LayerNormKernel<true, T, TB>
                                                            : LayerNormKernel<false, T, TB>;
  STEPC_LAUNCH_COOPERATIVE(RowBlocks(rows), kThreads, 0, ctx->stream, kernel)(x, w, b, rows, d,
                                                                              (float)eps, y);
  return STEPC_LAUNCHED(ctx, "LayerNormKernel");
}

template <typename T, typename TB>
int RmsNorm(stepc_cuda_ctx* ctx, NormIn<TB> x, const float* w, int64_t rows, int64_t d,
            double eps, T* y) {
  auto* kernel = NormVectors(d, {x.a, x.b, x.sum, w, y}) ? RmsNormKernel<true, T, TB>
                                                         : RmsNormKernel<false, T, TB>;
  STEPC_LAUNCH_COOPERATIVE(RowBlocks(rows), kThreads, 0, ctx->stream, kernel)(x, w, rows, d,
                                                                              (float)eps, y);
  return STEPC_LAUNCHED(ctx, "RmsNormKernel");
}

NormIn<float> Plain(const float* x) { return NormIn<float>{x, nullptr, nullptr}; }

extern "C" int stepc_cuda_layer_norm(stepc_cuda_ctx* ctx, const float* x, const float* w,
                                     const float* b, int64_t rows, int64_t d, double eps,
                                     float* y) {
  return LayerNorm(ctx, Plain(x), w, b, rows, d, eps, y);
}

extern "C" int stepc_cuda_layer_norm_bf16(stepc_cuda_ctx* ctx, const float* x, const float* w,
                                          const float* b, int64_t rows, int64_t d, double eps,
                                          __nv_bfloat16* y) {
  return LayerNorm(ctx, Plain(x), w, b, rows, d, eps, y);
}

// A layer norm's gradient (kLayer) or an RMS norm's, 16-byte steps where
// the pointers allow: in one pass (NormGradFusedKernel, then the blocks'
// partial rows summed in order), or where a block's shared rows would not
// fit, the row kernel then the weight (and bias) column sums.
template <bool kLayer, typename Dy>
int NormGrad(stepc_cuda_ctx* ctx, Dy dy, const float* x, const float* w, int64_t rows,
             int64_t d, double eps, float* scratch, GradOut dx, float* dw, float* db) {
  const bool vectors = dy.Aligned() && NormVectors(d, {x, w, dx.acc, dx.dx, dx.rounded});
  const NormGradPlan plan = PlanNormGrad(rows, d, kLayer);
  if (plan.fused) {
    auto* kernel = vectors ? NormGradFusedKernel<kLayer, true, Dy>
                           : NormGradFusedKernel<kLayer, false, Dy>;
    STEPC_CUDA_TRY(ctx, AllowSharedMemory(kernel, plan.shared_bytes));
    float* part_w = scratch;
    float* part_b = kLayer ? scratch + plan.partial_floats : nullptr;
    float* finish = scratch + (kLayer ? 2 : 1) * plan.partial_floats;
    STEPC_LAUNCH_COOPERATIVE(plan.blocks, kThreads, plan.shared_bytes, ctx->stream, kernel)(
        dy, x, w, rows, d, (float)eps, plan.rows_per_block, dx, part_w, part_b);
    if (int rc = STEPC_LAUNCHED(ctx, "NormGradFusedKernel")) return rc;
    if (int rc = SumRows(ctx, part_w, plan.blocks, d, finish, dw)) return rc;
    return kLayer && db ? SumRows(ctx, part_b, plan.blocks, d, finish, db) : 0;
  }
  auto* kernel = kLayer
                     ? (vectors ? LayerNormGradKernel<true, Dy> : LayerNormGradKernel<false, Dy>)
                     : (vectors ? RmsNormGradKernel<true, Dy> : RmsNormGradKernel<false, Dy>);
  STEPC_LAUNCH_COOPERATIVE(RowBlocks(rows), kThreads, 0, ctx->stream, kernel)(
      dy, x, w, rows, d, (float)eps, scratch, dx);
  if (int rc = STEPC_LAUNCHED(ctx, kLayer ? "LayerNormGradKernel" : "RmsNormGradKernel"))
    return rc;
  return NormColumns(ctx, dy, x, rows, d, plan, scratch, dw, kLayer ? db : nullptr);
}
template <typename TD>
int LayerNormGrad(stepc_cuda_ctx* ctx, const TD* dy, const float* x, const float* w,
                  int64_t rows, int64_t d, double eps, float* scratch, GradOut dx, float* dw,
                  float* db) {
  return NormGrad<true>(ctx, DyOf<TD>{dy}, x, w, rows, d, eps, scratch, dx, dw, db);
}
int LayerNormGrad(stepc_cuda_ctx* ctx, DySum dy, const float* x, const float* w, int64_t rows,
                  int64_t d, double eps, float* scratch, GradOut dx, float* dw, float* db) {
  return NormGrad<true>(ctx, dy, x, w, rows, d, eps, scratch, dx, dw, db);
}
template <typename TD>
int RmsNormGrad(stepc_cuda_ctx* ctx, const TD* dy, const float* x, const float* w, int64_t rows,
                int64_t d, double eps, float* scratch, GradOut dx, float* dw) {
  return NormGrad<false>(ctx, DyOf<TD>{dy}, x, w, rows, d, eps, scratch, dx, dw, nullptr);
}
int RmsNormGrad(stepc_cuda_ctx* ctx, DySum dy, const float* x, const float* w, int64_t rows,
                int64_t d, double eps, float* scratch, GradOut dx, float* dw) {
  return NormGrad<false>(ctx, dy, x, w, rows, d, eps, scratch, dx, dw, nullptr);
}

// dy f32, or bf16 (`_of_bf16`: the input gradient a bf16 GEMM left, read
// as it is; no f32 copy).
extern "C" int stepc_cuda_layer_norm_grad(stepc_cuda_ctx* ctx, const float* dy, const float* x,
                                          const float* w, int64_t rows, int64_t d, double eps,
                                          float* scratch, float* dx, float* dw, float* db) {
  return LayerNormGrad(ctx, dy, x, w, rows, d, eps, scratch, GradOut{nullptr, dx, nullptr}, dw,
                       db);
}
extern "C" int stepc_cuda_layer_norm_grad_of_bf16(stepc_cuda_ctx* ctx, const __nv_bfloat16* dy,
                                                  const float* x, const float* w, int64_t rows,
                                                  int64_t d, double eps, float* scratch,
                                                  float* dx, float* dw, float* db) {
  return LayerNormGrad(ctx, dy, x, w, rows, d, eps, scratch, GradOut{nullptr, dx, nullptr}, dw,
                       db);
}
extern "C" int stepc_cuda_rms_norm_grad(stepc_cuda_ctx* ctx, const float* dy, const float* x,
                                        const float* w, int64_t rows, int64_t d, double eps,
                                        float* scratch, float* dx, float* dw) {
  return RmsNormGrad(ctx, dy, x, w, rows, d, eps, scratch, GradOut{nullptr, dx, nullptr}, dw);
}
extern "C" int stepc_cuda_rms_norm_grad_of_bf16(stepc_cuda_ctx* ctx, const __nv_bfloat16* dy,
                                                const float* x, const float* w, int64_t rows,
                                                int64_t d, double eps, float* scratch, float* dx,
                                                float* dw) {
  return RmsNormGrad(ctx, dy, x, w, rows, d, eps, scratch, GradOut{nullptr, dx, nullptr}, dw);
}

// The residual stream's gradient through a norm: sum = acc + dx, and with
// `_rounded` its bf16 copy too (step-lower-library-calls' norm-gradient
// adds); dy f32 or bf16 (`_of_bf16`).
#define STEPC_LAYER_NORM_GRAD_ADD(name, TD, ROUNDED_PARAM, ROUNDED)                             \
  extern "C" int name(stepc_cuda_ctx* ctx, const TD* dy, const float* x, const float* w,        \
                      const float* acc, int64_t rows, int64_t d, double eps, float* scratch,    \
                      float* sum, float* dw, float* db ROUNDED_PARAM) {                         \
    return LayerNormGrad(ctx, dy, x, w, rows, d, eps, scratch, GradOut{acc, sum, ROUNDED}, dw, \
                         db);                                                                   \
  }
#define STEPC_RMS_NORM_GRAD_ADD(name, TD, ROUNDED_PARAM, ROUNDED)                               \
  extern "C" int name(stepc_cuda_ctx* ctx, const TD* dy, const float* x, const float* w,        \
                      const float* acc, int64_t rows, int64_t d, double eps, float* scratch,    \
                      float* sum, float* dw ROUNDED_PARAM) {                                    \
    return RmsNormGrad(ctx, dy, x, w, rows, d, eps, scratch, GradOut{acc, sum, ROUNDED}, dw);  \
  }
#define STEPC_LAYER_NORM_GRAD_ADD_SUM(name, TERMS, DY, ROUNDED_PARAM, ROUNDED)                   \
  extern "C" int name(stepc_cuda_ctx* ctx, TERMS, const float* x, const float* w,               \
                      const float* acc, int64_t rows, int64_t d, double eps, float* scratch,    \
                      float* sum, float* dw, float* db ROUNDED_PARAM) {                         \
    return LayerNormGrad(ctx, DY, x, w, rows, d, eps, scratch, GradOut{acc, sum, ROUNDED}, dw, \
                         db);                                                                   \
  }
#define STEPC_RMS_NORM_GRAD_ADD_SUM(name, TERMS, DY, ROUNDED_PARAM, ROUNDED)                     \
  extern "C" int name(stepc_cuda_ctx* ctx, TERMS, const float* x, const float* w,               \
                      const float* acc, int64_t rows, int64_t d, double eps, float* scratch,    \
                      float* sum, float* dw ROUNDED_PARAM) {                                    \
    return RmsNormGrad(ctx, DY, x, w, rows, d, eps, scratch, GradOut{acc, sum, ROUNDED}, dw);  \
  }
#define STEPC_NO_ROUNDED
#define STEPC_ROUNDED_PARAM , __nv_bfloat16* rounded
STEPC_LAYER_NORM_GRAD_ADD(stepc_cuda_layer_norm_grad_add, float, STEPC_NO_ROUNDED, nullptr)
STEPC_LAYER_NORM_GRAD_ADD(stepc_cuda_layer_norm_grad_add_of_bf16, __nv_bfloat16,
                          STEPC_NO_ROUNDED, nullptr)
STEPC_LAYER_NORM_GRAD_ADD(stepc_cuda_layer_norm_grad_add_rounded, float, STEPC_ROUNDED_PARAM,
                          rounded)
STEPC_LAYER_NORM_GRAD_ADD(stepc_cuda_layer_norm_grad_add_rounded_of_bf16, __nv_bfloat16,
                          STEPC_ROUNDED_PARAM, rounded)
STEPC_RMS_NORM_GRAD_ADD(stepc_cuda_rms_norm_grad_add, float, STEPC_NO_ROUNDED, nullptr)
STEPC_RMS_NORM_GRAD_ADD(stepc_cuda_rms_norm_grad_add_of_bf16, __nv_bfloat16, STEPC_NO_ROUNDED,
                        nullptr)
STEPC_RMS_NORM_GRAD_ADD(stepc_cuda_rms_norm_grad_add_rounded, float, STEPC_ROUNDED_PARAM,
                        rounded)
STEPC_RMS_NORM_GRAD_ADD(stepc_cuda_rms_norm_grad_add_rounded_of_bf16, __nv_bfloat16,
                        STEPC_ROUNDED_PARAM, rounded)
// dy the f32 sum of two or three bf16 input gradients (`_of_bf16_sum2`,
// `_sum3`: step-lower-library-calls' summed dy), added as the step does.
#define STEPC_DY_SUM2 const __nv_bfloat16 *dy0, const __nv_bfloat16 *dy1
#define STEPC_DY_SUM3 STEPC_DY_SUM2, const __nv_bfloat16 *dy2
#define STEPC_SUM2 DySum{dy0, dy1, nullptr}
#define STEPC_SUM3 DySum{dy0, dy1, dy2}
STEPC_LAYER_NORM_GRAD_ADD_SUM(stepc_cuda_layer_norm_grad_add_of_bf16_sum2, STEPC_DY_SUM2,
                              STEPC_SUM2, STEPC_NO_ROUNDED, nullptr)
STEPC_LAYER_NORM_GRAD_ADD_SUM(stepc_cuda_layer_norm_grad_add_of_bf16_sum3, STEPC_DY_SUM3,
                              STEPC_SUM3, STEPC_NO_ROUNDED, nullptr)
STEPC_LAYER_NORM_GRAD_ADD_SUM(stepc_cuda_layer_norm_grad_add_rounded_of_bf16_sum2, STEPC_DY_SUM2,
                              STEPC_SUM2, STEPC_ROUNDED_PARAM, rounded)
STEPC_LAYER_NORM_GRAD_ADD_SUM(stepc_cuda_layer_norm_grad_add_rounded_of_bf16_sum3, STEPC_DY_SUM3,
                              STEPC_SUM3, STEPC_ROUNDED_PARAM, rounded)
STEPC_RMS_NORM_GRAD_ADD_SUM(stepc_cuda_rms_norm_grad_add_of_bf16_sum2, STEPC_DY_SUM2, STEPC_SUM2,
                            STEPC_NO_ROUNDED, nullptr)
STEPC_RMS_NORM_GRAD_ADD_SUM(stepc_cuda_rms_norm_grad_add_of_bf16_sum3, STEPC_DY_SUM3, STEPC_SUM3,
                            STEPC_NO_ROUNDED, nullptr)
STEPC_RMS_NORM_GRAD_ADD_SUM(stepc_cuda_rms_norm_grad_add_rounded_of_bf16_sum2, STEPC_DY_SUM2,
                            STEPC_SUM2, STEPC_ROUNDED_PARAM, rounded)
STEPC_RMS_NORM_GRAD_ADD_SUM(stepc_cuda_rms_norm_grad_add_rounded_of_bf16_sum3, STEPC_DY_SUM3,
                            STEPC_SUM3, STEPC_ROUNDED_PARAM, rounded)
#undef STEPC_DY_SUM2
#undef STEPC_DY_SUM3
#undef STEPC_SUM2
#undef STEPC_SUM3
#undef STEPC_LAYER_NORM_GRAD_ADD_SUM
#undef STEPC_RMS_NORM_GRAD_ADD_SUM
// Where the residual stream's gradient starts (the final norm's): dx and
// its bf16 copy.
#define STEPC_NORM_GRAD_ROUNDED(name, Grad, TD, DB_PARAM, DB)                                   \
  extern "C" int name(stepc_cuda_ctx* ctx, const TD* dy, const float* x, const float* w,        \
                      int64_t rows, int64_t d, double eps, float* scratch, float* dx,           \
                      float* dw DB_PARAM, __nv_bfloat16* rounded) {                             \
    return Grad(ctx, dy, x, w, rows, d, eps, scratch, GradOut{nullptr, dx, rounded}, dw DB);    \
  }
#define STEPC_DB_PARAM , float* db
#define STEPC_DB , db
STEPC_NORM_GRAD_ROUNDED(stepc_cuda_layer_norm_grad_rounded, LayerNormGrad, float, STEPC_DB_PARAM,
                        STEPC_DB)
STEPC_NORM_GRAD_ROUNDED(stepc_cuda_layer_norm_grad_rounded_of_bf16, LayerNormGrad,
                        __nv_bfloat16, STEPC_DB_PARAM, STEPC_DB)
STEPC_NORM_GRAD_ROUNDED(stepc_cuda_rms_norm_grad_rounded, RmsNormGrad, float, STEPC_NO_ROUNDED,
                        STEPC_NO_ROUNDED)
STEPC_NORM_GRAD_ROUNDED(stepc_cuda_rms_norm_grad_rounded_of_bf16, RmsNormGrad, __nv_bfloat16,
                        STEPC_NO_ROUNDED, STEPC_NO_ROUNDED)
#undef STEPC_NORM_GRAD_ROUNDED
#undef STEPC_DB_PARAM
#undef STEPC_DB
#undef STEPC_LAYER_NORM_GRAD_ADD
#undef STEPC_RMS_NORM_GRAD_ADD
#undef STEPC_NO_ROUNDED
#undef STEPC_ROUNDED_PARAM

extern "C" int stepc_cuda_rms_norm(stepc_cuda_ctx* ctx, const float* x, const float* w,
                                   int64_t rows, int64_t d, double eps, float* y) {
  return RmsNorm(ctx, Plain(x), w, rows, d, eps, y);
}
extern "C" int stepc_cuda_rms_norm_bf16(stepc_cuda_ctx* ctx, const float* x, const float* w,
                                        int64_t rows, int64_t d, double eps, __nv_bfloat16* y) {
  return RmsNorm(ctx, Plain(x), w, rows, d, eps, y);
}

// The residual add before a norm, and the norm, in one pass: sum = a + b
// (b f32, or bf16: `_of_bf16`), y = norm(sum) (f32, or bf16: `_bf16`).
#define STEPC_LAYER_NORM_ADD(name, TB, T)                                                      \
  extern "C" int name(stepc_cuda_ctx* ctx, const float* a, const TB* b, const float* w,        \
                      const float* bias, int64_t rows, int64_t d, double eps, float* sum,      \
                      T* y) {                                                                  \
    return LayerNorm(ctx, NormIn<TB>{a, b, sum}, w, bias, rows, d, eps, y);                   \
  }
#define STEPC_RMS_NORM_ADD(name, TB, T)                                                        \
  extern "C" int name(stepc_cuda_ctx* ctx, const float* a, const TB* b, const float* w,        \
                      int64_t rows, int64_t d, double eps, float* sum, T* y) {                 \
    return RmsNorm(ctx, NormIn<TB>{a, b, sum}, w, rows, d, eps, y);                           \
  }
STEPC_LAYER_NORM_ADD(stepc_cuda_layer_norm_add, float, float)
STEPC_LAYER_NORM_ADD(stepc_cuda_layer_norm_add_bf16, float, __nv_bfloat16)
STEPC_LAYER_NORM_ADD(stepc_cuda_layer_norm_add_of_bf16, __nv_bfloat16, float)
STEPC_LAYER_NORM_ADD(stepc_cuda_layer_norm_add_of_bf16_bf16, __nv_bfloat16, __nv_bfloat16)
STEPC_RMS_NORM_ADD(stepc_cuda_rms_norm_add, float, float)
STEPC_RMS_NORM_ADD(stepc_cuda_rms_norm_add_bf16, float, __nv_bfloat16)
STEPC_RMS_NORM_ADD(stepc_cuda_rms_norm_add_of_bf16, __nv_bfloat16, float)
STEPC_RMS_NORM_ADD(stepc_cuda_rms_norm_add_of_bf16_bf16, __nv_bfloat16, __nv_bfloat16)
#undef STEPC_LAYER_NORM_ADD
#undef STEPC_RMS_NORM_ADD
// b a table of `period` rows, row r of x adding row r % period of it.
#define STEPC_LAYER_NORM_ADD_OF_REPEATED(name, T)                                              \
  extern "C" int name(stepc_cuda_ctx* ctx, const float* a, const float* b, const float* w,     \
                      const float* bias, int64_t rows, int64_t d, double eps, int64_t period,  \
                      float* sum, T* y) {                                                      \
    return LayerNorm(ctx, NormIn<float>{a, b, sum, period * d}, w, bias, rows, d, eps, y);    \
  }
#define STEPC_RMS_NORM_ADD_OF_REPEATED(name, T)                                                \
  extern "C" int name(stepc_cuda_ctx* ctx, const float* a, const float* b, const float* w,     \
                      int64_t rows, int64_t d, double eps, int64_t period, float* sum, T* y) { \
    return RmsNorm(ctx, NormIn<float>{a, b, sum, period * d}, w, rows, d, eps, y);            \
  }
STEPC_LAYER_NORM_ADD_OF_REPEATED(stepc_cuda_layer_norm_add_of_repeated, float)
STEPC_LAYER_NORM_ADD_OF_REPEATED(stepc_cuda_layer_norm_add_of_repeated_bf16, __nv_bfloat16)
STEPC_RMS_NORM_ADD_OF_REPEATED(stepc_cuda_rms_norm_add_of_repeated, float)
STEPC_RMS_NORM_ADD_OF_REPEATED(stepc_cuda_rms_norm_add_of_repeated_bf16, __nv_bfloat16)
#undef STEPC_LAYER_NORM_ADD_OF_REPEATED
#undef STEPC_RMS_NORM_ADD_OF_REPEATED

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

namespace stepc::cuda {
namespace {

template <typename TI, typename TO>
int Rotary(stepc_cuda_ctx* ctx, const TI* x, int64_t batch, int64_t len, int64_t width,
           int64_t head_dim, double theta, int inverse, float* scratch, TO* y) {
  STEPC_LAUNCH(ElementwiseBlocks(len * head_dim / 2), kThreads, 0, ctx->stream,
               RotaryTableKernel)(len, head_dim, theta, inverse ? -1.0 : 1.0, scratch);
  if (int rc = STEPC_LAUNCHED(ctx, "RotaryTableKernel")) return rc;
  STEPC_LAUNCH(ElementwiseBlocks(batch * len * width / 2), kThreads, 0, ctx->stream,
               RotaryKernel<TI, TO>)(x, batch, len, width, head_dim, scratch, y);
  return STEPC_LAUNCHED(ctx, "RotaryKernel");
}

}  // namespace
}  // namespace stepc::cuda

// x and y of f32 or bf16: `_of_bf16` reads bf16, `_bf16` writes it.
#define STEPC_ROTARY(name, TI, TO)                                                            \
  extern "C" int name(stepc_cuda_ctx* ctx, const TI* x, int64_t batch, int64_t len,           \
                      int64_t width, int64_t head_dim, double theta, int inverse,             \
                      float* scratch, TO* y) {                                                \
    return Rotary(ctx, x, batch, len, width, head_dim, theta, inverse, scratch, y);           \
  }
STEPC_ROTARY(stepc_cuda_rotary, float, float)
STEPC_ROTARY(stepc_cuda_rotary_bf16, float, __nv_bfloat16)
STEPC_ROTARY(stepc_cuda_rotary_of_bf16, __nv_bfloat16, float)
STEPC_ROTARY(stepc_cuda_rotary_of_bf16_bf16, __nv_bfloat16, __nv_bfloat16)
#undef STEPC_ROTARY
