//===- Fusion.h - elementwise fusion groups, for both back ends ---*- C++ -*-===//

#ifndef STEPC_COMPILER_FUSION_H
#define STEPC_COMPILER_FUSION_H

#include "stepc/Analysis/MemoryPlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"

namespace stepc {

/// A run of elementwise ops over the same number of elements, computed by
/// one loop (CPU) or kernel (CUDA): element i of every op in order, values
/// kept in registers, only `outputs` (values used after the group) stored.
struct ElementwiseGroup {
  llvm::SmallVector<mlir::Operation *> ops;
  /// Operands from outside the group, in first-use order.
  llvm::SmallVector<mlir::Value> inputs;
  /// Results with a use outside the group, in definition order.
  llvm::SmallVector<mlir::Value> outputs;
  int64_t numElements = 0;
};

struct ElementwiseFusion {
  llvm::SmallVector<ElementwiseGroup> groups;
  /// The group of each member op.
  llvm::DenseMap<mlir::Operation *, unsigned> groupOf;
  /// Results that never reach memory (used only inside their group).
  llvm::DenseSet<mlir::Value> interior;
};

/// `v` with reshapes looked through (a reshape is the same elements).
mlir::Value throughReshapes(mlir::Value v);

/// Groups consecutive elementwise ops of `step` (reshapes in between do not
/// break a run) with the same element count, at most `maxOps` ops and
/// `maxInputs` inputs a group; ops in `taken` (fused elsewhere) break runs.
/// `fusable` says which ops the back end can put in a group. Groups of one
/// op are not recorded. Adds every member but the first to `computedBy`
/// (mapped to the first), for planMemory.
ElementwiseFusion planElementwiseFusion(mlir::func::FuncOp step, ComputedBy &computedBy,
                                        llvm::function_ref<bool(mlir::Operation *)> fusable,
                                        unsigned maxOps = 32, unsigned maxInputs = 12);

} // namespace stepc

#endif // STEPC_COMPILER_FUSION_H
