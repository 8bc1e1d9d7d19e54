// bf16 attention one (batch entry, KV head) at a time, in one core's cache.
// oneDNN's batched matmuls (attention_bf16.cc) run each product over all
// heads at once, so the f32 scores of a chunk leave the cores' caches
// between the product, the softmax and the next product, and a call per head
// costs microseconds of oneDNN overhead: a 128 x 128 x 32 product is ~1.7 us
// of work. Here one thread takes one (batch entry, KV head) at a time, its
// heads and blocks of query rows in turn, on operands it packed itself, all
// of it in that core's L1/L2. Masked (causal) blocks are skipped.
//
// Two engines run the products on the same packed operands: AMX tiles
// (tdpbf16ps over 16 x 16 tiles) where the CPU has them, else AVX512-BF16
// dot products (vdpbf16ps, 16 lanes at a time). Both accumulate the bf16
// pairs in f32; the packing, softmax and roundings are shared.
//
// Layouts: an A operand is bf16 rows (K contiguous, padded to 32); a B
// operand is "pair-interleaved" (VNNI): element (k, n) at
// [(k / 2) * ldb + n] * 2 + k % 2, as a tile row holds 16 columns of 2
// consecutive k. Padding is zero, so padded rows and columns add nothing.

#include "runtime/kernels/cpu/attention_bf16.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace stepc::cpu {

#if defined(__x86_64__)

namespace {

using bf16 = stepc_bf16;

// Query rows per block (a multiple of 32: the block is the K dimension of
// the dK and dV products).
constexpr int64_t kQueryBlock = 64;

int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// The row stride of the per-key buffers (Kᵀ and Vᵀ as pairs, dKᵀ and dVᵀ in
// f32): the keys rounded up to 32, plus 32. A product walks 8-32 of their
// rows at once; at a power-of-two stride (2048 keys: 8 KB) those rows share
// one L1 set and evicted each other (llama-s's attention: the B loads of
// S = Q Kᵀ were the hottest instructions).
int64_t KeyStride(int64_t tk) { return RoundUp(tk, 32) + 32; }

// The tile instructions as inline assembly with their memory effects
// stated: GCC 12's intrinsics tell the compiler that ldtilecfg reads 8 bytes
// of the 64-byte configuration (so the stores of the rest are dropped) and
// that tile loads and stores touch no memory.
#define STEPC_TILE_LOAD(t, base, stride) \
  asm volatile("tileloadd (%0,%1,1), %%tmm" #t ::"r"(base), "r"((long)(stride)) : "memory")
#define STEPC_TILE_STORE(t, base, stride) \
  asm volatile("tilestored %%tmm" #t ", (%0,%1,1)" ::"r"(base), "r"((long)(stride)) : "memory")
#define STEPC_TILE_ZERO(t) asm volatile("tilezero %%tmm" #t ::)
// tmm[c] += tmm[a] · tmm[b] over bf16 pairs, accumulated in f32.
#define STEPC_TILE_DPBF16PS(c, a, b) asm volatile("tdpbf16ps %%tmm" #b ", %%tmm" #a ", %%tmm" #c ::)

// Tiles 0-3 a 2 x 2 block of accumulators, 4-5 two A operands, 6-7 two B
// operands: 16 rows of 64 bytes each (16 f32, or 32 bf16 = 16 pairs).
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

void ConfigureTiles() {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.colsb[t] = 64;
    config.rows[t] = 16;
  }
  asm volatile("ldtilecfg %0" ::"m"(config) : "memory");
}

void ReleaseTiles() { asm volatile("tilerelease" ::: "memory"); }

// C = (or +=) A B for M rows, M and every column count multiples of 32, in
// 32 x 32 blocks of four tiles (each A and B tile loaded once per block, not
// per tile). Row tile i (rows i..i+15) needs columns [0, cols(i)), and its
// tile at column j the K range krange(i, j): what a causal mask leaves of
// the product. A block computes the union of its tiles' needs; what lies
// outside a tile's own is zero in the operands (masked probabilities and
// their gradients are stored as zeros), so it adds nothing.
template <typename Cols, typename KRange>
void TileMatmul(const bf16* a, int64_t lda, const bf16* b, int64_t ldb, float* c, int64_t ldc,
                int64_t m, Cols cols, KRange krange, bool accumulate) {
  for (int64_t i = 0; i < m; i += 32) {
    const int64_t n = RoundUp(std::max(cols(i), cols(i + 16)), 32);
    for (int64_t j = 0; j < n; j += 32) {
      int64_t k0 = INT64_MAX, k1 = 0;
      for (int64_t di : {0, 16})
        for (int64_t dj : {0, 16}) {
          const auto [t0, t1] = krange(i + di, j + dj);
          k0 = std::min(k0, t0);
          k1 = std::max(k1, t1);
        }
      float* c00 = c + i * ldc + j;
      float* c10 = c00 + 16 * ldc;
      if (accumulate) {
        STEPC_TILE_LOAD(0, c00, ldc * 4);
        STEPC_TILE_LOAD(1, c00 + 16, ldc * 4);
        STEPC_TILE_LOAD(2, c10, ldc * 4);
        STEPC_TILE_LOAD(3, c10 + 16, ldc * 4);
      } else {
        STEPC_TILE_ZERO(0);
        STEPC_TILE_ZERO(1);
        STEPC_TILE_ZERO(2);
        STEPC_TILE_ZERO(3);
      }
      for (int64_t kk = k0; kk < k1; kk += 32) {
        const bf16* a0 = a + i * lda + kk;
        const bf16* b0 = b + ((kk / 2) * ldb + j) * 2;
        STEPC_TILE_LOAD(4, a0, lda * 2);
        STEPC_TILE_LOAD(5, a0 + 16 * lda, lda * 2);
        STEPC_TILE_LOAD(6, b0, ldb * 4);
        STEPC_TILE_LOAD(7, b0 + 32, ldb * 4);
        STEPC_TILE_DPBF16PS(0, 4, 6);
        STEPC_TILE_DPBF16PS(1, 4, 7);
        STEPC_TILE_DPBF16PS(2, 5, 6);
        STEPC_TILE_DPBF16PS(3, 5, 7);
      }
      STEPC_TILE_STORE(0, c00, ldc * 4);
      STEPC_TILE_STORE(1, c00 + 16, ldc * 4);
      STEPC_TILE_STORE(2, c10, ldc * 4);
      STEPC_TILE_STORE(3, c10 + 16, ldc * 4);
    }
  }
}

// Both engines need AVX-512 (F, BW, VL, DQ, BF16; every CPU with AMX has
// it): the kernels' packing transposes and roundings use it 16 lanes at a
// time, whatever -march the library is built for (the baseline library is
// x86-64-v3).
#define STEPC_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

// TileMatmul's product on AVX512-BF16 dot products, for CPUs without AMX:
// vdpbf16ps adds to each of 16 f32 lanes the dot of a bf16 pair of A (one
// row's k, k + 1, broadcast) with that lane's pair of a B pair row, so B's
// tile layout serves as it is. Blocks of 8 rows x 32 columns: 16
// accumulators, enough independent sums to cover the instruction's latency,
// kept in registers across the block's K range. Row tile i's K range is the
// union of its two 16-column tiles' (zero operands outside each one's own).
template <typename Cols, typename KRange>
STEPC_AVX512 void DotMatmul(const bf16* a, int64_t lda, const bf16* b, int64_t ldb, float* c,
                            int64_t ldc, int64_t m, Cols cols, KRange krange, bool accumulate) {
  constexpr int kRows = 8;
  for (int64_t i = 0; i < m; i += 16) {
    const int64_t n = RoundUp(cols(i), 32);
    for (int64_t j = 0; j < n; j += 32) {
      const auto [l0, l1] = krange(i, j);
      const auto [r0, r1] = krange(i, j + 16);
      const int64_t k0 = std::min(l0, r0), k1 = std::max(l1, r1);
      for (int64_t row = i; row < i + 16; row += kRows) {
        float* cr = c + row * ldc + j;
        const bf16* ar = a + row * lda;
        __m512 acc[kRows][2];
        for (int t = 0; t < kRows; ++t)
          for (int h = 0; h < 2; ++h)
            acc[t][h] = accumulate ? _mm512_loadu_ps(cr + t * ldc + 16 * h) : _mm512_setzero_ps();
        for (int64_t kk = k0; kk < k1; kk += 2) {
          const bf16* bp = b + ((kk / 2) * ldb + j) * 2;
          const __m512bh b0 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(bp));
          const __m512bh b1 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(bp + 32));
          for (int t = 0; t < kRows; ++t) {
            int32_t pair;
            std::memcpy(&pair, ar + t * lda + kk, sizeof pair);
            const __m512bh av = reinterpret_cast<__m512bh>(_mm512_set1_epi32(pair));
            acc[t][0] = _mm512_dpbf16_ps(acc[t][0], av, b0);
            acc[t][1] = _mm512_dpbf16_ps(acc[t][1], av, b1);
          }
        }
        for (int t = 0; t < kRows; ++t)
          for (int h = 0; h < 2; ++h) _mm512_storeu_ps(cr + t * ldc + 16 * h, acc[t][h]);
      }
    }
  }
}

// C = (or +=) A B on the workspace's engine (TileMatmul's contract).
template <typename Cols, typename KRange>
STEPC_AVX512 void Matmul(bool amx, const bf16* a, int64_t lda, const bf16* b, int64_t ldb,
                         float* c, int64_t ldc, int64_t m, Cols cols, KRange krange,
                         bool accumulate) {
  if (amx)
    TileMatmul(a, lda, b, ldb, c, ldc, m, cols, krange, accumulate);
  else
    DotMatmul(a, lda, b, ldb, c, ldc, m, cols, krange, accumulate);
}

// eˣ in every lane: Cephes' single-precision polynomial on r = x − n·ln2
// (n = round(x·log₂e), ln2 in two parts), scaled by 2ⁿ with vscalefps: within
// 2 ulp of expf, 0 below −104 (where expf is 0 or a few subnormal ulps),
// NaN for NaN.
STEPC_AVX512 inline __m512 Exp(__m512 x) {
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  const __mmask16 live = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-104.0f), _CMP_NLT_UQ);
  return _mm512_maskz_scalef_ps(live, p, n);
}

// Lanes [0, n) of a vector, none for n <= 0.
inline __mmask16 LanesBelow(int64_t n) { return n >= 16 ? 0xffff : n <= 0 ? 0 : (1u << n) - 1; }

// v rounded to bf16, zero outside `lanes`: vcvtneps2bf16 rounds to nearest
// even and quiets NaNs as stepc_f32_to_bf16 does, but flushes subnormal
// inputs to zero where stepc_f32_to_bf16 rounds them, so a vector holding
// one goes lane by lane: bit for bit stepc_f32_to_bf16's result.
STEPC_AVX512 inline __m256i Rounded(__m512 v, __mmask16 lanes) {
  __m256i h = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v));
  if (_mm512_mask_fpclass_ps_mask(lanes, v, 0x20)) {  // 0x20: subnormal
    alignas(64) float f[16];
    alignas(32) bf16 b[16];
    _mm512_store_ps(f, v);
    for (int i = 0; i < 16; ++i) b[i] = stepc_f32_to_bf16(f[i]);
    h = _mm256_load_si256(reinterpret_cast<const __m256i*>(b));
  }
  return _mm256_maskz_mov_epi16(lanes, h);
}

// x rounded to bf16 16 at a time, bit for bit stepc_f32_to_bf16.
STEPC_AVX512 void RoundToBf16(const float* x, int64_t n, bf16* out) {
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 lanes = LanesBelow(n - j);
    _mm256_mask_storeu_epi16(out + j, lanes, Rounded(_mm512_maskz_loadu_ps(lanes, x + j), lanes));
  }
}

// 16 rounded values of row `low` and of the next row as the 16 words of a
// pair row (a B operand with k = row: PackPairsOfRows' layout).
STEPC_AVX512 inline void StorePairs(__m256i low, __m256i high, bf16* out) {
  const __m512i pairs = _mm512_or_si512(_mm512_cvtepu16_epi32(low),
                                        _mm512_slli_epi32(_mm512_cvtepu16_epi32(high), 16));
  _mm512_storeu_si512(out, pairs);
}

// Rounded rows of a block: one bf16 row per row (an A operand), or pairs of
// rows interleaved (a B operand with k = row) for the dK and dV products.
enum class RowLayout { kRows, kPairs };

// The rounded values of a group of kRowGroup rows, 16 columns from j, into
// `out` (row stride ld) in `layout`.
STEPC_AVX512 inline void StoreGroup(const __m256i* h, int kRows, RowLayout layout, bf16* out,
                                    int64_t ld, int64_t j) {
  if (layout == RowLayout::kRows) {
    for (int i = 0; i < kRows; ++i)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i * ld + j), h[i]);
  } else {
    for (int i = 0; i < kRows; i += 2) StorePairs(h[i], h[i + 1], out + (i / 2 * ld + j) * 2);
  }
}

// Rows handled together by the softmax loops: one row alone is a chain of
// dependent reductions (max, sum) that leaves the vector units idle; each
// row's own arithmetic is the same in any grouping.
constexpr int kRowGroup = 4;

// SoftmaxRow (attention_bf16.h) 16 lanes at a time, for rows [0, rows) (a
// multiple of kRowGroup) of a block's scores (row stride ld): row r's P =
// softmax(scale · s) over its first visible(r) entries, rounded into out in
// `layout` (zero from there to width, a multiple of 16) and, if `keep`, in
// f32 in s's place (which otherwise holds the exponentials).
template <typename Visible>
STEPC_AVX512 void SoftmaxRows(float* s, int64_t ld, int64_t rows, Visible visible, int64_t width,
                              float scale, RowLayout layout, bf16* out, bool keep) {
  const __m512 vscale = _mm512_set1_ps(scale), none = _mm512_set1_ps(-INFINITY);
  for (int64_t r0 = 0; r0 < rows; r0 += kRowGroup) {
    int64_t n[kRowGroup], most = 0;
    __m512 high[kRowGroup], sum[kRowGroup];
    for (int i = 0; i < kRowGroup; ++i) {
      n[i] = visible(r0 + i);
      most = std::max(most, n[i]);
      high[i] = none;
      sum[i] = _mm512_setzero_ps();
    }
    float* row = s + r0 * ld;
    for (int64_t j = 0; j < most; j += 16)
      for (int i = 0; i < kRowGroup; ++i)
        high[i] = _mm512_max_ps(
            high[i], _mm512_mul_ps(_mm512_mask_loadu_ps(none, LanesBelow(n[i] - j), row + i * ld + j),
                                   vscale));
    for (int i = 0; i < kRowGroup; ++i) high[i] = _mm512_set1_ps(_mm512_reduce_max_ps(high[i]));
    for (int64_t j = 0; j < most; j += 16)
      for (int i = 0; i < kRowGroup; ++i) {
        const __mmask16 lanes = LanesBelow(n[i] - j);
        const __m512 e =
            Exp(_mm512_fmsub_ps(_mm512_maskz_loadu_ps(lanes, row + i * ld + j), vscale, high[i]));
        _mm512_mask_storeu_ps(row + i * ld + j, lanes, e);
        sum[i] = _mm512_mask_add_ps(sum[i], lanes, sum[i], e);
      }
    for (int i = 0; i < kRowGroup; ++i) sum[i] = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum[i]));
    for (int64_t j = 0; j < width; j += 16) {
      __m256i h[kRowGroup];
      for (int i = 0; i < kRowGroup; ++i) {
        const __mmask16 lanes = LanesBelow(n[i] - j);
        const __m512 p = _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes, row + i * ld + j), sum[i]);
        if (keep) _mm512_mask_storeu_ps(row + i * ld + j, lanes, p);
        h[i] = Rounded(p, lanes);
      }
      StoreGroup(h, kRowGroup, layout, out + r0 * ld, ld, j);
    }
  }
}

// SoftmaxGradRow (attention_bf16.h) 16 lanes at a time, for rows [0, rows)
// (a multiple of kRowGroup): row r's dS = scale · P∘(dP − Σ P∘dP) over its
// first visible(r) entries, from f32 P and dP (row stride ld), rounded into
// `rows_out` and as pairs of rows into `pairs_out` (zero from there to width).
template <typename Visible>
STEPC_AVX512 void SoftmaxGradRows(const float* p, const float* dp, int64_t ld, int64_t rows,
                                  Visible visible, int64_t width, float scale, bf16* rows_out,
                                  bf16* pairs_out) {
  const __m512 vscale = _mm512_set1_ps(scale);
  for (int64_t r0 = 0; r0 < rows; r0 += kRowGroup) {
    int64_t n[kRowGroup], most = 0;
    __m512 dot[kRowGroup];
    for (int i = 0; i < kRowGroup; ++i) {
      n[i] = visible(r0 + i);
      most = std::max(most, n[i]);
      dot[i] = _mm512_setzero_ps();
    }
    const float *prow = p + r0 * ld, *dprow = dp + r0 * ld;
    for (int64_t j = 0; j < most; j += 16)
      for (int i = 0; i < kRowGroup; ++i) {
        const __mmask16 lanes = LanesBelow(n[i] - j);
        dot[i] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(lanes, prow + i * ld + j),
                                 _mm512_maskz_loadu_ps(lanes, dprow + i * ld + j), dot[i]);
      }
    for (int i = 0; i < kRowGroup; ++i) dot[i] = _mm512_set1_ps(_mm512_reduce_add_ps(dot[i]));
    for (int64_t j = 0; j < width; j += 16) {
      __m256i h[kRowGroup];
      for (int i = 0; i < kRowGroup; ++i) {
        const __mmask16 lanes = LanesBelow(n[i] - j);
        const __m512 pv = _mm512_maskz_loadu_ps(lanes, prow + i * ld + j);
        const __m512 dpv = _mm512_maskz_loadu_ps(lanes, dprow + i * ld + j);
        h[i] = Rounded(_mm512_mul_ps(_mm512_mul_ps(pv, _mm512_sub_ps(dpv, dot[i])), vscale), lanes);
      }
      StoreGroup(h, kRowGroup, RowLayout::kRows, rows_out + r0 * ld, ld, j);
      StoreGroup(h, kRowGroup, RowLayout::kPairs, pairs_out + r0 * ld, ld, j);
    }
  }
}

// A 16 x 16 block of 32-bit words transposed in registers: v[i] becomes
// column i of the block.
STEPC_AVX512 inline void Transpose16x16(__m512i v[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {  // 2 x 2 blocks of words within each 128-bit lane
    t[i] = _mm512_unpacklo_epi32(v[i], v[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(v[i], v[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {  // 4 x 4 blocks within each lane
    v[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    v[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    v[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    v[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int i = 0; i < 16; i += 8)  // lanes 0 and 2, 1 and 3 of rows 4 apart
    for (int j = 0; j < 4; ++j) {
      t[i + j] = _mm512_shuffle_i32x4(v[i + j], v[i + j + 4], 0x88);
      t[i + j + 4] = _mm512_shuffle_i32x4(v[i + j], v[i + j + 4], 0xdd);
    }
  for (int j = 0; j < 8; ++j) {  // then lane halves of rows 8 apart
    v[j] = _mm512_shuffle_i32x4(t[j], t[j + 8], 0x88);
    v[j + 8] = _mm512_shuffle_i32x4(t[j], t[j + 8], 0xdd);
  }
}

// out[c][r] = in[r][c] for r < rows, c < cols, of 32-bit words; row strides
// in bytes (a bf16 pair is a word wherever it starts).
STEPC_AVX512 void Transpose32(const void* in, int64_t in_stride, int64_t rows, int64_t cols,
                              void* out, int64_t out_stride) {
  const char* src = static_cast<const char*>(in);
  char* dst = static_cast<char*>(out);
  for (int64_t r0 = 0; r0 < rows; r0 += 16) {
    const int64_t nr = std::min<int64_t>(16, rows - r0);
    const __mmask16 row_lanes = nr == 16 ? 0xffff : (1u << nr) - 1;
    for (int64_t c0 = 0; c0 < cols; c0 += 16) {
      const int64_t nc = std::min<int64_t>(16, cols - c0);
      const __mmask16 col_lanes = nc == 16 ? 0xffff : (1u << nc) - 1;
      __m512i v[16];
      for (int64_t i = 0; i < 16; ++i)
        v[i] = i < nr ? _mm512_maskz_loadu_epi32(col_lanes, src + (r0 + i) * in_stride + c0 * 4)
                      : _mm512_setzero_si512();
      Transpose16x16(v);
      for (int64_t c = 0; c < nc; ++c)
        _mm512_mask_storeu_epi32(dst + (c0 + c) * out_stride + r0 * 4, row_lanes, v[c]);
    }
  }
}

// `rows` rows of `width` bf16 from x (row stride ld) as an A operand: rp x wp,
// zero padded.
void PackRows(const bf16* x, int64_t ld, int64_t rows, int64_t width, int64_t rp, int64_t wp,
              bf16* out) {
  for (int64_t r = 0; r < rp; ++r) {
    bf16* row = out + r * wp;
    int64_t copied = r < rows ? width : 0;
    if (copied) std::memcpy(row, x + r * ld, width * sizeof(bf16));
    std::memset(row + copied, 0, (wp - copied) * sizeof(bf16));
  }
}

// Two bf16 as the 32-bit pair a B tile row holds: `low` at the lower address.
inline uint32_t Pair(bf16 low, bf16 high) { return low | static_cast<uint32_t>(high) << 16; }

// `rows` rows (stride ld) as a B operand with k = row, n = column: rows 2i
// and 2i + 1 interleaved into pair row i (rp/2 x wp pairs, zero padded).
void PackPairsOfRows(const bf16* x, int64_t ld, int64_t rows, int64_t width, int64_t rp,
                     int64_t wp, bf16* out) {
  uint32_t* pairs = reinterpret_cast<uint32_t*>(out);
  for (int64_t i = 0; i < rp / 2; ++i) {
    uint32_t* row = pairs + i * wp;
    const int64_t r = 2 * i;
    const int64_t n = r < rows ? width : 0;
    if (r + 1 < rows) {
      const bf16 *low = x + r * ld, *high = low + ld;
#pragma omp simd
      for (int64_t d = 0; d < n; ++d) row[d] = Pair(low[d], high[d]);
    } else {
      const bf16* low = x + r * ld;
#pragma omp simd
      for (int64_t d = 0; d < n; ++d) row[d] = Pair(low[d], 0);
    }
    std::memset(row + n, 0, (wp - n) * sizeof(uint32_t));
  }
}

// The rows transposed as a B operand with k = column, n = row: a row's
// columns 2i and 2i + 1 are already a pair; pair row i holds them for every
// row (wp/2 rows of ld_out >= rows pairs, zero padded; an odd width's last
// column pairs with zero).
STEPC_AVX512 void PackPairsOfColumns(const bf16* x, int64_t ld, int64_t rows, int64_t width,
                                     int64_t ld_out, int64_t wp, bf16* out) {
  uint32_t* pairs = reinterpret_cast<uint32_t*>(out);
  std::memset(pairs, 0, wp / 2 * ld_out * sizeof(uint32_t));
  Transpose32(x, ld * sizeof(bf16), rows, width / 2, pairs, ld_out * sizeof(uint32_t));
  if (width % 2)
    for (int64_t r = 0; r < rows; ++r)
      pairs[width / 2 * ld_out + r] = Pair(x[r * ld + width - 1], 0);
}

// The rows transposed (wp x rp, zero padded): an A operand whose K
// dimension is x's rows. Rows 2i and 2i + 1 interleaved are pair row i of
// `scratch` (rp/2 x wp words); its transpose holds each column's pairs of
// consecutive rows, which is the transposed bf16 row.
STEPC_AVX512 void PackColumns(const bf16* x, int64_t ld, int64_t rows, int64_t width, int64_t rp,
                              int64_t wp, bf16* scratch, bf16* out) {
  PackPairsOfRows(x, ld, rows, width, rp, wp, scratch);
  Transpose32(scratch, wp * sizeof(uint32_t), rp / 2, wp, out, rp / 2 * sizeof(uint32_t));
}

// Rows [0, rows) of `width` bf16 from x (row stride ld), asked for ahead of
// the item that reads (or writes) them: an item's rows come from memory.
void FetchRows(const bf16* x, int64_t ld, int64_t rows, int64_t width, bool write) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < width; c += 32) {
      if (write)
        __builtin_prefetch(x + r * ld + c, 1, 3);
      else
        __builtin_prefetch(x + r * ld + c, 0, 3);
    }
}

template <typename T>
T* Grown(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(n);
  return v.data();
}

// One thread's buffers, kept across calls.
struct Workspace {
  bool amx = false;  // the engine: AMX tiles, or AVX512-BF16 dot products
  std::vector<bf16> kt, kb, vt, vb, qa, doa, qt, dot, pb, dsb, pp, dsp, pairs;
  std::vector<float> s, dp, o, dkt, dvt;
};

Workspace& ThreadWorkspace() {
  thread_local Workspace w;
  return w;
}

// One block of query rows [t0, t0 + rows) of one head: its sizes and masks.
struct Block {
  const Bf16Attention& a;
  int64_t t0, rows, rp, kend, kp, dp;
  Block(const Bf16Attention& a, int64_t t0, int64_t dp)
      : a(a), t0(t0), rows(std::min(kQueryBlock, a.tq - t0)), rp(RoundUp(rows, 32)),
        kend(a.causal ? std::min(t0 + rows, a.tk) : a.tk), kp(RoundUp(kend, 32)), dp(dp) {}
  // Keys row r sees; none for a padding row (r >= rows).
  int64_t Visible(int64_t r) const { return a.causal ? std::min(t0 + r + 1, a.tk) : a.tk; }
  int64_t VisibleOrNone(int64_t r) const { return r < rows ? Visible(r) : 0; }
  // Score columns row tile i needs (the last visible key, rounded to 16).
  int64_t ScoreColumns(int64_t i) const {
    return a.causal ? std::min(kp, RoundUp(t0 + i + 16, 16)) : kp;
  }
  // Keys row tile i multiplies by (rounded to 32).
  std::pair<int64_t, int64_t> KeyRange(int64_t i) const {
    return {0, a.causal ? std::min(kp, RoundUp(t0 + i + 16, 32)) : kp};
  }
  // Query rows the keys j..j+15 get gradient from: those that see them.
  std::pair<int64_t, int64_t> QueryRange(int64_t j) const {
    return {a.causal ? std::clamp<int64_t>((j - t0) / 32 * 32, 0, rp) : 0, rp};
  }
};

// S = Q Kᵀ of the block, then P = softmax(scale·S) over each row's visible
// keys: rounded in pb in `layout`, zero beyond, and if `keep` in f32 in s.
STEPC_AVX512 void Probabilities(const Workspace& w, const Block& blk, const bf16* qa,
                                const bf16* kt, float* s, RowLayout layout, bf16* pb, bool keep) {
  const int64_t kp = blk.kp;
  Matmul(
      w.amx, qa, blk.dp, kt, KeyStride(blk.a.tk), s, kp, blk.rp,
      [&](int64_t i) { return blk.ScoreColumns(i); },
      [&](int64_t, int64_t) { return std::pair<int64_t, int64_t>{0, blk.dp}; }, false);
  SoftmaxRows(s, kp, blk.rp, [&](int64_t r) { return blk.VisibleOrNone(r); }, kp, blk.a.scale,
              layout, pb, keep);
}

// Rows [0, rows) of an f32 [rp, dp] result rounded into x's head columns
// (dp a multiple of 16, at least hd).
STEPC_AVX512 void StoreRows(const float* c, int64_t dp, int64_t rows, int64_t hd, bf16* x,
                            int64_t ld) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c0 = 0; c0 < hd; c0 += 16) {
      const __mmask16 lanes = LanesBelow(hd - c0);
      _mm256_mask_storeu_epi16(x + r * ld + c0, lanes,
                               Rounded(_mm512_loadu_ps(c + r * dp + c0), lanes));
    }
}

// An f32 [dp, cols] result transposed into x's head columns: rows [0, rows)
// of x from its columns (cols a multiple of 16, at least rows), 16 x 16
// blocks transposed in registers and rounded there.
STEPC_AVX512 void StoreColumns(const float* c, int64_t cols, int64_t rows, int64_t hd, bf16* x,
                               int64_t ld) {
  for (int64_t r0 = 0; r0 < rows; r0 += 16)
    for (int64_t c0 = 0; c0 < hd; c0 += 16) {
      __m512i v[16];
      for (int i = 0; i < 16; ++i)
        v[i] = _mm512_loadu_si512(c + (c0 + i) * cols + r0);
      Transpose16x16(v);
      const __mmask16 lanes = LanesBelow(hd - c0);
      for (int64_t k = 0; k < std::min<int64_t>(16, rows - r0); ++k)
        _mm256_mask_storeu_epi16(x + (r0 + k) * ld + c0, lanes,
                                 Rounded(_mm512_castsi512_ps(v[k]), lanes));
    }
}

STEPC_AVX512 void ForwardHeads(const Bf16Attention& a, int64_t b, int64_t kvh, const bf16* q,
                            const bf16* k, const bf16* v, bf16* out, Workspace& w) {
  const int64_t dp = RoundUp(a.hd, 32), tkp = RoundUp(a.tk, 32), ldt = KeyStride(a.tk);
  const bf16* kh = k + b * a.tk * a.ldk + kvh * a.hd;
  const bf16* vh = v + b * a.tk * a.ldk + kvh * a.hd;
  bf16* kt = Grown(w.kt, dp * ldt);
  bf16* vb = Grown(w.vb, tkp * dp);
  PackPairsOfColumns(kh, a.ldk, a.tk, a.hd, ldt, dp, kt);  // Kᵀ: k = dim, n = key
  PackPairsOfRows(vh, a.ldk, a.tk, a.hd, tkp, dp, vb);     // V: k = key, n = dim
  for (int64_t h = kvh * a.group(); h < (kvh + 1) * a.group(); ++h)
    for (int64_t t0 = 0; t0 < a.tq; t0 += kQueryBlock) {
      const Block blk(a, t0, dp);
      bf16* qa = Grown(w.qa, blk.rp * dp);
      float* s = Grown(w.s, blk.rp * blk.kp);
      bf16* pb = Grown(w.pb, blk.rp * blk.kp);
      float* o = Grown(w.o, blk.rp * dp);
      PackRows(q + (b * a.tq + t0) * a.ldq + h * a.hd, a.ldq, blk.rows, a.hd, blk.rp, dp, qa);
      Probabilities(w, blk, qa, kt, s, RowLayout::kRows, pb, /*keep=*/false);
      Matmul(
          w.amx, pb, blk.kp, vb, dp, o, dp, blk.rp, [&](int64_t) { return dp; },
          [&](int64_t i, int64_t) { return blk.KeyRange(i); }, false);
      StoreRows(o, dp, blk.rows, a.hd, out + (b * a.tq + t0) * a.ldo + h * a.hd, a.ldo);
    }
}

// dP = dO Vᵀ; dS = scale·P∘(dP − rowsum(P∘dP)); dQ = dS K; and, summed
// over the group's heads in f32 and kept transposed (their products then
// take P and dS as pairs of rows, not transposed): dKᵀ += Qᵀ dS,
// dVᵀ += dOᵀ P.
STEPC_AVX512 void BackwardHeads(const Bf16Attention& a, int64_t b, int64_t kvh, const bf16* dout,
                             const bf16* q, const bf16* k, const bf16* v, bf16* dq, bf16* dk,
                             bf16* dv, Workspace& w) {
  const int64_t dp = RoundUp(a.hd, 32), tkp = RoundUp(a.tk, 32), ldt = KeyStride(a.tk);
  const bf16* kh = k + b * a.tk * a.ldk + kvh * a.hd;
  const bf16* vh = v + b * a.tk * a.ldk + kvh * a.hd;
  bf16* kt = Grown(w.kt, dp * ldt);
  bf16* kb = Grown(w.kb, tkp * dp);
  bf16* vt = Grown(w.vt, dp * ldt);
  PackPairsOfColumns(kh, a.ldk, a.tk, a.hd, ldt, dp, kt);  // Kᵀ for S
  PackPairsOfRows(kh, a.ldk, a.tk, a.hd, tkp, dp, kb);     // K for dQ
  PackPairsOfColumns(vh, a.ldk, a.tk, a.hd, ldt, dp, vt);  // Vᵀ for dP
  float* dkt = Grown(w.dkt, dp * ldt);
  float* dvt = Grown(w.dvt, dp * ldt);
  std::memset(dkt, 0, dp * ldt * sizeof(float));
  std::memset(dvt, 0, dp * ldt * sizeof(float));
  for (int64_t h = kvh * a.group(); h < (kvh + 1) * a.group(); ++h)
    for (int64_t t0 = 0; t0 < a.tq; t0 += kQueryBlock) {
      const Block blk(a, t0, dp);
      const int64_t rp = blk.rp, kp = blk.kp;
      const bf16* qh = q + (b * a.tq + t0) * a.ldq + h * a.hd;
      const bf16* doh = dout + (b * a.tq + t0) * a.ldo + h * a.hd;
      bf16* qa = Grown(w.qa, rp * dp);
      bf16* doa = Grown(w.doa, rp * dp);
      bf16* qt = Grown(w.qt, dp * rp);
      bf16* dot = Grown(w.dot, dp * rp);
      float* p = Grown(w.s, rp * kp);
      float* dpf = Grown(w.dp, rp * kp);
      bf16* dsb = Grown(w.dsb, rp * kp);
      bf16* pp = Grown(w.pp, rp * kp);
      bf16* dsp = Grown(w.dsp, rp * kp);
      float* o = Grown(w.o, rp * dp);
      PackRows(qh, a.ldq, blk.rows, a.hd, rp, dp, qa);
      PackRows(doh, a.ldo, blk.rows, a.hd, rp, dp, doa);
      bf16* pairs = Grown(w.pairs, rp * dp);
      PackColumns(qh, a.ldq, blk.rows, a.hd, rp, dp, pairs, qt);
      PackColumns(doh, a.ldo, blk.rows, a.hd, rp, dp, pairs, dot);
      Probabilities(w, blk, qa, kt, p, RowLayout::kPairs, pp, /*keep=*/true);
      Matmul(
          w.amx, doa, dp, vt, ldt, dpf, kp, rp, [&](int64_t i) { return blk.ScoreColumns(i); },
          [&](int64_t, int64_t) { return std::pair<int64_t, int64_t>{0, dp}; }, false);
      SoftmaxGradRows(p, dpf, kp, rp, [&](int64_t r) { return blk.VisibleOrNone(r); }, kp,
                      a.scale, dsb, dsp);
      Matmul(
          w.amx, dsb, kp, kb, dp, o, dp, rp, [&](int64_t) { return dp; },
          [&](int64_t i, int64_t) { return blk.KeyRange(i); }, false);
      StoreRows(o, dp, blk.rows, a.hd, dq + (b * a.tq + t0) * a.ldq + h * a.hd, a.ldq);
      Matmul(
          w.amx, qt, rp, dsp, kp, dkt, ldt, dp, [&](int64_t) { return kp; },
          [&](int64_t, int64_t j) { return blk.QueryRange(j); }, true);
      Matmul(
          w.amx, dot, rp, pp, kp, dvt, ldt, dp, [&](int64_t) { return kp; },
          [&](int64_t, int64_t j) { return blk.QueryRange(j); }, true);
    }
  StoreColumns(dkt, ldt, a.tk, a.hd, dk + b * a.tk * a.ldk + kvh * a.hd, a.ldk);
  StoreColumns(dvt, ldt, a.tk, a.hd, dv + b * a.tk * a.ldk + kvh * a.hd, a.ldk);
}

// Every (batch entry, KV head) item on the threads (their tiles configured
// on the AMX engine): in order on each thread (static), each first calling
// fetch(b, kvh) of the item after it (its rows asked for ahead: an item's
// rows come from memory), then work(b, kvh, workspace).
template <typename Fetch, typename Work>
void ForEachItem(const Bf16Attention& a, HeadEngine engine, Fetch fetch, Work work) {
  const bool amx = engine == HeadEngine::kAmx;
#pragma omp parallel
  {
    if (amx) ConfigureTiles();
    Workspace& w = ThreadWorkspace();
    w.amx = amx;
#pragma omp for collapse(2) schedule(static)
    for (int64_t b = 0; b < a.batch; ++b)
      for (int64_t kvh = 0; kvh < a.kv_heads; ++kvh) {
        const int64_t next = b * a.kv_heads + kvh + 1;
        if (next < a.batch * a.kv_heads) fetch(next / a.kv_heads, next % a.kv_heads);
        work(b, kvh, w);
      }
    if (amx) ReleaseTiles();
  }
}

}  // namespace

void RoundToBf16Avx512(const float* x, int64_t n, stepc_bf16* out) { RoundToBf16(x, n, out); }

HeadEngine HeadAttentionEngine() {
  static const bool avx512_bf16 = [] {
    __builtin_cpu_init();  // checks the OS saves the vector state, too
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512bf16");
  }();
  static const bool amx = [] {
    unsigned eax, ebx, ecx, edx;
    if (!avx512_bf16 || !__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
    const bool amx_bf16 = (edx >> 22) & 1, amx_tile = (edx >> 24) & 1;
    if (!amx_bf16 || !amx_tile) return false;
    // Linux hands out the tile registers' state only on request.
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  const HeadEngine best =
      amx ? HeadEngine::kAmx : avx512_bf16 ? HeadEngine::kAvx512Bf16 : HeadEngine::kNone;
  // STEPC_ATTENTION (a diagnostic switch): amx, avx512 or onednn. A
  // misspelt value, or an engine this CPU cannot run, must not pass for a
  // measured path: either runs the CPU's own, with a note once.
  const char* forced = std::getenv("STEPC_ATTENTION");
  if (!forced || !*forced) return best;
  const std::string name = forced;
  std::optional<HeadEngine> wanted;
  bool runs = true;
  if (name == "onednn") {
    wanted = HeadEngine::kNone;
  } else if (name == "avx512") {
    wanted = HeadEngine::kAvx512Bf16;
    runs = avx512_bf16;
  } else if (name == "amx") {
    wanted = HeadEngine::kAmx;
    runs = amx;
  }
  if (wanted && runs) return *wanted;
  static std::once_flag told;
  std::call_once(told, [&] {
    if (!wanted)
      std::fprintf(stderr,
                   "stepc: note: STEPC_ATTENTION=%s is not a CPU attention path (amx, avx512, "
                   "onednn): ignored, the CPU's own path runs\n",
                   forced);
    else
      std::fprintf(stderr,
                   "stepc: note: STEPC_ATTENTION=%s: this CPU (or its kernel) offers no %s: "
                   "the CPU's own path runs\n",
                   forced, name == "amx" ? "AMX tiles" : "AVX512-BF16 dot products");
  });
  return best;
}

void HeadAttentionForward(HeadEngine engine, const Bf16Attention& a, const stepc_bf16* q,
                          const stepc_bf16* k, const stepc_bf16* v, stepc_bf16* out) {
  ForEachItem(
      a, engine,
      [&](int64_t b, int64_t kvh) {
        FetchRows(k + b * a.tk * a.ldk + kvh * a.hd, a.ldk, a.tk, a.hd, false);
        FetchRows(v + b * a.tk * a.ldk + kvh * a.hd, a.ldk, a.tk, a.hd, false);
        for (int64_t h = kvh * a.group(); h < (kvh + 1) * a.group(); ++h) {
          FetchRows(q + b * a.tq * a.ldq + h * a.hd, a.ldq, a.tq, a.hd, false);
          FetchRows(out + b * a.tq * a.ldo + h * a.hd, a.ldo, a.tq, a.hd, true);
        }
      },
      [&](int64_t b, int64_t kvh, Workspace& w) { ForwardHeads(a, b, kvh, q, k, v, out, w); });
}

void HeadAttentionBackward(HeadEngine engine, const Bf16Attention& a, const stepc_bf16* dout,
                           const stepc_bf16* q, const stepc_bf16* k, const stepc_bf16* v,
                           stepc_bf16* dq, stepc_bf16* dk, stepc_bf16* dv) {
  ForEachItem(
      a, engine,
      [&](int64_t b, int64_t kvh) {
        for (const bf16* x : {k, v, static_cast<const bf16*>(dk), static_cast<const bf16*>(dv)})
          FetchRows(x + b * a.tk * a.ldk + kvh * a.hd, a.ldk, a.tk, a.hd, x == dk || x == dv);
        for (int64_t h = kvh * a.group(); h < (kvh + 1) * a.group(); ++h) {
          FetchRows(q + b * a.tq * a.ldq + h * a.hd, a.ldq, a.tq, a.hd, false);
          FetchRows(dout + b * a.tq * a.ldo + h * a.hd, a.ldo, a.tq, a.hd, false);
          FetchRows(dq + b * a.tq * a.ldq + h * a.hd, a.ldq, a.tq, a.hd, true);
        }
      },
      [&](int64_t b, int64_t kvh, Workspace& w) {
        BackwardHeads(a, b, kvh, dout, q, k, v, dq, dk, dv, w);
      });
}

#else  // !__x86_64__

HeadEngine HeadAttentionEngine() { return HeadEngine::kNone; }
void RoundToBf16Avx512(const float*, int64_t, stepc_bf16*) {}
void HeadAttentionForward(HeadEngine, const Bf16Attention&, const stepc_bf16*, const stepc_bf16*,
                          const stepc_bf16*, stepc_bf16*) {}
void HeadAttentionBackward(HeadEngine, const Bf16Attention&, const stepc_bf16*,
                           const stepc_bf16*, const stepc_bf16*, const stepc_bf16*, stepc_bf16*,
                           stepc_bf16*, stepc_bf16*) {}

#endif

}  // namespace stepc::cpu
