// tile_math.h - the tile-level math of the CUDA kernels, as __host__
// __device__ functions so that the host checks it against the reference
// interpreter (no GPU needed): flash-attention's online softmax over key
// tiles, causal tile classification, the log-sum-exp the forward saves, and
// the backward's row terms; the fused cross-entropy row; LayerNorm's
// mergeable Welford statistics. A kernel is these functions plus memory
// movement.

#ifndef STEPC_RUNTIME_KERNELS_CUDA_TILE_MATH_H_
#define STEPC_RUNTIME_KERNELS_CUDA_TILE_MATH_H_

#include <math.h>

#include "../host_device.h"

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

// out = acc / l; returns the log-sum-exp m + log(l) the backward needs. A
// row whose every key was masked gives 0 and +inf (so that the backward's
// probabilities exp(s - lse) are 0 too), not NaN.
STEPC_HD float RowFinish(const RowState& st, const float* acc, int dh, float* out) {
  if (st.l == 0.0f) {
    for (int c = 0; c < dh; ++c) out[c] = 0.0f;
    return INFINITY;
  }
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

// ---- Fused cross-entropy: one pass over a row of logits, no probability
// buffer: the online (max, sum) gives the log-sum-exp; the gradient is
// recomputed from it.

// Folds x[0..n) into the running (m, l) of Σ exp(x - m); combining the
// partial states of several threads uses the same rescaling (RowMerge).
STEPC_HD void RowFold(RowState& st, const float* x, int n) {
  for (int j = 0; j < n; ++j) {
    if (x[j] > st.m) {
      st.l = st.l * (st.m == -INFINITY ? 0.0f : expf(st.m - x[j])) + 1.0f;
      st.m = x[j];
    } else {
      st.l += expf(x[j] - st.m);
    }
  }
}

STEPC_HD RowState RowMerge(RowState a, RowState b) {
  if (a.m == -INFINITY) return b;
  if (b.m == -INFINITY) return a;
  const float m = fmaxf(a.m, b.m);
  return RowState{m, a.l * expf(a.m - m) + b.l * expf(b.m - m)};
}

STEPC_HD float RowLse(RowState st) { return st.m + logf(st.l); }

// dlogits[j] = scale · (exp(x_j - lse) - [j == target]), scale = dloss / N.
STEPC_HD void CrossEntropyRowGrad(const float* x, int n, int target, float lse, float scale,
                                  float* dx) {
  for (int j = 0; j < n; ++j) dx[j] = scale * (expf(x[j] - lse) - (j == target ? 1.0f : 0.0f));
}

// ---- LayerNorm rows: Welford statistics, mergeable across threads.

struct Welford {
  float mean;
  float m2;  // Σ (x - mean)²
  float n;
};

STEPC_HD Welford WelfordStart() { return Welford{0.0f, 0.0f, 0.0f}; }

STEPC_HD void WelfordAdd(Welford& w, float x) {
  w.n += 1.0f;
  const float delta = x - w.mean;
  w.mean += delta / w.n;
  w.m2 += delta * (x - w.mean);
}

// Chan et al.'s parallel combination: what a warp shuffle tree does.
STEPC_HD Welford WelfordMerge(Welford a, Welford b) {
  if (a.n == 0.0f) return b;
  if (b.n == 0.0f) return a;
  const float n = a.n + b.n, delta = b.mean - a.mean;
  return Welford{a.mean + delta * b.n / n, a.m2 + b.m2 + delta * delta * a.n * b.n / n, n};
}

// y = (x - mean) · rstd · w + b; returns rstd = 1/sqrt(var + eps) (biased var).
STEPC_HD float LayerNormRow(const float* x, const float* w, const float* b, int d, float eps,
                            Welford stats, float* y) {
  const float rstd = 1.0f / sqrtf(stats.m2 / stats.n + eps);
  for (int i = 0; i < d; ++i) y[i] = (x[i] - stats.mean) * rstd * w[i] + b[i];
  return rstd;
}

// dx = rstd · (g - mean(g) - x̂ · mean(g · x̂)), g = dy · w; accumulates
// dw += dy · x̂ and db += dy.
STEPC_HD void LayerNormRowGrad(const float* dy, const float* x, const float* w, int d,
                               float mean, float rstd, float* dx, float* dw, float* db) {
  float mg = 0.0f, mgx = 0.0f;
  for (int i = 0; i < d; ++i) {
    const float g = dy[i] * w[i], xhat = (x[i] - mean) * rstd;
    mg += g;
    mgx += g * xhat;
    dw[i] += dy[i] * xhat;
    db[i] += dy[i];
  }
  mg /= d;
  mgx /= d;
  for (int i = 0; i < d; ++i) {
    const float xhat = (x[i] - mean) * rstd;
    dx[i] = rstd * (dy[i] * w[i] - mg - xhat * mgx);
  }
}

}  // namespace stepc::tile

#endif  // STEPC_RUNTIME_KERNELS_CUDA_TILE_MATH_H_
