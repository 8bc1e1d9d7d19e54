//===- LoweringUtils.h - what the target-lowering passes share ---*- C++ -*-===//

#ifndef STEPC_COMPILER_LIB_LOWERINGUTILS_H
#define STEPC_COMPILER_LIB_LOWERINGUTILS_H

#include "stepc/Dialect/Step/IR/StepDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace stepc {

/// The functions a lowering pass rewrites: the training steps (marked
/// step.train_step) of `module` and their forward-only steps
/// (step.eval_step).
inline llvm::SmallVector<mlir::func::FuncOp> trainingSteps(mlir::ModuleOp module) {
  llvm::SmallVector<mlir::func::FuncOp> steps;
  for (auto f : module.getOps<mlir::func::FuncOp>())
    if (f->hasAttr(step::StepDialect::kTrainStepAttrName) ||
        f->hasAttr(step::StepDialect::kEvalStepAttrName))
      steps.push_back(f);
  return steps;
}

/// Checks a pass's `target` option: cpu or cuda, else an error naming the
/// pass.
inline mlir::LogicalResult checkTarget(mlir::ModuleOp module, llvm::StringRef pass,
                                       llvm::StringRef target) {
  if (target == "cpu" || target == "cuda")
    return mlir::success();
  return mlir::emitError(module.getLoc())
         << pass << ": unknown target '" << target << "' (expected cpu or cuda)";
}

/// On the CPU: attention on slices of one packed [B, T, 3C] tensor reads
/// it in place, and its gradient's pad-and-add back into [B, T, 3C] is one
/// kernel writing the three parts (PackedAttention.cpp).
void lowerPackedAttention(mlir::func::FuncOp step);
/// On the CPU: a cross-entropy and its gradient (same logits and targets)
/// as one kernel with both results (FusedCrossEntropy.cpp).
void lowerFusedCrossEntropy(mlir::func::FuncOp step);

} // namespace stepc

#endif // STEPC_COMPILER_LIB_LOWERINGUTILS_H
