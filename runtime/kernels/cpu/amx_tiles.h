// AMX tile products and the operand layouts they read, shared by the
// attention (attention_amx.cc) and the GEMMs (gemm_amx.cc).
//
// Layouts: an A operand is bf16 rows (K contiguous, padded to 32); a B
// operand is "pair-interleaved" (VNNI): element (k, n) at
// [(k / 2) * ldb + n] * 2 + k % 2, as a tile row holds 16 columns of 2
// consecutive k. Padding is zero, so padded rows and columns add nothing.
#ifndef STEPC_RUNTIME_KERNELS_CPU_AMX_TILES_H_
#define STEPC_RUNTIME_KERNELS_CPU_AMX_TILES_H_

#if defined(__x86_64__)

#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <vector>

#include "runtime/kernels/cpu/cpu_kernels.h"

namespace stepc::cpu::amx {

using bf16 = stepc_bf16;

inline int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

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

inline void ConfigureTiles() {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.colsb[t] = 64;
    config.rows[t] = 16;
  }
  asm volatile("ldtilecfg %0" ::"m"(config) : "memory");
}

inline void ReleaseTiles() { asm volatile("tilerelease" ::: "memory"); }

// C = (or +=) A B for M rows, M and every column count multiples of 32, in
// 32 x 32 blocks of four tiles (each A and B tile loaded once per block, not
// per tile). Row tile i (rows i..i+15) needs columns [0, cols(i)), and its
// tile at column j the K range krange(i, j): what a causal mask leaves of
// the product. A block computes the union of its tiles' needs; what lies
// outside a tile's own is zero in the operands (masked probabilities and
// their gradients are stored as zeros), so it adds nothing.
template <typename Cols, typename KRange>
inline void TileMatmul(const bf16* a, int64_t lda, const bf16* b, int64_t ldb, float* c,
                       int64_t ldc, int64_t m, Cols cols, KRange krange, bool accumulate) {
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

// Every CPU with AMX has AVX-512 (F, BW, VL, DQ, BF16): the kernels' packing
// transposes and roundings use it 16 lanes at a time, whatever -march the
// library is built for (the baseline library is x86-64-v3).
#define STEPC_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

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
STEPC_AVX512 inline void RoundToBf16(const float* x, int64_t n, bf16* out) {
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
STEPC_AVX512 inline void Transpose32(const void* in, int64_t in_stride, int64_t rows, int64_t cols,
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
inline void PackRows(const bf16* x, int64_t ld, int64_t rows, int64_t width, int64_t rp, int64_t wp,
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

// Columns [0, 32) (`lanes` of them, zero past) of row `low` and of the next
// row (none: zero) as 32 pairs: the 16 words of columns [0, 16) of a pair row
// at out, of [16, 32) at out16.
STEPC_AVX512 inline void StorePairs32(const bf16* low, const bf16* high, __mmask32 lanes, bf16* out,
                                      bf16* out16) {
  // Word 2c from `low`'s word c, word 2c + 1 from `high`'s (index 32 + c).
  static const __m512i kFirst =
      _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6,
                       37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
  static const __m512i kSecond = _mm512_add_epi16(kFirst, _mm512_set1_epi16(16));
  const __m512i lo = _mm512_maskz_loadu_epi16(lanes, low);
  const __m512i hi = high ? _mm512_maskz_loadu_epi16(lanes, high) : _mm512_setzero_si512();
  _mm512_storeu_si512(out, _mm512_permutex2var_epi16(lo, kFirst, hi));
  _mm512_storeu_si512(out16, _mm512_permutex2var_epi16(lo, kSecond, hi));
}

// Lanes [0, n) of 32 bf16 lanes, none for n <= 0.
inline __mmask32 Lanes32Below(int64_t n) {
  return n >= 32 ? 0xffffffffu : n <= 0 ? 0 : (1u << n) - 1;
}

// `rows` rows (stride ld) as a B operand with k = row, n = column: rows 2i
// and 2i + 1 interleaved into pair row i (rp/2 x wp pairs, wp a multiple of
// 32, zero padded).
STEPC_AVX512 inline void PackPairsOfRows(const bf16* x, int64_t ld, int64_t rows, int64_t width,
                                         int64_t rp, int64_t wp, bf16* out) {
  for (int64_t i = 0; i < rp / 2; ++i) {
    const int64_t r = 2 * i;
    const bf16* low = x + r * ld;
    for (int64_t c = 0; c < wp; c += 32) {
      bf16* pairs = out + (i * wp + c) * 2;
      StorePairs32(low + c, r + 1 < rows ? low + ld + c : nullptr,
                   r < rows ? Lanes32Below(width - c) : 0, pairs, pairs + 32);
    }
  }
}

// The rows transposed as a B operand with k = column, n = row: a row's
// columns 2i and 2i + 1 are already a pair; pair row i holds them for every
// row (wp/2 x rp pairs, zero padded; an odd width's last column pairs with
// zero).
STEPC_AVX512 inline void PackPairsOfColumns(const bf16* x, int64_t ld, int64_t rows, int64_t width,
                                            int64_t rp, int64_t wp, bf16* out) {
  uint32_t* pairs = reinterpret_cast<uint32_t*>(out);
  std::memset(pairs, 0, wp / 2 * rp * sizeof(uint32_t));
  Transpose32(x, ld * sizeof(bf16), rows, width / 2, pairs, rp * sizeof(uint32_t));
  if (width % 2)
    for (int64_t r = 0; r < rows; ++r) pairs[width / 2 * rp + r] = Pair(x[r * ld + width - 1], 0);
}

// The rows transposed (wp x rp, zero padded): an A operand whose K
// dimension is x's rows. Rows 2i and 2i + 1 interleaved are pair row i of
// `scratch` (rp/2 x wp words); its transpose holds each column's pairs of
// consecutive rows, which is the transposed bf16 row.
STEPC_AVX512 inline void PackColumns(const bf16* x, int64_t ld, int64_t rows, int64_t width,
                                     int64_t rp, int64_t wp, bf16* scratch, bf16* out) {
  PackPairsOfRows(x, ld, rows, width, rp, wp, scratch);
  Transpose32(scratch, wp * sizeof(uint32_t), rp / 2, wp, out, rp / 2 * sizeof(uint32_t));
}

// Rows [0, rows) of `width` bf16 from x (row stride ld), asked for ahead of
// the item that reads (or writes) them: an item's rows come from memory.
inline void FetchRows(const bf16* x, int64_t ld, int64_t rows, int64_t width, bool write) {
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

// True where this CPU has AMX tiles for bf16 and the kernel let this process
// use them: Linux hands out the tile registers' state only on request
// (arch_prctl ARCH_REQ_XCOMP_PERM).
inline bool TilesUsable() {
  static const bool usable = [] {
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
    const bool amx_bf16 = (edx >> 22) & 1, amx_tile = (edx >> 24) & 1;
    if (!amx_bf16 || !amx_tile) return false;
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return usable;
}

}  // namespace stepc::cpu::amx

#endif  // __x86_64__

#endif  // STEPC_RUNTIME_KERNELS_CPU_AMX_TILES_H_
