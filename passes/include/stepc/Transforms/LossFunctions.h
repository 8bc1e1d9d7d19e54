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
mlir::LogicalResult rebindBatch(mlir::func::FuncOp loss, int64_t globalBatch, int64_t ranks);

/// Builds `<name>_grad` (marked step.gradient) next to `loss` and inserts it
/// into `symbols`; fails with a diagnostic on an op without an autodiff rule.
mlir::FailureOr<mlir::func::FuncOp> differentiateLoss(mlir::func::FuncOp loss,
                                                      mlir::SymbolTable &symbols);

} // namespace stepc

#endif // STEPC_TRANSFORMS_LOSSFUNCTIONS_H
