// Flash attention on tensor cores for bf16 q/k/v, f32 accumulation.
//
// The forward (TcForwardKernel) is FlashAttention-2's on mma.sync m16n8k16
// (mma.cuh): scores, the online softmax and the output accumulator stay in
// registers, P goes from the score fragments straight into the next
// product's operand fragments.
//
// The backward is WMMA 16x16x16: a block of 4 warps takes 64 query rows (or,
// for dK/dV, 64 key rows), tiles of 64 rows of the other side are staged in
// shared memory, each warp multiplies its 16 rows; everything elementwise —
// scaling, masking, P from the saved log-sum-exp, dS — runs on score tiles
// in shared memory (WMMA's fragment layout is opaque).
//
// P and dS are rounded to bf16 for the products (as FlashAttention does); the
// statistics and accumulators stay f32. Same algorithm as the scalar kernels
// in attention.cu: forward with online softmax and saved lse; dQ per query
// block; dK, dV per key block over the query heads of its group; no atomics.

#include "runtime/kernels/cuda/attention.cuh"
#include "runtime/kernels/cuda/mma.cuh"
#include "runtime/kernels/cuda/vector_access.cuh"

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

// Rows [r0, r0 + 64) of head h of a [B, rows, ld] tensor into
// tile[64][kLd] (bf16; kLd = kDh + kPad), zeros outside; with `vec` (16-byte
// aligned rows and head dim a multiple of 8) 8 elements a thread step.
template <int kDh, int kLd>
__device__ void StageRows(const bf16* src, int64_t b, int64_t r0, int64_t rows, int64_t h,
                          int64_t ld, int64_t dh, bool vec, bf16* tile) {
  if (vec) {
    for (int e = threadIdx.x; e < kR * kDh / 8; e += blockDim.x) {
      const int r = e / (kDh / 8), c = e % (kDh / 8) * 8;
      const int64_t row = r0 + r;
      Bits128 x{};
      if (row < rows && c < dh)
        x = *reinterpret_cast<const Bits128*>(src + (b * rows + row) * ld + h * dh + c);
      *reinterpret_cast<Bits128*>(tile + r * kLd + c) = x;
    }
    return;
  }
  for (int e = threadIdx.x; e < kR * kDh; e += blockDim.x) {
    const int r = e / kDh, c = e % kDh;
    const int64_t row = r0 + r;
    tile[r * kLd + c] = row < rows && c < dh ? src[(b * rows + row) * ld + h * dh + c]
                                             : __float2bfloat16(0.0f);
  }
}

// The same rows transposed: tile[c][r] (row stride kLd = 64 + kPad), so a
// product's B fragment that runs along the rows (P·V) loads pairs of
// adjacent elements. A warp's lanes take consecutive rows of one column
// chunk: its transposed stores fall on consecutive addresses.
template <int kDh, int kLd>
__device__ void StageColumns(const bf16* src, int64_t b, int64_t r0, int64_t rows, int64_t h,
                             int64_t ld, int64_t dh, bool vec, bf16* tile) {
  uint16_t* out = reinterpret_cast<uint16_t*>(tile);
  if (vec) {
    for (int e = threadIdx.x; e < kR * kDh / 8; e += blockDim.x) {
      const int r = e % kR, c = e / kR * 8;
      const int64_t row = r0 + r;
      Bits128 x{};
      if (row < rows && c < dh)
        x = *reinterpret_cast<const Bits128*>(src + (b * rows + row) * ld + h * dh + c);
      for (int j = 0; j < 8; ++j)
        out[(c + j) * kLd + r] = static_cast<uint16_t>(x.w[j / 2] >> (16 * (j % 2)));
    }
    return;
  }
  for (int e = threadIdx.x; e < kR * kDh; e += blockDim.x) {
    const int r = e % kR, c = e / kR;
    const int64_t row = r0 + r;
    tile[c * kLd + r] = row < rows && c < dh ? src[(b * rows + row) * ld + h * dh + c]
                                             : __float2bfloat16(0.0f);
  }
}

// Whether a query tile's rows [q0, q0 + 64) and a key tile [k0, k0 + 64)
// need no mask: all rows and keys exist and every key precedes every row.
__device__ __forceinline__ bool WholeTile(const AttentionArgs& a, int64_t q0, int64_t k0) {
  return q0 + kR <= a.tq && k0 + kR <= a.tk && (!a.causal || k0 + kR - 1 <= q0);
}

// The forward, FlashAttention-2's way on mma.sync (mma.cuh): a block of 4
// warps takes 64 query rows, each warp 16 of them, their Q fragments held
// in registers; per 64-key tile (K row-major and V transposed in shared
// memory, rows padded by kPad so fragment loads hit distinct banks) a warp
// computes its 16x64 scores in registers, runs the online softmax on them
// where they lie (a row's 4 lanes combine maxima by shuffles), rounds P to
// bf16 straight into the A fragments of P·V and accumulates O in registers.
// Each lane keeps partial row sums of the rounded P (summed over the row's
// lanes at the end), as the scalar kernels sum what the products read.
template <int kDh>
__global__ void __launch_bounds__(kTensorCoreThreads)
    TcForwardKernel(const bf16* q, const bf16* k, const bf16* v, AttentionArgs a, bool vec,
                    void* out, float* lse) {
  constexpr int kLd = kDh + kTensorCorePad, kVtLd = kR + kTensorCorePad;
  STEPC_DYNAMIC_SHARED(char, smem);
  Carve carve{smem};
  bf16* qs = carve.Take<bf16>(kR * kLd);
  bf16* ks = carve.Take<bf16>(kR * kLd);
  bf16* vt = carve.Take<bf16>(kDh * kVtLd);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int64_t b = blockIdx.y / a.heads, h = blockIdx.y % a.heads;
  const int64_t kvh = h / (a.heads / a.kv_heads);
  const int64_t q0 = blockIdx.x * (int64_t)kR, q1 = min(a.tq, q0 + kR);
  StageRows<kDh, kLd>(q, b, q0, a.tq, h, a.q_ld, a.dh, vec, qs);
  __syncthreads();
  uint32_t qa[kDh / 16][4];
  const bf16* qw = qs + 16 * warp * kLd;
  for (int kk = 0; kk < kDh / 16; ++kk) {
    qa[kk][0] = mma::LoadPair(qw + g * kLd + 16 * kk + 2 * t);
    qa[kk][1] = mma::LoadPair(qw + (g + 8) * kLd + 16 * kk + 2 * t);
    qa[kk][2] = mma::LoadPair(qw + g * kLd + 16 * kk + 2 * t + 8);
    qa[kk][3] = mma::LoadPair(qw + (g + 8) * kLd + 16 * kk + 2 * t + 8);
  }
  float o[kDh / 8][4] = {};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // rows g, g + 8
  const int64_t rows[2] = {q0 + 16 * warp + g, q0 + 16 * warp + g + 8};
  const int64_t k_end = a.causal ? min(a.tk, q1) : a.tk;
  for (int64_t k0 = 0; k0 < k_end; k0 += kR) {
    __syncthreads();
    StageRows<kDh, kLd>(k, b, k0, a.tk, kvh, a.kv_ld, a.dh, vec, ks);
    StageColumns<kDh, kVtLd>(v, b, k0, a.tk, kvh, a.kv_ld, a.dh, vec, vt);
    __syncthreads();
    float s[kR / 8][4] = {};  // this warp's 16 rows x 64 keys, 8 keys a fragment
    for (int nt = 0; nt < kR / 8; ++nt)
      for (int kk = 0; kk < kDh / 16; ++kk) {
        const bf16* kr = ks + (8 * nt + g) * kLd + 16 * kk + 2 * t;
        const uint32_t kb[2] = {mma::LoadPair(kr), mma::LoadPair(kr + 8)};
        mma::Mma(s[nt], qa[kk], kb);
      }
    const bool whole = WholeTile(a, q0 + 16 * warp, k0) && q0 + 16 * warp + 16 <= a.tq;
    float tile_max[2] = {-INFINITY, -INFINITY};
    for (int nt = 0; nt < kR / 8; ++nt)
      for (int e = 0; e < 4; ++e) {
        const int64_t j = k0 + 8 * nt + 2 * t + e % 2;
        float x = s[nt][e] * a.scale;
        if (!whole && !Visible(a, rows[e / 2], j)) x = -INFINITY;
        s[nt][e] = x;
        tile_max[e / 2] = fmaxf(tile_max[e / 2], x);
      }
    float rescale[2];
    for (int r = 0; r < 2; ++r) {
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
      const float m_new = fmaxf(m[r], tile_max[r]);
      rescale[r] = m[r] == -INFINITY ? 0.0f : expf(m[r] - m_new);
      m[r] = m_new;
      l[r] *= rescale[r];
    }
    // P rounded to bf16 into P·V's A fragments: keys [16kk, 16kk + 16) are
    // score fragments 2kk (a0, a1) and 2kk + 1 (a2, a3).
    uint32_t pa[kR / 16][4];
    for (int nt = 0; nt < kR / 8; ++nt) {
      float p[4];
      for (int e = 0; e < 4; ++e) {
        const float mr = m[e / 2];
        const float pe = mr == -INFINITY || s[nt][e] == -INFINITY ? 0.0f : expf(s[nt][e] - mr);
        p[e] = __bfloat162float(__float2bfloat16(pe));
        l[e / 2] += p[e];
      }
      pa[nt / 2][2 * (nt % 2)] = mma::Pack(p[0], p[1]);
      pa[nt / 2][2 * (nt % 2) + 1] = mma::Pack(p[2], p[3]);
    }
    for (int nd = 0; nd < kDh / 8; ++nd) {
      o[nd][0] *= rescale[0];
      o[nd][1] *= rescale[0];
      o[nd][2] *= rescale[1];
      o[nd][3] *= rescale[1];
      for (int kk = 0; kk < kR / 16; ++kk) {
        const bf16* vr = vt + (8 * nd + g) * kVtLd + 16 * kk + 2 * t;
        const uint32_t vb[2] = {mma::LoadPair(vr), mma::LoadPair(vr + 8)};
        mma::Mma(o[nd], pa[kk], vb);
      }
    }
  }
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
  for (int nd = 0; nd < kDh / 8; ++nd)
    for (int e = 0; e < 4; ++e) {
      const int64_t i = rows[e / 2];
      const int64_t c = 8 * nd + 2 * t + e % 2;
      if (i < a.tq && c < a.dh) StoreAs(out, a.out_type, a.ORow(b, i, h) + c, o[nd][e] / l[e / 2]);
    }
  if (lse && t == 0)
    for (int r = 0; r < 2; ++r)
      if (rows[r] < a.tq) lse[a.Stat(b, h, rows[r])] = m[r] + logf(l[r]);
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
  auto aligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  const bool vec = a.dh % 8 == 0 && a.q_ld % 8 == 0 && a.kv_ld % 8 == 0 && aligned(q) &&
                   aligned(k) && aligned(v);
  STEPC_LAUNCH_COOPERATIVE(grid, kTensorCoreThreads, shared, ctx->stream, TcForwardKernel<kDh>)(
      q, k, v, a, vec, out, lse);
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
