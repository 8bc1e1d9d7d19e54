// step.quantize_fp8 on the GPU, as kernels/cpu/fp8.cc: a warp per tile
// (its largest magnitude, its power-of-two scale, the fp8 rounding), the
// cast from and to bf16 fused in; then the packing of the fp8 GEMMs'
// operands into bytes and block scales (fp8_pack.h).

#include <atomic>

#include "runtime/kernels/cuda/common.cuh"
#include "runtime/kernels/cuda/fp8_pack.h"
#include "runtime/kernels/elementwise_math.h"

namespace stepc::cuda {
namespace {

// The larger magnitude, NaN if either is (a tile holding a NaN takes scale
// 1, as the CPU's quantizer).
__device__ __forceinline__ float MaxMagnitude(float amax, float v) {
  return (v != v || amax != amax) ? NAN : fmaxf(amax, fabsf(v));
}

// A warp per tile: its elements row by row, consecutive lanes on
// consecutive columns (a [1, 128] tile is one 128-element row segment), the
// largest magnitude across the warp, the power-of-two scale, the rounding;
// x read as f32 or bf16 and y written as either (the step's widening of a
// bf16 input and its rounding for the GEMMs, folded in).
template <typename TI, typename TO>
__global__ void QuantizeFp8Kernel(const TI* x, int64_t matrices, int64_t rows, int64_t cols,
                                  int64_t tile_rows, int64_t tile_cols, int format, TO* y) {
  const int64_t row_tiles = (rows + tile_rows - 1) / tile_rows;
  const int64_t col_tiles = (cols + tile_cols - 1) / tile_cols;
  const int lane = threadIdx.x % 32;
  const int64_t warps = (int64_t)gridDim.x * blockDim.x / 32;
  for (int64_t w = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32;
       w < matrices * row_tiles * col_tiles; w += warps) {
    const int64_t m = w / (row_tiles * col_tiles), t = w % (row_tiles * col_tiles);
    const int64_t r0 = (t / col_tiles) * tile_rows, c0 = (t % col_tiles) * tile_cols;
    const int64_t height = min(tile_rows, rows - r0), width = min(tile_cols, cols - c0);
    const int64_t base = m * rows * cols + r0 * cols + c0;
    float amax = 0.0f;
    for (int64_t i = lane; i < height * width; i += 32)
      amax = MaxMagnitude(amax, Load(x, base + (i / width) * cols + i % width));
    for (int o = 16; o > 0; o >>= 1)
      amax = MaxMagnitude(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float s = stepc_fp8_tile_scale<float>(amax, format);
    for (int64_t i = lane; i < height * width; i += 32) {
      const int64_t e = base + (i / width) * cols + i % width;
      Store(y, e, stepc_round_fp8<float>(Load(x, e) * s, format) / s);
    }
  }
}

// The weight gradients' [128, 1] tiles (128 rows of one column): a thread
// block stages a panel of 128 rows by 64 columns in shared memory, read
// and written along the rows (coalesced), a warp reducing each column.
constexpr int kColumnTileRows = 128, kColumnPanel = 64;
template <typename TI, typename TO>
__global__ void QuantizeFp8ColumnTilesKernel(const TI* x, int64_t matrices, int64_t rows,
                                             int64_t cols, int format, TO* y) {
  __shared__ float panel[kColumnTileRows][kColumnPanel + 1];
  __shared__ float scale[kColumnPanel];
  const int64_t row_tiles = (rows + kColumnTileRows - 1) / kColumnTileRows;
  const int64_t col_panels = (cols + kColumnPanel - 1) / kColumnPanel;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int64_t blk = blockIdx.x; blk < matrices * row_tiles * col_panels; blk += gridDim.x) {
    const int64_t m = blk / (row_tiles * col_panels), t = blk % (row_tiles * col_panels);
    const int64_t r0 = (t / col_panels) * kColumnTileRows, c0 = (t % col_panels) * kColumnPanel;
    const int64_t base = m * rows * cols;
    for (int e = threadIdx.x; e < kColumnTileRows * kColumnPanel; e += blockDim.x) {
      const int64_t r = r0 + e / kColumnPanel, c = c0 + e % kColumnPanel;
      panel[e / kColumnPanel][e % kColumnPanel] =
          r < rows && c < cols ? Load(x, base + r * cols + c) : 0.0f;
    }
    __syncthreads();
    for (int cc = warp; cc < kColumnPanel; cc += warps) {
      float amax = 0.0f;
      for (int i = lane; i < kColumnTileRows; i += 32) amax = MaxMagnitude(amax, panel[i][cc]);
      for (int o = 16; o > 0; o >>= 1)
        amax = MaxMagnitude(amax, __shfl_xor_sync(0xffffffffu, amax, o));
      if (lane == 0) scale[cc] = stepc_fp8_tile_scale<float>(amax, format);
    }
    __syncthreads();
    for (int e = threadIdx.x; e < kColumnTileRows * kColumnPanel; e += blockDim.x) {
      const int64_t r = r0 + e / kColumnPanel, c = c0 + e % kColumnPanel;
      const float s = scale[e % kColumnPanel];
      if (r < rows && c < cols)
        Store(y, base + r * cols + c,
              stepc_round_fp8<float>(panel[e / kColumnPanel][e % kColumnPanel] * s, format) / s);
    }
    __syncthreads();  // the panel and scales are read before the next block's loads
  }
}

// Both roundings a linear layer's input or output gradient takes, in one
// pass over x [rows, cols] (f32, or bf16 read as it is): [1, 128] row
// tiles (the forward and input-gradient products) and [128, 1] column
// tiles (the weight gradient). A thread block per 128 x 128 panel: thread
// t holds column t % 128 of every other row (64 values in registers, the
// loops unrolled), the columns' maxima meet in shared memory, the rows'
// across a warp and then the row's four warps. With `column_partial`,
// each panel's column sums of x (a bias gradient: its 64 values a thread
// in order, then the two rows of threads) go to column_partial[panel
// row][column]. With `transform` (PairTransform) the values rounded are
// computed from x's as they are read: the GELU of x's (the MLP's
// activation), the GELU's gradient at `pre` of x's (the MLP's output
// gradient: x its input gradient, `pre` its pre-activation), SwiGLU's
// silu(x) * pre (Llama's activation, x the gate; and the up projection's
// output gradient, pre the input gradient) or silu_grad(pre * third, x)
// (the gate's output gradient, pre the input gradient, third the up
// projection's output), each computed as the elementwise kernels compute
// it. Two kernels write the roundings: as bf16 values, or
// packed as the fp8 GEMMs read them.
enum PairTransform {
  kPairAsIs = 0,
  kPairGelu = 1,
  kPairGeluTanh = 2,
  kPairGeluGrad = 3,
  kPairGeluGradTanh = 4,
  kPairSwiglu = 5,
  kPairSwigluGateGrad = 6,
};
constexpr int kPairPanel = kFp8PairPanel;
constexpr int kPairHeld = kPairPanel * kPairPanel / kThreads;  // rows a thread holds

struct PairPanel {
  float column_max[kThreads / kPairPanel][kPairPanel];
  float row_max[kPairPanel][kPairPanel / 32];
  float row_scale[kPairPanel], column_scale[kPairPanel];  // row / column i of the panel
  float column_sum[kThreads / kPairPanel][kPairPanel];
};

// The panel at (r0, c0) into `v` (this thread's column cc = t % 128, rows
// half + 2i), its rows' and columns' scales into `p` (the quantizer's rule
// for each tile) and its column sums into `column_partial` (if not null).
// Every thread calls it; on return the scales are visible to all.
// kSwiglu: whether the SwiGLU transforms are compiled in (the rounding
// kernel, which takes none, keeps to 128 registers without spilling).
template <bool kSwiglu, typename T>
__device__ __forceinline__ void LoadPairPanel(const T* x, const T* pre, const T* third,
                                              int64_t rows, int64_t cols, int format,
                                              int transform, int64_t r0,
                                              int64_t c0, float (&v)[kPairHeld], PairPanel& p,
                                              float* column_partial) {
  const int cc = threadIdx.x % kPairPanel, half = threadIdx.x / kPairPanel;
  const int lane = threadIdx.x % 32, quarter = cc / 32;
  const int64_t c = c0 + cc;
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < kPairHeld; ++i) {
    const int64_t r = r0 + half + 2 * i;
    const bool in = r < rows && c < cols;
    v[i] = in ? Load(x, r * cols + c) : 0.0f;
    if (transform == kPairGelu || transform == kPairGeluTanh)
      v[i] = stepc_gelu<float>(v[i], transform == kPairGeluTanh);
    if (transform == kPairGeluGrad || transform == kPairGeluGradTanh)
      v[i] = stepc_gelu_grad<float>(v[i], in ? Load(pre, r * cols + c) : 0.0f,
                                    transform == kPairGeluGradTanh);
    if (kSwiglu && transform == kPairSwiglu)
      v[i] = stepc_silu<float>(v[i]) * (in ? Load(pre, r * cols + c) : 0.0f);
    if (kSwiglu && transform == kPairSwigluGateGrad)
      v[i] = stepc_silu_grad<float>(
          in ? Load(pre, r * cols + c) * Load(third, r * cols + c) : 0.0f, v[i]);
    amax = MaxMagnitude(amax, v[i]);
    float m = MaxMagnitude(0.0f, v[i]);
    for (int o = 16; o > 0; o >>= 1) m = MaxMagnitude(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (lane == 0) p.row_max[half + 2 * i][quarter] = m;
  }
  p.column_max[half][cc] = amax;
  if (column_partial) {
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kPairHeld; ++i) sum += v[i];
    p.column_sum[half][cc] = sum;
  }
  __syncthreads();
  if (column_partial && half == 0 && c < cols)
    column_partial[(r0 / kPairPanel) * cols + c] = p.column_sum[0][cc] + p.column_sum[1][cc];
  if (half == 0) {
    p.column_scale[cc] =
        stepc_fp8_tile_scale<float>(MaxMagnitude(p.column_max[0][cc], p.column_max[1][cc]), format);
    float m = 0.0f;
    for (int q = 0; q < kPairPanel / 32; ++q) m = MaxMagnitude(m, p.row_max[cc][q]);
    p.row_scale[cc] = stepc_fp8_tile_scale<float>(m, format);  // row cc of the panel
  }
  __syncthreads();
}

// The roundings as bf16 values (where something other than an fp8 GEMM
// reads them). At most 128 registers so that two blocks share an SM.
template <typename T>
__global__ void __launch_bounds__(kThreads, 2)
    QuantizeFp8RowsColumnsKernel(const T* x, int64_t rows, int64_t cols, int format,
                                 __nv_bfloat16* by_rows, __nv_bfloat16* by_columns,
                                 float* column_partial, int transform) {
  __shared__ PairPanel p;
  const int64_t row_panels = (rows + kPairPanel - 1) / kPairPanel;
  const int64_t col_panels = (cols + kPairPanel - 1) / kPairPanel;
  const int cc = threadIdx.x % kPairPanel, half = threadIdx.x / kPairPanel;
  for (int64_t blk = blockIdx.x; blk < row_panels * col_panels; blk += gridDim.x) {
    const int64_t r0 = (blk / col_panels) * kPairPanel, c0 = (blk % col_panels) * kPairPanel;
    const int64_t c = c0 + cc;
    float v[kPairHeld];
    LoadPairPanel<false>(x, static_cast<const T*>(nullptr), static_cast<const T*>(nullptr), rows,
                         cols, format, transform, r0, c0, v, p, column_partial);
#pragma unroll
    for (int i = 0; i < kPairHeld; ++i) {
      const int64_t r = r0 + half + 2 * i;
      if (r >= rows || c >= cols) continue;
      const float sr = p.row_scale[half + 2 * i], sc = p.column_scale[cc];
      Store(by_rows, r * cols + c, stepc_round_fp8<float>(v[i] * sr, format) / sr);
      Store(by_columns, r * cols + c, stepc_round_fp8<float>(v[i] * sc, format) / sc);
    }
    __syncthreads();  // the maxima are read before the next panel writes them
  }
}

// The roundings packed as the fp8 GEMMs read them (fp8_pack.h's 1x128
// layouts): the rows' bytes where x's values are, a scale per row of the
// panel at row_scales[panel col * rows + r]; the columns' bytes
// transposed, [cols, rows], a scale per column at col_scales[panel row *
// cols + c]. The transposed bytes go through shared memory so that both
// writes run along memory. At most 128 registers (nvcc --resource-usage,
// sm_90a: no spills), two blocks an SM.
template <typename T>
__global__ void __launch_bounds__(kThreads, 2)
    PackFp8RowsColumnsKernel(const T* x, const T* pre, const T* third, int64_t rows,
                             int64_t cols, int format, uint8_t* row_bytes, float* row_scales,
                             uint8_t* col_bytes, float* col_scales, float* column_partial,
                             int transform) {
  constexpr int kStride = kPairPanel + 4;  // bytes a staged column takes
  __shared__ PairPanel p;
  __shared__ uint32_t staged_words[kPairPanel * kStride / 4];  // [column][row] bytes
  uint8_t* staged = reinterpret_cast<uint8_t*>(staged_words);
  const int64_t row_panels = (rows + kPairPanel - 1) / kPairPanel;
  const int64_t col_panels = (cols + kPairPanel - 1) / kPairPanel;
  const int cc = threadIdx.x % kPairPanel, half = threadIdx.x / kPairPanel;
  for (int64_t blk = blockIdx.x; blk < row_panels * col_panels; blk += gridDim.x) {
    const int64_t r0 = (blk / col_panels) * kPairPanel, c0 = (blk % col_panels) * kPairPanel;
    const int64_t c = c0 + cc;
    float v[kPairHeld];
    LoadPairPanel<true>(x, pre, third, rows, cols, format, transform, r0, c0, v, p,
                        column_partial);
    if (half == 0) {
      if (r0 + cc < rows) row_scales[(c0 / kPairPanel) * rows + r0 + cc] = 1.0f / p.row_scale[cc];
      if (c < cols) col_scales[(r0 / kPairPanel) * cols + c] = 1.0f / p.column_scale[cc];
    }
#pragma unroll
    for (int i = 0; i < kPairHeld; ++i) {
      const int64_t rr = half + 2 * i, r = r0 + rr;
      staged[cc * kStride + rr] =
          static_cast<uint8_t>(stepc_fp8_bits<float>(v[i] * p.column_scale[cc], format));
      if (r < rows && c < cols)
        row_bytes[r * cols + c] =
            static_cast<uint8_t>(stepc_fp8_bits<float>(v[i] * p.row_scale[rr], format));
    }
    __syncthreads();
    // The staged columns, four bytes a thread along each column's rows.
    const bool whole = rows % 4 == 0 && r0 + kPairPanel <= rows;
    for (int w = threadIdx.x; w < kPairPanel * kPairPanel / 4; w += blockDim.x) {
      const int col = w / (kPairPanel / 4), r4 = (w % (kPairPanel / 4)) * 4;
      if (c0 + col >= cols) continue;
      uint8_t* out = col_bytes + (c0 + col) * rows + r0 + r4;
      const uint8_t* in = staged + col * kStride + r4;
      if (whole) {
        *reinterpret_cast<uint32_t*>(out) = *reinterpret_cast<const uint32_t*>(in);
      } else {
        for (int j = 0; j < 4 && r0 + r4 + j < rows; ++j) out[j] = in[j];
      }
    }
    __syncthreads();  // the maxima and staged bytes are read before the next panel
  }
}

// A weight [rows, cols] (f32) in 128x128 blocks, as the fp8 GEMMs read it:
// a thread block per block, its largest magnitude (warps, then shared
// memory), its scale (step.quantize_fp8's for that tile), then the bytes as
// stored (`bytes` [rows, cols], scales[row block * ld_cols + col block])
// and transposed (`t_bytes` [cols, rows], t_scales[col block * ld_rows +
// row block]) through shared memory, either output null where not wanted.
__global__ void PackFp8BlocksBothKernel(const float* x, int64_t rows, int64_t cols, int format,
                                        uint8_t* bytes, float* scales, int64_t ld_cols,
                                        uint8_t* t_bytes, float* t_scales, int64_t ld_rows) {
  constexpr int kStride = kFp8Block + 4;
  __shared__ float warp_max[kThreads / 32];
  __shared__ uint32_t staged_words[kFp8Block * kStride / 4];  // [col][row] bytes
  uint8_t* staged = reinterpret_cast<uint8_t*>(staged_words);
  const int64_t row_blocks = (rows + kFp8Block - 1) / kFp8Block;
  const int64_t col_blocks = (cols + kFp8Block - 1) / kFp8Block;
  for (int64_t blk = blockIdx.x; blk < row_blocks * col_blocks; blk += gridDim.x) {
    const int64_t r0 = (blk / col_blocks) * kFp8Block, c0 = (blk % col_blocks) * kFp8Block;
    float amax = 0.0f;
    for (int i = threadIdx.x; i < kFp8Block * kFp8Block; i += blockDim.x) {
      const int64_t r = r0 + i / kFp8Block, c = c0 + i % kFp8Block;
      if (r < rows && c < cols) amax = MaxMagnitude(amax, x[r * cols + c]);
    }
    for (int o = 16; o > 0; o >>= 1)
      amax = MaxMagnitude(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = amax;
    __syncthreads();
    amax = 0.0f;
    for (int w = 0; w < (int)blockDim.x / 32; ++w) amax = MaxMagnitude(amax, warp_max[w]);
    const float s = stepc_fp8_tile_scale<float>(amax, format);
    if (threadIdx.x == 0) {
      if (scales) scales[(r0 / kFp8Block) * ld_cols + c0 / kFp8Block] = 1.0f / s;
      if (t_scales) t_scales[(c0 / kFp8Block) * ld_rows + r0 / kFp8Block] = 1.0f / s;
    }
    for (int i = threadIdx.x; i < kFp8Block * kFp8Block; i += blockDim.x) {
      const int rr = i / kFp8Block, cc = i % kFp8Block;
      const int64_t r = r0 + rr, c = c0 + cc;
      const uint8_t b = r < rows && c < cols
                            ? static_cast<uint8_t>(stepc_fp8_bits<float>(x[r * cols + c] * s,
                                                                         format))
                            : 0;
      if (bytes && r < rows && c < cols) bytes[r * cols + c] = b;
      staged[cc * kStride + rr] = b;
    }
    __syncthreads();
    if (t_bytes)
      for (int i = threadIdx.x; i < kFp8Block * kFp8Block; i += blockDim.x) {
        const int cc = i / kFp8Block, rr = i % kFp8Block;
        if (r0 + rr < rows && c0 + cc < cols)
          t_bytes[(c0 + cc) * rows + r0 + rr] = staged[cc * kStride + rr];
      }
    __syncthreads();  // warp_max and the staged bytes are read before the next block
  }
}

// Packed bytes [lines, k] with scales [k / 128, lines] (or, `ld` > 0,
// 128x128 blocks at [line / 128][k / 128] of a table `ld` wide) as bf16
// values (exact): the operand of the bf16 GEMM where the fp8 one does not
// run.
__global__ void UnpackFp8Kernel(const uint8_t* bytes, const float* scales, int64_t lines,
                                int64_t k, int format, int64_t ld, __nv_bfloat16* out) {
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < lines * k;
       e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t line = e / k, kk = e % k;
    const float scale = ld > 0 ? scales[(line / kFp8Block) * ld + kk / kFp8Block]
                               : scales[(kk / kFp8Block) * lines + line];
    out[e] = __float2bfloat16(stepc_fp8_value<float>(bytes[e], format) * scale);
  }
}

template <typename TI, typename TO>
int QuantizeFp8(stepc_cuda_ctx* ctx, const TI* x, int64_t matrices, int64_t rows, int64_t cols,
                int64_t tile_rows, int64_t tile_cols, int format, TO* y) {
  if (tile_rows == kColumnTileRows && tile_cols == 1) {
    const int64_t blocks = std::min<int64_t>(
        matrices * CeilDiv(rows, kColumnTileRows) * CeilDiv(cols, kColumnPanel), kMaxBlocks);
    STEPC_LAUNCH_COOPERATIVE(blocks, kThreads, 0, ctx->stream,
                             QuantizeFp8ColumnTilesKernel<TI, TO>)(x, matrices, rows, cols,
                                                                   format, y);
    return STEPC_LAUNCHED(ctx, "QuantizeFp8ColumnTilesKernel");
  }
  const int64_t tiles =
      matrices * CeilDiv(rows, tile_rows) * CeilDiv(cols, tile_cols);
  const int64_t blocks = std::min<int64_t>(CeilDiv(tiles, kThreads / 32), kMaxBlocks);
  STEPC_LAUNCH_COOPERATIVE(blocks, kThreads, 0, ctx->stream, QuantizeFp8Kernel<TI, TO>)(
      x, matrices, rows, cols, tile_rows, tile_cols, format, y);
  return STEPC_LAUNCHED(ctx, "QuantizeFp8Kernel");
}

// A warp per 1x128 block of a row: four elements a lane, the block's
// largest magnitude across the warp, its scale, the bytes.
template <typename In>
__global__ void PackFp8RowsKernel(const In* x, int64_t rows, int64_t k, int format, uint8_t* out,
                                  float* scales) {
  const int64_t blocks_k = (k + kFp8Block - 1) / kFp8Block;
  const int lane = threadIdx.x % 32;
  const int64_t warps = (int64_t)gridDim.x * blockDim.x / 32;
  for (int64_t w = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32; w < rows * blocks_k;
       w += warps) {
    const int64_t r = w / blocks_k, c0 = (w % blocks_k) * kFp8Block;
    float v[4], amax = 0.0f;
    for (int i = 0; i < 4; ++i) {
      const int64_t c = c0 + lane + 32 * i;
      v[i] = c < k ? Load(x, r * k + c) : 0.0f;
      amax = fmaxf(amax, fabsf(v[i]));
    }
    amax = WarpMax(amax);
    const float s = stepc_fp8_tile_scale<float>(amax, format);
    for (int i = 0; i < 4; ++i) {
      const int64_t c = c0 + lane + 32 * i;
      if (c < k) out[r * k + c] = static_cast<uint8_t>(stepc_fp8_bits<float>(v[i] * s, format));
    }
    if (lane == 0) scales[(c0 / kFp8Block) * rows + r] = 1.0f / s;
  }
}

// PackFp8RowsKernel for x stored [k, rows] (a weight gradient's operands,
// whose K is the tokens): a thread block stages 128 k by 64 rows in shared
// memory, read along the rows (coalesced), then a warp packs each row's
// block as above.
template <typename In>
__global__ void PackFp8RowsOfColumnsKernel(const In* x, int64_t rows, int64_t k, int format,
                                           uint8_t* out, float* scales) {
  constexpr int kRows = 64;
  __shared__ float tile[kFp8Block][kRows + 1];
  const int64_t blocks_k = (k + kFp8Block - 1) / kFp8Block, chunks = (rows + kRows - 1) / kRows;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int64_t blk = blockIdx.x; blk < blocks_k * chunks; blk += gridDim.x) {
    const int64_t c0 = (blk / chunks) * kFp8Block, r0 = (blk % chunks) * kRows;
    for (int e = threadIdx.x; e < kFp8Block * kRows; e += blockDim.x) {
      const int64_t c = c0 + e / kRows, r = r0 + e % kRows;
      tile[e / kRows][e % kRows] = c < k && r < rows ? Load(x, c * rows + r) : 0.0f;
    }
    __syncthreads();
    for (int rr = warp; rr < kRows; rr += warps) {
      const int64_t r = r0 + rr;
      float amax = 0.0f;
      for (int i = 0; i < 4; ++i) amax = fmaxf(amax, fabsf(tile[lane + 32 * i][rr]));
      amax = WarpMax(amax);
      const float s = stepc_fp8_tile_scale<float>(amax, format);
      if (r < rows) {
        for (int i = 0; i < 4; ++i) {
          const int64_t c = c0 + lane + 32 * i;
          if (c < k)
            out[r * k + c] =
                static_cast<uint8_t>(stepc_fp8_bits<float>(tile[lane + 32 * i][rr] * s, format));
        }
        if (lane == 0) scales[(c0 / kFp8Block) * rows + r] = 1.0f / s;
      }
    }
    __syncthreads();  // the tile is read before the next block's loads
  }
}

// A thread block per 128x128 block of op(x) as [n, k]: its largest
// magnitude (warps, then shared memory), its scale, the bytes written
// K-major (a transpose when x is stored [k, n]).
template <typename In>
__global__ void PackFp8BlocksKernel(const In* x, int64_t n, int64_t k, int stored_nk, int format,
                                    uint8_t* out, float* scales, int64_t scale_ld) {
  __shared__ float warp_max[kThreads / 32];
  const int64_t blocks_n = (n + kFp8Block - 1) / kFp8Block;
  const int64_t blocks_k = (k + kFp8Block - 1) / kFp8Block;
  for (int64_t blk = blockIdx.x; blk < blocks_n * blocks_k; blk += gridDim.x) {
    const int64_t n0 = (blk / blocks_k) * kFp8Block, k0 = (blk % blocks_k) * kFp8Block;
    // Element i of the block: (row, col) of op(x), false past its edge.
    auto at = [&](int64_t i, int64_t* row, int64_t* col) {
      *row = n0 + i / kFp8Block;
      *col = k0 + i % kFp8Block;
      return *row < n && *col < k;
    };
    float amax = 0.0f;
    for (int64_t i = threadIdx.x; i < kFp8Block * kFp8Block; i += blockDim.x) {
      int64_t row, col;
      if (at(i, &row, &col))
        amax = fmaxf(amax, fabsf(Load(x, stored_nk ? row * k + col : col * n + row)));
    }
    amax = WarpMax(amax);
    if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = amax;
    __syncthreads();
    amax = 0.0f;
    for (int w = 0; w < (int)blockDim.x / 32; ++w) amax = fmaxf(amax, warp_max[w]);
    const float s = stepc_fp8_tile_scale<float>(amax, format);
    for (int64_t i = threadIdx.x; i < kFp8Block * kFp8Block; i += blockDim.x) {
      int64_t row, col;
      if (at(i, &row, &col))
        out[row * k + col] = static_cast<uint8_t>(stepc_fp8_bits<float>(
            Load(x, stored_nk ? row * k + col : col * n + row) * s, format));
    }
    if (threadIdx.x == 0) scales[(n0 / kFp8Block) * scale_ld + k0 / kFp8Block] = 1.0f / s;
    __syncthreads();  // warp_max is read before the next block writes it
  }
}

}  // namespace

int PackFp8Rows(stepc_cuda_ctx* ctx, const void* x, int in_type, int64_t rows, int64_t k,
                bool stored_kr, int format, uint8_t* out, float* scales) {
  if (stored_kr) {
    const int64_t blocks = std::min<int64_t>(CeilDiv(k, kFp8Block) * CeilDiv(rows, 64), kMaxBlocks);
    if (in_type == STEPC_CUDA_BF16)
      STEPC_LAUNCH_COOPERATIVE(blocks, kThreads, 0, ctx->stream,
                               PackFp8RowsOfColumnsKernel<__nv_bfloat16>)(
          static_cast<const __nv_bfloat16*>(x), rows, k, format, out, scales);
    else
      STEPC_LAUNCH_COOPERATIVE(blocks, kThreads, 0, ctx->stream, PackFp8RowsOfColumnsKernel<float>)(
          static_cast<const float*>(x), rows, k, format, out, scales);
    return STEPC_LAUNCHED(ctx, "PackFp8RowsOfColumnsKernel");
  }
  const int64_t warps = rows * CeilDiv(k, kFp8Block);
  const int64_t blocks = std::min<int64_t>(CeilDiv(warps, kThreads / 32), kMaxBlocks);
  if (in_type == STEPC_CUDA_BF16)
    STEPC_LAUNCH_COOPERATIVE(blocks, kThreads, 0, ctx->stream, PackFp8RowsKernel<__nv_bfloat16>)(
        static_cast<const __nv_bfloat16*>(x), rows, k, format, out, scales);
  else
    STEPC_LAUNCH_COOPERATIVE(blocks, kThreads, 0, ctx->stream, PackFp8RowsKernel<float>)(
        static_cast<const float*>(x), rows, k, format, out, scales);
  return STEPC_LAUNCHED(ctx, "PackFp8RowsKernel");
}

int PackFp8Blocks(stepc_cuda_ctx* ctx, const void* x, int in_type, int64_t n, int64_t k,
                  bool stored_nk, int format, uint8_t* out, float* scales, int64_t scale_ld) {
  const int64_t blocks =
      std::min<int64_t>(CeilDiv(n, kFp8Block) * CeilDiv(k, kFp8Block), kMaxBlocks);
  if (in_type == STEPC_CUDA_BF16)
    STEPC_LAUNCH_COOPERATIVE(blocks, kThreads, 0, ctx->stream,
                             PackFp8BlocksKernel<__nv_bfloat16>)(
        static_cast<const __nv_bfloat16*>(x), n, k, stored_nk ? 1 : 0, format, out, scales,
        scale_ld);
  else
    STEPC_LAUNCH_COOPERATIVE(blocks, kThreads, 0, ctx->stream, PackFp8BlocksKernel<float>)(
        static_cast<const float*>(x), n, k, stored_nk ? 1 : 0, format, out, scales, scale_ld);
  return STEPC_LAUNCHED(ctx, "PackFp8BlocksKernel");
}

namespace {
std::atomic<int64_t> fp8_gemms_run{0};
}  // namespace
int64_t Fp8GemmsRun() { return fp8_gemms_run.load(std::memory_order_relaxed); }
void CountFp8GemmRun() { fp8_gemms_run.fetch_add(1, std::memory_order_relaxed); }

int PackFp8Operands(stepc_cuda_ctx* ctx, const void* a, int a_type, const void* b, int b_type,
                    int64_t m, int64_t n, int64_t k, bool transpose_a, bool transpose_b,
                    int a_format, int b_format, bool b_vector, void* scratch,
                    Fp8Packed* packed) {
  const Fp8GemmLayout layout = PlanFp8Gemm(m, n, k, b_vector);
  char* s = static_cast<char*>(scratch);
  Fp8Packed& p = *packed;
  p = Fp8Packed{reinterpret_cast<uint8_t*>(s + layout.a_bytes),
                reinterpret_cast<uint8_t*>(s + layout.b_bytes),
                reinterpret_cast<float*>(s + layout.a_scales),
                reinterpret_cast<float*>(s + layout.b_scales), layout.b_scale_ld};
  // An operand packed already (STEPC_CUDA_FP8) is read where it is.
  if (a_type == STEPC_CUDA_FP8) {
    p.a = static_cast<uint8_t*>(const_cast<void*>(a));
    p.a_scales = nullptr;  // the caller's
  } else if (int rc = PackFp8Rows(ctx, a, a_type, m, k, transpose_a, a_format, p.a,
                                  p.a_scales)) {
    return rc;
  }
  if (b_type == STEPC_CUDA_FP8) {
    p.b = static_cast<uint8_t*>(const_cast<void*>(b));
    p.b_scales = nullptr;
    p.b_scale_ld = b_vector ? 0 : layout.b_scale_ld;  // 128x128 blocks: K-blocks padded
    return 0;
  }
  // op(B) as [n, k]: B stored [n, k] when transposed, else [k, n].
  if (b_vector) return PackFp8Rows(ctx, b, b_type, n, k, !transpose_b, b_format, p.b, p.b_scales);
  return PackFp8Blocks(ctx, b, b_type, n, k, transpose_b, b_format, p.b, p.b_scales,
                       p.b_scale_ld);
}

int UnpackFp8(stepc_cuda_ctx* ctx, const uint8_t* bytes, const float* scales, int64_t lines,
              int64_t k, int format, int64_t ld, __nv_bfloat16* out) {
  STEPC_LAUNCH(ElementwiseBlocks(lines * k), kThreads, 0, ctx->stream, UnpackFp8Kernel)(
      bytes, scales, lines, k, format, ld, out);
  return STEPC_LAUNCHED(ctx, "UnpackFp8Kernel");
}

int Fp8ValuesInBf16(stepc_cuda_ctx* ctx, const void* a, const float* a_scales, const void* b,
                    const float* b_scales, void* c, int64_t batch, int64_t m, int64_t n,
                    int64_t k, int transpose_a, int transpose_b, int shared_rhs, int a_type,
                    int b_type, int out_type, const float* bias, int epilogue, void* aux,
                    int a_format, int b_format, int b_vector, void* scratch) {
  const bool packed_a = a_type == STEPC_CUDA_FP8, packed_b = b_type == STEPC_CUDA_FP8;
  const Fp8Bf16Operands layout =
      PlanFp8Bf16Operands(batch * m, n, k, packed_a, packed_b);
  char* s = static_cast<char*>(scratch);
  auto* a_bf16 = reinterpret_cast<__nv_bfloat16*>(s + layout.a);
  auto* b_bf16 = reinterpret_cast<__nv_bfloat16*>(s + layout.b);
  if (packed_a) {
    if (int rc = UnpackFp8(ctx, static_cast<const uint8_t*>(a), a_scales, batch * m, k, a_format,
                           /*ld=*/0, a_bf16))
      return rc;
    a = a_bf16;
  }
  if (packed_b) {
    const int64_t ld = b_vector ? 0 : PlanFp8Gemm(batch * m, n, k, false).b_scale_ld;
    if (int rc = UnpackFp8(ctx, static_cast<const uint8_t*>(b), b_scales, n, k, b_format, ld,
                           b_bf16))
      return rc;
    b = b_bf16;
  }
  // Both operands bf16 now, unless neither was made here (then alike).
  const int in_type = packed_a || packed_b ? STEPC_CUDA_BF16 : b_type;
  return stepc_cuda_matmul(ctx, a, b, c, batch, m, n, k, transpose_a, transpose_b, shared_rhs,
                           in_type, out_type, bias, epilogue, aux);
}

}  // namespace stepc::cuda

using namespace stepc::cuda;

namespace {
// With `sums`: x's column sums too (partials in `scratch`, then summed in
// panel order: deterministic).
template <typename T>
int QuantizeFp8RowsColumns(stepc_cuda_ctx* ctx, const T* x, int64_t rows, int64_t cols,
                           int format, __nv_bfloat16* by_rows, __nv_bfloat16* by_columns,
                           float* scratch = nullptr, float* sums = nullptr,
                           int transform = kPairAsIs) {
  const int64_t blocks =
      std::min<int64_t>(CeilDiv(rows, kPairPanel) * CeilDiv(cols, kPairPanel), kMaxBlocks);
  STEPC_LAUNCH_COOPERATIVE(blocks, kThreads, 0, ctx->stream, QuantizeFp8RowsColumnsKernel<T>)(
      x, rows, cols, format, by_rows, by_columns, sums ? scratch : nullptr, transform);
  if (int rc = STEPC_LAUNCHED(ctx, "QuantizeFp8RowsColumnsKernel")) return rc;
  if (!sums) return 0;
  return FinishChunks(ctx, scratch, CeilDiv(rows, kPairPanel), cols, /*sum*/ 0, 1.0f, sums);
}
}  // namespace

extern "C" int stepc_cuda_quantize_fp8_rows_columns_bf16(stepc_cuda_ctx* ctx, const float* x,
                                                         int64_t rows, int64_t cols, int format,
                                                         __nv_bfloat16* by_rows,
                                                         __nv_bfloat16* by_columns) {
  return QuantizeFp8RowsColumns(ctx, x, rows, cols, format, by_rows, by_columns);
}

extern "C" int stepc_cuda_quantize_fp8_rows_columns_of_bf16_bf16(
    stepc_cuda_ctx* ctx, const __nv_bfloat16* x, int64_t rows, int64_t cols, int format,
    __nv_bfloat16* by_rows, __nv_bfloat16* by_columns) {
  return QuantizeFp8RowsColumns(ctx, x, rows, cols, format, by_rows, by_columns);
}

// The GELU of x rounded both ways (`tanh_form` 0: exact, 1: tanh).
extern "C" int stepc_cuda_quantize_fp8_rows_columns_gelu_bf16(
    stepc_cuda_ctx* ctx, const float* x, int64_t rows, int64_t cols, int format, int tanh_form,
    __nv_bfloat16* by_rows, __nv_bfloat16* by_columns) {
  return QuantizeFp8RowsColumns(ctx, x, rows, cols, format, by_rows, by_columns, nullptr,
                                nullptr, tanh_form ? kPairGeluTanh : kPairGelu);
}

extern "C" int stepc_cuda_quantize_fp8_rows_columns_gelu_of_bf16_bf16(
    stepc_cuda_ctx* ctx, const __nv_bfloat16* x, int64_t rows, int64_t cols, int format,
    int tanh_form, __nv_bfloat16* by_rows, __nv_bfloat16* by_columns) {
  return QuantizeFp8RowsColumns(ctx, x, rows, cols, format, by_rows, by_columns, nullptr,
                                nullptr, tanh_form ? kPairGeluTanh : kPairGelu);
}

extern "C" int stepc_cuda_quantize_fp8_rows_columns_dbias_bf16(
    stepc_cuda_ctx* ctx, const float* x, int64_t rows, int64_t cols, int format, float* scratch,
    __nv_bfloat16* by_rows, __nv_bfloat16* by_columns, float* sums) {
  return QuantizeFp8RowsColumns(ctx, x, rows, cols, format, by_rows, by_columns, scratch, sums);
}

extern "C" int stepc_cuda_quantize_fp8_rows_columns_dbias_of_bf16_bf16(
    stepc_cuda_ctx* ctx, const __nv_bfloat16* x, int64_t rows, int64_t cols, int format,
    float* scratch, __nv_bfloat16* by_rows, __nv_bfloat16* by_columns, float* sums) {
  return QuantizeFp8RowsColumns(ctx, x, rows, cols, format, by_rows, by_columns, scratch, sums);
}

namespace {
template <typename T>
int PackFp8RowsColumns(stepc_cuda_ctx* ctx, const T* x, int64_t rows, int64_t cols, int format,
                       uint8_t* row_bytes, float* row_scales, uint8_t* col_bytes,
                       float* col_scales, float* scratch = nullptr, float* sums = nullptr,
                       int transform = kPairAsIs, const T* pre = nullptr,
                       const T* third = nullptr) {
  const int64_t blocks =
      std::min<int64_t>(CeilDiv(rows, kPairPanel) * CeilDiv(cols, kPairPanel), kMaxBlocks);
  STEPC_LAUNCH_COOPERATIVE(blocks, kThreads, 0, ctx->stream, PackFp8RowsColumnsKernel<T>)(
      x, pre, third, rows, cols, format, row_bytes, row_scales, col_bytes, col_scales,
      sums ? scratch : nullptr, transform);
  if (int rc = STEPC_LAUNCHED(ctx, "PackFp8RowsColumnsKernel")) return rc;
  if (!sums) return 0;
  return FinishChunks(ctx, scratch, CeilDiv(rows, kPairPanel), cols, /*sum*/ 0, 1.0f, sums);
}
}  // namespace

#define STEPC_PACK_FP8_ROWS_COLUMNS(name, T)                                                   \
  extern "C" int name(stepc_cuda_ctx* ctx, const T* x, int64_t rows, int64_t cols, int format, \
                      uint8_t* row_bytes, float* row_scales, uint8_t* col_bytes,               \
                      float* col_scales) {                                                     \
    return PackFp8RowsColumns(ctx, x, rows, cols, format, row_bytes, row_scales, col_bytes,    \
                              col_scales);                                                     \
  }
STEPC_PACK_FP8_ROWS_COLUMNS(stepc_cuda_pack_fp8_rows_columns, float)
STEPC_PACK_FP8_ROWS_COLUMNS(stepc_cuda_pack_fp8_rows_columns_of_bf16, __nv_bfloat16)
#undef STEPC_PACK_FP8_ROWS_COLUMNS

#define STEPC_PACK_FP8_ROWS_COLUMNS_GELU(name, T)                                              \
  extern "C" int name(stepc_cuda_ctx* ctx, const T* x, int64_t rows, int64_t cols, int format, \
                      int tanh_form, uint8_t* row_bytes, float* row_scales,                    \
                      uint8_t* col_bytes, float* col_scales) {                                 \
    return PackFp8RowsColumns(ctx, x, rows, cols, format, row_bytes, row_scales, col_bytes,    \
                              col_scales, nullptr, nullptr,                                    \
                              tanh_form ? kPairGeluTanh : kPairGelu);                          \
  }
STEPC_PACK_FP8_ROWS_COLUMNS_GELU(stepc_cuda_pack_fp8_rows_columns_gelu, float)
STEPC_PACK_FP8_ROWS_COLUMNS_GELU(stepc_cuda_pack_fp8_rows_columns_gelu_of_bf16, __nv_bfloat16)
#undef STEPC_PACK_FP8_ROWS_COLUMNS_GELU

#define STEPC_PACK_FP8_ROWS_COLUMNS_DBIAS(name, T)                                             \
  extern "C" int name(stepc_cuda_ctx* ctx, const T* x, int64_t rows, int64_t cols, int format, \
                      float* scratch, uint8_t* row_bytes, float* row_scales,                   \
                      uint8_t* col_bytes, float* col_scales, float* sums) {                    \
    return PackFp8RowsColumns(ctx, x, rows, cols, format, row_bytes, row_scales, col_bytes,    \
                              col_scales, scratch, sums);                                      \
  }
STEPC_PACK_FP8_ROWS_COLUMNS_DBIAS(stepc_cuda_pack_fp8_rows_columns_dbias, float)
STEPC_PACK_FP8_ROWS_COLUMNS_DBIAS(stepc_cuda_pack_fp8_rows_columns_dbias_of_bf16, __nv_bfloat16)
#undef STEPC_PACK_FP8_ROWS_COLUMNS_DBIAS

// The GELU's gradient at `pre` of dy (`tanh_form` 0 exact, 1 tanh) packed,
// the gradient itself never stored; with its bias gradient (_dbias).
#define STEPC_PACK_FP8_ROWS_COLUMNS_GELU_GRAD(name, T, SUMS)                                  \
  extern "C" int name(stepc_cuda_ctx* ctx, const T* dy, const T* pre, int64_t rows,           \
                      int64_t cols, int format, int tanh_form SUMS(, float* scratch),          \
                      uint8_t* row_bytes, float* row_scales, uint8_t* col_bytes,               \
                      float* col_scales SUMS(, float* sums)) {                                 \
    float* partial = nullptr;                                                                  \
    float* totals = nullptr;                                                                   \
    SUMS(partial = scratch; totals = sums;)                                                    \
    return PackFp8RowsColumns(ctx, dy, rows, cols, format, row_bytes, row_scales, col_bytes,   \
                              col_scales, partial, totals,                                     \
                              tanh_form ? kPairGeluGradTanh : kPairGeluGrad, pre);             \
  }
#define STEPC_NO_SUMS(...)
#define STEPC_SUMS(...) __VA_ARGS__
STEPC_PACK_FP8_ROWS_COLUMNS_GELU_GRAD(stepc_cuda_pack_fp8_rows_columns_gelu_grad, float,
                                      STEPC_NO_SUMS)
STEPC_PACK_FP8_ROWS_COLUMNS_GELU_GRAD(stepc_cuda_pack_fp8_rows_columns_gelu_grad_of_bf16,
                                      __nv_bfloat16, STEPC_NO_SUMS)
STEPC_PACK_FP8_ROWS_COLUMNS_GELU_GRAD(stepc_cuda_pack_fp8_rows_columns_gelu_grad_dbias, float,
                                      STEPC_SUMS)
STEPC_PACK_FP8_ROWS_COLUMNS_GELU_GRAD(stepc_cuda_pack_fp8_rows_columns_gelu_grad_dbias_of_bf16,
                                      __nv_bfloat16, STEPC_SUMS)
#undef STEPC_SUMS
#undef STEPC_NO_SUMS
#undef STEPC_PACK_FP8_ROWS_COLUMNS_GELU_GRAD

// SwiGLU's product silu(gate) * other packed (Llama's activation, other
// the up projection's output; the up projection's output gradient, other
// the input gradient), and the gate's output gradient silu_grad(dy * up,
// gate), from the bf16 values the GEMMs wrote: neither is stored.
extern "C" int stepc_cuda_pack_fp8_rows_columns_swiglu_of_bf16(
    stepc_cuda_ctx* ctx, const __nv_bfloat16* gate, const __nv_bfloat16* other, int64_t rows,
    int64_t cols, int format, uint8_t* row_bytes, float* row_scales, uint8_t* col_bytes,
    float* col_scales) {
  return PackFp8RowsColumns(ctx, gate, rows, cols, format, row_bytes, row_scales, col_bytes,
                            col_scales, nullptr, nullptr, kPairSwiglu, other);
}

extern "C" int stepc_cuda_pack_fp8_rows_columns_swiglu_gate_grad_of_bf16(
    stepc_cuda_ctx* ctx, const __nv_bfloat16* gate, const __nv_bfloat16* dy,
    const __nv_bfloat16* up, int64_t rows, int64_t cols, int format, uint8_t* row_bytes,
    float* row_scales, uint8_t* col_bytes, float* col_scales) {
  return PackFp8RowsColumns(ctx, gate, rows, cols, format, row_bytes, row_scales, col_bytes,
                            col_scales, nullptr, nullptr, kPairSwigluGateGrad, dy, up);
}

// A layer's input rounded in [1, 128] tiles alone (the eval step's
// forward), packed as the fp8 GEMMs read it: PackFp8Rows, into the step's
// buffers.
extern "C" int stepc_cuda_pack_fp8_rows(stepc_cuda_ctx* ctx, const float* x, int64_t rows,
                                        int64_t cols, int format, uint8_t* bytes,
                                        float* scales) {
  return PackFp8Rows(ctx, x, STEPC_CUDA_F32, rows, cols, /*stored_kr=*/false, format, bytes,
                     scales);
}

// The same of a bf16 input (an attention's output, cuDNN's bf16).
extern "C" int stepc_cuda_pack_fp8_rows_of_bf16(stepc_cuda_ctx* ctx, const __nv_bfloat16* x,
                                                int64_t rows, int64_t cols, int format,
                                                uint8_t* bytes, float* scales) {
  return PackFp8Rows(ctx, x, STEPC_CUDA_BF16, rows, cols, /*stored_kr=*/false, format, bytes,
                     scales);
}

namespace {
int PackFp8BlocksBoth(stepc_cuda_ctx* ctx, const float* x, int64_t rows, int64_t cols,
                      int format, uint8_t* bytes, float* scales, uint8_t* t_bytes,
                      float* t_scales) {
  const int64_t blocks =
      std::min<int64_t>(CeilDiv(rows, kFp8Block) * CeilDiv(cols, kFp8Block), kMaxBlocks);
  const int64_t ld_cols = AlignUp(CeilDiv(cols, kFp8Block), 4);
  const int64_t ld_rows = AlignUp(CeilDiv(rows, kFp8Block), 4);
  STEPC_LAUNCH_COOPERATIVE(blocks, kThreads, 0, ctx->stream, PackFp8BlocksBothKernel)(
      x, rows, cols, format, bytes, scales, ld_cols, t_bytes, t_scales, ld_rows);
  return STEPC_LAUNCHED(ctx, "PackFp8BlocksBothKernel");
}
}  // namespace

extern "C" int stepc_cuda_pack_fp8_blocks(stepc_cuda_ctx* ctx, const float* w, int64_t rows,
                                          int64_t cols, int format, uint8_t* bytes,
                                          float* scales) {
  return PackFp8BlocksBoth(ctx, w, rows, cols, format, bytes, scales, nullptr, nullptr);
}

extern "C" int stepc_cuda_pack_fp8_blocks_transposed(stepc_cuda_ctx* ctx, const float* w,
                                                     int64_t rows, int64_t cols, int format,
                                                     uint8_t* t_bytes, float* t_scales) {
  return PackFp8BlocksBoth(ctx, w, rows, cols, format, nullptr, nullptr, t_bytes, t_scales);
}

extern "C" int stepc_cuda_pack_fp8_blocks_both(stepc_cuda_ctx* ctx, const float* w,
                                               int64_t rows, int64_t cols, int format,
                                               uint8_t* bytes, float* scales, uint8_t* t_bytes,
                                               float* t_scales) {
  return PackFp8BlocksBoth(ctx, w, rows, cols, format, bytes, scales, t_bytes, t_scales);
}

// The fp8 GEMM of operands neither of which is packed yet (gemm.cu, or the
// emulation's gemm.cc, runs the packed form).
extern "C" int stepc_cuda_matmul_fp8(stepc_cuda_ctx* ctx, const void* a, const void* b, void* c,
                                     int64_t batch, int64_t m, int64_t n, int64_t k,
                                     int transpose_a, int transpose_b, int shared_rhs,
                                     int a_type, int b_type, int out_type, const float* bias,
                                     int epilogue, void* aux, int a_format, int b_format,
                                     int b_vector, void* scratch) {
  return stepc_cuda_matmul_fp8_packed(ctx, a, nullptr, b, nullptr, c, batch, m, n, k,
                                      transpose_a, transpose_b, shared_rhs, a_type, b_type,
                                      out_type, bias, epilogue, aux, a_format, b_format,
                                      b_vector, scratch);
}

#define STEPC_QUANTIZE_FP8(name, TI, TO)                                                     \
  extern "C" int name(stepc_cuda_ctx* ctx, const TI* x, int64_t matrices, int64_t rows,      \
                      int64_t cols, int64_t tile_rows, int64_t tile_cols, int format, TO* y) { \
    return QuantizeFp8(ctx, x, matrices, rows, cols, tile_rows, tile_cols, format, y);       \
  }
STEPC_QUANTIZE_FP8(stepc_cuda_quantize_fp8, float, float)
STEPC_QUANTIZE_FP8(stepc_cuda_quantize_fp8_bf16, float, __nv_bfloat16)
STEPC_QUANTIZE_FP8(stepc_cuda_quantize_fp8_of_bf16, __nv_bfloat16, float)
STEPC_QUANTIZE_FP8(stepc_cuda_quantize_fp8_of_bf16_bf16, __nv_bfloat16, __nv_bfloat16)
#undef STEPC_QUANTIZE_FP8
