// The bf16 attention kernels' shared description of one call, and the
// per-head implementation (attention_heads.cc: AMX tiles or AVX512-BF16 dot
// products) that attention_bf16.cc runs where the CPU has either.
#ifndef STEPC_RUNTIME_KERNELS_CPU_ATTENTION_BF16_H_
#define STEPC_RUNTIME_KERNELS_CPU_ATTENTION_BF16_H_

#include <cmath>
#include <cstdint>

#include "runtime/kernels/cpu/cpu_kernels.h"

namespace stepc::cpu {

struct Bf16Attention {
  int64_t batch, tq, tk, heads, kv_heads, hd;
  bool causal;
  float scale;
  // Row strides of Q and dQ, of K, V, dK and dV, and of O and dO: H·Dh and
  // Hkv·Dh, or a packed [B, T, width] source's width for Q, K and V.
  int64_t ldq, ldk, ldo;
  int64_t group() const { return heads / kv_heads; }
};

// `n` f32 rounded to bf16, one at a time (the AMX path rounds 16 at a time,
// to the same values).
inline void RoundRowToBf16(const float* x, int64_t n, stepc_bf16* out) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) out[j] = stepc_f32_to_bf16(x[j]);
}

// One row of P = softmax(scale · s) over its first n entries: in f32 in
// place, and rounded into out (by `round`), which is zero from n to width.
template <typename Round = decltype(&RoundRowToBf16)>
inline void SoftmaxRow(float* row, int64_t n, int64_t width, float scale, stepc_bf16* out,
                       Round round = RoundRowToBf16) {
  float shift = -INFINITY;
#pragma omp simd reduction(max : shift)
  for (int64_t j = 0; j < n; ++j) shift = row[j] * scale > shift ? row[j] * scale : shift;
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) {
    row[j] = expf(row[j] * scale - shift);
    sum += row[j];
  }
  const float inv = 1.0f / sum;
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) row[j] *= inv;
  round(row, n, out);
  for (int64_t j = n; j < width; ++j) out[j] = 0;
}

// One row of dS = scale · P∘(dP − Σ P∘dP) over its first n entries: in f32
// in dp's place, and rounded into out (by `round`), which is zero from n to
// width.
template <typename Round = decltype(&RoundRowToBf16)>
inline void SoftmaxGradRow(const float* p, float* dp, int64_t n, int64_t width, float scale,
                           stepc_bf16* out, Round round = RoundRowToBf16) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) sum += p[j] * dp[j];
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) dp[j] = p[j] * (dp[j] - sum) * scale;
  round(dp, n, out);
  for (int64_t j = n; j < width; ++j) out[j] = 0;
}

// The engine of the per-head kernels on this CPU: AMX tiles where it has them
// for bf16 and the kernel let this process use them (arch_prctl
// ARCH_REQ_XCOMP_PERM), else AVX512-BF16 dot products where it has those,
// else none (oneDNN's batched matmuls run). STEPC_ATTENTION=onednn asks for
// none, STEPC_ATTENTION=avx512 for the dot products on an AMX CPU too.
enum class HeadEngine { kNone, kAmx, kAvx512Bf16 };
HeadEngine HeadAttentionEngine();
// x rounded to bf16 16 at a time (vcvtneps2bf16), equal to
// stepc_f32_to_bf16 bit for bit. Call only where HeadAttentionEngine() is
// not kNone.
void RoundToBf16Avx512(const float* x, int64_t n, stepc_bf16* out);
// The attention with each (batch entry, KV head) on one thread, its
// operands in that core's cache, on `engine` (not kNone). Same numerics as
// the oneDNN path: bf16 products accumulated in f32, P and dS rounded to
// bf16 before their products.
void HeadAttentionForward(HeadEngine engine, const Bf16Attention& a, const stepc_bf16* q,
                          const stepc_bf16* k, const stepc_bf16* v, stepc_bf16* out);
void HeadAttentionBackward(HeadEngine engine, const Bf16Attention& a, const stepc_bf16* dout,
                           const stepc_bf16* q, const stepc_bf16* k, const stepc_bf16* v,
                           stepc_bf16* dq, stepc_bf16* dk, stepc_bf16* dv);
}  // namespace stepc::cpu

#endif  // STEPC_RUNTIME_KERNELS_CPU_ATTENTION_BF16_H_
