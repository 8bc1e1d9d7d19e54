//===- ModelReport.h - what a loss function computes --------------*- C++ -*-===//

#ifndef STEPC_ANALYSIS_MODELREPORT_H
#define STEPC_ANALYSIS_MODELREPORT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <cstdint>

namespace stepc {

/// The model-level facts of a loss function, counted once for every report
/// (step-report, stepc --report, stepc --report-pareto).
struct ModelReport {
  int64_t params = 0;
  int64_t paramTensors = 0;
  int64_t paramBytes = 0;
  /// Parameters used as a matmul operand (through convert/reshape/transpose).
  int64_t matmulParams = 0;
  int64_t forwardFlops = 0;
  /// Forward + backward model FLOPs (FlopCount.h's convention).
  int64_t modelFlops = 0;
  /// Positions the loss averages over (the cross_entropy targets).
  int64_t tokens = 0;
};

/// Counts `loss`'s parameters, model FLOPs and tokens; an op without a FLOP
/// rule, or one that brings a sum beyond int64, is an error at the op.
mlir::FailureOr<ModelReport> analyzeModel(mlir::func::FuncOp loss);

} // namespace stepc

#endif // STEPC_ANALYSIS_MODELREPORT_H
