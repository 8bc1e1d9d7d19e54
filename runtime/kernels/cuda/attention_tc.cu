// Flash attention on tensor cores for bf16 q/k/v, f32 accumulation,
// FlashAttention-2's way on mma.sync m16n8k16 (mma.cuh): a block of 4 warps
// takes 64 query rows (or, for dK/dV, 64 key rows), each warp 16 of them;
// tiles of 64 rows of the other side are staged in shared memory (rows
// padded so fragment loads hit distinct banks; a product running along a
// tile's rows takes its operand by ldmatrix's transposing load), and the
// scores, the softmax or the score gradients, and the accumulators stay in
// registers: a product's result fragments become the next product's
// operand fragments.
//
// P and dS are rounded to bf16 for the products (as FlashAttention does); the
// statistics and accumulators stay f32. Same algorithm as the scalar kernels
// in attention.cu: forward with online softmax and saved lse; dQ per query
// block; dK, dV per key block over the query heads of its group; no atomics.

#include "runtime/kernels/cuda/attention.cuh"
#include "runtime/kernels/cuda/mma.cuh"
#include "runtime/kernels/cuda/vector_access.cuh"

#include <initializer_list>

namespace stepc::cuda {
namespace {

using bf16 = __nv_bfloat16;
constexpr int kR = kTensorCoreRows;  // 64

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

// The softmax's exponentials in base 2 on the SFU (ex2.approx, relative
// error about 2^-22), FlashAttention's way: scores scaled by log2(e) with
// the softmax scale (one multiply-add before each), where expf's accurate
// range reduction costs several instructions an element beside the
// products.
constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;
__device__ __forceinline__ float Exp2(float x) {
#ifdef STEPC_CUDA_EMULATION
  return std::exp2(x);
#else
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#endif
}

// The saved statistics of query rows [i0, i0 + 64) of head h (0 past Tq),
// the log-sum-exp in base 2 (times log2(e)) for Exp2.
__device__ void StageRowStats(const AttentionArgs& a, int64_t b, int64_t h, int64_t i0,
                              const float* lse, const float* delta, float* row_lse,
                              float* row_delta) {
  for (int r = threadIdx.x; r < kR; r += blockDim.x) {
    const bool valid = i0 + r < a.tq;
    row_lse[r] = valid ? lse[a.Stat(b, h, i0 + r)] * kLog2e : 0.0f;
    row_delta[r] = valid ? delta[a.Stat(b, h, i0 + r)] : 0.0f;
  }
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

// StageRows with cp.async (mma.cuh): the copies are in flight when it
// returns (the caller commits and waits); needs `vec`'s alignment.
template <int kDh, int kLd>
__device__ void CopyRows(const bf16* src, int64_t b, int64_t r0, int64_t rows, int64_t h,
                         int64_t ld, int64_t dh, bf16* tile) {
  for (int e = threadIdx.x; e < kR * kDh / 8; e += blockDim.x) {
    const int r = e / (kDh / 8), c = e % (kDh / 8) * 8;
    const int64_t row = r0 + r;
    const bool valid = row < rows && c < dh;
    mma::CopyAsync16(tile + r * kLd + c, valid ? src + (b * rows + row) * ld + h * dh + c : src,
                     valid);
  }
}

// A tile's rows into one of a kernel's two buffers: with cp.async where the
// rows allow (`vec`), in flight until the caller's WaitForTile, else staged
// at once.
template <int kDh, int kLd>
__device__ void FetchRows(const bf16* src, int64_t b, int64_t r0, int64_t rows, int64_t h,
                          int64_t ld, int64_t dh, bool vec, bf16* tile) {
  if (vec)
    CopyRows<kDh, kLd>(src, b, r0, rows, h, ld, dh, tile);
  else
    StageRows<kDh, kLd>(src, b, r0, rows, h, ld, dh, false, tile);
}
// The top of a double-buffered loop's iteration, after fetching the next
// tile (pending = 1) or with none left to fetch (0): this tile's copies
// have landed and every thread's are visible. The buffer the next tile was
// fetched into is the one the previous iteration read, which every warp is
// past (each iteration ends at a barrier).
__device__ __forceinline__ void WaitForTile(int pending) {
  if (pending)
    mma::WaitCopies<1>();
  else
    mma::WaitCopies<0>();
  __syncthreads();
}

// Whether query rows [r0, r0 + rows) and a key tile [k0, k0 + 64) need no
// mask: all rows and keys exist and every key precedes every row.
__device__ __forceinline__ bool WholeTile(const AttentionArgs& a, int64_t r0, int64_t rows,
                                          int64_t k0) {
  return r0 + rows <= a.tq && k0 + kR <= a.tk && (!a.causal || k0 + kR - 1 <= r0);
}

// The A fragment of rows [r0, r0 + 16), columns [16kk, 16kk + 16) of a
// row-major bf16 tile (row stride ld).
__device__ __forceinline__ void LoadA(const bf16* tile, int ld, int r0, int kk,
                                      uint32_t (&a)[4]) {
  const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  const bf16* p = tile + (r0 + g) * ld + 16 * kk + 2 * t;
  a[0] = mma::LoadPair(p);
  a[1] = mma::LoadPair(p + 8 * ld);
  a[2] = mma::LoadPair(p + 8);
  a[3] = mma::LoadPair(p + 8 * ld + 8);
}
// The B fragment B[k][n] = tile[n0 + n][16kk + k]: a tile whose rows are
// B's columns (K's rows for S = Q Kᵀ, V's for dP = dO Vᵀ).
__device__ __forceinline__ void LoadB(const bf16* tile, int ld, int n0, int kk,
                                      uint32_t (&b)[2]) {
  const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  const bf16* p = tile + (n0 + g) * ld + 16 * kk + 2 * t;
  b[0] = mma::LoadPair(p);
  b[1] = mma::LoadPair(p + 8);
}
// acc (16 rows from r0 by 8 kN columns from n0) += A·Bᵀ over kK·16: A the
// rows of one tile, B the rows of another (S = Q Kᵀ, dP = dO Vᵀ, and the
// transposes dK/dV's block computes).
template <int kN, int kK>
__device__ __forceinline__ void RowsTimesRows(const bf16* a_tile, int a_ld, int r0,
                                              const bf16* b_tile, int b_ld, int n0,
                                              float (&acc)[kN][4]) {
  for (int kk = 0; kk < kK; ++kk) {
    uint32_t a[4];
    LoadA(a_tile, a_ld, r0, kk, a);
    for (int nt = 0; nt < kN; ++nt) {
      uint32_t b[2];
      LoadB(b_tile, b_ld, n0 + 8 * nt, kk, b);
      mma::Mma(acc[nt], a, b);
    }
  }
}
// acc += A·B with A's fragments in registers (P or dS, rounded to bf16) and
// B the rows [k0, k0 + 16·kK) of a row-major tile (dS K, Pᵀ dO, dSᵀ Q).
template <int kN, int kK>
__device__ __forceinline__ void FragmentsTimes(const uint32_t (&a)[kK][4], const bf16* rows,
                                               int ld, int k0, float (&acc)[kN][4]) {
  for (int nd = 0; nd < kN; ++nd)
    for (int kk = 0; kk < kK; ++kk) {
      uint32_t b[2];
      mma::LoadBRows(rows, ld, k0 + 16 * kk, 8 * nd, b);
      mma::Mma(acc[nd], a[kk], b);
    }
}
// A fragments of a product's f32 result (16 rows by 8 kN columns), each
// value rounded to bf16: columns [16kk, 16kk + 16) are result fragments 2kk
// (a0, a1) and 2kk + 1 (a2, a3).
template <int kN>
__device__ __forceinline__ void Rounded(const float (&c)[kN][4], uint32_t (&a)[kN / 2][4]) {
  for (int nt = 0; nt < kN; ++nt) {
    a[nt / 2][2 * (nt % 2)] = mma::Pack(c[nt][0], c[nt][1]);
    a[nt / 2][2 * (nt % 2) + 1] = mma::Pack(c[nt][2], c[nt][3]);
  }
}

// A query block's place (batch b, head h and its key-value head, rows
// [q0, q1)), the key tiles its causal mask lets it see, and the fetch of
// key tile i's K and V rows into buffer i % 2 (the forward's and dQ's).
struct QueryBlock {
  int64_t b, h, kvh, q0, q1, tiles;
  __device__ explicit QueryBlock(const AttentionArgs& a)
      : b(blockIdx.y / a.heads), h(blockIdx.y % a.heads), kvh(h / (a.heads / a.kv_heads)),
        q0(blockIdx.x * (int64_t)kR), q1(min(a.tq, q0 + kR)) {
    tiles = ((a.causal ? min(a.tk, q1) : a.tk) + kR - 1) / kR;
  }
  template <int kDh, int kLd>
  __device__ void FetchKeys(const AttentionArgs& a, const bf16* k, const bf16* v, bool vec,
                            int64_t i, bf16* ks, bf16* vs) const {
    constexpr int kTile = kR * kLd;
    FetchRows<kDh, kLd>(k, b, i * kR, a.tk, kvh, a.kv_ld, a.dh, vec, ks + (i % 2) * kTile);
    FetchRows<kDh, kLd>(v, b, i * kR, a.tk, kvh, a.kv_ld, a.dh, vec, vs + (i % 2) * kTile);
    mma::CommitCopies();
  }
};

// The forward, FlashAttention-2's way on mma.sync (mma.cuh): a block of 4
// warps takes 64 query rows, each warp 16 of them, their Q fragments held
// in registers; 64-key tiles of K and V are copied into shared memory
// (rows padded by kTensorCorePad so fragment loads hit distinct banks) with
// cp.async, the next tile's copies in flight while the warps work on this
// one (two buffers). A warp computes its 16x64 scores in registers, runs
// the online softmax on them where they lie (a row's 4 lanes combine maxima
// by shuffles), rounds P to bf16 straight into the A fragments of P·V (V's
// B fragments by ldmatrix's transposing load) and accumulates O in
// registers. Each lane keeps partial row sums of the rounded P (summed over
// the row's lanes at the end), as the scalar kernels sum what the products
// read; the row maxima are kept in base-2 units (Exp2), the log-sum-exp
// saved in e's.
template <int kDh, bool kMasked>
__global__ void __launch_bounds__(kTensorCoreThreads)
    TcForwardKernel(const bf16* q, const bf16* k, const bf16* v, AttentionArgs a, bool vec,
                    void* out, float* lse) {
  constexpr int kLd = kDh + kTensorCorePad, kTile = kR * kLd;
  STEPC_DYNAMIC_SHARED(char, smem);
  Carve carve{smem};
  bf16* qs = carve.Take<bf16>(kTile);
  bf16* ks = carve.Take<bf16>(2 * kTile);  // two buffers each
  bf16* vs = carve.Take<bf16>(2 * kTile);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const QueryBlock blk(a);
  const int64_t b = blk.b, h = blk.h, q0 = blk.q0, tiles = blk.tiles;
  auto fetch = [&](int64_t i) { blk.FetchKeys<kDh, kLd>(a, k, v, vec, i, ks, vs); };
  if (tiles > 0) fetch(0);
  StageRows<kDh, kLd>(q, b, q0, a.tq, h, a.q_ld, a.dh, vec, qs);
  __syncthreads();
  uint32_t qa[kDh / 16][4];
  for (int kk = 0; kk < kDh / 16; ++kk) LoadA(qs, kLd, 16 * warp, kk, qa[kk]);
  float o[kDh / 8][4] = {};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // rows g, g + 8
  const float scale2 = a.scale * kLog2e;  // scores in base-2 units
  const int64_t rows[2] = {q0 + 16 * warp + g, q0 + 16 * warp + g + 8};
  for (int64_t i = 0; i < tiles; ++i) {
    const int64_t k0 = i * kR;
    WaitForTile(i + 1 < tiles ? (fetch(i + 1), 1) : 0);
    const bf16 *kb = ks + (i % 2) * kTile, *vb = vs + (i % 2) * kTile;
    float s[kR / 8][4] = {};  // this warp's 16 rows x 64 keys, 8 keys a fragment
    for (int nt = 0; nt < kR / 8; ++nt)
      for (int kk = 0; kk < kDh / 16; ++kk) {
        uint32_t kf[2];
        LoadB(kb, kLd, 8 * nt, kk, kf);
        mma::Mma(s[nt], qa[kk], kf);
      }
    const bool whole = WholeTile(a, q0 + 16 * warp, 16, k0);
    float tile_max[2] = {-INFINITY, -INFINITY};
    for (int nt = 0; nt < kR / 8; ++nt)
      for (int e = 0; e < 4; ++e) {
        const int64_t j = k0 + 8 * nt + 2 * t + e % 2;
        float x = s[nt][e] * scale2;
        if (!whole && !Visible(a, rows[e / 2], j))
          x = -INFINITY;
        else if (kMasked)
          x += a.Bias(b, h, rows[e / 2], j) * kLog2e;
        s[nt][e] = x;
        tile_max[e / 2] = fmaxf(tile_max[e / 2], x);
      }
    float rescale[2];
    for (int r = 0; r < 2; ++r) {
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
      const float m_new = fmaxf(m[r], tile_max[r]);
      rescale[r] = m[r] == -INFINITY ? 0.0f : Exp2(m[r] - m_new);
      m[r] = m_new;
      l[r] *= rescale[r];
    }
    // P, rounded to bf16 as P·V reads it (l sums those values), into the
    // product's A fragments.
    for (int nt = 0; nt < kR / 8; ++nt)
      for (int e = 0; e < 4; ++e) {
        const float mr = m[e / 2];
        const float pe = mr == -INFINITY || s[nt][e] == -INFINITY ? 0.0f : Exp2(s[nt][e] - mr);
        s[nt][e] = __bfloat162float(__float2bfloat16(pe));
        l[e / 2] += s[nt][e];
      }
    uint32_t pa[kR / 16][4];
    Rounded<kR / 8>(s, pa);  // exact: the values are bf16's already
    for (int nd = 0; nd < kDh / 8; ++nd)
      for (int e = 0; e < 4; ++e) o[nd][e] *= rescale[e / 2];
    FragmentsTimes<kDh / 8, kR / 16>(pa, vb, kLd, 0, o);  // O += P V
    __syncthreads();  // this buffer is the one the next iteration fetches into
  }
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
  for (int nd = 0; nd < kDh / 8; ++nd)
    for (int e = 0; e < 4; ++e) {
      const int64_t i = rows[e / 2];
      const int64_t c = 8 * nd + 2 * t + e % 2;
      // A row its mask hides whole: 0, and log-sum-exp +inf (the scalar
      // kernels' convention; its backward then sees P = 0).
      const float li = l[e / 2];
      if (i < a.tq && c < a.dh)
        StoreAs(out, a.out_type, a.ORow(b, i, h) + c, li == 0.0f ? 0.0f : o[nd][e] / li);
    }
  if (lse && t == 0)
    for (int r = 0; r < 2; ++r)
      if (rows[r] < a.tq)
        lse[a.Stat(b, h, rows[r])] = l[r] == 0.0f ? INFINITY : m[r] * kLn2 + logf(l[r]);
}

// dQ for 64 query rows (mma.sync, as the forward): per 64-key tile a warp
// computes its 16 rows' S = Q Kᵀ and dP = dO Vᵀ in registers, P from the
// saved log-sum-exp and dS = P (dP - D)·scale where they lie, and adds
// dS K. K and V tiles are double-buffered as in the forward.
template <int kDh, bool kMasked>
__global__ void __launch_bounds__(kTensorCoreThreads)
    TcQueryGradKernel(const bf16* dout, const bf16* q, const bf16* k, const bf16* v,
                      AttentionArgs a, bool vec, const float* lse, const float* delta,
                      void* dq) {
  constexpr int kLd = kDh + kTensorCorePad, kTile = kR * kLd;
  STEPC_DYNAMIC_SHARED(char, smem);
  Carve carve{smem};
  bf16* qs = carve.Take<bf16>(kTile);
  bf16* dos = carve.Take<bf16>(kTile);
  bf16* ks = carve.Take<bf16>(2 * kTile);  // two buffers each
  bf16* vs = carve.Take<bf16>(2 * kTile);
  float* row_lse = carve.Take<float>(kR);
  float* row_delta = carve.Take<float>(kR);
  const int warp = threadIdx.x / 32, t = threadIdx.x % 4;
  const QueryBlock blk(a);
  const int64_t b = blk.b, h = blk.h, q0 = blk.q0, tiles = blk.tiles;
  auto fetch = [&](int64_t i) { blk.FetchKeys<kDh, kLd>(a, k, v, vec, i, ks, vs); };
  if (tiles > 0) fetch(0);
  StageRows<kDh, kLd>(q, b, q0, a.tq, h, a.q_ld, a.dh, vec, qs);
  StageRows<kDh, kLd>(dout, b, q0, a.tq, h, a.heads * a.dh, a.dh, vec, dos);
  StageRowStats(a, b, h, q0, lse, delta, row_lse, row_delta);
  const int g = threadIdx.x % 32 / 4;
  const int rows[2] = {16 * warp + g, 16 * warp + g + 8};  // this lane's rows of the tile
  float acc[kDh / 8][4] = {};
  const float scale2 = a.scale * kLog2e;  // scores in base-2 units
  for (int64_t i = 0; i < tiles; ++i) {
    const int64_t k0 = i * kR;
    WaitForTile(i + 1 < tiles ? (fetch(i + 1), 1) : 0);
    const bf16 *kb = ks + (i % 2) * kTile, *vb = vs + (i % 2) * kTile;
    float s[kR / 8][4] = {}, dp[kR / 8][4] = {};
    RowsTimesRows<kR / 8, kDh / 16>(qs, kLd, 16 * warp, kb, kLd, 0, s);
    RowsTimesRows<kR / 8, kDh / 16>(dos, kLd, 16 * warp, vb, kLd, 0, dp);
    for (int nt = 0; nt < kR / 8; ++nt)
      for (int e = 0; e < 4; ++e) {
        const int r = rows[e / 2];
        const int64_t j = k0 + 8 * nt + 2 * t + e % 2;
        float ds = 0.0f;
        if (Visible(a, q0 + r, j)) {
          float x = s[nt][e] * scale2;
          if constexpr (kMasked) x += a.Bias(b, h, q0 + r, j) * kLog2e;
          const float p = Exp2(x - row_lse[r]);
          ds = p * (dp[nt][e] - row_delta[r]) * a.scale;
        }
        s[nt][e] = ds;
      }
    uint32_t dsa[kR / 16][4];
    Rounded<kR / 8>(s, dsa);
    FragmentsTimes<kDh / 8, kR / 16>(dsa, kb, kLd, 0, acc);  // dQ += dS K
    __syncthreads();  // this buffer is the one the next iteration fetches into
  }
  for (int nd = 0; nd < kDh / 8; ++nd)
    for (int e = 0; e < 4; ++e) {
      const int64_t i = q0 + rows[e / 2], c = 8 * nd + 2 * t + e % 2;
      if (i < a.tq && c < a.dh) StoreAs(dq, a.out_type, a.DQRow(b, i, h) + c, acc[nd][e]);
    }
}

// dK and dV for 64 key rows over the query heads of its group: per 64-row
// query tile a warp computes its 16 keys' Sᵀ = K Qᵀ and dPᵀ = V dOᵀ in
// registers, Pᵀ and dSᵀ where they lie, and adds Pᵀ dO and dSᵀ Q; Q and dO
// tiles (and their rows' statistics) double-buffered as in the forward.
// Each query tile goes in passes of 32 columns (64 for a head dim of 32):
// beside the dK and dV accumulators (64 or 128 registers a lane), that
// keeps gpt2's head dim of 64 at three blocks an SM (164 registers with the
// double buffers; whole tiles took 171 without them, two blocks).
template <int kDh, bool kMasked>
__global__ void __launch_bounds__(kTensorCoreThreads)
    TcKeyValueGradKernel(const bf16* dout, const bf16* q, const bf16* k, const bf16* v,
                         AttentionArgs a, bool vec, const float* lse, const float* delta,
                         void* dk, void* dv) {
  constexpr int kLd = kDh + kTensorCorePad, kTile = kR * kLd;
  constexpr int kCols = kDh > 32 ? 32 : 64;  // query columns a pass
  STEPC_DYNAMIC_SHARED(char, smem);
  Carve carve{smem};
  bf16* ks = carve.Take<bf16>(kTile);
  bf16* vs = carve.Take<bf16>(kTile);
  bf16* qs = carve.Take<bf16>(2 * kTile);  // two buffers each
  bf16* dos = carve.Take<bf16>(2 * kTile);
  float* row_lse = carve.Take<float>(2 * kR);
  float* row_delta = carve.Take<float>(2 * kR);
  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  const int64_t b = blockIdx.y / a.kv_heads, kvh = blockIdx.y % a.kv_heads;
  const int64_t group = a.heads / a.kv_heads;
  const int64_t j0 = blockIdx.x * (int64_t)kR;
  // Query tiles before the block's first key see none of its keys; the
  // tiles of each head of the group, one after another.
  const int64_t q_begin = a.causal ? j0 : 0;
  const int64_t per_head = (a.tq - q_begin + kR - 1) / kR, tiles = group * per_head;
  auto fetch = [&](int64_t i) {
    const int64_t h = kvh * group + i / per_head, i0 = q_begin + i % per_head * kR;
    const int buf = i % 2;
    FetchRows<kDh, kLd>(q, b, i0, a.tq, h, a.q_ld, a.dh, vec, qs + buf * kTile);
    FetchRows<kDh, kLd>(dout, b, i0, a.tq, h, a.heads * a.dh, a.dh, vec, dos + buf * kTile);
    StageRowStats(a, b, h, i0, lse, delta, row_lse + buf * kR, row_delta + buf * kR);
    mma::CommitCopies();
  };
  if (tiles > 0) fetch(0);
  StageRows<kDh, kLd>(k, b, j0, a.tk, kvh, a.kv_ld, a.dh, vec, ks);
  StageRows<kDh, kLd>(v, b, j0, a.tk, kvh, a.kv_ld, a.dh, vec, vs);
  const int64_t keys[2] = {j0 + 16 * warp + g, j0 + 16 * warp + g + 8};
  float dk_acc[kDh / 8][4] = {}, dv_acc[kDh / 8][4] = {};
  const float scale2 = a.scale * kLog2e;  // scores in base-2 units
  for (int64_t i = 0; i < tiles; ++i) {
    const int64_t h = kvh * group + i / per_head, i0 = q_begin + i % per_head * kR;
    WaitForTile(i + 1 < tiles ? (fetch(i + 1), 1) : 0);
    const int buf = i % 2;
    const bf16 *qb = qs + buf * kTile, *dob = dos + buf * kTile;
    const float *lse2 = row_lse + buf * kR, *dd = row_delta + buf * kR;
    for (int c0 = 0; c0 < kR; c0 += kCols) {
      float st[kCols / 8][4] = {}, dpt[kCols / 8][4] = {};
      RowsTimesRows<kCols / 8, kDh / 16>(ks, kLd, 16 * warp, qb, kLd, c0, st);
      RowsTimesRows<kCols / 8, kDh / 16>(vs, kLd, 16 * warp, dob, kLd, c0, dpt);
      for (int nt = 0; nt < kCols / 8; ++nt)
        for (int e = 0; e < 4; ++e) {
          const int col = c0 + 8 * nt + 2 * t + e % 2;
          float p = 0.0f, ds = 0.0f;
          if (Visible(a, i0 + col, keys[e / 2])) {
            float x = st[nt][e] * scale2;
            if constexpr (kMasked) x += a.Bias(b, h, i0 + col, keys[e / 2]) * kLog2e;
            p = Exp2(x - lse2[col]);
            ds = p * (dpt[nt][e] - dd[col]) * a.scale;
          }
          st[nt][e] = p;
          dpt[nt][e] = ds;
        }
      uint32_t pa[kCols / 16][4], dsa[kCols / 16][4];
      Rounded<kCols / 8>(st, pa);
      Rounded<kCols / 8>(dpt, dsa);
      // dV += Pᵀ dO, dK += dSᵀ Q over this pass's query rows.
      FragmentsTimes<kDh / 8, kCols / 16>(pa, dob, kLd, c0, dv_acc);
      FragmentsTimes<kDh / 8, kCols / 16>(dsa, qb, kLd, c0, dk_acc);
    }
    __syncthreads();  // this buffer is the one the next iteration fetches into
  }
  for (int nd = 0; nd < kDh / 8; ++nd)
    for (int e = 0; e < 4; ++e) {
      const int64_t j = keys[e / 2], c = 8 * nd + 2 * t + e % 2;
      if (j < a.tk && c < a.dh) {
        StoreAs(dk, a.out_type, a.DKRow(b, j, kvh) + c, dk_acc[nd][e]);
        StoreAs(dv, a.out_type, a.DKRow(b, j, kvh) + c, dv_acc[nd][e]);
      }
    }
}

}  // namespace

// Whether the kernels may stage rows 8 elements at a time: head dim and row
// strides multiples of 8 elements, every tensor 16-byte aligned.
bool Vectors(const AttentionArgs& a, std::initializer_list<const void*> tensors) {
  for (const void* p : tensors)
    if (!Aligned16(p)) return false;
  return a.dh % 8 == 0 && a.q_ld % 8 == 0 && a.kv_ld % 8 == 0 && (a.heads * a.dh) % 8 == 0;
}

// The kernels of a masked attention add the mask to the scores (kMasked);
// the others have no code for it (gpt2's dK/dV kernel: 164 registers
// instead of 220, three blocks an SM instead of two).
template <int kDh, bool kMasked>
int LaunchForward(stepc_cuda_ctx* ctx, const bf16* q, const bf16* k, const bf16* v,
                  const AttentionArgs& a, void* out, float* lse) {
  const int64_t shared = TensorCoreForwardShared(kDh);
  auto* kernel = TcForwardKernel<kDh, kMasked>;
  STEPC_CUDA_TRY(ctx, AllowSharedMemory(kernel, shared));
  dim3 grid(CeilDiv(a.tq, kR), a.batch * a.heads);
  const bool vec = Vectors(a, {q, k, v});
  STEPC_LAUNCH_COOPERATIVE(grid, kTensorCoreThreads, shared, ctx->stream, kernel)(
      q, k, v, a, vec, out, lse);
  return STEPC_LAUNCHED(ctx, "TcForwardKernel(attention)");
}

template <int kDh, bool kMasked>
int LaunchBackward(stepc_cuda_ctx* ctx, const bf16* dout, const bf16* q, const bf16* k,
                   const bf16* v, const AttentionArgs& a, const float* lse, const float* delta,
                   void* dq, void* dk, void* dv) {
  const int64_t qshared = TensorCoreQueryGradShared(kDh);
  auto* query_grad = TcQueryGradKernel<kDh, kMasked>;
  STEPC_CUDA_TRY(ctx, AllowSharedMemory(query_grad, qshared));
  dim3 qgrid(CeilDiv(a.tq, kR), a.batch * a.heads);
  const bool vec = Vectors(a, {dout, q, k, v});
  STEPC_LAUNCH_COOPERATIVE(qgrid, kTensorCoreThreads, qshared, ctx->stream, query_grad)(
      dout, q, k, v, a, vec, lse, delta, dq);
  if (int rc = STEPC_LAUNCHED(ctx, "TcQueryGradKernel(attention)")) return rc;
  const int64_t kshared = TensorCoreKeyValueGradShared(kDh);
  auto* key_value_grad = TcKeyValueGradKernel<kDh, kMasked>;
  STEPC_CUDA_TRY(ctx, AllowSharedMemory(key_value_grad, kshared));
  dim3 kgrid(CeilDiv(a.tk, kR), a.batch * a.kv_heads);
  STEPC_LAUNCH_COOPERATIVE(kgrid, kTensorCoreThreads, kshared, ctx->stream, key_value_grad)(
      dout, q, k, v, a, vec, lse, delta, dk, dv);
  return STEPC_LAUNCHED(ctx, "TcKeyValueGradKernel(attention)");
}

template <int kDh>
int TensorCoreForward(stepc_cuda_ctx* ctx, const bf16* q, const bf16* k, const bf16* v,
                      const AttentionArgs& a, void* out, float* lse) {
  return a.mask ? LaunchForward<kDh, true>(ctx, q, k, v, a, out, lse)
                : LaunchForward<kDh, false>(ctx, q, k, v, a, out, lse);
}

template <int kDh>
int TensorCoreBackward(stepc_cuda_ctx* ctx, const bf16* dout, const bf16* q, const bf16* k,
                       const bf16* v, const AttentionArgs& a, const float* lse,
                       const float* delta, void* dq, void* dk, void* dv) {
  return a.mask ? LaunchBackward<kDh, true>(ctx, dout, q, k, v, a, lse, delta, dq, dk, dv)
                : LaunchBackward<kDh, false>(ctx, dout, q, k, v, a, lse, delta, dq, dk, dv);
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
