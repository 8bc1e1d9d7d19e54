// Causal grouped-query attention, memory-efficient: one query row of scores
// at a time (no T×T buffer); the backward pass recomputes the probabilities.
// Layout [B, T, H·Dh] (llm.c's). Work splits over (batch, KV head): every
// thread owns the key/value rows it accumulates into, so no atomics.

#include <cmath>
#include <cstring>
#include <vector>

#include "runtime/kernels/cpu/cpu_kernels.h"

namespace {

struct Shape {
  int64_t batch, tq, tk, heads, kv_heads, hd;
  bool causal;
  float scale;
  int64_t Q(int64_t b, int64_t t, int64_t h) const { return ((b * tq + t) * heads + h) * hd; }
  int64_t K(int64_t b, int64_t t, int64_t h) const { return ((b * tk + t) * kv_heads + h) * hd; }
  int64_t Visible(int64_t t) const { return causal ? t + 1 : tk; }
};

// p[j] = softmax_j(scale · q·k_j) over the visible keys.
void Probabilities(const Shape& s, const float* q, const float* k, int64_t b, int64_t h,
                   int64_t kvh, int64_t t, float* p) {
  const float* qt = q + s.Q(b, t, h);
  int64_t n = s.Visible(t);
  float max = -INFINITY;
  for (int64_t j = 0; j < n; ++j) {
    const float* kj = k + s.K(b, j, kvh);
    float dot = 0;
    for (int64_t c = 0; c < s.hd; ++c) dot += qt[c] * kj[c];
    p[j] = s.scale * dot;
    max = std::fmax(max, p[j]);
  }
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) {
    p[j] = std::exp(p[j] - max);
    sum += p[j];
  }
  float inv = static_cast<float>(1.0 / sum);
  for (int64_t j = 0; j < n; ++j) p[j] *= inv;
}

}  // namespace

extern "C" void stepc_cpu_attention(const float* q, const float* k, const float* v,
                                    int64_t batch, int64_t tq, int64_t tk, int64_t heads,
                                    int64_t kv_heads, int64_t head_dim, int causal,
                                    double scale, float* out) {
  Shape s{batch, tq, tk, heads, kv_heads, head_dim, causal != 0, static_cast<float>(scale)};
  int64_t group = heads / kv_heads;
#pragma omp parallel
  {
    std::vector<float> p(tk);
#pragma omp for collapse(2)
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t t = 0; t < tq; ++t) {
          Probabilities(s, q, k, b, h, h / group, t, p.data());
          float* o = out + s.Q(b, t, h);
          std::memset(o, 0, head_dim * sizeof(float));
          for (int64_t j = 0; j < s.Visible(t); ++j) {
            const float* vj = v + s.K(b, j, h / group);
            for (int64_t c = 0; c < head_dim; ++c) o[c] += p[j] * vj[c];
          }
        }
  }
}

// dV += Pᵀ dO; dP = dO Vᵀ; dS = P ∘ (dP - Σ P∘dP); dQ = scale·dS K; dK += scale·dSᵀ Q
extern "C" void stepc_cpu_attention_grad(const float* dout, const float* q, const float* k,
                                         const float* v, int64_t batch, int64_t tq,
                                         int64_t tk, int64_t heads, int64_t kv_heads,
                                         int64_t head_dim, int causal, double scale,
                                         float* dq, float* dk, float* dv) {
  Shape s{batch, tq, tk, heads, kv_heads, head_dim, causal != 0, static_cast<float>(scale)};
  int64_t group = heads / kv_heads;
  std::memset(dk, 0, batch * tk * kv_heads * head_dim * sizeof(float));
  std::memset(dv, 0, batch * tk * kv_heads * head_dim * sizeof(float));
#pragma omp parallel
  {
    std::vector<float> p(tk), dp(tk);
#pragma omp for collapse(2)
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t kvh = 0; kvh < kv_heads; ++kvh)
        for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h)
          for (int64_t t = 0; t < tq; ++t) {
            Probabilities(s, q, k, b, h, kvh, t, p.data());
            int64_t n = s.Visible(t);
            const float *dot = dout + s.Q(b, t, h), *qt = q + s.Q(b, t, h);
            double row = 0;
            for (int64_t j = 0; j < n; ++j) {
              const float* vj = v + s.K(b, j, kvh);
              float* dvj = dv + s.K(b, j, kvh);
              float acc = 0;
              for (int64_t c = 0; c < head_dim; ++c) {
                acc += dot[c] * vj[c];
                dvj[c] += p[j] * dot[c];
              }
              dp[j] = acc;
              row += static_cast<double>(p[j]) * acc;
            }
            float* dqt = dq + s.Q(b, t, h);
            std::memset(dqt, 0, head_dim * sizeof(float));
            for (int64_t j = 0; j < n; ++j) {
              float ds = p[j] * (dp[j] - static_cast<float>(row)) * s.scale;
              const float* kj = k + s.K(b, j, kvh);
              float* dkj = dk + s.K(b, j, kvh);
              for (int64_t c = 0; c < head_dim; ++c) {
                dqt[c] += ds * kj[c];
                dkj[c] += ds * qt[c];
              }
            }
          }
  }
}

// Adjacent pairs of each head rotate by t·θ_i, θ_i = theta^(-2i/Dh).
extern "C" void stepc_cpu_rotary(const float* x, int64_t batch, int64_t len, int64_t width,
                                 int64_t head_dim, double theta, int inverse, float* y) {
  std::vector<double> freq(head_dim / 2);
  for (int64_t i = 0; i < head_dim / 2; ++i)
    freq[i] = std::pow(theta, -2.0 * i / head_dim) * (inverse ? -1.0 : 1.0);
#pragma omp parallel for collapse(2)
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < len; ++t)
      for (int64_t base = 0; base < width; base += head_dim)
        for (int64_t i = 0; i < head_dim / 2; ++i) {
          double angle = t * freq[i];
          float c = static_cast<float>(std::cos(angle)), sn = static_cast<float>(std::sin(angle));
          int64_t p = (b * len + t) * width + base + 2 * i;
          float x0 = x[p], x1 = x[p + 1];
          y[p] = x0 * c - x1 * sn;
          y[p + 1] = x0 * sn + x1 * c;
        }
}
