// flash_attention_host.h - the flash-attention forward and backward of the
// CUDA kernels, run on the host tile by tile with tile_math.h: the same
// tiling, masking and online softmax as the kernel, checked against the
// reference interpreter in tile_math_test.cc. Layout [B, T, H·Dh] (step.attention).

#ifndef STEPC_RUNTIME_KERNELS_CUDA_FLASH_ATTENTION_HOST_H_
#define STEPC_RUNTIME_KERNELS_CUDA_FLASH_ATTENTION_HOST_H_

#include <algorithm>
#include <vector>

#include "runtime/kernels/cuda/tile_math.h"

namespace stepc::tile {

struct AttentionShape {
  int batch, t, heads, kv_heads, dh;
  bool causal;
  float scale;
  int q_tile, k_tile;  // Br, Bc of the kernel
  int Q(int b, int i, int h) const { return ((b * t + i) * heads + h) * dh; }
  int K(int b, int j, int h) const { return ((b * t + j) * kv_heads + h) * dh; }
};

// Forward: out and the per-(b, h, row) log-sum-exp, one key tile at a time.
inline void FlashForward(const AttentionShape& s, const float* q, const float* k, const float* v,
                         float* out, float* lse) {
  const int group = s.heads / s.kv_heads;
  std::vector<float> scores(s.k_tile), acc(s.dh);
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.heads; ++h)
      for (int q0 = 0; q0 < s.t; q0 += s.q_tile) {
        const int q1 = std::min(s.t, q0 + s.q_tile);
        for (int i = q0; i < q1; ++i) {
          RowState st = RowStart();
          std::fill(acc.begin(), acc.end(), 0.0f);
          for (int k0 = 0; k0 < s.t; k0 += s.k_tile) {
            const int k1 = std::min(s.t, k0 + s.k_tile);
            TileMask mask = s.causal ? CausalTile(q0, q1, k0, k1) : TileMask::kFull;
            if (mask == TileMask::kSkip) continue;
            for (int j = k0; j < k1; ++j) {
              float dot = 0.0f;
              for (int c = 0; c < s.dh; ++c)
                dot += q[s.Q(b, i, h) + c] * k[s.K(b, j, h / group) + c];
              bool visible = mask == TileMask::kFull || CausalVisible(i, j);
              scores[j - k0] = visible ? s.scale * dot : -INFINITY;
            }
            RowUpdate(st, scores.data(), k1 - k0, v + s.K(b, k0, h / group),
                      s.kv_heads * s.dh, s.dh, acc.data());
          }
          lse[(b * s.heads + h) * s.t + i] = RowFinish(st, acc.data(), s.dh, out + s.Q(b, i, h));
        }
      }
}

// Backward from the saved lse (no probabilities kept): per key tile,
// P = exp(S - lse), dV += Pᵀ dO, dP = dO Vᵀ, dS = P (dP - D),
// dQ += scale dS K, dK += scale dSᵀ Q.
inline void FlashBackward(const AttentionShape& s, const float* q, const float* k,
                          const float* v, const float* out, const float* lse, const float* dout,
                          float* dq, float* dk, float* dv) {
  const int group = s.heads / s.kv_heads;
  std::fill(dq, dq + s.batch * s.t * s.heads * s.dh, 0.0f);
  std::fill(dk, dk + s.batch * s.t * s.kv_heads * s.dh, 0.0f);
  std::fill(dv, dv + s.batch * s.t * s.kv_heads * s.dh, 0.0f);
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.heads; ++h)
      for (int i = 0; i < s.t; ++i) {
        const int kvh = h / group;
        const float delta = RowDelta(dout + s.Q(b, i, h), out + s.Q(b, i, h), s.dh);
        const float row_lse = lse[(b * s.heads + h) * s.t + i];
        const int q_tile0 = i / s.q_tile * s.q_tile, q_tile1 = std::min(s.t, q_tile0 + s.q_tile);
        for (int k0 = 0; k0 < s.t; k0 += s.k_tile) {
          const int k1 = std::min(s.t, k0 + s.k_tile);
          TileMask mask = s.causal ? CausalTile(q_tile0, q_tile1, k0, k1) : TileMask::kFull;
          if (mask == TileMask::kSkip) continue;
          for (int j = k0; j < k1; ++j) {
            if (mask == TileMask::kPartial && !CausalVisible(i, j)) continue;
            float dot = 0.0f, dp = 0.0f;
            for (int c = 0; c < s.dh; ++c) {
              dot += q[s.Q(b, i, h) + c] * k[s.K(b, j, kvh) + c];
              dp += dout[s.Q(b, i, h) + c] * v[s.K(b, j, kvh) + c];
            }
            const float p = ProbFromLse(s.scale * dot, row_lse);
            const float ds = ScoreGrad(p, dp, delta) * s.scale;
            for (int c = 0; c < s.dh; ++c) {
              dv[s.K(b, j, kvh) + c] += p * dout[s.Q(b, i, h) + c];
              dq[s.Q(b, i, h) + c] += ds * k[s.K(b, j, kvh) + c];
              dk[s.K(b, j, kvh) + c] += ds * q[s.Q(b, i, h) + c];
            }
          }
        }
      }
}

}  // namespace stepc::tile

#endif  // STEPC_RUNTIME_KERNELS_CUDA_FLASH_ATTENTION_HOST_H_
