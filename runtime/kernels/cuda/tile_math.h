// tile_math.h - the tile-level math of the CUDA kernels, as __host__
// __device__ functions so that the host checks it against the reference
// interpreter (no GPU needed): flash-attention's online softmax over key
// tiles, causal tile classification, the log-sum-exp the forward saves, and
// the backward's row terms. A kernel is these functions plus memory movement.

#ifndef STEPC_RUNTIME_KERNELS_CUDA_TILE_MATH_H_
#define STEPC_RUNTIME_KERNELS_CUDA_TILE_MATH_H_

#include <math.h>

#if defined(__CUDACC__)
#define STEPC_HD __host__ __device__ __forceinline__
#else
#define STEPC_HD inline
#endif

namespace stepc::tile {

// How a [q0, q1) x [k0, k1) tile of the causal score matrix is masked.
enum class TileMask { kSkip, kFull, kPartial };

STEPC_HD TileMask CausalTile(int q0, int q1, int k0, int k1) {
  if (k0 > q1 - 1) return TileMask::kSkip;   // every key after every query
  if (k1 - 1 <= q0) return TileMask::kFull;  // every key at or before every query
  return TileMask::kPartial;
}

STEPC_HD bool CausalVisible(int q, int k) { return k <= q; }

// The online softmax of one query row over the key tiles seen so far:
// m = max score, l = Σ exp(s - m), acc = Σ exp(s - m) · v.
struct RowState {
  float m;
  float l;
};

STEPC_HD RowState RowStart() { return RowState{-INFINITY, 0.0f}; }

// Folds one tile of n scores s (masked ones -inf) and their value rows
// (v + j·ldv, dh floats each) into the state and acc[dh]: the old terms are
// rescaled by exp(m_old - m_new) (Milakov & Gimelshein; FlashAttention).
STEPC_HD void RowUpdate(RowState& st, const float* s, int n, const float* v, int ldv, int dh,
                        float* acc) {
  float tile_max = -INFINITY;
  for (int j = 0; j < n; ++j) tile_max = fmaxf(tile_max, s[j]);
  if (tile_max == -INFINITY) return;  // fully masked tile: nothing to add
  const float m = fmaxf(st.m, tile_max);
  const float rescale = st.m == -INFINITY ? 0.0f : expf(st.m - m);
  for (int c = 0; c < dh; ++c) acc[c] *= rescale;
  float l = st.l * rescale;
  for (int j = 0; j < n; ++j) {
    if (s[j] == -INFINITY) continue;
    const float p = expf(s[j] - m);
    l += p;
    for (int c = 0; c < dh; ++c) acc[c] += p * v[j * ldv + c];
  }
  st.m = m;
  st.l = l;
}

// out = acc / l; returns the log-sum-exp m + log(l) the backward needs.
STEPC_HD float RowFinish(const RowState& st, const float* acc, int dh, float* out) {
  const float inv = 1.0f / st.l;
  for (int c = 0; c < dh; ++c) out[c] = acc[c] * inv;
  return st.m + logf(st.l);
}

// Backward row term D = Σ_c dO[c]·O[c] (= Σ_j P_j dP_j).
STEPC_HD float RowDelta(const float* dout, const float* out, int dh) {
  float d = 0.0f;
  for (int c = 0; c < dh; ++c) d += dout[c] * out[c];
  return d;
}

// P_j from the saved log-sum-exp, and dS_j = P_j (dP_j - D).
STEPC_HD float ProbFromLse(float score, float lse) { return expf(score - lse); }
STEPC_HD float ScoreGrad(float p, float dp, float delta) { return p * (dp - delta); }

}  // namespace stepc::tile

#endif  // STEPC_RUNTIME_KERNELS_CUDA_TILE_MATH_H_
