//===- PackedAttention.h - attention on the packed QKV projection -*- C++ -*-===//
//
// A GPT projects its input once into [B, T, W] and slices query, key and
// value out of it; their gradients come back as three zero-pads summed into
// [B, T, W]. Both targets' kernels can read the three in place and write
// the three gradients into their columns of one result: what they need to
// recognise is here (PackedAttention.cpp), the CPU's lowering to its packed
// calls (lowerPackedAttention, LoweringUtils.h) and the CUDA kernels' packed
// form (step-fuse-cuda-kernels) use it.
//
//===----------------------------------------------------------------------===//

#ifndef STEPC_COMPILER_LIB_PACKEDATTENTION_H
#define STEPC_COMPILER_LIB_PACKEDATTENTION_H

#include "stepc/Dialect/Step/IR/StepOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <array>
#include <optional>

namespace stepc {

/// Query, key and value as last-dim slices [offset, offset + width) of one
/// rank-3 f32 or bf16 source, whole in its first two dims.
struct PackedQkv {
  mlir::Value source;
  std::array<step::SliceOp, 3> slices;
  std::array<int64_t, 3> offsets, widths;
  /// The slices cover the last dim exactly once (so a packed gradient
  /// writes every element).
  bool tilesLastDim() const;
};
std::optional<PackedQkv> packedQkv(mlir::Value query, mlir::Value key, mlir::Value value);

/// An attention gradient's results, each padded back into the source's
/// shape at its slice (widened to f32 first when the source is bf16), and
/// summed by two adds in any order: what one packed kernel writes.
struct PackedGradSum {
  std::array<step::PadOp, 3> pads;
  std::array<step::ConvertOp, 3> widens; // null for an f32 source
  step::AddOp first, second;             // `second` is the sum
};
std::optional<PackedGradSum> packedGradSum(step::AttentionGradOp grad, const PackedQkv &qkv);

/// Under --precision=bf16 the mixed-precision pass rounds each slice
/// (convert(slice(x)) to bf16). Rounding commutes with slicing, so for each
/// unmasked attention and gradient of `step` whose three operands are such
/// converts of one f32 x, they become slices of one convert(x) (made once
/// per x, right after it). Returns each x's rounded copy; the replaced
/// slices and converts are erased when nothing reads them any more.
llvm::DenseMap<mlir::Value, mlir::Value> roundBeforeSlicing(mlir::func::FuncOp step);

/// Slices of a rounded source that no packed kernel takes go back to
/// rounding after slicing (neither target copies a bf16 slice): each use of
/// such a slice for which `staysPacked` is false reads convert(slice(x))
/// instead; rounded copies nothing reads any more are erased.
void unroundLeftovers(const llvm::DenseMap<mlir::Value, mlir::Value> &rounded,
                      llvm::function_ref<bool(mlir::OpOperand &)> staysPacked);

} // namespace stepc

#endif // STEPC_COMPILER_LIB_PACKEDATTENTION_H
