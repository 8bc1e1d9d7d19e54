//===- Report.h - what the compiler knows before anything runs ----*- C++ -*-===//

#ifndef STEPC_COMPILER_REPORT_H
#define STEPC_COMPILER_REPORT_H

#include "stepc/Analysis/MemoryPlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/JSON.h"

namespace stepc {

/// The compile-time report of a training step (`stepc --report`): FLOPs
/// (model and executed), parameter, optimizer-state and planned peak bytes,
/// saved activations (total and per transformer block), kernels per step.
/// `loss` is the model's loss function, `step` its training step (whose
/// first ops are the loss function's, in order), `plan` the step's memory.
/// A link and compute rate to predict the exposed communication time with.
struct CommModel {
  /// Bus bandwidth per rank, GB/s; 0: no prediction.
  double linkGBps = 0;
  /// Sustained compute, GFLOP/s, for the work a collective can hide behind.
  double computeGflops = 100;
};

mlir::FailureOr<llvm::json::Object> buildReport(mlir::func::FuncOp loss,
                                                mlir::func::FuncOp step,
                                                const MemoryPlan &plan,
                                                llvm::StringRef target,
                                                const CommModel &comm = {});

} // namespace stepc

#endif // STEPC_COMPILER_REPORT_H
