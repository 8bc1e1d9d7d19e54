// bf16 GEMMs on AMX tiles for the shapes a step's layers make: one operand
// small (a weight: K and N in the hundreds), the other thousands of tokens
// long and, in a step, just written by another kernel and gone from the
// caches. oneDNN's matmul runs these 1.7-2.5x slower from memory than from
// cache (its loops leave the fetching to the hardware prefetcher, which
// starts late on a new stream); here each thread asks for the rows it takes
// next while it computes the current ones.
//
// Two schedules:
// - rows: B packed once (pair-interleaved, shared by the threads, its
//   panels packed by all of them), the threads taking contiguous ranges of
//   32-row blocks of C; a block's A rows are tile rows as stored (K a
//   multiple of 32) or packed; the block 2 ahead fetched.
// - split K (K far above M and N: a weight's gradient over the tokens):
//   each thread takes a range of K in chunks, packs both operands' chunk
//   (A transposed where it is stored [K, M]) and accumulates all of C in f32
//   of its own; the threads' sums are added in thread order.
// Bias and rounding to bf16 are applied to the f32 sums, as oneDNN does.

#include "runtime/kernels/cpu/gemm_amx.h"

#include <omp.h>

#include <cstdlib>
#include <cstring>
#include <utility>

#include "runtime/kernels/cpu/amx_tiles.h"

namespace stepc::cpu {

#if defined(__x86_64__)

namespace {

using namespace amx;

// The most bytes of packed B the row schedule keeps: all of it is read for
// every block of rows, so it must stay in a core's L2.
constexpr int64_t kMaxPackedB = 1 << 20;
// K per chunk in the split-K schedule: both packed chunks and C's f32 sums
// in L2, and 8 tile products per load and store of C's tiles.
constexpr int64_t kChunk = 256;
// Blocks of 32 rows fetched ahead in the row schedule.
constexpr int64_t kAhead = 2;

struct Gemm {
  const bf16* a;
  const bf16* b;
  void* c;
  bool c_f32;
  int64_t m, n, k;
  bool ta, tb;
  const float* bias;
};

// One thread's buffers, kept across calls: its packed operands, PackA's
// scratch, its f32 sums; and, of the thread that calls, those shared by all
// (the row schedule's packed B, the split-K schedule's sums).
struct Scratch {
  std::vector<bf16> a, b, pairs, shared_b;
  std::vector<float> c, shared_c;
};

Scratch& ThreadScratch() {
  thread_local Scratch s;
  return s;
}

// Packed B: tile by tile, each tile's 1 KB contiguous (tile loads 64 bytes
// apart, read in order: no cache-set conflicts, the prefetcher follows),
// 32-column panels of kp / 32 steps of two tiles (columns 0-15, 16-31):
// element (k, j) of a panel at ((k / 32 * 2 + j / 16) * 16 + k % 32 / 2) * 16
// + j % 16 words, half k % 2.
constexpr int64_t kTileWords = 16 * 16;

inline bf16* PanelTile(bf16* packed, int64_t kp, int64_t j, int64_t k) {
  return packed + ((j / 32 * (kp / 32) + k / 32) * 2 + j % 32 / 16) * kTileWords * 2;
}

// op(B)[k0 + kk, j] for kk < kn (zero past kn, up to kp, a multiple of 32)
// for the panels of columns [j0, j1) (multiples of 32; zero past n).
STEPC_AVX512 void PackB(const Gemm& g, int64_t k0, int64_t kn, int64_t kp, int64_t j0, int64_t j1,
                        bf16* out) {
  if (!g.tb) {  // B stored [k, n]: rows 2r and 2r + 1 interleaved
    for (int64_t j = j0; j < j1; j += 32)
      for (int64_t k = 0; k < kp; k += 2) {
        const bf16* low = g.b + (k0 + k) * g.n + j;
        bf16* row = PanelTile(out, kp, j, k) + k % 32 / 2 * 32;
        StorePairs32(low, k + 1 < kn ? low + g.n : nullptr, k < kn ? Lanes32Below(g.n - j) : 0, row,
                     row + kTileWords * 2);
      }
    return;
  }
  // B stored [n, k]: a row's k pairs are words; a tile is a 16 x 16 block of
  // them transposed.
  for (int64_t j = j0; j < j1; j += 16)
    for (int64_t k = 0; k < kp; k += 32) {
      const __mmask32 lanes = Lanes32Below(kn - k);
      __m512i v[16];
      for (int64_t i = 0; i < 16; ++i)
        v[i] = j + i < g.n ? _mm512_maskz_loadu_epi16(lanes, g.b + (j + i) * g.k + k0 + k)
                           : _mm512_setzero_si512();
      Transpose16x16(v);
      bf16* tile = PanelTile(out, kp, j, k);
      for (int64_t i = 0; i < 16; ++i) _mm512_storeu_si512(tile + i * 32, v[i]);
    }
}

// The 32 x 32 block of C = A rows (stride lda) x a panel of packed B over
// `steps` steps of K, added to c's (row stride ldc) if `accumulate`: tiles
// 0-3 the four sums, 4-5 A, 6-7 B (amx_tiles.h's configuration).
inline void PanelProduct(const bf16* a, int64_t lda, const bf16* panel, int64_t steps, float* c,
                         int64_t ldc, bool accumulate) {
  float* c10 = c + 16 * ldc;
  if (accumulate) {
    STEPC_TILE_LOAD(0, c, ldc * 4);
    STEPC_TILE_LOAD(1, c + 16, ldc * 4);
    STEPC_TILE_LOAD(2, c10, ldc * 4);
    STEPC_TILE_LOAD(3, c10 + 16, ldc * 4);
  } else {
    STEPC_TILE_ZERO(0);
    STEPC_TILE_ZERO(1);
    STEPC_TILE_ZERO(2);
    STEPC_TILE_ZERO(3);
  }
  for (int64_t s = 0; s < steps; ++s) {
    const bf16* a0 = a + s * 32;
    const bf16* b0 = panel + s * 2 * kTileWords * 2;
    // Each load just after the last product that reads the tile it replaces
    // (tiles are not renamed: a load waits for the products before it).
    STEPC_TILE_LOAD(4, a0, lda * 2);
    STEPC_TILE_LOAD(6, b0, 64);
    STEPC_TILE_DPBF16PS(0, 4, 6);
    STEPC_TILE_LOAD(7, b0 + kTileWords * 2, 64);
    STEPC_TILE_DPBF16PS(1, 4, 7);
    STEPC_TILE_LOAD(5, a0 + 16 * lda, lda * 2);
    STEPC_TILE_DPBF16PS(2, 5, 6);
    STEPC_TILE_DPBF16PS(3, 5, 7);
  }
  STEPC_TILE_STORE(0, c, ldc * 4);
  STEPC_TILE_STORE(1, c + 16, ldc * 4);
  STEPC_TILE_STORE(2, c10, ldc * 4);
  STEPC_TILE_STORE(3, c10 + 16, ldc * 4);
}

// op(A)[i0 + r, k0 + kk] for r < rows, kk < kn as an A operand: rp x kp
// bf16, zero padded.
STEPC_AVX512 void PackA(const Gemm& g, int64_t i0, int64_t rows, int64_t rp, int64_t k0, int64_t kn,
                        int64_t kp, Scratch& s, bf16* out) {
  if (g.ta)  // A stored [k, m]: its rows k0.. transposed
    PackColumns(g.a + k0 * g.m + i0, g.m, kn, rows, kp, rp, Grown(s.pairs, kp * rp), out);
  else
    PackRows(g.a + i0 * g.k + k0, g.k, rows, kn, rp, kp, out);
}

// Rows [i0, i0 + rows), columns [j0, j1) of C from f32 sums `acc` (row
// stride ld, from column j0): bias added, stored in f32 or rounded to bf16.
STEPC_AVX512 void StoreC(const Gemm& g, const float* acc, int64_t ld, int64_t i0, int64_t rows,
                         int64_t j0, int64_t j1) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = j0; j < j1; j += 16) {
      const __mmask16 lanes = LanesBelow(j1 - j);
      __m512 v = _mm512_maskz_loadu_ps(lanes, acc + r * ld + j - j0);
      if (g.bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(lanes, g.bias + j));
      const int64_t at = (i0 + r) * g.n + j;
      if (g.c_f32)
        _mm512_mask_storeu_ps(static_cast<float*>(g.c) + at, lanes, v);
      else
        _mm256_mask_storeu_epi16(static_cast<bf16*>(g.c) + at, lanes, Rounded(v, lanes));
    }
}

// Rows of a matrix (bytes apart: ld; `width` bytes each) asked for ahead a
// part at a time: a loop of `steps` steps asks for part s at step s, so the
// requests spread over the work instead of queueing up at its start.
struct Fetch {
  const char* base;
  int64_t ld, rows, width;
  bool write;
  void Part(int64_t s, int64_t steps) const {
    for (int64_t r = rows * s / steps; r < rows * (s + 1) / steps; ++r)
      for (int64_t b = 0; b < width; b += 64) {
        if (write)
          __builtin_prefetch(base + r * ld + b, 1, 3);
        else
          __builtin_prefetch(base + r * ld + b, 0, 3);
      }
  }
};

// Elements [r0, r0 + rows) x [c0, c0 + cols) of a row-major matrix with ld
// elements of `size` bytes a row.
Fetch Rows(const void* x, int64_t ld, int64_t size, int64_t r0, int64_t rows, int64_t c0,
           int64_t cols, bool write = false) {
  return {static_cast<const char*>(x) + (r0 * ld + c0) * size, ld * size, rows, cols * size, write};
}

// op(A)'s rows [i0, i0 + rows), and C's.
std::pair<Fetch, Fetch> RowBlock(const Gemm& g, int64_t i0, int64_t rows) {
  return {g.ta ? Rows(g.a, g.m, 2, 0, g.k, i0, rows) : Rows(g.a, g.k, 2, i0, rows, 0, g.k),
          Rows(g.c, g.n, g.c_f32 ? 4 : 2, i0, rows, 0, g.n, /*write=*/true)};
}

// K rows [k0, k0 + kn) of op(A) and op(B).
std::pair<Fetch, Fetch> KRows(const Gemm& g, int64_t k0, int64_t kn) {
  return {g.ta ? Rows(g.a, g.m, 2, k0, kn, 0, g.m) : Rows(g.a, g.k, 2, 0, g.m, k0, kn),
          g.tb ? Rows(g.b, g.k, 2, 0, g.n, k0, kn) : Rows(g.b, g.n, 2, k0, kn, 0, g.n)};
}

STEPC_AVX512 void RowSchedule(const Gemm& g) {
  const int64_t kp = RoundUp(g.k, 32), np = RoundUp(g.n, 32), blocks = (g.m + 31) / 32;
  std::vector<bf16>& packed_b = ThreadScratch().shared_b;
  packed_b.resize(kp * np);
  bf16* bp = packed_b.data();
  const bool direct_a = !g.ta && g.k % 32 == 0;               // tile rows as stored
  const bool direct_c = g.c_f32 && !g.bias && g.n % 32 == 0;  // tiles stored into C
#pragma omp parallel
  {
    const int64_t t = omp_get_thread_num(), threads = omp_get_num_threads();
    const int64_t panels = np / 32;
    PackB(g, 0, g.k, kp, 32 * (panels * t / threads), 32 * (panels * (t + 1) / threads), bp);
    const int64_t b0 = blocks * t / threads, b1 = blocks * (t + 1) / threads;
    for (int64_t blk = b0; blk < std::min(b1, b0 + kAhead); ++blk) {
      const auto [a_rows, c_rows] = RowBlock(g, blk * 32, std::min<int64_t>(32, g.m - blk * 32));
      a_rows.Part(0, 1);
      c_rows.Part(0, 1);
    }
    Scratch& s = ThreadScratch();
    bf16* abuf = Grown(s.a, 32 * kp);
    float* acc = Grown(s.c, 2 * 32 * 32);
    ConfigureTiles();
#pragma omp barrier
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t i = blk * 32, rows = std::min<int64_t>(32, g.m - i);
      // The block kAhead ahead asked for over this block's panels.
      const int64_t ahead = blk + kAhead < b1 ? std::min<int64_t>(32, g.m - i - kAhead * 32) : 0;
      const auto [a_ahead, c_ahead] = RowBlock(g, i + kAhead * 32, ahead);
      a_ahead.Part(0, 1);
      c_ahead.Part(0, 1);
      const bf16* ap = abuf;
      int64_t lda = kp;
      if (direct_a && rows == 32) {
        ap = g.a + i * g.k;
        lda = g.k;
      } else {
        PackA(g, i, rows, 32, 0, g.k, kp, s, abuf);
      }
      if (direct_c && rows == 32) {
        for (int64_t j = 0; j < np; j += 32) {
          PanelProduct(ap, lda, PanelTile(bp, kp, j, 0), kp / 32,
                       static_cast<float*>(g.c) + i * g.n + j, g.n, false);
        }
        continue;
      }
      // Each 32 x 32 block finished while in L1, the one before stored while
      // the tiles compute the next (two buffers: no wait between them).
      for (int64_t j = 0; j <= np; j += 32) {
        if (j < np)
          PanelProduct(ap, lda, PanelTile(bp, kp, j, 0), kp / 32, acc + j / 32 % 2 * 1024, 32,
                       false);
        if (j > 0) StoreC(g, acc + (j / 32 - 1) % 2 * 1024, 32, i, rows, j - 32, std::min(j, g.n));
      }
    }
    ReleaseTiles();
  }
}

STEPC_AVX512 void SplitKSchedule(const Gemm& g) {
  const int64_t mp = RoundUp(g.m, 32), np = RoundUp(g.n, 32);
  const int64_t threads = omp_get_max_threads(), chunks = (g.k + kChunk - 1) / kChunk;
  std::vector<float>& sums = ThreadScratch().shared_c;
  sums.resize(threads * mp * np);
  float* all = sums.data();
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num();
    float* mine = all + t * mp * np;
    Scratch& s = ThreadScratch();
    const int64_t c0 = chunks * t / threads, c1 = chunks * (t + 1) / threads;
    ConfigureTiles();
    for (int64_t ch = c0; ch < c1; ++ch) {
      const int64_t k0 = ch * kChunk, kn = std::min(kChunk, g.k - k0), kp = RoundUp(kn, 32);
      // The next chunk's rows of both operands, asked for over this one's
      // panels (the first chunk's: at once).
      if (ch == c0) {
        const auto [a_rows, b_rows] = KRows(g, k0, kn);
        a_rows.Part(0, 1);
        b_rows.Part(0, 1);
      }
      const int64_t k1 = k0 + kChunk;
      const auto [a_next, b_next] = KRows(g, k1, ch + 1 < c1 ? std::min(kChunk, g.k - k1) : 0);
      const int64_t steps = mp / 32 * (np / 32);
      bf16* ap = Grown(s.a, mp * kp);
      bf16* bp = Grown(s.b, kp * np);
      PackB(g, k0, kn, kp, 0, np, bp);
      PackA(g, 0, g.m, mp, k0, kn, kp, s, ap);
      for (int64_t i = 0; i < mp; i += 32)
        for (int64_t j = 0; j < np; j += 32) {
          const int64_t step = i / 32 * (np / 32) + j / 32;
          a_next.Part(step, steps);
          b_next.Part(step, steps);
          PanelProduct(ap + i * kp, kp, PanelTile(bp, kp, j, 0), kp / 32, mine + i * np + j, np,
                       ch != c0);
        }
    }
    if (c0 == c1) std::memset(mine, 0, mp * np * sizeof(float));
    ReleaseTiles();
#pragma omp barrier
#pragma omp for schedule(static)
    for (int64_t r = 0; r < g.m; ++r) {
      float* row = all + r * np;
      for (int64_t p = 1; p < threads; ++p) {
        const float* other = all + p * mp * np + r * np;
#pragma omp simd
        for (int64_t j = 0; j < g.n; ++j) row[j] += other[j];
      }
      StoreC(g, row, np, r, 1, 0, g.n);
    }
  }
}

}  // namespace

bool AmxGemm(const stepc_bf16* a, const stepc_bf16* b, void* c, bool c_f32, int64_t m, int64_t n,
             int64_t k, bool transpose_a, bool transpose_b, const float* bias) {
  const char* forced = std::getenv("STEPC_GEMM");
  if ((forced && std::strcmp(forced, "onednn") == 0) || !TilesUsable() || omp_in_parallel() ||
      m <= 0 || n <= 0 || k <= 0)
    return false;
  const Gemm g{a, b, c, c_f32, m, n, k, transpose_a, transpose_b, bias};
  const int64_t mp = RoundUp(m, 32), np = RoundUp(n, 32), kp = RoundUp(k, 32);
  if (omp_get_max_threads() > 1 && k >= 8 * std::max(m, n) && mp * np <= 512 * 512) {
    SplitKSchedule(g);
    return true;
  }
  if (kp * np * static_cast<int64_t>(sizeof(bf16)) > kMaxPackedB) return false;
  RowSchedule(g);
  return true;
}

#else  // !__x86_64__

bool AmxGemm(const stepc_bf16*, const stepc_bf16*, void*, bool, int64_t, int64_t, int64_t, bool,
             bool, const float*) {
  return false;
}

#endif

}  // namespace stepc::cpu
