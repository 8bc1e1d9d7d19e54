// Causal grouped-query attention. The probabilities of one (batch, head) and
// block of query rows live in a per-thread tile and are recomputed in the
// backward pass: nothing of size B·H·T² is kept.
// Layout [B, T, H·Dh] (llm.c's). Work splits over (batch, KV head): every
// thread owns the key/value rows it accumulates into, so no atomics.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include <cblas.h>

#include "runtime/kernels/cpu/cpu_kernels.h"

namespace {

struct Shape {
  int64_t batch, tq, tk, heads, kv_heads, hd;
  bool causal;
  float scale;
  // Row strides (elements) of the query (and dQ), key (dK), value (dV) and
  // output (dO) rows: H·Dh and Hkv·Dh, or a packed [B, T, 3C] source's 3C.
  int64_t ldq, ldk, ldv, ldo;
  int64_t Q(int64_t b, int64_t t, int64_t h) const { return (b * tq + t) * ldq + h * hd; }
  int64_t K(int64_t b, int64_t t, int64_t h) const { return (b * tk + t) * ldk + h * hd; }
  int64_t V(int64_t b, int64_t t, int64_t h) const { return (b * tk + t) * ldv + h * hd; }
  int64_t O(int64_t b, int64_t t, int64_t h) const { return (b * tq + t) * ldo + h * hd; }
  int64_t Visible(int64_t t) const { return causal ? t + 1 : tk; }
};

Shape Separate(int64_t batch, int64_t tq, int64_t tk, int64_t heads, int64_t kv_heads,
               int64_t hd, int causal, double scale) {
  return {batch, tq, tk, heads, kv_heads, hd, causal != 0, static_cast<float>(scale),
          heads * hd, kv_heads * hd, kv_heads * hd, heads * hd};
}

Shape Packed(int64_t batch, int64_t len, int64_t heads, int64_t kv_heads, int64_t hd,
             int causal, double scale, int64_t width) {
  return {batch, len, len, heads, kv_heads, hd, causal != 0, static_cast<float>(scale),
          width, width, width, heads * hd};
}

// Causal attention works on blocks of query rows: block [t0, t1) sees keys
// [0, t1) only, so the products skip the masked upper triangle (5/8 of the
// full T×T work for T = 128).
constexpr int64_t kQueryBlock = 32;

int64_t KeyExtent(const Shape& s, int64_t t1) { return s.causal ? std::min(t1, s.tk) : s.tk; }

// Rows [t0, t1) of P = softmax(scale · Q_bh K_bkvᵀ + mask) over keys
// [0, kend), into p (row stride tk; masked entries exactly 0).
void ProbabilityBlock(const Shape& s, const float* q, const float* k, int64_t b, int64_t h,
                      int64_t kvh, int64_t t0, int64_t t1, float* p) {
  const int64_t kend = KeyExtent(s, t1);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, t1 - t0, kend, s.hd, s.scale,
              q + s.Q(b, t0, h), s.ldq, k + s.K(b, 0, kvh), s.ldk, 0.0f, p, s.tk);
  for (int64_t t = t0; t < t1; ++t) {
    float* row = p + (t - t0) * s.tk;
    int64_t n = s.Visible(t);
    // Vector reductions and libmvec's expf (cpu_kernels.h).
    float max = -INFINITY;
#pragma omp simd reduction(max : max)
    for (int64_t j = 0; j < n; ++j) max = row[j] > max ? row[j] : max;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < n; ++j) {
      row[j] = expf(row[j] - max);
      sum += row[j];
    }
    const float inv = 1.0f / sum;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) row[j] *= inv;
    for (int64_t j = n; j < kend; ++j) row[j] = 0.0f;
  }
}

// Per (batch, head) and block of query rows: P in a per-thread tile (never
// all heads at once, never kept for backward), O = P V. The products are
// OpenBLAS calls on strided head views (nested in the OpenMP loop, they run
// single-threaded).
void Forward(const Shape& s, const float* q, const float* k, const float* v, float* out) {
  const int64_t group = s.heads / s.kv_heads;
#pragma omp parallel
  {
    std::vector<float> p(kQueryBlock * s.tk);
#pragma omp for collapse(2)
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t h = 0; h < s.heads; ++h)
        for (int64_t t0 = 0; t0 < s.tq; t0 += kQueryBlock) {
          const int64_t t1 = std::min(s.tq, t0 + kQueryBlock), kend = KeyExtent(s, t1);
          ProbabilityBlock(s, q, k, b, h, h / group, t0, t1, p.data());
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, t1 - t0, s.hd, kend, 1.0f,
                      p.data(), s.tk, v + s.V(b, 0, h / group), s.ldv, 0.0f,
                      out + s.O(b, t0, h), s.ldo);
        }
  }
}

// Per (batch, KV head), each query head of the group, each block of query
// rows, with P recomputed: dV += Pᵀ dO; dP = dO Vᵀ;
// dS = scale · P ∘ (dP - rowsum(P ∘ dP)); dQ = dS K; dK += dSᵀ Q.
// A thread owns its KV head's dK, dV: no atomics. dQ is written whole
// (every row of every head), dK and dV are zeroed first.
void Backward(const Shape& s, const float* dout, const float* q, const float* k,
              const float* v, float* dq, float* dk, float* dv) {
  const int64_t group = s.heads / s.kv_heads, width = s.kv_heads * s.hd;
  for (int64_t r = 0; r < s.batch * s.tk; ++r) {
    std::memset(dk + r * s.ldk, 0, width * sizeof(float));
    std::memset(dv + r * s.ldv, 0, width * sizeof(float));
  }
#pragma omp parallel
  {
    std::vector<float> p(kQueryBlock * s.tk), dp(kQueryBlock * s.tk);
#pragma omp for collapse(2)
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t kvh = 0; kvh < s.kv_heads; ++kvh)
        for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h)
          for (int64_t t0 = 0; t0 < s.tq; t0 += kQueryBlock) {
            const int64_t t1 = std::min(s.tq, t0 + kQueryBlock), rows = t1 - t0;
            const int64_t kend = KeyExtent(s, t1), tk = s.tk;
            ProbabilityBlock(s, q, k, b, h, kvh, t0, t1, p.data());
            const float* dO = dout + s.O(b, t0, h);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, kend, s.hd, rows, 1.0f,
                        p.data(), tk, dO, s.ldo, 1.0f, dv + s.V(b, 0, kvh), s.ldv);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, kend, s.hd, 1.0f, dO,
                        s.ldo, v + s.V(b, 0, kvh), s.ldv, 0.0f, dp.data(), tk);
            for (int64_t t = t0; t < t1; ++t) {
              float* pr = p.data() + (t - t0) * tk;
              float* dr = dp.data() + (t - t0) * tk;
              int64_t n = s.Visible(t);
              float r = 0.0f;
#pragma omp simd reduction(+ : r)
              for (int64_t j = 0; j < n; ++j) r += pr[j] * dr[j];
#pragma omp simd
              for (int64_t j = 0; j < n; ++j) dr[j] = pr[j] * (dr[j] - r) * s.scale;
              for (int64_t j = n; j < kend; ++j) dr[j] = 0.0f;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, s.hd, kend, 1.0f,
                        dp.data(), tk, k + s.K(b, 0, kvh), s.ldk, 0.0f, dq + s.Q(b, t0, h),
                        s.ldq);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, kend, s.hd, rows, 1.0f,
                        dp.data(), tk, q + s.Q(b, t0, h), s.ldq, 1.0f, dk + s.K(b, 0, kvh),
                        s.ldk);
          }
  }
}

}  // namespace

extern "C" void stepc_cpu_attention(const float* q, const float* k, const float* v,
                                    int64_t batch, int64_t tq, int64_t tk, int64_t heads,
                                    int64_t kv_heads, int64_t head_dim, int causal,
                                    double scale, float* out) {
  Forward(Separate(batch, tq, tk, heads, kv_heads, head_dim, causal, scale), q, k, v, out);
}

extern "C" void stepc_cpu_attention_grad(const float* dout, const float* q, const float* k,
                                         const float* v, int64_t batch, int64_t tq,
                                         int64_t tk, int64_t heads, int64_t kv_heads,
                                         int64_t head_dim, int causal, double scale,
                                         float* dq, float* dk, float* dv) {
  Backward(Separate(batch, tq, tk, heads, kv_heads, head_dim, causal, scale), dout, q, k, v,
           dq, dk, dv);
}

// Query, key and value read in place from their columns of one [B, T, width]
// tensor (compiler/lib/PackedAttention.cpp).
extern "C" void stepc_cpu_attention_packed(const float* qkv, int64_t batch, int64_t len,
                                           int64_t heads, int64_t kv_heads, int64_t head_dim,
                                           int causal, double scale, int64_t width,
                                           int64_t q_offset, int64_t k_offset,
                                           int64_t v_offset, float* out) {
  Forward(Packed(batch, len, heads, kv_heads, head_dim, causal, scale, width), qkv + q_offset,
          qkv + k_offset, qkv + v_offset, out);
}

// dQ, dK and dV into their columns of one [B, T, width] gradient; the
// columns tile the width (the compiler checks), so all of it is written.
extern "C" void stepc_cpu_attention_grad_packed(const float* dout, const float* qkv,
                                                int64_t batch, int64_t len, int64_t heads,
                                                int64_t kv_heads, int64_t head_dim,
                                                int causal, double scale, int64_t width,
                                                int64_t q_offset, int64_t k_offset,
                                                int64_t v_offset, float* dqkv) {
  Backward(Packed(batch, len, heads, kv_heads, head_dim, causal, scale, width), dout,
           qkv + q_offset, qkv + k_offset, qkv + v_offset, dqkv + q_offset, dqkv + k_offset,
           dqkv + v_offset);
}
