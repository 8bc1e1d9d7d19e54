// Flash attention on tensor cores (WMMA 16x16x16, bf16 operands, f32
// accumulation) for bf16 q/k/v: a block of 4 warps takes 64 query rows (or,
// for dK/dV, 64 key rows), tiles of 64 rows of the other side are staged in
// shared memory, each warp multiplies its 16 rows. Everything elementwise —
// scaling, masking, the online softmax, P from the saved log-sum-exp, dS —
// runs on score tiles in shared memory, so no fragment layout is assumed.
// P and dS are rounded to bf16 for the products (as FlashAttention does); the
// statistics and accumulators stay f32. Same algorithm as the scalar kernels
// in attention.cu: forward with online softmax and saved lse; dQ per query
// block; dK, dV per key block over the query heads of its group; no atomics.

#include "runtime/kernels/cuda/attention.cuh"

#ifndef STEPC_CUDA_EMULATION
#include <mma.h>
#endif

namespace stepc::cuda {
namespace {

using namespace nvcuda;
using bf16 = __nv_bfloat16;
constexpr int kR = kTensorCoreRows;  // 64

using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major>;
using FragAT = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::col_major>;
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major>;
using FragBT = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

// Carves the dynamic shared memory into consecutive regions.
struct Carve {
  char* at;
  template <typename T>
  __device__ T* Take(int64_t count) {
    T* p = reinterpret_cast<T*>(at);
    at += count * sizeof(T);
    return p;
  }
};

// Rows [r0, r0 + 64) of head h of a [B, rows, ld] tensor (ld its row
// stride) into tile[64][kDh] (bf16), zeros outside.
template <int kDh>
__device__ void Stage(const bf16* src, int64_t b, int64_t r0, int64_t rows, int64_t h,
                      int64_t ld, int64_t dh, bf16* tile) {
  for (int e = threadIdx.x; e < kR * kDh; e += blockDim.x) {
    const int r = e / kDh, c = e % kDh;
    const int64_t row = r0 + r;
    tile[e] = row < rows && c < dh ? src[(b * rows + row) * ld + h * dh + c]
                                   : __float2bfloat16(0.0f);
  }
}

// out[16 rows of warp w][64] = A[16w..][0..kDh) · Bᵀ, B given as rows
// [64][kDh] (so Bᵀ is read column-major): S = Q Kᵀ, dP = dO Vᵀ.
template <int kDh>
__device__ void RowsTimesTransposed(const bf16* a, const bf16* b, float* out) {
  const int w = threadIdx.x / 32;
  for (int jt = 0; jt < kR / 16; ++jt) {
    FragC acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int kk = 0; kk < kDh / 16; ++kk) {
      FragA fa;
      FragBT fb;
      wmma::load_matrix_sync(fa, a + 16 * w * kDh + 16 * kk, kDh);
      wmma::load_matrix_sync(fb, b + 16 * jt * kDh + 16 * kk, kDh);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(out + 16 * w * kR + 16 * jt, acc, kR, wmma::mem_row_major);
  }
}

// acc[16 rows of warp w][0..kDh) += P[16w..][0..64) · V[64][kDh], with P
// read transposed when `transpose` (dV += Pᵀ dO, dK += dSᵀ Q).
template <int kDh, bool kTranspose>
__device__ void AccumulateTimes(const bf16* p, const bf16* v, float* acc) {
  const int w = threadIdx.x / 32;
  for (int nt = 0; nt < kDh / 16; ++nt) {
    FragC c;
    wmma::load_matrix_sync(c, acc + 16 * w * kDh + 16 * nt, kDh, wmma::mem_row_major);
    for (int kk = 0; kk < kR / 16; ++kk) {
      FragB fb;
      wmma::load_matrix_sync(fb, v + 16 * kk * kDh + 16 * nt, kDh);
      if constexpr (kTranspose) {
        FragAT fa;  // A(m, k) = P[k][m]: rows of the block are P's columns
        wmma::load_matrix_sync(fa, p + 16 * kk * kR + 16 * w, kR);
        wmma::mma_sync(c, fa, fb, c);
      } else {
        FragA fa;
        wmma::load_matrix_sync(fa, p + 16 * w * kR + 16 * kk, kR);
        wmma::mma_sync(c, fa, fb, c);
      }
    }
    wmma::store_matrix_sync(acc + 16 * w * kDh + 16 * nt, c, kDh, wmma::mem_row_major);
  }
}

// The saved statistics of query rows [i0, i0 + 64) of head h (0 past Tq).
__device__ void StageRowStats(const AttentionArgs& a, int64_t b, int64_t h, int64_t i0,
                              const float* lse, const float* delta, float* row_lse,
                              float* row_delta) {
  for (int r = threadIdx.x; r < kR; r += blockDim.x) {
    const bool valid = i0 + r < a.tq;
    row_lse[r] = valid ? lse[a.Stat(b, h, i0 + r)] : 0.0f;
    row_delta[r] = valid ? delta[a.Stat(b, h, i0 + r)] : 0.0f;
  }
}

// Zeroes an accumulator tile.
__device__ void Zero(float* tile, int count) {
  for (int e = threadIdx.x; e < count; e += blockDim.x) tile[e] = 0.0f;
}

__device__ __forceinline__ bool Visible(const AttentionArgs& a, int64_t i, int64_t j) {
  return i < a.tq && j < a.tk && (!a.causal || j <= i);
}

template <int kDh>
__global__ void __launch_bounds__(kTensorCoreThreads)
    TcForwardKernel(const bf16* q, const bf16* k, const bf16* v, AttentionArgs a, void* out,
                    float* lse) {
  STEPC_DYNAMIC_SHARED(char, smem);
  Carve carve{smem};
  bf16* qs = carve.Take<bf16>(kR * kDh);
  bf16* ks = carve.Take<bf16>(kR * kDh);
  bf16* vs = carve.Take<bf16>(kR * kDh);
  float* s = carve.Take<float>(kR * kR);
  bf16* p = carve.Take<bf16>(kR * kR);
  float* o = carve.Take<float>(kR * kDh);
  float* m = carve.Take<float>(kR);
  float* l = carve.Take<float>(kR);
  const int64_t b = blockIdx.y / a.heads, h = blockIdx.y % a.heads;
  const int64_t kvh = h / (a.heads / a.kv_heads);
  const int64_t q0 = blockIdx.x * (int64_t)kR, q1 = min(a.tq, q0 + kR);
  Stage<kDh>(q, b, q0, a.tq, h, a.q_ld, a.dh, qs);
  Zero(o, kR * kDh);
  for (int r = threadIdx.x; r < kR; r += blockDim.x) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
  }
  const int64_t k_end = a.causal ? min(a.tk, q1) : a.tk;
  for (int64_t k0 = 0; k0 < k_end; k0 += kR) {
    __syncthreads();
    Stage<kDh>(k, b, k0, a.tk, kvh, a.kv_ld, a.dh, ks);
    Stage<kDh>(v, b, k0, a.tk, kvh, a.kv_ld, a.dh, vs);
    __syncthreads();
    RowsTimesTransposed<kDh>(qs, ks, s);
    __syncthreads();
    // The online softmax of each row over this tile (tile_math.h's RowUpdate,
    // with the accumulator in shared memory).
    for (int r = threadIdx.x; r < kR; r += blockDim.x) {
      const int64_t i = q0 + r;
      float tile_max = -INFINITY;
      for (int j = 0; j < kR; ++j)
        if (Visible(a, i, k0 + j)) tile_max = fmaxf(tile_max, s[r * kR + j] * a.scale);
      const float m_new = fmaxf(m[r], tile_max);
      const float rescale = m[r] == -INFINITY ? 0.0f : expf(m[r] - m_new);
      float sum = 0.0f;
      for (int j = 0; j < kR; ++j) {
        float pj = 0.0f;
        if (m_new != -INFINITY && Visible(a, i, k0 + j))
          pj = expf(s[r * kR + j] * a.scale - m_new);
        const bf16 rounded = __float2bfloat16(pj);
        p[r * kR + j] = rounded;
        sum += __bfloat162float(rounded);
      }
      l[r] = l[r] * rescale + sum;
      m[r] = m_new;
      for (int c = 0; c < kDh; ++c) o[r * kDh + c] *= rescale;
    }
    __syncthreads();
    AccumulateTimes<kDh, false>(p, vs, o);
  }
  __syncthreads();
  for (int e = threadIdx.x; e < kR * kDh; e += blockDim.x) {
    const int r = e / kDh, c = e % kDh;
    const int64_t i = q0 + r;
    if (i < a.tq && c < a.dh) StoreAs(out, a.out_type, a.ORow(b, i, h) + c, o[e] / l[r]);
  }
  if (lse)
    for (int r = threadIdx.x; r < kR; r += blockDim.x)
      if (q0 + r < a.tq) lse[a.Stat(b, h, q0 + r)] = m[r] + logf(l[r]);
}

// P = exp(S·scale - lse) and dS = P (dP - D)·scale on a [64 q][64 k] tile.
__device__ void ScoreGrads(const AttentionArgs& a, int64_t i0, int64_t j0, const float* s,
                           const float* dp, const float* row_lse, const float* row_delta,
                           bf16* p, bf16* ds) {
  for (int e = threadIdx.x; e < kR * kR; e += blockDim.x) {
    const int r = e / kR, j = e % kR;
    float pj = 0.0f, dsj = 0.0f;
    if (Visible(a, i0 + r, j0 + j)) {
      pj = expf(s[e] * a.scale - row_lse[r]);
      dsj = pj * (dp[e] - row_delta[r]) * a.scale;
    }
    if (p) p[e] = __float2bfloat16(pj);
    ds[e] = __float2bfloat16(dsj);
  }
}

template <int kDh>
__global__ void __launch_bounds__(kTensorCoreThreads)
    TcQueryGradKernel(const bf16* dout, const bf16* q, const bf16* k, const bf16* v,
                      AttentionArgs a, const float* lse, const float* delta, void* dq) {
  STEPC_DYNAMIC_SHARED(char, smem);
  Carve carve{smem};
  bf16* qs = carve.Take<bf16>(kR * kDh);
  bf16* dos = carve.Take<bf16>(kR * kDh);
  bf16* ks = carve.Take<bf16>(kR * kDh);
  bf16* vs = carve.Take<bf16>(kR * kDh);
  float* s = carve.Take<float>(kR * kR);
  float* dp = carve.Take<float>(kR * kR);
  bf16* ds = carve.Take<bf16>(kR * kR);
  float* acc = carve.Take<float>(kR * kDh);
  float* row_lse = carve.Take<float>(kR);
  float* row_delta = carve.Take<float>(kR);
  const int64_t b = blockIdx.y / a.heads, h = blockIdx.y % a.heads;
  const int64_t kvh = h / (a.heads / a.kv_heads);
  const int64_t q0 = blockIdx.x * (int64_t)kR, q1 = min(a.tq, q0 + kR);
  Stage<kDh>(q, b, q0, a.tq, h, a.q_ld, a.dh, qs);
  Stage<kDh>(dout, b, q0, a.tq, h, a.heads * a.dh, a.dh, dos);
  Zero(acc, kR * kDh);
  StageRowStats(a, b, h, q0, lse, delta, row_lse, row_delta);
  const int64_t k_end = a.causal ? min(a.tk, q1) : a.tk;
  for (int64_t k0 = 0; k0 < k_end; k0 += kR) {
    __syncthreads();
    Stage<kDh>(k, b, k0, a.tk, kvh, a.kv_ld, a.dh, ks);
    Stage<kDh>(v, b, k0, a.tk, kvh, a.kv_ld, a.dh, vs);
    __syncthreads();
    RowsTimesTransposed<kDh>(qs, ks, s);
    RowsTimesTransposed<kDh>(dos, vs, dp);
    __syncthreads();
    ScoreGrads(a, q0, k0, s, dp, row_lse, row_delta, nullptr, ds);
    __syncthreads();
    AccumulateTimes<kDh, false>(ds, ks, acc);  // dQ += dS K
  }
  __syncthreads();
  for (int e = threadIdx.x; e < kR * kDh; e += blockDim.x) {
    const int r = e / kDh, c = e % kDh;
    if (q0 + r < a.tq && c < a.dh) StoreAs(dq, a.out_type, a.DQRow(b, q0 + r, h) + c, acc[e]);
  }
}

template <int kDh>
__global__ void __launch_bounds__(kTensorCoreThreads)
    TcKeyValueGradKernel(const bf16* dout, const bf16* q, const bf16* k, const bf16* v,
                         AttentionArgs a, const float* lse, const float* delta, void* dk,
                         void* dv) {
  STEPC_DYNAMIC_SHARED(char, smem);
  Carve carve{smem};
  bf16* ks = carve.Take<bf16>(kR * kDh);
  bf16* vs = carve.Take<bf16>(kR * kDh);
  bf16* qs = carve.Take<bf16>(kR * kDh);
  bf16* dos = carve.Take<bf16>(kR * kDh);
  float* s = carve.Take<float>(kR * kR);
  float* dp = carve.Take<float>(kR * kR);
  bf16* p = carve.Take<bf16>(kR * kR);
  bf16* ds = carve.Take<bf16>(kR * kR);
  float* dk_acc = carve.Take<float>(kR * kDh);
  float* dv_acc = carve.Take<float>(kR * kDh);
  float* row_lse = carve.Take<float>(kR);
  float* row_delta = carve.Take<float>(kR);
  const int64_t b = blockIdx.y / a.kv_heads, kvh = blockIdx.y % a.kv_heads;
  const int64_t group = a.heads / a.kv_heads;
  const int64_t j0 = blockIdx.x * (int64_t)kR;
  Stage<kDh>(k, b, j0, a.tk, kvh, a.kv_ld, a.dh, ks);
  Stage<kDh>(v, b, j0, a.tk, kvh, a.kv_ld, a.dh, vs);
  Zero(dk_acc, kR * kDh);
  Zero(dv_acc, kR * kDh);
  // Query tiles before the block's first key see none of its keys.
  const int64_t q_begin = a.causal ? j0 : 0;
  for (int64_t g = 0; g < group; ++g) {
    const int64_t h = kvh * group + g;
    for (int64_t i0 = q_begin; i0 < a.tq; i0 += kR) {
      __syncthreads();
      Stage<kDh>(q, b, i0, a.tq, h, a.q_ld, a.dh, qs);
      Stage<kDh>(dout, b, i0, a.tq, h, a.heads * a.dh, a.dh, dos);
      StageRowStats(a, b, h, i0, lse, delta, row_lse, row_delta);
      __syncthreads();
      RowsTimesTransposed<kDh>(qs, ks, s);    // S[q][k]
      RowsTimesTransposed<kDh>(dos, vs, dp);  // dP[q][k]
      __syncthreads();
      ScoreGrads(a, i0, j0, s, dp, row_lse, row_delta, p, ds);
      __syncthreads();
      AccumulateTimes<kDh, true>(p, dos, dv_acc);  // dV += Pᵀ dO
      AccumulateTimes<kDh, true>(ds, qs, dk_acc);  // dK += dSᵀ Q
    }
  }
  __syncthreads();
  for (int e = threadIdx.x; e < kR * kDh; e += blockDim.x) {
    const int r = e / kDh, c = e % kDh;
    if (j0 + r < a.tk && c < a.dh) {
      StoreAs(dk, a.out_type, a.DKRow(b, j0 + r, kvh) + c, dk_acc[e]);
      StoreAs(dv, a.out_type, a.DKRow(b, j0 + r, kvh) + c, dv_acc[e]);
    }
  }
}

}  // namespace

template <int kDh>
int TensorCoreForward(stepc_cuda_ctx* ctx, const bf16* q, const bf16* k, const bf16* v,
                      const AttentionArgs& a, void* out, float* lse) {
  const int64_t shared = TensorCoreForwardShared(kDh);
  STEPC_CUDA_TRY(ctx, AllowSharedMemory(TcForwardKernel<kDh>, shared));
  dim3 grid(CeilDiv(a.tq, kR), a.batch * a.heads);
  STEPC_LAUNCH_COOPERATIVE(grid, kTensorCoreThreads, shared, ctx->stream, TcForwardKernel<kDh>)(
      q, k, v, a, out, lse);
  return STEPC_LAUNCHED(ctx, "TcForwardKernel(attention)");
}

template <int kDh>
int TensorCoreBackward(stepc_cuda_ctx* ctx, const bf16* dout, const bf16* q, const bf16* k,
                       const bf16* v, const AttentionArgs& a, const float* lse,
                       const float* delta, void* dq, void* dk, void* dv) {
  const int64_t qshared = TensorCoreQueryGradShared(kDh);
  STEPC_CUDA_TRY(ctx, AllowSharedMemory(TcQueryGradKernel<kDh>, qshared));
  dim3 qgrid(CeilDiv(a.tq, kR), a.batch * a.heads);
  STEPC_LAUNCH_COOPERATIVE(qgrid, kTensorCoreThreads, qshared, ctx->stream,
                           TcQueryGradKernel<kDh>)(dout, q, k, v, a, lse, delta, dq);
  if (int rc = STEPC_LAUNCHED(ctx, "TcQueryGradKernel(attention)")) return rc;
  const int64_t kshared = TensorCoreKeyValueGradShared(kDh);
  STEPC_CUDA_TRY(ctx, AllowSharedMemory(TcKeyValueGradKernel<kDh>, kshared));
  dim3 kgrid(CeilDiv(a.tk, kR), a.batch * a.kv_heads);
  STEPC_LAUNCH_COOPERATIVE(kgrid, kTensorCoreThreads, kshared, ctx->stream,
                           TcKeyValueGradKernel<kDh>)(dout, q, k, v, a, lse, delta, dk, dv);
  return STEPC_LAUNCHED(ctx, "TcKeyValueGradKernel(attention)");
}

#define STEPC_TC_INSTANTIATE(n)                                                              \
  template int TensorCoreForward<n>(stepc_cuda_ctx*, const bf16*, const bf16*, const bf16*, \
                                    const AttentionArgs&, void*, float*);                  \
  template int TensorCoreBackward<n>(stepc_cuda_ctx*, const bf16*, const bf16*, const bf16*, \
                                     const bf16*, const AttentionArgs&, const float*,        \
                                     const float*, void*, void*, void*);
STEPC_TC_INSTANTIATE(32)
STEPC_TC_INSTANTIATE(64)
STEPC_TC_INSTANTIATE(128)
#undef STEPC_TC_INSTANTIATE

}  // namespace stepc::cuda
