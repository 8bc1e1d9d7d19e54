//===- LoweringUtils.h - what the target-lowering passes share ---*- C++ -*-===//

#ifndef STEPC_COMPILER_LIB_LOWERINGUTILS_H
#define STEPC_COMPILER_LIB_LOWERINGUTILS_H

#include "stepc/Dialect/Step/IR/StepDialect.h"
#include "stepc/Dialect/StepK/IR/StepKOps.h"

#include "mlir/IR/IRMapping.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace stepc {

/// The functions a lowering pass rewrites: the training steps (marked
/// step.train_step) of `module` and their forward-only steps
/// (step.eval_step) and sampling steps (step.sample_step).
inline llvm::SmallVector<mlir::func::FuncOp> trainingSteps(mlir::ModuleOp module) {
  llvm::SmallVector<mlir::func::FuncOp> steps;
  for (auto f : module.getOps<mlir::func::FuncOp>())
    if (f->hasAttr(step::StepDialect::kTrainStepAttrName) ||
        f->hasAttr(step::StepDialect::kEvalStepAttrName) ||
        f->hasAttr(step::StepDialect::kSampleStepAttrName))
      steps.push_back(f);
  return steps;
}

/// The multi-tensor library calls step-fuse-cuda-kernels forms: their
/// inputs travel to the kernel as a table (not as arguments), and they read
/// every block's tensors.
inline constexpr llvm::StringLiteral kSquaredNormsCall = "squared_norms";
inline constexpr llvm::StringLiteral kBf16CopiesCall = "bf16_copies";
inline bool isMultiTensorCall(mlir::Operation *op) {
  auto call = llvm::dyn_cast<stepk::CallOp>(op);
  return call && (call.getCallee() == kSquaredNormsCall || call.getCallee() == kBf16CopiesCall);
}

/// Whether both back ends can compute `op` element by element inside a
/// stepk.fused kernel (ScalarMathOpInterface ops and converts): the fusion
/// pass's rule, which the emitters follow (FuseElementwise.cpp).
bool isFusableElementwise(mlir::Operation *op);
/// Before the fusion finds its runs: elementwise values recomputed beside
/// far users, elementwise ops sunk to their first users, where that keeps
/// values out of memory between kernels (PlaceElementwise.cpp).
void placeElementwiseForFusion(mlir::func::FuncOp step);

/// Checks a pass's `target` option: cpu or cuda, else an error naming the
/// pass.
inline mlir::LogicalResult checkTarget(mlir::ModuleOp module, llvm::StringRef pass,
                                       llvm::StringRef target) {
  if (target == "cpu" || target == "cuda")
    return mlir::success();
  return mlir::emitError(module.getLoc())
         << pass << ": unknown target '" << target << "' (expected cpu or cuda)";
}

/// Fills `call`'s (empty) body with what it computes: one argument per
/// input, clones of `ops` in order on them, a yield of `yields`' clones.
inline void fillCallBody(stepk::CallOp call, llvm::ArrayRef<mlir::Operation *> ops,
                         mlir::ValueRange yields) {
  mlir::Block *body = new mlir::Block();
  call.getBody().push_back(body);
  mlir::IRMapping map;
  for (mlir::Value in : call.getInputs())
    map.map(in, body->addArgument(in.getType(), in.getLoc()));
  mlir::OpBuilder inner = mlir::OpBuilder::atBlockEnd(body);
  for (mlir::Operation *op : ops)
    inner.clone(*op, map);
  llvm::SmallVector<mlir::Value> yielded;
  for (mlir::Value y : yields)
    yielded.push_back(map.lookup(y));
  inner.create<stepk::YieldOp>(call.getLoc(), yielded);
}

/// On the CPU: attention on slices of one packed [B, T, 3C] tensor reads
/// it in place, and its gradient's pad-and-add back into [B, T, 3C] is one
/// kernel writing the three parts (PackedAttention.cpp).
void lowerPackedAttention(mlir::func::FuncOp step);
/// A cross-entropy and its gradient (same logits and targets) as one
/// kernel with both results; on CUDA it also reads bf16 logits that were
/// only widened for the two (FusedCrossEntropy.cpp). Options need their
/// count explicit first.
void lowerFusedCrossEntropy(mlir::func::FuncOp step, bool cuda);
/// Gives every cross_entropy(_grad) with options its count operand.
void explicitLossCounts(mlir::func::FuncOp step);
/// Marks the stepk.gemm ops whose operands step.quantize_fp8 rounded in
/// tiles that hold cuBLASLt's fp8 scaling blocks (`fp8` formats): CUDA
/// multiplies them on fp8 tensor cores (Fp8Gemms.cpp).
void markFp8Gemms(mlir::func::FuncOp step);
/// After markFp8Gemms: a rounding pair (a linear layer's input, or its
/// output gradient) that only fp8 GEMMs read, as operands they can take
/// packed, writes their operands instead of bf16 copies: fp8 bytes and
/// block scales both ways (pack_fp8_rows_columns...), read by the GEMMs as
/// they are (Fp8Gemms.cpp).
void packFp8Pairs(mlir::func::FuncOp step);
/// After markFp8Gemms: a weight's rounding in 128x128 tiles that only fp8
/// GEMMs read as their rhs is a pass writing its fp8 bytes and block scales
/// in the layouts they read (as stored for the forward, transposed for the
/// input gradient: pack_fp8_blocks[_transposed|_both]); so is an input's
/// lone [1, 128] rounding (a forward without its backward: pack_fp8_rows)
/// (Fp8Gemms.cpp).
void packFp8Roundings(mlir::func::FuncOp step);

/// Under bf16, both targets: an f32 value that is otherwise only rounded to
/// bf16 (a bias's gradient beside its weight gradient's GEMM operand) is
/// summed from the rounded values, as autocast sums them; step-lower-
/// library-calls then reads them as they are (reduce_of_bf16), and the
/// f32 value is never stored (FoldWideningGemms.cpp).
void sumBesideRoundings(mlir::func::FuncOp step);

/// Under bf16, both targets: a bf16 GEMM (stepk.gemm, no GELU epilogue)
/// whose f32 result only elementwise ops read writes bf16, and each reader
/// widens it (step-fuse-elementwise joins the widening to its kernel): the
/// GEMM's rounding (a biased one's: autocast's, the sum plus the bias),
/// half the bytes written, kept for the backward and read again
/// (FoldWideningGemms.cpp).
void narrowGemmsForLoops(mlir::func::FuncOp step);

/// On the CPU under bf16: a value rounded to bf16 once, not again where it
/// is widened back or read through a reshape (FoldConversions.cpp).
void foldConversions(mlir::func::FuncOp step);

/// `type` with bf16 elements.
inline mlir::RankedTensorType asBF16Type(mlir::Type type) {
  auto ranked = mlir::cast<mlir::RankedTensorType>(type);
  return mlir::RankedTensorType::get(ranked.getShape(),
                                     mlir::BFloat16Type::get(type.getContext()));
}

/// The masked cross-entropy kernels' `ignore` scalar when nothing is
/// ignored: a value no i32 target equals.
constexpr int64_t kNoIgnoredTarget = -(int64_t{1} << 40);

} // namespace stepc

#endif // STEPC_COMPILER_LIB_LOWERINGUTILS_H
