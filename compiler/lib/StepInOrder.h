//===- StepInOrder.h - a planned step as it runs, calls included --*- C++ -*-===//
//
// An outlined step calls its block functions; analyses that follow values
// from their makers to their readers across the whole step (the CPU
// emitter's broadcast folding, the report's saved activations and
// collective windows, the memory plot, --report-pareto's FLOPs) read it
// here as it runs: each op once per call of
// its function, in execution order (the memory plan's op indices), each
// value an instance (the value, and the call computing it), with what that
// call's plan says of it. Nothing is inlined.
//
//===----------------------------------------------------------------------===//

#ifndef STEPC_COMPILER_LIB_STEPINORDER_H
#define STEPC_COMPILER_LIB_STEPINORDER_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace stepc {

class StepInOrder {
public:
  /// A value as one call computes it (-1: the step itself).
  using Instance = std::pair<mlir::Value, int64_t>;
  /// Where an instance is stored: an argument (>= 0) or -1, an arena
  /// buffer (>= 0) or -1.
  using Storage = std::pair<int64_t, int64_t>;
  struct Op {
    mlir::Operation *op;
    int64_t call;
    /// The block its result is computed for in that call (step.computed_for).
    std::string computedFor;
  };

  /// Fails (at the call) if a call's step.run_plan does not fit its callee.
  static mlir::FailureOr<StepInOrder> of(mlir::func::FuncOp step);

  const std::vector<Op> &ops() const { return order; }
  size_t calls() const { return callOps.size(); }
  /// The instance `v` read in `call` is: an argument of a block function
  /// is the call's operand, a call's result what the callee returns.
  Instance instance(mlir::Value v, int64_t call) const;
  std::optional<Storage> storage(Instance i) const;
  /// The positions of the ops reading `i` as an operand, in order, and
  /// of those that read it from inside their body.
  llvm::ArrayRef<int64_t> readers(Instance i) const;
  llvm::ArrayRef<int64_t> nestedReaders(Instance i) const;

private:
  void add(mlir::Operation *op, int64_t call);

  std::vector<Op> order;
  llvm::SmallVector<mlir::func::CallOp> callOps;
  llvm::DenseMap<mlir::Operation *, int64_t> callIndex;
  llvm::DenseMap<Instance, Storage> stored;
  llvm::DenseMap<Instance, llvm::SmallVector<int64_t>> direct, nested;
};

/// parameterBlocks (OutlineBlocks.h) over the step as it runs: the block of
/// each parameter, its moments and its gradient, per instance.
llvm::DenseMap<StepInOrder::Instance, std::string>
parameterBlocks(mlir::func::FuncOp step, const StepInOrder &view);

} // namespace stepc

#endif // STEPC_COMPILER_LIB_STEPINORDER_H
