// bf16 attention as FlashAttention computes it on a GPU, here on batched
// oneDNN matmuls (oneDNN picks AMX or AVX512-BF16): bf16 Q, K, V and dO,
// f32 scores, softmax and accumulation, the probabilities P and their
// gradient dS rounded to bf16 where they feed a product (as the CUDA
// tensor-core kernels do). Work goes in chunks of (batch entries, a block of
// query rows) sized so that the f32 scores stay within a fixed scratch
// budget: the [B, H, T, T] scores are never whole (gpt2-124m's would be
// 400 MB). A causal block of query rows [t0, t1) multiplies keys [0, t1)
// only.
//
// Q, K, V and their gradients are rows of [B, T, heads·Dh]. Keys and values
// are read in place as [B, Hkv, T, Dh] views; the query-side rows of a chunk
// (Q, dO, and O, dQ on the way out) are gathered contiguous as
// [nb, Hkv, G·rows, Dh], so that a group's query heads are one matrix
// against their shared key/value head: oneDNN's fast matmuls take such 4-D
// strided operands, not a 5-D view broadcasting K over the group (that runs
// its reference code: 5 s against 6 ms for gpt-capstone's shapes). dK and
// dV sum over the group and the query blocks in f32 and are rounded once at
// the end.
//
// Where the CPU has AMX or AVX512-BF16, attention_heads.cc's kernels run
// instead (the same numerics, each head's work in one core's cache); where
// oneDNN has no bf16 matmul for this CPU, the f32 kernels run on widened
// copies with P and dS rounded as here (stepc_cpu_attention_rounded), the
// results rounded once.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "runtime/kernels/cpu/attention_bf16.h"
#include "runtime/kernels/cpu/cpu_kernels.h"
#include "runtime/kernels/cpu/onednn_matmul.h"

namespace {

using stepc::onednn::Matmul;
using stepc::onednn::Operand;
using stepc::onednn::Type;

// Bytes of f32 scores one chunk may hold.
constexpr int64_t kScoreBudget = int64_t{16} << 20;
// Query rows per block: a causal block skips the keys after its last row.
constexpr int64_t kQueryBlock = 128;

using Attention = stepc::cpu::Bf16Attention;

// Batch entries [b0, b0 + nb), query rows [t0, t1), keys [0, kend).
struct Chunk {
  int64_t b0, nb, t0, t1, kend;
  int64_t rows() const { return t1 - t0; }
};

std::vector<Chunk> Chunks(const Attention& a) {
  std::vector<Chunk> chunks;
  for (int64_t t0 = 0; t0 < a.tq; t0 += kQueryBlock) {
    const int64_t t1 = std::min(a.tq, t0 + kQueryBlock);
    const int64_t kend = a.causal ? std::min(t1, a.tk) : a.tk;
    const int64_t per_entry = a.heads * (t1 - t0) * kend * int64_t{sizeof(float)};
    const int64_t nb = std::clamp<int64_t>(kScoreBudget / per_entry, 1, a.batch);
    for (int64_t b0 = 0; b0 < a.batch; b0 += nb)
      chunks.push_back({b0, std::min(nb, a.batch - b0), t0, t1, kend});
  }
  return chunks;
}

// Keys that query row `row` of the chunk sees.
int64_t Visible(const Attention& a, const Chunk& c, int64_t row) {
  return a.causal ? std::min(c.t0 + row + 1, c.kend) : c.kend;
}

// Scratch kept per thread and grown across calls (fresh pages cost more than
// the attention itself).
template <typename T>
T* Scratch(int slot, int64_t n) {
  thread_local std::vector<T> scratch[8];
  if (static_cast<int64_t>(scratch[slot].size()) < n) scratch[slot].resize(n);
  return scratch[slot].data();
}

// Key-side rows [0, kend) of the chunk's entries in place as
// [nb, Hkv, kend, Dh], or transposed ([nb, Hkv, Dh, kend]).
Operand Keys(const Attention& a, const Chunk& c, bool transposed) {
  const int64_t ld = a.ldk;
  if (transposed)
    return {{c.nb, a.kv_heads, a.hd, c.kend}, {a.tk * ld, a.hd, 1, ld}, Type::kBf16};
  return {{c.nb, a.kv_heads, c.kend, a.hd}, {a.tk * ld, a.hd, ld, 1}, Type::kBf16};
}
int64_t KeyOffset(const Attention& a, const Chunk& c) { return c.b0 * a.tk * a.ldk; }

// The gathered query-side rows: [nb, Hkv, G·rows, Dh].
Operand Gathered(const Attention& a, const Chunk& c) {
  const int64_t m = a.group() * c.rows();
  return {{c.nb, a.kv_heads, m, a.hd}, {a.kv_heads * m * a.hd, m * a.hd, a.hd, 1},
          Type::kBf16};
}

// A contiguous [nb, Hkv, G·rows, kend] buffer of scores, or transposed
// ([nb, Hkv, kend, G·rows]).
Operand Scores(const Attention& a, const Chunk& c, Type type, bool transposed = false) {
  const int64_t m = a.group() * c.rows(), k = c.kend;
  if (transposed) return {{c.nb, a.kv_heads, k, m}, {a.kv_heads * m * k, m * k, 1, k}, type};
  return {{c.nb, a.kv_heads, m, k}, {a.kv_heads * m * k, m * k, k, 1}, type};
}

// f32 [B, Tk, Hkv·Dh] accumulators of dK and dV, viewed [nb, Hkv, kend, Dh].
Operand KeyAccumulator(const Attention& a, const Chunk& c) {
  const int64_t ld = a.kv_heads * a.hd;
  return {{c.nb, a.kv_heads, c.kend, a.hd}, {a.tk * ld, a.hd, ld, 1}, Type::kF32};
}

// Offset of query-side row t of head h of the chunk's entry b, in x (row
// stride ld) and in the gathered layout.
int64_t RowOffset(const Attention& a, const Chunk& c, int64_t ld, int64_t b, int64_t t,
                  int64_t h) {
  return ((c.b0 + b) * a.tq + c.t0 + t) * ld + h * a.hd;
}
int64_t GatheredOffset(const Attention& a, const Chunk& c, int64_t b, int64_t t, int64_t h) {
  const int64_t g = a.group();
  return (((b * a.kv_heads + h / g) * g + h % g) * c.rows() + t) * a.hd;
}

void Gather(const Attention& a, const Chunk& c, const stepc_bf16* x, int64_t ld,
            stepc_bf16* out) {
#pragma omp parallel for collapse(2)
  for (int64_t b = 0; b < c.nb; ++b)
    for (int64_t t = 0; t < c.rows(); ++t)
      for (int64_t h = 0; h < a.heads; ++h)
        std::memcpy(out + GatheredOffset(a, c, b, t, h), x + RowOffset(a, c, ld, b, t, h),
                    a.hd * sizeof(stepc_bf16));
}

void Scatter(const Attention& a, const Chunk& c, const stepc_bf16* in, stepc_bf16* x,
             int64_t ld) {
#pragma omp parallel for collapse(2)
  for (int64_t b = 0; b < c.nb; ++b)
    for (int64_t t = 0; t < c.rows(); ++t)
      for (int64_t h = 0; h < a.heads; ++h)
        std::memcpy(x + RowOffset(a, c, ld, b, t, h), in + GatheredOffset(a, c, b, t, h),
                    a.hd * sizeof(stepc_bf16));
}

// P = softmax(scale · Q Kᵀ) for the chunk from its gathered queries, in f32
// in p (the backward pass reads it) and rounded into pb; masked entries
// exactly 0. False where oneDNN has no bf16 matmul on this CPU.
bool Probabilities(const Attention& a, const Chunk& c, const stepc_bf16* qg,
                   const stepc_bf16* k, float* p, stepc_bf16* pb) {
  if (!Matmul(Gathered(a, c), qg, Keys(a, c, /*transposed=*/true), k + KeyOffset(a, c),
              Scores(a, c, Type::kF32), p, /*accumulate=*/false))
    return false;
  const int64_t lines = c.nb * a.heads * c.rows(), kend = c.kend;
#pragma omp parallel for
  for (int64_t line = 0; line < lines; ++line)
    stepc::cpu::SoftmaxRow(p + line * kend, Visible(a, c, line % c.rows()), kend, a.scale,
                           pb + line * kend);
  return true;
}

// O = P V per chunk. False where oneDNN has no bf16 matmul (nothing written).
bool Forward(const Attention& a, const stepc_bf16* q, const stepc_bf16* k, const stepc_bf16* v,
             stepc_bf16* out) {
  if (const auto engine = stepc::cpu::HeadAttentionEngine();
      engine != stepc::cpu::HeadEngine::kNone) {
    stepc::cpu::HeadAttentionForward(engine, a, q, k, v, out);
    return true;
  }
  for (const Chunk& c : Chunks(a)) {
    const int64_t n = c.nb * a.heads * c.rows() * c.kend;
    const int64_t gathered = c.nb * a.heads * c.rows() * a.hd;
    float* p = Scratch<float>(0, n);
    stepc_bf16* pb = Scratch<stepc_bf16>(0, n);
    stepc_bf16* qg = Scratch<stepc_bf16>(1, gathered);
    stepc_bf16* og = Scratch<stepc_bf16>(2, gathered);
    Gather(a, c, q, a.ldq, qg);
    if (!Probabilities(a, c, qg, k, p, pb)) return false;
    Matmul(Scores(a, c, Type::kBf16), pb, Keys(a, c, /*transposed=*/false), v + KeyOffset(a, c),
           Gathered(a, c), og, /*accumulate=*/false);
    Scatter(a, c, og, out, a.ldo);
  }
  return true;
}

void NarrowInto(const float* x, int64_t n, stepc_bf16* out) {
#pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) out[i] = stepc_f32_to_bf16(x[i]);
}

// Rows of `width` f32 rounded into rows of stride ld.
void NarrowRows(const float* x, int64_t rows, int64_t width, stepc_bf16* out, int64_t ld) {
#pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r)
#pragma omp simd
    for (int64_t j = 0; j < width; ++j) out[r * ld + j] = stepc_f32_to_bf16(x[r * width + j]);
}

// Per chunk, P recomputed: dP = dO Vᵀ; dS = scale·P∘(dP − rowsum(P∘dP));
// dQ = dS K; dK += dSᵀ Q; dV += Pᵀ dO.
bool Backward(const Attention& a, const stepc_bf16* dout, const stepc_bf16* q,
              const stepc_bf16* k, const stepc_bf16* v, stepc_bf16* dq, stepc_bf16* dk,
              stepc_bf16* dv) {
  if (const auto engine = stepc::cpu::HeadAttentionEngine();
      engine != stepc::cpu::HeadEngine::kNone) {
    stepc::cpu::HeadAttentionBackward(engine, a, dout, q, k, v, dq, dk, dv);
    return true;
  }
  const int64_t width = a.kv_heads * a.hd, key_values = a.batch * a.tk * width;
  float* dkf = Scratch<float>(2, key_values);
  float* dvf = Scratch<float>(3, key_values);
  std::memset(dkf, 0, key_values * sizeof(float));
  std::memset(dvf, 0, key_values * sizeof(float));
  for (const Chunk& c : Chunks(a)) {
    const int64_t n = c.nb * a.heads * c.rows() * c.kend;
    const int64_t gathered = c.nb * a.heads * c.rows() * a.hd;
    float* p = Scratch<float>(0, n);
    float* dp = Scratch<float>(1, n);
    stepc_bf16* pb = Scratch<stepc_bf16>(0, n);
    stepc_bf16* dsb = Scratch<stepc_bf16>(3, n);
    stepc_bf16* qg = Scratch<stepc_bf16>(1, gathered);
    stepc_bf16* dog = Scratch<stepc_bf16>(2, gathered);
    stepc_bf16* dqg = Scratch<stepc_bf16>(4, gathered);
    Gather(a, c, q, a.ldq, qg);
    Gather(a, c, dout, a.ldo, dog);
    if (!Probabilities(a, c, qg, k, p, pb)) return false;
    Matmul(Gathered(a, c), dog, Keys(a, c, /*transposed=*/true), v + KeyOffset(a, c),
           Scores(a, c, Type::kF32), dp, /*accumulate=*/false);
    const int64_t lines = c.nb * a.heads * c.rows(), kend = c.kend;
#pragma omp parallel for
    for (int64_t line = 0; line < lines; ++line)
      stepc::cpu::SoftmaxGradRow(p + line * kend, dp + line * kend,
                                 Visible(a, c, line % c.rows()), kend, a.scale, dsb + line * kend);
    Matmul(Scores(a, c, Type::kBf16), dsb, Keys(a, c, /*transposed=*/false), k + KeyOffset(a, c),
           Gathered(a, c), dqg, /*accumulate=*/false);
    Scatter(a, c, dqg, dq, a.ldq);  // dQ's rows [t0, t1): written whole, once
    const int64_t acc = c.b0 * a.tk * width;
    Matmul(Scores(a, c, Type::kBf16, /*transposed=*/true), dsb, Gathered(a, c), qg,
           KeyAccumulator(a, c), dkf + acc, /*accumulate=*/true);
    Matmul(Scores(a, c, Type::kBf16, /*transposed=*/true), pb, Gathered(a, c), dog,
           KeyAccumulator(a, c), dvf + acc, /*accumulate=*/true);
  }
  NarrowRows(dkf, a.batch * a.tk, width, dk, a.ldk);
  NarrowRows(dvf, a.batch * a.tk, width, dv, a.ldk);
  return true;
}

// The fallback's f32 copies.
float* Widen(int slot, const stepc_bf16* x, int64_t n) {
  float* out = Scratch<float>(4 + slot, n);
#pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) out[i] = stepc_bf16_to_f32(x[i]);
  return out;
}

Attention Separate(int64_t batch, int64_t tq, int64_t tk, int64_t heads, int64_t kv_heads,
                   int64_t hd, int causal, double scale) {
  return {batch, tq, tk, heads, kv_heads, hd, causal != 0, static_cast<float>(scale),
          heads * hd, kv_heads * hd, heads * hd};
}

}  // namespace

extern "C" void stepc_cpu_attention_bf16(const stepc_bf16* q, const stepc_bf16* k,
                                         const stepc_bf16* v, int64_t batch, int64_t tq,
                                         int64_t tk, int64_t heads, int64_t kv_heads,
                                         int64_t head_dim, int causal, double scale,
                                         stepc_bf16* out) {
  if (Forward(Separate(batch, tq, tk, heads, kv_heads, head_dim, causal, scale), q, k, v, out))
    return;
  const int64_t nq = batch * tq * heads * head_dim, nk = batch * tk * kv_heads * head_dim;
  float* of = Scratch<float>(3, nq);
  stepc_cpu_attention_rounded(Widen(0, q, nq), Widen(1, k, nk), Widen(2, v, nk), batch, tq, tk,
                              heads, kv_heads, head_dim, causal, scale, heads * head_dim,
                              kv_heads * head_dim, kv_heads * head_dim, of);
  NarrowInto(of, nq, out);
}

extern "C" void stepc_cpu_attention_grad_bf16(const stepc_bf16* dout, const stepc_bf16* q,
                                              const stepc_bf16* k, const stepc_bf16* v,
                                              int64_t batch, int64_t tq, int64_t tk,
                                              int64_t heads, int64_t kv_heads, int64_t head_dim,
                                              int causal, double scale, stepc_bf16* dq,
                                              stepc_bf16* dk, stepc_bf16* dv) {
  if (Backward(Separate(batch, tq, tk, heads, kv_heads, head_dim, causal, scale), dout, q, k, v,
               dq, dk, dv))
    return;
  const int64_t nq = batch * tq * heads * head_dim, nk = batch * tk * kv_heads * head_dim;
  float *dqf = Scratch<float>(0, nq), *dkf = Scratch<float>(1, nk), *dvf = Scratch<float>(2, nk);
  stepc_cpu_attention_grad_rounded(Widen(3, dout, nq), Widen(0, q, nq), Widen(1, k, nk),
                                   Widen(2, v, nk), batch, tq, tk, heads, kv_heads, head_dim,
                                   causal, scale, heads * head_dim, kv_heads * head_dim,
                                   kv_heads * head_dim, dqf, dkf, dvf);
  NarrowInto(dqf, nq, dq);
  NarrowInto(dkf, nk, dk);
  NarrowInto(dvf, nk, dv);
}

// A mask's bf16 attention: the f32 kernels on widened copies (exact
// products, results rounded once), as where oneDNN has no bf16 matmul.
extern "C" void stepc_cpu_attention_masked_bf16(const stepc_bf16* q, const stepc_bf16* k,
                                                const stepc_bf16* v, const float* mask,
                                                int64_t batch, int64_t tq, int64_t tk,
                                                int64_t heads, int64_t kv_heads,
                                                int64_t head_dim, int causal, double scale,
                                                int64_t mask_batch, int64_t mask_head,
                                                int64_t mask_row, stepc_bf16* out) {
  const int64_t nq = batch * tq * heads * head_dim, nk = batch * tk * kv_heads * head_dim;
  float* of = Scratch<float>(3, nq);
  stepc_cpu_attention_masked(Widen(0, q, nq), Widen(1, k, nk), Widen(2, v, nk), mask, batch, tq,
                             tk, heads, kv_heads, head_dim, causal, scale, mask_batch,
                             mask_head, mask_row, of);
  NarrowInto(of, nq, out);
}

extern "C" void stepc_cpu_attention_grad_masked_bf16(
    const stepc_bf16* dout, const stepc_bf16* q, const stepc_bf16* k, const stepc_bf16* v,
    const float* mask, int64_t batch, int64_t tq, int64_t tk, int64_t heads, int64_t kv_heads,
    int64_t head_dim, int causal, double scale, int64_t mask_batch, int64_t mask_head,
    int64_t mask_row, stepc_bf16* dq, stepc_bf16* dk, stepc_bf16* dv) {
  const int64_t nq = batch * tq * heads * head_dim, nk = batch * tk * kv_heads * head_dim;
  float *dqf = Scratch<float>(0, nq), *dkf = Scratch<float>(1, nk), *dvf = Scratch<float>(2, nk);
  stepc_cpu_attention_grad_masked(Widen(3, dout, nq), Widen(0, q, nq), Widen(1, k, nk),
                                  Widen(2, v, nk), mask, batch, tq, tk, heads, kv_heads,
                                  head_dim, causal, scale, mask_batch, mask_head, mask_row, dqf,
                                  dkf, dvf);
  NarrowInto(dqf, nq, dq);
  NarrowInto(dkf, nk, dk);
  NarrowInto(dvf, nk, dv);
}

// Query, key and value read in place from their columns of one bf16
// [B, T, width] tensor (compiler/lib/PackedAttention.cpp).
extern "C" void stepc_cpu_attention_packed_bf16(const stepc_bf16* qkv, int64_t batch,
                                                int64_t len, int64_t heads, int64_t kv_heads,
                                                int64_t head_dim, int causal, double scale,
                                                int64_t width, int64_t q_offset,
                                                int64_t k_offset, int64_t v_offset,
                                                stepc_bf16* out) {
  const Attention a{batch, len, len, heads, kv_heads, head_dim, causal != 0,
                    static_cast<float>(scale), width, width, heads * head_dim};
  if (Forward(a, qkv + q_offset, qkv + k_offset, qkv + v_offset, out)) return;
  const int64_t n = batch * len * width, no = batch * len * heads * head_dim;
  float* of = Scratch<float>(3, no);
  const float* x = Widen(0, qkv, n);
  stepc_cpu_attention_rounded(x + q_offset, x + k_offset, x + v_offset, batch, len, len, heads,
                              kv_heads, head_dim, causal, scale, width, width, width, of);
  NarrowInto(of, no, out);
}

// dQ, dK and dV into their columns of one bf16 [B, T, width] gradient; the
// columns tile the width (the compiler checks), so all of it is written.
extern "C" void stepc_cpu_attention_grad_packed_bf16(const stepc_bf16* dout,
                                                     const stepc_bf16* qkv, int64_t batch,
                                                     int64_t len, int64_t heads,
                                                     int64_t kv_heads, int64_t head_dim,
                                                     int causal, double scale, int64_t width,
                                                     int64_t q_offset, int64_t k_offset,
                                                     int64_t v_offset, stepc_bf16* dqkv) {
  const Attention a{batch, len, len, heads, kv_heads, head_dim, causal != 0,
                    static_cast<float>(scale), width, width, heads * head_dim};
  if (Backward(a, dout, qkv + q_offset, qkv + k_offset, qkv + v_offset, dqkv + q_offset,
               dqkv + k_offset, dqkv + v_offset))
    return;
  const int64_t n = batch * len * width, no = batch * len * heads * head_dim;
  float* df = Scratch<float>(0, n);
  const float* x = Widen(0, qkv, n);
  stepc_cpu_attention_grad_rounded(Widen(3, dout, no), x + q_offset, x + k_offset, x + v_offset,
                                   batch, len, len, heads, kv_heads, head_dim, causal, scale,
                                   width, width, width, df + q_offset, df + k_offset,
                                   df + v_offset);
  NarrowInto(df, n, dqkv);
}
