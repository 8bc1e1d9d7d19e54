// Causal grouped-query attention in f32. The probabilities of one (batch,
// head) and block of query rows live in a per-thread tile and are recomputed
// in the backward pass: nothing of size B·H·T² is kept.
// Layout [B, T, H·Dh] (llm.c's). Work splits over (batch, KV head): every
// thread owns the key/value rows it accumulates into, so no atomics.
//
// The products are our own register-blocked loops, not BLAS calls: at a
// head's sizes (T x Dh with Dh = 16..128) a library call's packing and
// dispatch cost as much as its arithmetic (OpenBLAS calls per block ran
// gpt-capstone's attention at 130-160 GFLOP/s on 2 threads; these loops
// take its forward 1.86 -> 1.06 ms and backward 3.66 -> 2.34 ms per layer).
// Each product C = A B reads B and C as rows of whole vectors (16 floats on
// AVX-512, 8 on AVX2) and A one value at a time through two strides, so Q,
// dO and the transposes Pᵀ, dSᵀ are read in place; only an item's Kᵀ and Vᵀ
// are made (square blocks of one vector's width transposed in registers,
// stored in panels of 64 keys: at llama-s's 2048 keys the panels took its
// forward 192 -> 155 ms, as rows 8 KB apart had shared a few L1 sets), and
// K, V, Q and dO are copied only where the head dim is not a multiple of
// the vector width. GCC vector extensions of the target's width; the same
// sums in the same order on every thread count and at either width (a row's
// sums in 16 partial sums: RowSum). The softmax's exponential is a
// polynomial in those vectors (within 1 ulp of expf).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "runtime/kernels/cpu/cpu_kernels.h"

namespace {

struct Shape {
  int64_t batch, tq, tk, heads, kv_heads, hd;
  bool causal;
  float scale;
  // Row strides (elements) of the query (and dQ), key (dK), value (dV) and
  // output (dO) rows: H·Dh and Hkv·Dh, or a packed [B, T, 3C] source's 3C.
  int64_t ldq, ldk, ldv, ldo;
  // P and dS rounded to bf16 where they feed a product (the bf16 kernels'
  // numerics, for their fallback on widened copies).
  bool round_products = false;
  // step.attention's additive mask (a broadcast dim's stride 0), or null.
  const float* mask = nullptr;
  int64_t mask_batch = 0, mask_head = 0, mask_row = 0;
  int64_t Q(int64_t b, int64_t t, int64_t h) const { return (b * tq + t) * ldq + h * hd; }
  int64_t K(int64_t b, int64_t t, int64_t h) const { return (b * tk + t) * ldk + h * hd; }
  int64_t V(int64_t b, int64_t t, int64_t h) const { return (b * tk + t) * ldv + h * hd; }
  int64_t O(int64_t b, int64_t t, int64_t h) const { return (b * tq + t) * ldo + h * hd; }
  int64_t Visible(int64_t t) const { return causal ? std::min(t + 1, tk) : tk; }
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
// [0, t1) only, so the products skip most of the masked upper triangle.
constexpr int64_t kQueryBlock = 32;
// The target's own vector width: GCC splits a wider vector type into
// registers of the target's width but builds its broadcasts through the
// stack and spills blocks larger than the register file (16-float vectors
// on an AVX2-only CPU ran these loops 40x slower). STEPC_ATTENTION_WIDE
// forces the AVX-512 layout on any target: attention_test builds it so to
// check that both widths give the same results.
// Rows of C are taken kNarrowRows at a time where C is at most
// kNarrowVectors vectors wide, else 4 at a time.
#if defined(__AVX512F__) || defined(STEPC_ATTENTION_WIDE)
constexpr int64_t kLanes = 16;  // one zmm; 32 registers
constexpr int kMaxVectors = 4;  // a row block's vectors: 4 rows x 4 = 16 accumulators
constexpr int kNarrowRows = 8;  // 8 x 2 for C of <= 2 vectors
constexpr int64_t kNarrowVectors = 2;
#else
constexpr int64_t kLanes = 8;   // one ymm (AVX2); 16 registers
constexpr int kMaxVectors = 2;
// Every C 6 rows x 2 vectors at a time: 12 accumulators, with 2 for B and 1
// for A's value. 4 x 2 (8 accumulators) left the multiply-adds' latency
// bare: gpt-capstone's attention ran 1.45x (forward) and 1.5x (backward)
// slower on an AVX2 EPYC.
constexpr int kNarrowRows = 6;
constexpr int64_t kNarrowVectors = INT64_MAX / kLanes;
#endif

int64_t Padded(int64_t n) { return (n + kLanes - 1) / kLanes * kLanes; }
int64_t KeyExtent(const Shape& s, int64_t t1) { return s.causal ? std::min(t1, s.tk) : s.tk; }

// GCC notes that a 64-byte vector passed by value changes the ABI where the
// target lacks AVX-512: these helpers are internal and inlined, no ABI.
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float Vec __attribute__((vector_size(kLanes * sizeof(float)), aligned(4), may_alias));

typedef int32_t Mask __attribute__((vector_size(kLanes * sizeof(int32_t))));

inline Vec Load(const float* p) { return *reinterpret_cast<const Vec*>(p); }
inline void Store(float* p, Vec v) { *reinterpret_cast<Vec*>(p) = v; }
inline Vec Splat(float x) { return Vec{} + x; }
// Lanes j0 + l below n.
inline Mask Below(int64_t n, int64_t j0) {
  Mask lane;
  for (int l = 0; l < kLanes; ++l) lane[l] = l;
  return lane < static_cast<int32_t>(std::min<int64_t>(n - j0, kLanes));
}
inline float MaxOf(Vec v) {
  float m = v[0];
  for (int l = 1; l < kLanes; ++l) m = std::max(m, v[l]);
  return m;
}
// A row's sum in 16 partial sums, element j in partial j mod 16, added in
// order at the end: the same sum on every target (with 8-float vectors,
// two vectors take alternate chunks), so a step built for AVX2 and one for
// AVX-512 agree bit for bit.
constexpr int kSumParts = 16 / kLanes;
struct RowSum {
  Vec part[kSumParts];
  void Clear() {
    for (Vec& v : part) v = Vec{};
  }
  // x holds elements [j, j + kLanes) of the row.
  void Add(int64_t j, Vec x) { part[(j / kLanes) % kSumParts] += x; }
  float Total() const {
    float s = part[0][0];
    for (int e = 1; e < 16; ++e) s += part[e / kLanes][e % kLanes];
    return s;
  }
};

// eˣ for x <= 0 (a softmax's arguments) in every lane: Cephes' single-
// precision polynomial on r = x − n·ln2 (n = x·log₂e rounded, ln2 in two
// parts), scaled by 2ⁿ through the exponent bits: within 1 ulp of glibc's
// expf (every 7th float of [−87, 0] compared, AVX-512 and AVX2 builds); 0
// below −87 (where expf is subnormal or 0: nothing next to a row's 1); NaN
// for NaN (a diverged score shows in the row, as expf would show it).
inline Vec Exp(Vec x) {
  const Mask dead = x < -87.0f;
  const Vec y = dead ? Splat(-87.0f) : x;
  // n = floor(y·log₂e + ½): the conversion truncates, toward 0.
  const Vec t = y * 1.44269504088896341f + 0.5f;
  const Mask truncated = __builtin_convertvector(t, Mask);
  const Mask n = truncated - (__builtin_convertvector(truncated, Vec) > t ? 1 : 0);
  const Vec nf = __builtin_convertvector(n, Vec);
  Vec r = y - nf * 0.693359375f;
  r = r - nf * -2.12194440e-4f;
  Vec p = Splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + (r + 1.0f);
  const Vec scale = reinterpret_cast<Vec>((n + 127) << 23);
  return dead ? Splat(0.0f) : p * scale;
}

// Keeps v in a register: GCC otherwise folds a B vector's load into each
// row's multiply-add, R loads of the same vector where one will do, and on
// Zen 4/5 the loads, not the multiply-adds, bounded the products
// (gpt-capstone's attention 1.15-1.2x faster pinned). On AVX-512 only,
// where a Vec is one register: an AVX2 build ran no faster pinned.
inline void PinToRegister(Vec& v) {
#if defined(__AVX512F__)
  asm("" : "+v"(v));
#else
  (void)v;
#endif
}

// A matrix operand read one value at a time: element (i, k) at
// data[i · row + k · depth], so a transposed or strided view costs no copy.
struct Scalars {
  const float* data;
  int64_t row, depth;
};

// C[i, :] (=, or += with `accumulate`) alpha · Σ_k A[i, k] B[k, :] for R
// rows and NV vectors of columns: R × NV accumulators in registers, k in
// order (the same sums whatever the blocking around it).
template <int R, int NV>
inline void Micro(Scalars a, const float* b, int64_t ldb, int64_t depth, float* c, int64_t ldc,
                  float alpha, bool accumulate) {
  Vec acc[R][NV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = Vec{};
  for (int64_t k = 0; k < depth; ++k) {
    Vec bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      bv[v] = Load(b + k * ldb + v * kLanes);
      PinToRegister(bv[v]);
    }
    const float* ak = a.data + k * a.depth;
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const float x = ak[r * a.row];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] += x * bv[v];
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      float* out = c + r * ldc + v * kLanes;
      const Vec value = acc[r][v] * alpha;
      Store(out, accumulate ? Load(out) + value : value);
    }
}

// Rows of C in blocks of R: columns kMaxVectors vectors at a time, narrower
// at the edge.
template <int R>
void RowBlock(Scalars a, const float* b, int64_t ldb, int64_t depth, int64_t cols, float* c,
              int64_t ldc, float alpha, bool accumulate) {
  int64_t j = 0;
  if constexpr (kMaxVectors >= 4)
    for (; j + 4 * kLanes <= cols; j += 4 * kLanes)
      Micro<R, 4>(a, b + j, ldb, depth, c + j, ldc, alpha, accumulate);
  for (; j + 2 * kLanes <= cols; j += 2 * kLanes)
    Micro<R, 2>(a, b + j, ldb, depth, c + j, ldc, alpha, accumulate);
  for (; j < cols; j += kLanes)
    Micro<R, 1>(a, b + j, ldb, depth, c + j, ldc, alpha, accumulate);
}

// C = (or +=) alpha · A B: A [rows, depth], B [depth, cols] (row stride ldb),
// C [rows, cols] (ldc); cols a multiple of kLanes. Narrow C (a head's width
// of 16 or 32 on AVX-512; any C on AVX2) takes kNarrowRows rows at a time to
// fill the registers.
void Gemm(Scalars a, const float* b, int64_t ldb, int64_t rows, int64_t depth, int64_t cols,
          float* c, int64_t ldc, float alpha, bool accumulate) {
  int64_t r = 0;
  auto at = [&](int64_t i) { return Scalars{a.data + i * a.row, a.row, a.depth}; };
  if (cols <= kNarrowVectors * kLanes)
    for (; r + kNarrowRows <= rows; r += kNarrowRows)
      RowBlock<kNarrowRows>(at(r), b, ldb, depth, cols, c + r * ldc, ldc, alpha, accumulate);
  for (; r + 4 <= rows; r += 4)
    RowBlock<4>(at(r), b, ldb, depth, cols, c + r * ldc, ldc, alpha, accumulate);
  for (; r < rows; ++r)
    RowBlock<1>(at(r), b, ldb, depth, cols, c + r * ldc, ldc, alpha, accumulate);
}

// Rows [0, rows) of x (width floats, row stride ld) into out [rp, wp]
// (wp = Padded(width)), zero elsewhere.
void PackRows(const float* x, int64_t ld, int64_t rows, int64_t width, int64_t rp, float* out) {
  const int64_t wp = Padded(width);
  for (int64_t r = 0; r < rp; ++r) {
    float* row = out + r * wp;
    const int64_t n = r < rows ? width : 0;
    if (n) std::memcpy(row, x + r * ld, n * sizeof(float));
    std::fill(row + n, row + wp, 0.0f);
  }
}

// One step of a kLanes x kLanes transpose in registers: rows i and i + S
// (bit S of i clear) exchange their off-diagonal S x S blocks. The steps
// (S = 1, 2, 4[, 8]) swap the bits of the row index with those of the
// column index.
template <int S>
inline void SwapBlocks(Vec v[kLanes]) {
  Mask low, high;
  for (int e = 0; e < kLanes; ++e) {
    low[e] = (e & S) ? kLanes + e - S : e;
    high[e] = (e & S) ? kLanes + e : e + S;
  }
  for (int i = 0; i < kLanes; ++i)
    if (!(i & S)) {
      const Vec a = v[i], b = v[i + S];
      v[i] = __builtin_shuffle(a, b, low);
      v[i + S] = __builtin_shuffle(a, b, high);
    }
}

// A transposed operand (Kᵀ, Vᵀ: head dim x keys) is stored in panels of
// kPanel columns, each [Padded(hd), kPanel] contiguous: a product's column
// block then reads consecutive lines, where rows of a long key dimension
// (8 KB apart at 2048 keys) would fall into the same few L1 sets.
constexpr int64_t kPanel = 64;

int64_t PanelFloats(int64_t width) { return Padded(width) * kPanel; }
int64_t PanelsFloats(int64_t width, int64_t cols) {
  return (cols + kPanel - 1) / kPanel * PanelFloats(width);
}

// C = (or +=) alpha · A B for B stored in panels (above) of panel_floats
// floats each, kPanel columns a panel.
void PanelGemm(Scalars a, const float* panels, int64_t panel_floats, int64_t rows,
               int64_t depth, int64_t cols, float* c, int64_t ldc, float alpha,
               bool accumulate) {
  for (int64_t j0 = 0; j0 < cols; j0 += kPanel)
    Gemm(a, panels + j0 / kPanel * panel_floats, kPanel, rows, depth,
         std::min(kPanel, cols - j0), c + j0, ldc, alpha, accumulate);
}

// Rows [0, rows) of x transposed into panels (above) of `cols` columns
// (out's column i is x's row i; zero beyond rows; cols a multiple of
// kLanes), kLanes x kLanes blocks at a time.
void PackTransposed(const float* x, int64_t ld, int64_t rows, int64_t width, int64_t cols,
                    float* out) {
  for (int64_t r0 = 0; r0 < cols; r0 += kLanes)
    for (int64_t d0 = 0; d0 < width; d0 += kLanes) {
      const int64_t n = std::min<int64_t>(kLanes, width - d0);
      Vec v[kLanes];
      for (int i = 0; i < kLanes; ++i) {
        v[i] = Splat(0.0f);
        if (r0 + i >= rows) continue;
        const float* row = x + (r0 + i) * ld + d0;
        if (n == kLanes)
          v[i] = Load(row);
        else
          std::memcpy(&v[i], row, n * sizeof(float));
      }
      SwapBlocks<1>(v);
      SwapBlocks<2>(v);
      SwapBlocks<4>(v);
      if constexpr (kLanes == 16) SwapBlocks<8>(v);
      float* panel = out + r0 / kPanel * PanelFloats(width) + r0 % kPanel;
      for (int i = 0; i < kLanes; ++i) Store(panel + (d0 + i) * kPanel, v[i]);
    }
}

template <typename T>
T* Grown(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(n);
  return v.data();
}

// One thread's buffers, kept across calls.
struct Workspace {
  std::vector<float> kt, vt, kr, vr, qr, dor, p, pr, dp, o, dkr, dvr;
};

// rows x kcols of x (row stride ld) rounded to bf16 values, into `to` (may
// be x).
void RoundRows(const float* x, int64_t ld, int64_t rows, int64_t kcols, float* to) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < kcols; ++j) to[r * ld + j] = stepc_bf16_round(x[r * ld + j]);
}

Workspace& ThreadWorkspace() {
  thread_local Workspace w;
  return w;
}

// Softmax over each row's first n[i] entries of G rows (row stride ld), in
// place, zero from there to kcols. The rows side by side: each row's max and
// sum are chains of dependent operations, a group's run in parallel; each
// row's own arithmetic is the same in any grouping.
template <int G>
void SoftmaxRows(float* row, int64_t ld, const int64_t* n, int64_t kcols) {
  int64_t most = 0;
  for (int i = 0; i < G; ++i) most = std::max(most, n[i]);
  Vec high[G];
  RowSum sum[G];
  for (int i = 0; i < G; ++i) {
    high[i] = Splat(-INFINITY);
    sum[i].Clear();
  }
  for (int64_t j = 0; j < most; j += kLanes)
    for (int i = 0; i < G; ++i) {
      const Vec x = Load(row + i * ld + j);
      const Vec m = Below(n[i], j) ? x : Splat(-INFINITY);
      high[i] = high[i] > m ? high[i] : m;
    }
  float inv[G];
  // A row masked whole (max -inf) becomes zeros: exp(-inf - 0) = 0 and
  // its sum's inverse 0, where PyTorch's math would give NaN.
  for (int i = 0; i < G; ++i) {
    const float m = MaxOf(high[i]);
    high[i] = Splat(m == -INFINITY ? 0.0f : m);
  }
  for (int64_t j = 0; j < most; j += kLanes)
    for (int i = 0; i < G; ++i) {
      float* x = row + i * ld + j;
      const Vec e = Below(n[i], j) ? Exp(Load(x) - high[i]) : Splat(0.0f);
      Store(x, e);
      sum[i].Add(j, e);
    }
  for (int i = 0; i < G; ++i) {
    const float total = sum[i].Total();
    inv[i] = total > 0.0f ? 1.0f / total : 0.0f;
  }
  for (int64_t j = 0; j < kcols; j += kLanes)
    for (int i = 0; i < G; ++i) {
      float* x = row + i * ld + j;
      Store(x, j < most ? Load(x) * inv[i] : Splat(0.0f));
    }
}

// Rows [t0, t1) of P = softmax(scale · Q Kᵀ + mask) over keys [0, kend),
// into p (row stride kp; masked entries exactly 0). qh: the block's query
// rows in place (row stride ldq; the products read them one value at a
// time), kt: Kᵀ in panels (PackTransposed); (b, h) the block's batch entry
// and query head (where the mask is read).
void ProbabilityBlock(const Shape& s, const float* qh, const float* kt, int64_t kp, int64_t b,
                      int64_t h, int64_t t0, int64_t t1, float* p) {
  const int64_t kend = KeyExtent(s, t1), kcols = Padded(kend);
  PanelGemm({qh, s.ldq, 1}, kt, PanelFloats(s.hd), t1 - t0, s.hd, kcols, p, kp, s.scale, false);
  if (s.mask)
    for (int64_t t = t0; t < t1; ++t) {
      const float* m = s.mask + b * s.mask_batch + h * s.mask_head + t * s.mask_row;
      float* row = p + (t - t0) * kp;
      for (int64_t j = 0, n = s.Visible(t); j < n; ++j) row[j] += m[j];
    }
  int64_t t = t0;
  for (; t + 4 <= t1; t += 4) {
    const int64_t n[4] = {s.Visible(t), s.Visible(t + 1), s.Visible(t + 2), s.Visible(t + 3)};
    SoftmaxRows<4>(p + (t - t0) * kp, kp, n, kcols);
  }
  for (; t < t1; ++t) {
    const int64_t n[1] = {s.Visible(t)};
    SoftmaxRows<1>(p + (t - t0) * kp, kp, n, kcols);
  }
}

// dS = scale · P ∘ (dP − rowsum(P ∘ dP)) over each row's first n[i] entries
// of G rows, in dP's place, zero from there to kcols.
template <int G>
void SoftmaxGradRows(const float* p, float* dp, int64_t ld, const int64_t* n, int64_t kcols,
                     float scale) {
  int64_t most = 0;
  for (int i = 0; i < G; ++i) most = std::max(most, n[i]);
  RowSum dots[G];
  Vec dot[G];
  for (int i = 0; i < G; ++i) dots[i].Clear();
  for (int64_t j = 0; j < most; j += kLanes)
    for (int i = 0; i < G; ++i) {
      const Vec x = Load(p + i * ld + j) * Load(dp + i * ld + j);
      dots[i].Add(j, Below(n[i], j) ? x : Splat(0.0f));
    }
  for (int i = 0; i < G; ++i) dot[i] = Splat(dots[i].Total());
  for (int64_t j = 0; j < kcols; j += kLanes)
    for (int i = 0; i < G; ++i) {
      float* d = dp + i * ld + j;
      const Vec ds = Load(p + i * ld + j) * (Load(d) - dot[i]) * scale;
      Store(d, Below(n[i], j) ? ds : Splat(0.0f));
    }
}

// An item's keys and values, packed once for all its heads and blocks: Kᵀ
// and Vᵀ (the vector operands of S = Q Kᵀ and dP = dO Vᵀ), and K and V as
// rows of whole vectors (in place where the head dim is whole vectors).
struct ItemOperands {
  int64_t kp, dp;  // padded key count and head dim
  const float *kt, *vt;  // [dp, kp] in panels of kPanel columns
  const float *kr, *vr;  // rows of dp floats, strides ldkr, ldvr
  int64_t ldkr, ldvr;
};

// x's `rows` rows of hd floats as rows of dp floats: in place, or packed.
const float* Rows(const Shape& s, const float* x, int64_t ld, int64_t rows, int64_t kp,
                  std::vector<float>& packed, int64_t& stride) {
  const int64_t dp = Padded(s.hd);
  if (dp == s.hd) {
    stride = ld;
    return x;
  }
  float* out = Grown(packed, kp * dp);
  PackRows(x, ld, rows, s.hd, kp, out);
  stride = dp;
  return out;
}

ItemOperands PackItem(const Shape& s, const float* k, const float* v, int64_t b, int64_t kvh,
                      Workspace& w, bool backward) {
  ItemOperands it{};
  it.kp = Padded(s.tk);
  it.dp = Padded(s.hd);
  float* kt = Grown(w.kt, PanelsFloats(s.hd, it.kp));
  PackTransposed(k + s.K(b, 0, kvh), s.ldk, s.tk, s.hd, it.kp, kt);
  it.kt = kt;
  it.vr = Rows(s, v + s.V(b, 0, kvh), s.ldv, s.tk, it.kp, w.vr, it.ldvr);
  if (backward) {
    float* vt = Grown(w.vt, PanelsFloats(s.hd, it.kp));
    PackTransposed(v + s.V(b, 0, kvh), s.ldv, s.tk, s.hd, it.kp, vt);
    it.vt = vt;
    it.kr = Rows(s, k + s.K(b, 0, kvh), s.ldk, s.tk, it.kp, w.kr, it.ldkr);
  }
  return it;
}

// C = A B into `rows` rows of hd floats of x (row stride ld): straight
// there when hd is whole vectors, else through `tmp` [rows, Padded(hd)].
void GemmIntoRows(const Shape& s, Scalars a, const float* b, int64_t ldb, int64_t rows,
                  int64_t depth, float* x, int64_t ld, float* tmp) {
  const int64_t dp = Padded(s.hd);
  if (dp == s.hd) return Gemm(a, b, ldb, rows, depth, dp, x, ld, 1.0f, false);
  Gemm(a, b, ldb, rows, depth, dp, tmp, dp, 1.0f, false);
  for (int64_t r = 0; r < rows; ++r) std::memcpy(x + r * ld, tmp + r * dp, s.hd * sizeof(float));
}

// Per (batch, KV head) item, each head of its group and block of query
// rows: P in a per-thread tile (never all heads at once, never kept for
// backward), O = P V.
void Forward(const Shape& s, const float* q, const float* k, const float* v, float* out) {
  const int64_t group = s.heads / s.kv_heads;
#pragma omp parallel
  {
    Workspace& w = ThreadWorkspace();
#pragma omp for collapse(2) schedule(static)
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t kvh = 0; kvh < s.kv_heads; ++kvh) {
        const ItemOperands it = PackItem(s, k, v, b, kvh, w, /*backward=*/false);
        float* p = Grown(w.p, kQueryBlock * it.kp);
        float* o = Grown(w.o, kQueryBlock * it.dp);
        for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h)
          for (int64_t t0 = 0; t0 < s.tq; t0 += kQueryBlock) {
            const int64_t t1 = std::min(s.tq, t0 + kQueryBlock), rows = t1 - t0;
            ProbabilityBlock(s, q + s.Q(b, t0, h), it.kt, it.kp, b, h, t0, t1, p);
            if (s.round_products) RoundRows(p, it.kp, rows, Padded(KeyExtent(s, t1)), p);
            GemmIntoRows(s, {p, it.kp, 1}, it.vr, it.ldvr, rows, KeyExtent(s, t1),
                         out + s.O(b, t0, h), s.ldo, o);
          }
      }
  }
}

// Per (batch, KV head), each query head of the group, each block of query
// rows, with P recomputed: dV += Pᵀ dO; dP = dO Vᵀ;
// dS = scale · P ∘ (dP - rowsum(P ∘ dP)); dQ = dS K; dK += dSᵀ Q.
// Pᵀ and dSᵀ are read in place (one value at a time), dK and dV accumulate
// in the thread's buffers and are copied out once per item: every row of the
// item's dK and dV, so nothing is zeroed first.
void Backward(const Shape& s, const float* dout, const float* q, const float* k,
              const float* v, float* dq, float* dk, float* dv) {
  const int64_t group = s.heads / s.kv_heads;
#pragma omp parallel
  {
    Workspace& w = ThreadWorkspace();
#pragma omp for collapse(2) schedule(static)
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t kvh = 0; kvh < s.kv_heads; ++kvh) {
        const ItemOperands it = PackItem(s, k, v, b, kvh, w, /*backward=*/true);
        const int64_t kp = it.kp, dp = it.dp;
        float* p = Grown(w.p, kQueryBlock * kp);
        float* dpb = Grown(w.dp, kQueryBlock * kp);
        float* o = Grown(w.o, kQueryBlock * dp);
        float* dkr = Grown(w.dkr, kp * dp);
        float* dvr = Grown(w.dvr, kp * dp);
        std::fill(dkr, dkr + kp * dp, 0.0f);
        std::fill(dvr, dvr + kp * dp, 0.0f);
        for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h)
          for (int64_t t0 = 0; t0 < s.tq; t0 += kQueryBlock) {
            const int64_t t1 = std::min(s.tq, t0 + kQueryBlock), rows = t1 - t0;
            const int64_t kend = KeyExtent(s, t1), kcols = Padded(kend);
            const float* qh = q + s.Q(b, t0, h);
            const float* doh = dout + s.O(b, t0, h);
            int64_t ldqr, ldor;
            const float* qr = Rows(s, qh, s.ldq, rows, rows, w.qr, ldqr);
            const float* dor = Rows(s, doh, s.ldo, rows, rows, w.dor, ldor);
            ProbabilityBlock(s, qh, it.kt, kp, b, h, t0, t1, p);
            // dV's product reads P rounded; dS is computed from P as it is.
            const float* pv = p;
            if (s.round_products) {
              float* pr = Grown(w.pr, kQueryBlock * kp);
              RoundRows(p, kp, rows, kcols, pr);
              pv = pr;
            }
            Gemm({pv, 1, kp}, dor, ldor, kend, rows, dp, dvr, dp, 1.0f, true);
            PanelGemm({doh, s.ldo, 1}, it.vt, PanelFloats(s.hd), rows, s.hd, kcols, dpb, kp, 1.0f,
                      false);
            int64_t t = t0;
            for (; t + 4 <= t1; t += 4) {
              const int64_t n[4] = {s.Visible(t), s.Visible(t + 1), s.Visible(t + 2),
                                    s.Visible(t + 3)};
              SoftmaxGradRows<4>(p + (t - t0) * kp, dpb + (t - t0) * kp, kp, n, kcols, s.scale);
            }
            for (; t < t1; ++t) {
              const int64_t n[1] = {s.Visible(t)};
              SoftmaxGradRows<1>(p + (t - t0) * kp, dpb + (t - t0) * kp, kp, n, kcols, s.scale);
            }
            if (s.round_products) RoundRows(dpb, kp, rows, kcols, dpb);
            GemmIntoRows(s, {dpb, kp, 1}, it.kr, it.ldkr, rows, kend, dq + s.Q(b, t0, h), s.ldq,
                         o);
            Gemm({dpb, 1, kp}, qr, ldqr, kend, rows, dp, dkr, dp, 1.0f, true);
          }
        for (int64_t j = 0; j < s.tk; ++j) {
          std::memcpy(dk + s.K(b, j, kvh), dkr + j * dp, s.hd * sizeof(float));
          std::memcpy(dv + s.V(b, j, kvh), dvr + j * dp, s.hd * sizeof(float));
        }
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

// With step.attention's additive mask: its strides per batch entry, head
// and query row (0 where it broadcasts).
static Shape Masked(Shape s, const float* mask, int64_t mask_batch, int64_t mask_head,
                    int64_t mask_row) {
  s.mask = mask;
  s.mask_batch = mask_batch;
  s.mask_head = mask_head;
  s.mask_row = mask_row;
  return s;
}

extern "C" void stepc_cpu_attention_masked(const float* q, const float* k, const float* v,
                                           const float* mask, int64_t batch, int64_t tq,
                                           int64_t tk, int64_t heads, int64_t kv_heads,
                                           int64_t head_dim, int causal, double scale,
                                           int64_t mask_batch, int64_t mask_head,
                                           int64_t mask_row, float* out) {
  Forward(Masked(Separate(batch, tq, tk, heads, kv_heads, head_dim, causal, scale), mask,
                 mask_batch, mask_head, mask_row),
          q, k, v, out);
}

extern "C" void stepc_cpu_attention_grad_masked(const float* dout, const float* q,
                                                const float* k, const float* v,
                                                const float* mask, int64_t batch, int64_t tq,
                                                int64_t tk, int64_t heads, int64_t kv_heads,
                                                int64_t head_dim, int causal, double scale,
                                                int64_t mask_batch, int64_t mask_head,
                                                int64_t mask_row, float* dq, float* dk,
                                                float* dv) {
  Backward(Masked(Separate(batch, tq, tk, heads, kv_heads, head_dim, causal, scale), mask,
                  mask_batch, mask_head, mask_row),
           dout, q, k, v, dq, dk, dv);
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

// The bf16 kernels' fallback on widened copies (attention_bf16.cc): separate
// or packed operands (row strides), P and dS rounded as the bf16 kernels
// round them.
extern "C" void stepc_cpu_attention_rounded(const float* q, const float* k, const float* v,
                                            int64_t batch, int64_t tq, int64_t tk,
                                            int64_t heads, int64_t kv_heads, int64_t head_dim,
                                            int causal, double scale, int64_t ldq, int64_t ldk,
                                            int64_t ldv, float* out) {
  Shape s{batch, tq, tk, heads, kv_heads, head_dim, causal != 0, static_cast<float>(scale),
          ldq, ldk, ldv, heads * head_dim, /*round_products=*/true};
  Forward(s, q, k, v, out);
}

extern "C" void stepc_cpu_attention_grad_rounded(const float* dout, const float* q,
                                                 const float* k, const float* v, int64_t batch,
                                                 int64_t tq, int64_t tk, int64_t heads,
                                                 int64_t kv_heads, int64_t head_dim, int causal,
                                                 double scale, int64_t ldq, int64_t ldk,
                                                 int64_t ldv, float* dq, float* dk, float* dv) {
  Shape s{batch, tq, tk, heads, kv_heads, head_dim, causal != 0, static_cast<float>(scale),
          ldq, ldk, ldv, heads * head_dim, /*round_products=*/true};
  Backward(s, dout, q, k, v, dq, dk, dv);
}
