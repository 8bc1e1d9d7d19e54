//===- LossFunctions.h - rebinding and differentiating a loss -*- C++ -*-===//
//
// The transformations step-rebind-batch and step-autodiff apply to each loss
// function, for passes that build more than one gradient of a loss (the
// micro-batch gradient of step-micro-batch).
//
//===----------------------------------------------------------------------===//

#ifndef STEPC_TRANSFORMS_LOSSFUNCTIONS_H
#define STEPC_TRANSFORMS_LOSSFUNCTIONS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"

namespace stepc {

/// The batch of `loss`: dimension 0 of its inputs, which must agree; fails
/// with a diagnostic ("cannot <action>: ...") where they do not or there are
/// none.
mlir::FailureOr<int64_t> inputBatch(mlir::func::FuncOp loss, llvm::StringRef action);

/// Rebinds `loss` to the global batch `globalBatch` (0: its own) split over
/// `ranks`: every input's dimension 0 becomes globalBatch / ranks and every
/// result type follows. Fails with a diagnostic where shapes do not follow.
/// With `dropoutRowsAttr`, each step.dropout whose rows the split divided is
/// marked with it (its rows per part), for offsetDropoutRows, and each count
/// of targets the split divided (a cross_entropy's ignore_index gets a
/// step.token_count as its count) with `ranks`, for sumTokenCounts.
mlir::LogicalResult rebindBatch(mlir::func::FuncOp loss, int64_t globalBatch, int64_t ranks,
                                llvm::StringRef dropoutRowsAttr = {});

/// Makes each step.dropout of `function` marked `rowsAttr` draw its part's
/// rows of the whole tensor: its first row becomes part · rows (plus the
/// constant first row it had), `part` this rank's linear index over `axes`
/// of the world mesh (`parts` ranks along them); removes the mark. Fails
/// with a diagnostic at a dropout whose rows cannot be offset.
mlir::LogicalResult offsetDropoutRows(mlir::func::FuncOp function, llvm::StringRef rowsAttr,
                       llvm::ArrayRef<int16_t> axes, int64_t parts);

/// Replaces each count of `function` marked `partsAttr` (a step.token_count
/// of one part's targets, or step-micro-batch's sum of them) by its sum over
/// `axes` of the world mesh times 1/`parts`: each part's loss divides by the
/// whole batch's count over the parts, so the mean over the parts is the
/// batch's mean over its counted targets. Removes the mark.
mlir::LogicalResult sumTokenCounts(mlir::func::FuncOp function, llvm::StringRef partsAttr,
                                   llvm::ArrayRef<int16_t> axes, int64_t parts);

/// Builds `<name>_grad` (marked step.gradient) next to `loss` and inserts it
/// into `symbols`; fails with a diagnostic on an op without an autodiff rule.
/// With `recordOrigins`, every op of the gradient function is marked
/// StepDialect::kOriginAttrName with the position of the forward op it copies or whose
/// VJP built it (cotangent sums too): step-pipeline-stages places each
/// backward op on its forward op's stage. A trained parameter the loss does
/// not depend on gets a zero gradient; `unreached` (if given) lists their
/// argument numbers.
mlir::FailureOr<mlir::func::FuncOp>
differentiateLoss(mlir::func::FuncOp loss, mlir::SymbolTable &symbols, bool recordOrigins = false,
                  llvm::SmallVectorImpl<unsigned> *unreached = nullptr);


} // namespace stepc

#endif // STEPC_TRANSFORMS_LOSSFUNCTIONS_H
