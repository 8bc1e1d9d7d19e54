// Launch configuration and scratch sizing of the CUDA kernels: the numbers
// the compiler sizes the arena with must be the ones the kernels use.

#include "runtime/kernels/cuda/launch_config.h"

#include <gtest/gtest.h>

namespace stepc::cuda {
namespace {

TEST(LaunchConfig, ElementwiseBlocksCoverAndAreBounded) {
  EXPECT_EQ(ElementwiseBlocks(0), 1);
  EXPECT_EQ(ElementwiseBlocks(1), 1);
  EXPECT_EQ(ElementwiseBlocks(kThreads), 1);
  EXPECT_EQ(ElementwiseBlocks(kThreads + 1), 2);
  // A grid-stride loop covers any n with the bounded grid.
  EXPECT_EQ(ElementwiseBlocks(int64_t{1} << 40), kMaxBlocks);
}

TEST(LaunchConfig, ReduceSplitsOnlyWhenOutputsCannotFillTheGpu) {
  // Bias gradient of gpt2-124m: [8·1024, 768] -> [768]: 24 tiles, chunks fill the rest.
  ReducePlan bias = PlanReduce(768, 8192);
  EXPECT_EQ(bias.output_tiles, 24);
  EXPECT_EQ(bias.chunks, 8);  // ceil(8192 / 1024): every chunk at least 1024 rows
  EXPECT_EQ(bias.scratch_floats, 8 * 768);
  // A full reduction (the gradient norm of wte) splits into the most chunks.
  ReducePlan full = PlanReduce(1, 50257 * 768);
  EXPECT_EQ(full.output_tiles, 1);
  EXPECT_EQ(full.chunks, kTargetBlocks);
  EXPECT_EQ(full.scratch_floats, kTargetBlocks);
  // Many outputs: one chunk, no scratch.
  ReducePlan rows = PlanReduce(8192, 768);
  EXPECT_EQ(rows.chunks, 1);
  EXPECT_EQ(rows.scratch_floats, 0);
  // Small reductions never split below 1024 elements a chunk.
  EXPECT_EQ(PlanReduce(1, 1000).chunks, 1);
  EXPECT_EQ(PlanReduce(1, 5000).chunks, 5);
}

TEST(LaunchConfig, ChunksCoverTheReducedRange) {
  for (int64_t outputs : {1, 7, 32, 33, 768, 5000})
    for (int64_t reduced : {1, 1023, 1024, 1025, 100000, 38597376}) {
      ReducePlan p = PlanReduce(outputs, reduced);
      const int64_t per_chunk = CeilDiv(reduced, p.chunks);
      EXPECT_GE(per_chunk * p.chunks, reduced) << outputs << " " << reduced;
      EXPECT_LT(per_chunk * (p.chunks - 1), reduced) << "an empty chunk";
      EXPECT_EQ(p.output_tiles * kReduceLanes >= outputs, true);
    }
}

TEST(LaunchConfig, ColumnSumsFillTheGpuWithinTheirScratch) {
  // gpt2-124m's bias gradients at B=64: [65536, 768] and [65536, 3072].
  ReducePlan narrow = PlanColumnSum(768, 65536);
  EXPECT_EQ(narrow.output_tiles, 3);  // 256 columns a block
  EXPECT_EQ(narrow.chunks, 128);      // at most 128 partials a column
  EXPECT_EQ(narrow.scratch_floats, 128 * 768);
  ReducePlan wide = PlanColumnSum(3072, 65536);
  EXPECT_EQ(wide.output_tiles, 12);
  EXPECT_EQ(wide.chunks, 88);  // ceil(4 · 264 / 12): about 4 blocks an SM
  // Few rows: chunks of at least 64 rows, none below one.
  EXPECT_EQ(PlanColumnSum(768, 100).chunks, 2);
  EXPECT_EQ(PlanColumnSum(768, 10).chunks, 1);
  EXPECT_EQ(PlanColumnSum(768, 10).scratch_floats, 0);
  // The compiler plans for either kernel.
  for (int64_t outputs : {1, 8, 768, 3072})
    for (int64_t reduced : {1, 100, 8192, 65536})
      EXPECT_EQ(ReduceScratchFloats(outputs, reduced),
                std::max(PlanReduce(outputs, reduced).scratch_floats,
                         PlanColumnSum(outputs, reduced).scratch_floats));
}

TEST(LaunchConfig, NormGradInOnePassWhereTheWarpsSumsFit) {
  // gpt2-124m at B=64: 65,536 rows of 768; 8 warps x 2 tables x 768 floats.
  NormGradPlan p = PlanNormGrad(65536, 768);
  EXPECT_TRUE(p.fused);
  EXPECT_EQ(p.shared_bytes, 8 * 2 * 768 * 4);
  EXPECT_EQ(p.blocks, 4 * kTargetBlocks);
  EXPECT_EQ(p.rows_per_block, CeilDiv(65536, p.blocks));
  EXPECT_GE(p.blocks * p.rows_per_block, 65536);
  EXPECT_EQ(p.stats_floats, 0);
  // Two partial tables of a row per block, then the column sums' own chunks.
  EXPECT_EQ(p.partial_floats, p.blocks * 768);
  EXPECT_EQ(p.finish_floats, ReduceScratchFloats(768, p.blocks));
  EXPECT_EQ(p.scratch_floats, 2 * p.partial_floats + p.finish_floats);
  // Few rows: two rows a warp at least; one block for a tiny norm.
  EXPECT_EQ(PlanNormGrad(301, 100).blocks, CeilDiv(301, 16));
  EXPECT_EQ(PlanNormGrad(3, 100).blocks, 1);
  EXPECT_EQ(PlanNormGrad(3, 100).rows_per_block, 3);
  // Partial tables start on the scratch alignment.
  EXPECT_EQ(PlanNormGrad(301, 100).partial_floats % (kScratchAlignment / 4), 0);
  // An RMS norm has one table: Llama-1b's 2048 fits, a layer norm of 2048 not.
  EXPECT_TRUE(PlanNormGrad(8192, 2048, /*bias=*/false).fused);
  EXPECT_EQ(PlanNormGrad(8192, 2048, false).shared_bytes, 8 * 2048 * 4);
  EXPECT_EQ(PlanNormGrad(8192, 2048, false).scratch_floats,
            PlanNormGrad(8192, 2048, false).partial_floats +
                PlanNormGrad(8192, 2048, false).finish_floats);
  EXPECT_FALSE(PlanNormGrad(8192, 2048, /*bias=*/true).fused);
  EXPECT_TRUE(PlanNormGrad(8192, 1536).fused);
  EXPECT_FALSE(PlanNormGrad(8192, 1537).fused);
}

TEST(LaunchConfig, NormGradTwoPassScratchHoldsStatsAndBothPartialTables) {
  NormGradPlan p = PlanNormGrad(8192, 4096);
  EXPECT_FALSE(p.fused);
  EXPECT_EQ(p.shared_bytes, 0);
  EXPECT_EQ(p.stats_floats, 2 * 8192);
  EXPECT_EQ(p.scratch_floats, 2 * 8192 + 2 * p.partial_floats);
  // Room for the 16-byte column kernel's partials and the strided one's.
  EXPECT_EQ(p.partial_floats, std::max(PlanColumnSum(4096, 8192).scratch_floats,
                                       PlanReduce(4096, 8192).scratch_floats));
}

TEST(LaunchConfig, AttentionGradScratchIsAlignedSlices) {
  // gpt-small: B=4, T=64, H=4, Dh=16.
  AttentionGradPlan p = PlanAttentionGrad(4, 64, 4, 16);
  EXPECT_EQ(p.out_floats, 4 * 64 * 4 * 16);
  EXPECT_EQ(p.lse_floats, 4 * 4 * 64);
  EXPECT_EQ(p.delta_floats, 4 * 4 * 64);
  EXPECT_EQ(AttentionGradScratchBytes(4, 64, 4, 16), (16384 + 1024 + 1024) * 4);
  // With the forward's output and lse saved, only D.
  EXPECT_EQ(AttentionGradScratchBytes(4, 64, 4, 16, /*saved=*/true), 1024 * 4);
  EXPECT_EQ(AttentionLseBytes(4, 64, 4), 1024 * 4);
  // Odd sizes round each slice up.
  EXPECT_EQ(AttentionGradScratchBytes(1, 3, 1, 5), 256 * 3);
  EXPECT_EQ(AttentionLseBytes(1, 3, 1), 256);
}

TEST(LaunchConfig, CudnnAttentionGradScratchBesideOurs) {
  // gpt2-124m at B=64: T=1024, 12 heads of 64, bf16, f32 gradients wanted.
  const CudnnAttentionGradPlan p = PlanCudnnAttentionGrad(64, 1024, 1024, 12, 12, 64, true);
  EXPECT_EQ(p.dq_bytes, 64ll * 1024 * 12 * 64 * 2);
  EXPECT_EQ(p.dk_bytes, p.dq_bytes);
  EXPECT_EQ(p.dv_bytes, p.dq_bytes);
  // dQ accumulator and row sums (twice); the 1.6 GB dP buffer is over the
  // frontend's 256 MiB limit, so not counted; 64 MiB for the engine.
  EXPECT_EQ(p.workspace_bytes, 2 * 64ll * 12 * 1024 * 65 * 4 + (64ll << 20));
  const int64_t ours = AttentionGradScratchBytes(64, 1024, 12, 64, /*saved=*/true);
  EXPECT_EQ(AttentionGradScratchBytesFor(64, 1024, 1024, 12, 12, 64, true, /*bf16=*/true, true),
            ours + 3 * p.dq_bytes + p.workspace_bytes);
  // Grouped queries add f32 full-head dK and dV; a small problem its dP.
  const CudnnAttentionGradPlan g = PlanCudnnAttentionGrad(1, 70, 70, 4, 2, 64, false);
  EXPECT_EQ(g.dq_bytes, 0);
  EXPECT_EQ(g.workspace_bytes,
            AlignUp(2 * 4 * 70 * 65 * 4 + 2 * 4 * 70 * 64 * 4 + 4 * 128 * 128 * 2 + (64ll << 20),
                    kScratchAlignment));
  // f32 attention, or a head dim cuDNN does not take: ours alone.
  EXPECT_EQ(AttentionGradScratchBytesFor(4, 64, 64, 4, 4, 16, false, true, true),
            AttentionGradScratchBytes(4, 64, 4, 16));
  EXPECT_EQ(AttentionGradScratchBytesFor(4, 64, 64, 4, 4, 64, false, false, true),
            AttentionGradScratchBytes(4, 64, 4, 64));
}

TEST(LaunchConfig, AttentionGridsTileQueriesAndKeys) {
  Grid2 f = AttentionForwardGrid(8, 1024, 12);
  EXPECT_EQ(f.x, 1024 / kAttentionQueryTile);
  EXPECT_EQ(f.y, 96);
  Grid2 ragged = AttentionForwardGrid(1, 65, 2);
  EXPECT_EQ(ragged.x, 2);
  Grid2 kv = AttentionKeyGrid(2, 100, 1);  // MQA: one kv head
  EXPECT_EQ(kv.x, 2);
  EXPECT_EQ(kv.y, 2);
  EXPECT_EQ(AttentionSharedBytes(64, 4), 2 * kAttentionKeyTile * 64 * 4);
  // The largest head dim needs the opt-in above 48 KiB.
  EXPECT_GT(AttentionSharedBytes(kAttentionMaxHeadDim, 4), 48 * 1024);
}

TEST(LaunchConfig, TensorCoreAttentionFitsInSharedMemory) {
  EXPECT_TRUE(TensorCoreHeadDim(64));
  EXPECT_TRUE(TensorCoreHeadDim(128));
  EXPECT_FALSE(TensorCoreHeadDim(256));  // the scalar kernels take it
  for (int64_t dh : {32, 64, 128}) {
    EXPECT_LE(TensorCoreForwardShared(dh), kMaxSharedBytes) << dh;
    EXPECT_LE(TensorCoreQueryGradShared(dh), kMaxSharedBytes) << dh;
    EXPECT_LE(TensorCoreKeyValueGradShared(dh), kMaxSharedBytes) << dh;
    // The forward's regions stay 16-byte aligned for its 16-byte staging stores.
    EXPECT_EQ(TensorCoreForwardShared(dh) % 128, 0);
  }
  EXPECT_EQ(TensorCoreForwardShared(128), 87040);
  EXPECT_EQ(TensorCoreKeyValueGradShared(128), 105472);
}

TEST(LaunchConfig, SquaredNormsScratchHoldsEveryChunkAndEveryTensorsSum) {
  // A whole-tensor sum's chunks, as stepc_cuda_reduce makes them.
  EXPECT_EQ(SquaredNormChunks(1), 1);
  EXPECT_EQ(SquaredNormChunks(1024), PlanReduce(1, 1024).chunks);
  EXPECT_EQ(SquaredNormChunks(1025), 2);
  const int64_t counts[] = {1, 1024, 1025, 50304 * 768};
  // 4 sums; 1 + 1 + 2 + 264 partials (wte: as many chunks as fill the GPU).
  EXPECT_EQ(SquaredNormsScratchFloats(counts, 4), 4 + 1 + 1 + 2 + kTargetBlocks);
}

TEST(LaunchConfig, AdamwLaunchesAndBlocks) {
  EXPECT_EQ(AdamwLaunches(148), 5);  // gpt2-124m's 148 tensors
  EXPECT_EQ(AdamwLaunches(32), 1);
  EXPECT_EQ(AdamwLaunches(1), 1);
  EXPECT_EQ(AdamwBlocksPerTensor(1), 1);
  EXPECT_EQ(AdamwBlocksPerTensor(38597376), 1024);
  EXPECT_EQ(AdamwBlocksPerTensor(4 * kThreads * 3), 3);
}

TEST(LaunchConfig, AlignUp) {
  EXPECT_EQ(AlignUp(0, 256), 0);
  EXPECT_EQ(AlignUp(1, 256), 256);
  EXPECT_EQ(AlignUp(256, 256), 256);
  EXPECT_EQ(AlignUp(257, 256), 512);
}

}  // namespace
}  // namespace stepc::cuda
