//===- ArenaPlan.h - the memory plan, as the IR carries it -------*- C++ -*-===//
//
// step-plan-memory writes each step function's plan into the IR (a
// `step.memory_plan` dictionary on the function, `step.buffer` and
// `step.in_arg` on every op with results); the emitters, the report and
// the budget read it back from there. What the plan is, and how one is
// made, is passes/include/stepc/Analysis/MemoryPlan.h.
//
//===----------------------------------------------------------------------===//

#ifndef STEPC_COMPILER_ARENAPLAN_H
#define STEPC_COMPILER_ARENAPLAN_H

#include "stepc/Analysis/MemoryPlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <optional>

namespace stepc {

/// The CUDA step's arena around the plan's buffers:
///   [plan][status word][cuBLASLt workspace][scratch]
/// (the scratch is shared by every kernel that needs one; what a backward
/// reads of its forward, such as attention's log-sum-exp, is a value the
/// plan places like any other).
struct CudaArenaLayout {
  int64_t statusOffset = 0, workspaceOffset = 0, scratchOffset = 0, scratchBytes = 0;
  /// The whole arena.
  int64_t bytes = 0;
};

/// The CUDA layout of a plan of `planBytes` whose kernels need
/// `scratchBytes` of scratch.
CudaArenaLayout layoutCudaArena(int64_t planBytes, int64_t scratchBytes);

/// What the CUDA layout adds to any plan (status word and workspace, with
/// their alignment): step-remat budgets for it before the kernels exist.
int64_t cudaArenaOverheadBytes();

/// Bytes of `function`'s arguments (parameters, optimizer state, inputs):
/// what a rank holds besides the arena.
int64_t argumentBytes(mlir::func::FuncOp function);

/// Records `plan` (and the CUDA layout around it, if any) on `function`,
/// replacing a previous one.
void writeMemoryPlan(mlir::func::FuncOp function, const MemoryPlan &plan,
                     const std::optional<CudaArenaLayout> &cuda);

/// The plan recorded on `function`; an error at the function if it has none
/// (step-plan-memory did not run) or it does not match the function.
mlir::FailureOr<MemoryPlan> readMemoryPlan(mlir::func::FuncOp function);

/// Places `values` in `plan` as `op`'s step.buffer and step.in_arg place
/// its results (`values` are its results, or a block function call's that
/// return them), replacing what they had; an error at `op` if they name a
/// buffer or an argument (of `arguments`) the plan does not have.
mlir::LogicalResult placeValues(mlir::Operation *op, mlir::ValueRange values, MemoryPlan &plan,
                                unsigned arguments);

/// The CUDA layout recorded on `function`, if any.
std::optional<CudaArenaLayout> readCudaArena(mlir::func::FuncOp function);

/// The bytes the target allocates for `function`'s arena (the CUDA layout's,
/// else the plan's), 0 without a plan.
int64_t targetArenaBytes(mlir::func::FuncOp function);

/// The planned peak recorded on `function` (arguments + the target's
/// arena: what a memory budget is checked against), if it has a plan.
std::optional<int64_t> plannedPeakBytes(mlir::func::FuncOp function);

} // namespace stepc

#endif // STEPC_COMPILER_ARENAPLAN_H
