//===- BlockCalls.h - a block function's calls as the step runs them -*- C++ -*-===//
//
// After step-outline-blocks, a step calls a private func.func for each run
// of a transformer block, each call with its own plan (step.run_plan): the
// buffers, requests, transfer tags and blocks its ops had before outlining.
// What reads the step as it runs (the emitters, the arena plan's
// placement, StepInOrder, step-inline-blocks) finds the callee here and
// applies a call's plan to it for as long as it reads that call.
//
//===----------------------------------------------------------------------===//

#ifndef STEPC_COMPILER_BLOCKCALLS_H
#define STEPC_COMPILER_BLOCKCALLS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <memory>
#include <vector>

namespace stepc {

/// The attributes of a planned op that differ from call to call: its place
/// in the plan, its request slot, its transfer's tag, the block it
/// computes for. step.run_plan holds these (and locations), nothing else.
bool isPerCallAttribute(llvm::StringRef name);

/// The block function `call` calls (a func.func marked
/// step.block_function), or null for any other callee.
mlir::func::FuncOp blockFunctionOf(mlir::func::CallOp call);

/// One call of a block function as its step runs it: while the scope
/// lives, the callee's ops carry that call's plan and locations (its
/// step.run_plan: what the run's ops carried before step-outline-blocks),
/// so the emitters, StepInOrder and step-inline-blocks read them as that
/// run; the callee is restored when the scope ends.
class RunPlanScope {
public:
  /// An error at the call if its step.run_plan does not fit the callee.
  static mlir::FailureOr<std::unique_ptr<RunPlanScope>> apply(mlir::func::CallOp call,
                                                              mlir::func::FuncOp callee);
  ~RunPlanScope();
  RunPlanScope(const RunPlanScope &) = delete;
  RunPlanScope &operator=(const RunPlanScope &) = delete;

private:
  RunPlanScope() = default;
  struct Saved {
    mlir::Operation *op;
    mlir::Location loc;
    mlir::DictionaryAttr attributes;
  };
  std::vector<Saved> saved;
};

} // namespace stepc

#endif // STEPC_COMPILER_BLOCKCALLS_H
