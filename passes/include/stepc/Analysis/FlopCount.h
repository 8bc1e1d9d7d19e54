//===- FlopCount.h - per-op FLOP rules --------------------------*- C++ -*-===//

#ifndef STEPC_ANALYSIS_FLOPCOUNT_H
#define STEPC_ANALYSIS_FLOPCOUNT_H

#include "mlir/IR/Operation.h"
#include "mlir/Support/LogicalResult.h"

#include <cstdint>

namespace stepc {

/// FLOPs of one op under the model-FLOPs convention (6·P_matmul + 12·L·T·d per token).
struct OpFlops {
  /// Forward FLOPs: 2·M·N·K per matrix product.
  int64_t forward = 0;
  /// Backward FLOPs: twice the forward (one product per operand gradient).
  int64_t backward = 0;
};

/// Returns the model FLOPs of `op`. Ops the convention does not count
/// (elementwise, norms, softmax, loss, shape ops) give zero; an op with no
/// rule at all is an error reported at its location.
mlir::FailureOr<OpFlops> getModelFlops(mlir::Operation *op);

/// FLOPs `op` executes in a training step (recompute counted): products as
/// 2·M·N·K, attention as its QKᵀ and AV over the full score matrix, and
/// attention_grad as its five products (QKᵀ recomputed, dV, dP, dQ, dK).
/// Elementwise and memory-bound ops count zero; an op with no rule is an
/// error at its location.
mlir::FailureOr<int64_t> getExecutedFlops(mlir::Operation *op);

} // namespace stepc

#endif // STEPC_ANALYSIS_FLOPCOUNT_H
