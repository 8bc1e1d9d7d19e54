// launch_config.h - how the CUDA kernels are launched and how much scratch
// each needs, as plain host C++ shared by the compiler (which sizes the
// arena's scratch region at compile time) and the kernel library (which
// launches with the same numbers). No CUDA here: tested on any host
// (launch_config_test.cc).

#ifndef STEPC_RUNTIME_KERNELS_CUDA_LAUNCH_CONFIG_H_
#define STEPC_RUNTIME_KERNELS_CUDA_LAUNCH_CONFIG_H_

#include <algorithm>
#include <cstdint>

namespace stepc::cuda {

// Threads per block of the elementwise and row kernels.
constexpr int kThreads = 256;
// Blocks that fill an H100/H200 (132 SMs) about twice: enough to hide latency.
constexpr int64_t kTargetBlocks = 264;
// A grid-stride kernel never needs more blocks than this.
constexpr int64_t kMaxBlocks = 65535;
// cuBLASLt's workspace (NVIDIA recommends 32 MiB on Hopper).
constexpr int64_t kGemmWorkspaceBytes = 32ll << 20;
// Every scratch slice starts on this boundary (cuBLASLt wants 16 B; vector
// loads like it too).
constexpr int64_t kScratchAlignment = 256;
// Tensors one multi-tensor AdamW launch updates (its table is a kernel
// argument: 32 entries of 40 bytes stay far below the 4 KiB limit).
constexpr int kAdamwTensorsPerLaunch = 32;
// Flash attention: query rows per block (one thread each) and key rows per
// shared-memory tile; the largest head dimension the kernels take.
constexpr int kAttentionQueryTile = 64;
constexpr int kAttentionKeyTile = 32;
constexpr int kAttentionMaxHeadDim = 256;

// Layout kernels take shapes of at most this rank (passed by value).
constexpr int kMaxTensorRank = 8;

constexpr int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
constexpr int64_t AlignUp(int64_t bytes, int64_t to) { return CeilDiv(bytes, to) * to; }

// Blocks of kThreads for a grid-stride loop over n elements.
constexpr int64_t ElementwiseBlocks(int64_t n) {
  return std::max<int64_t>(1, std::min(CeilDiv(n, kThreads), kMaxBlocks));
}

// A reduction of `reduced` elements into each of `outputs` values. Blocks
// hold 32 outputs (one per lane: coalesced when outputs are contiguous) times
// 8 partial sums; when there are too few outputs to fill the GPU, the reduced
// range is split into `chunks` whose partials (scratch: chunks · outputs
// floats) a second kernel sums in a fixed order, so results are deterministic.
struct ReducePlan {
  int64_t output_tiles = 1;
  int64_t chunks = 1;
  int64_t scratch_floats = 0;
};
constexpr int kReduceLanes = 32, kReduceRows = 8;

constexpr ReducePlan PlanReduce(int64_t outputs, int64_t reduced) {
  ReducePlan p;
  p.output_tiles = std::max<int64_t>(1, CeilDiv(outputs, kReduceLanes));
  // Each chunk gets at least 1024 elements of every output's range.
  int64_t want = std::max<int64_t>(1, CeilDiv(kTargetBlocks, p.output_tiles));
  p.chunks = std::max<int64_t>(1, std::min({want, CeilDiv(reduced, 1024), int64_t{1024}}));
  p.scratch_floats = p.chunks > 1 ? p.chunks * outputs : 0;
  return p;
}

// A sum (max, mean) over the leading dims of a row-major [rows, cols]
// tensor into its cols trailing values (a bias gradient): each lane of a
// 32 x 8 block takes 8 adjacent columns (16-byte loads), so a block covers
// 256 columns, and the rows are split into chunks for about 4 blocks an SM,
// at most 128 (the finishing kernel reads them all for each column).
constexpr int kColumnsPerLane = 8;
constexpr ReducePlan PlanColumnSum(int64_t cols, int64_t rows) {
  ReducePlan p;
  p.output_tiles = std::max<int64_t>(1, CeilDiv(cols, kReduceLanes * kColumnsPerLane));
  int64_t want = std::max<int64_t>(1, CeilDiv(4 * kTargetBlocks, p.output_tiles));
  p.chunks = std::max<int64_t>(1, std::min({want, CeilDiv(rows, 64), int64_t{128}}));
  p.scratch_floats = p.chunks > 1 ? p.chunks * cols : 0;
  return p;
}
// What any reduction of `reduced` elements into each of `outputs` values may
// need (the kernel picks PlanColumnSum's when the layout allows).
constexpr int64_t ReduceScratchFloats(int64_t outputs, int64_t reduced) {
  return std::max(PlanReduce(outputs, reduced).scratch_floats,
                  PlanColumnSum(outputs, reduced).scratch_floats);
}

// LayerNorm / RMSNorm backward over `rows` rows of width d, in one pass
// where it fits (`fused`): blocks of kThreads take `blocks` contiguous chunks
// of rows, a warp a row at a time; each warp adds its rows' weight (and bias)
// gradient terms into its own shared-memory row of d sums per table, and the
// block writes its warps' rows added in warp order as one partial row; the
// [blocks, d] partials are then summed over the blocks in a fixed order
// (PlanColumnSum's kernel: `finish_floats` of its scratch). Where a block's
// shared rows would not fit (`shared_bytes` above kNormGradMaxSharedBytes),
// the row kernel keeps each row's (mean, rstd) and a second pass reads dy and
// x again for the column sums (PlanColumnSum's or PlanReduce's partials).
constexpr int64_t kNormGradMaxSharedBytes = 96 << 10;  // two blocks an SM
struct NormGradPlan {
  bool fused = false;
  int64_t blocks = 0;          // fused: chunks of rows, a block each
  int64_t rows_per_block = 0;  // fused
  int64_t shared_bytes = 0;    // fused: warps x tables x d floats
  int64_t stats_floats = 0;    // two-pass: (mean, rstd) a row
  int64_t partial_floats = 0;  // each partial table (two-pass: both tables)
  int64_t finish_floats = 0;   // fused: the blocks' column sums' own chunks
  int64_t scratch_floats = 0;
};

constexpr NormGradPlan PlanNormGrad(int64_t rows, int64_t d, bool bias = true) {
  NormGradPlan p;
  const int64_t warps = kThreads / 32, tables = bias ? 2 : 1;
  p.shared_bytes = warps * tables * d * 4;
  p.fused = p.shared_bytes <= kNormGradMaxSharedBytes;
  if (p.fused) {
    // Two rows a warp at least; at most four waves of 264 blocks, so the
    // partials stay a few percent of the rows' bytes.
    p.blocks = std::max<int64_t>(1, std::min(CeilDiv(rows, 2 * warps), 4 * kTargetBlocks));
    p.rows_per_block = CeilDiv(rows, p.blocks);
    p.partial_floats = AlignUp(p.blocks * d, kScratchAlignment / 4);
    p.finish_floats = ReduceScratchFloats(d, p.blocks);
    p.scratch_floats = tables * p.partial_floats + p.finish_floats;
    return p;
  }
  p.shared_bytes = 0;
  p.stats_floats = 2 * rows;
  p.partial_floats = ReduceScratchFloats(d, rows);
  // Two partial tables (weight and bias).
  p.scratch_floats = p.stats_floats + 2 * p.partial_floats;
  return p;
}

// The fused cross-entropy and its gradient: a block per row. A row of at
// most kCrossEntropyRowSharedBytes (gpt2-124m's 50,304 bf16 logits: 98 KiB)
// is kept in shared memory as the loss's pass reads it, so the gradient's
// pass reads it there, not from HBM again (two blocks of
// kCrossEntropyRowThreads an SM); a wider row is read twice.
constexpr int64_t kCrossEntropyRowSharedBytes = 112 << 10;
constexpr int kCrossEntropyRowThreads = 512;
constexpr bool CrossEntropyRowInShared(int64_t classes, int64_t logit_bytes) {
  return classes * logit_bytes <= kCrossEntropyRowSharedBytes;
}

// Rotary embeddings: the cos and sin table of len positions x head_dim / 2
// pairs.
constexpr int64_t RotaryScratchFloats(int64_t len, int64_t head_dim) { return len * head_dim; }

// Cross-entropy: the loss of each row, summed in a fixed order.
constexpr int64_t CrossEntropyScratchFloats(int64_t rows) { return rows; }

// Attention backward: the row terms D = rowsum(dO ∘ O), and, unless the
// forward saved them (`saved`: its output kept alive and its log-sum-exp in
// the arena), the recomputed output and log-sum-exp. Slices in that order.
struct AttentionGradPlan {
  int64_t delta_floats = 0, out_floats = 0, lse_floats = 0;
};
constexpr AttentionGradPlan PlanAttentionGrad(int64_t batch, int64_t tq, int64_t heads,
                                              int64_t head_dim) {
  AttentionGradPlan p;
  p.delta_floats = batch * heads * tq;
  p.out_floats = batch * tq * heads * head_dim;
  p.lse_floats = batch * heads * tq;
  return p;
}
constexpr int64_t AttentionGradScratchBytes(int64_t batch, int64_t tq, int64_t heads,
                                            int64_t head_dim, bool saved = false) {
  AttentionGradPlan p = PlanAttentionGrad(batch, tq, heads, head_dim);
  const int64_t delta = AlignUp(p.delta_floats * 4, kScratchAlignment);
  if (saved) return delta;
  return delta + AlignUp(p.out_floats * 4, kScratchAlignment) +
         AlignUp(p.lse_floats * 4, kScratchAlignment);
}
// cuDNN's fused flash attention (kernels/cuda/cudnn_attention.cc) takes a
// bf16 attention whose head dim its Hopper kernels cover; the rest runs on
// our own kernels.
constexpr bool CudnnAttentionHeadDim(int64_t head_dim) {
  return head_dim == 64 || head_dim == 128;
}
// What the cuDNN backward needs beyond our own kernel's scratch (which it
// uses to recompute the forward when none was saved): bf16 dQ, dK, dV when
// the step wants them in f32 (cuDNN writes bf16; we widen), then the graph's
// workspace as the frontend sizes it for these shapes: the f32 dQ
// accumulator and softmax row sums, f32 full-head dK and dV under grouped
// queries, the dP buffer when it is at most 256 MiB (the frontend's default
// limit), and 64 MiB for the engine. The runtime checks the graph's real
// workspace against it and falls back to our kernel (with a note) when it
// does not fit.
struct CudnnAttentionGradPlan {
  int64_t dq_bytes = 0, dk_bytes = 0, dv_bytes = 0, workspace_bytes = 0;
};
constexpr CudnnAttentionGradPlan PlanCudnnAttentionGrad(int64_t batch, int64_t tq, int64_t tk,
                                                        int64_t heads, int64_t kv_heads,
                                                        int64_t head_dim, bool f32_grads) {
  CudnnAttentionGradPlan p;
  if (f32_grads) {
    p.dq_bytes = AlignUp(batch * tq * heads * head_dim * 2, kScratchAlignment);
    p.dk_bytes = AlignUp(batch * tk * kv_heads * head_dim * 2, kScratchAlignment);
    p.dv_bytes = p.dk_bytes;
  }
  // (The dQ accumulator twice: a deterministic backward may keep ordered
  // partials; unmeasured, so generous.)
  int64_t ws = 2 * batch * heads * tq * (head_dim + 1) * 4;
  if (kv_heads != heads) ws += 2 * batch * heads * tk * head_dim * 4;
  const int64_t dp = batch * heads * AlignUp(tq, 64) * AlignUp(tk, 64) * 2;
  if (dp <= (256ll << 20)) ws += dp;
  p.workspace_bytes = AlignUp(ws + (64ll << 20), kScratchAlignment);
  return p;
}
// The scratch an attention backward is planned with: our kernel's, and for
// a bf16 one cuDNN can take, cuDNN's beside it.
constexpr int64_t AttentionGradScratchBytesFor(int64_t batch, int64_t tq, int64_t tk,
                                               int64_t heads, int64_t kv_heads,
                                               int64_t head_dim, bool saved, bool bf16,
                                               bool f32_grads) {
  const int64_t own = AttentionGradScratchBytes(batch, tq, heads, head_dim, saved);
  if (!bf16 || !CudnnAttentionHeadDim(head_dim)) return own;
  const CudnnAttentionGradPlan c =
      PlanCudnnAttentionGrad(batch, tq, tk, heads, kv_heads, head_dim, f32_grads);
  return own + c.dq_bytes + c.dk_bytes + c.dv_bytes + c.workspace_bytes;
}
// The log-sum-exp a forward saves for its backward.
constexpr int64_t AttentionLseBytes(int64_t batch, int64_t tq, int64_t heads) {
  return AlignUp(batch * heads * tq * 4, kScratchAlignment);
}

// Grid of the flash-attention forward: (query tiles, batch · heads).
struct Grid2 {
  int64_t x = 1, y = 1;
};
constexpr Grid2 AttentionForwardGrid(int64_t batch, int64_t tq, int64_t heads) {
  return Grid2{CeilDiv(tq, kAttentionQueryTile), batch * heads};
}
// The key/value backward runs a block per key tile of each kv head.
constexpr Grid2 AttentionKeyGrid(int64_t batch, int64_t tk, int64_t kv_heads) {
  return Grid2{CeilDiv(tk, kAttentionQueryTile), batch * kv_heads};
}
// Shared memory of a forward block: one key and one value tile.
constexpr int64_t AttentionSharedBytes(int64_t head_dim, int64_t element_bytes) {
  return 2 * kAttentionKeyTile * head_dim * element_bytes;
}

// Tensor-core attention (bf16, mma.sync m16n8k16): 64 query (or key) rows a
// block of 4 warps, 64-row tiles of the other side, staged in shared memory.
constexpr int kTensorCoreRows = 64;
constexpr int kTensorCoreThreads = 128;
constexpr bool TensorCoreHeadDim(int64_t padded) {
  return padded == 32 || padded == 64 || padded == 128;
}
// bf16 elements padding each shared-memory row of the mma.sync kernels'
// tiles (16 bytes): the 8 rows a fragment load touches fall on distinct banks.
constexpr int kTensorCorePad = 8;
// The forward (mma.sync, scores and accumulators in registers): a Q tile
// and two buffers each of K and V tiles, [64, dh + pad] bf16.
constexpr int64_t TensorCoreForwardShared(int64_t dh) {
  return 5 * 64 * (dh + kTensorCorePad) * 2;
}
// The backward (likewise): dQ's Q and dO tiles and two buffers each of K
// and V, and two f32 row statistics; dK/dV's K and V tiles and two buffers
// each of Q, dO and their rows' statistics.
constexpr int64_t TensorCoreQueryGradShared(int64_t dh) {
  return 6 * 64 * (dh + kTensorCorePad) * 2 + 2 * 64 * 4;
}
constexpr int64_t TensorCoreKeyValueGradShared(int64_t dh) {
  return 6 * 64 * (dh + kTensorCorePad) * 2 + 4 * 64 * 4;
}
// Hopper's shared memory per block (227 KiB with the opt-in).
constexpr int64_t kMaxSharedBytes = 227 * 1024;

// The multi-tensor AdamW: launches for n tensors, and blocks per launch
// (enough for the largest tensor, bounded).
constexpr int64_t AdamwLaunches(int64_t tensors) {
  return CeilDiv(tensors, kAdamwTensorsPerLaunch);
}
constexpr int64_t AdamwBlocksPerTensor(int64_t largest) {
  return std::max<int64_t>(1, std::min<int64_t>(CeilDiv(largest, kThreads * 4), 1024));
}

// The gradient clipping's squared norms of many tensors: each tensor in
// PlanReduce's chunks for a whole-tensor sum (so that each sum has the bits
// stepc_cuda_reduce gives it), a partial each, then a thread a tensor adds
// its partials; a launch of each per kSquaredNormTensorsPerLaunch tensors
// (the table is a kernel argument: 64 entries of 40 bytes), then one adds
// the sums in order. Scratch: the tensors' sums, then every partial.
constexpr int kSquaredNormTensorsPerLaunch = 64;
// The parameters' bf16 copies: a launch per 64 (a table of 24-byte rows).
constexpr int kBf16CopiesPerLaunch = 64;
constexpr int64_t SquaredNormChunks(int64_t n) { return PlanReduce(1, n).chunks; }
inline int64_t SquaredNormsScratchFloats(const int64_t* counts, int64_t tensors) {
  int64_t floats = tensors;
  for (int64_t t = 0; t < tensors; ++t) floats += SquaredNormChunks(counts[t]);
  return floats;
}

// The one-pass pair of fp8 roundings (fp8.cu): a block per 128 x 128
// panel; with the bias gradient, each panel's column sums, then one sum of
// them per column in order.
constexpr int64_t kFp8PairPanel = 128;
constexpr int64_t Fp8PairColumnSumScratchFloats(int64_t rows, int64_t cols) {
  return CeilDiv(rows, kFp8PairPanel) * cols;
}

// fp8 GEMMs (cuBLASLt's block scaling on Hopper, DeepSeek-V3's recipe):
// A [M, K] and B as [N, K] (both K-major, cuBLASLt's only fp8 layout), one
// byte an element; A scaled per 1x128 block along K (f32, [ceil(K/128)][M],
// M contiguous); B per 128x128 block ([ceil(N/128)][L4], L4 = ceil(K/128)
// rounded up to 4, K-blocks contiguous) or, `b_vector`, per 1x128 block
// along K as A ([ceil(K/128)][N]). cuBLASLt multiplies by the scales (they
// are 1/s of the quantizer's power of two s).
constexpr int64_t kFp8Block = 128;
struct Fp8GemmLayout {
  int64_t a_bytes, a_scales, b_bytes, b_scales, total;  // offsets into scratch; its size
  int64_t b_scale_ld;                                   // L4 (128x128 blocks)
};
constexpr Fp8GemmLayout PlanFp8Gemm(int64_t m, int64_t n, int64_t k, bool b_vector) {
  const int64_t kb = CeilDiv(k, kFp8Block), l4 = AlignUp(kb, 4);
  const int64_t a_scales = AlignUp(m * k, kScratchAlignment);
  const int64_t b_bytes = a_scales + AlignUp(kb * m * 4, kScratchAlignment);
  const int64_t b_scales = b_bytes + AlignUp(n * k, kScratchAlignment);
  const int64_t b_scale_floats = b_vector ? kb * n : CeilDiv(n, kFp8Block) * l4;
  const int64_t total = b_scales + AlignUp(b_scale_floats * 4, kScratchAlignment);
  return Fp8GemmLayout{0, a_scales, b_bytes, b_scales, total, l4};
}
// Whether an fp8 GEMM of this form runs on fp8 tensor cores: one product
// (or rows of a shared B under an untransposed A), cuBLASLt's alignment (16
// bytes of K, N; M scales in whole 16 bytes), not two e5m2 operands.
// Others run the bf16 GEMM on the same (exact) values.
constexpr bool Fp8GemmRunsInFp8(int64_t batch, int64_t m, int64_t n, int64_t k, int transpose_a,
                                int shared_rhs, int a_format, int b_format) {
  return (batch == 1 || (shared_rhs && !transpose_a)) && (batch * m) % 4 == 0 && k % 16 == 0 &&
         n % 16 == 0 && !(a_format == 1 && b_format == 1);
}
// Where an fp8 GEMM runs in bf16 (its form, no fp8 algorithm in cuBLASLt,
// or STEPC_FP8_GEMMS=0), the bf16 operands it unpacks in its scratch: A at
// 0, B after it.
struct Fp8Bf16Operands {
  int64_t a, b, total;  // offsets into scratch; its size
};
constexpr Fp8Bf16Operands PlanFp8Bf16Operands(int64_t rows, int64_t n, int64_t k, bool a_made,
                                              bool b_made) {
  const int64_t b = a_made ? AlignUp(rows * k * 2, kScratchAlignment) : 0;
  return Fp8Bf16Operands{0, b, b + (b_made ? AlignUp(n * k * 2, kScratchAlignment) : 0)};
}
// The scratch an fp8 GEMM packs its operands into (0 when it runs in bf16),
// or room for the bf16 operands it unpacks where it runs in bf16 (operands
// packed already: `packed_a`, `packed_b`, stepk.pack_fp8).
constexpr int64_t Fp8GemmScratchBytes(int64_t batch, int64_t m, int64_t n, int64_t k,
                                      int transpose_a, int shared_rhs, int a_format,
                                      int b_format, int b_vector, int packed_a = 0,
                                      int packed_b = 0) {
  const int64_t packed =
      Fp8GemmRunsInFp8(batch, m, n, k, transpose_a, shared_rhs, a_format, b_format)
          ? PlanFp8Gemm(batch * m, n, k, b_vector != 0).total
          : 0;
  return std::max(packed, PlanFp8Bf16Operands(batch * m, n, k, packed_a != 0, packed_b != 0)
                              .total);
}

}  // namespace stepc::cuda

#endif  // STEPC_RUNTIME_KERNELS_CUDA_LAUNCH_CONFIG_H_
