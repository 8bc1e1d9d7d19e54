//===- CpuEmitter.h - C++ source for the CPU target ---------------*- C++ -*-===//

#ifndef STEPC_COMPILER_CPUEMITTER_H
#define STEPC_COMPILER_CPUEMITTER_H

#include "stepc/Analysis/MemoryPlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <string>

namespace stepc {

/// What step.so's metadata carries besides the argument table.
struct ModuleSummary {
  int64_t modelFlops = 0;
  int64_t executedFlops = 0;
  int64_t tokens = 0;
  std::string reportJson;
  /// Ranks the step runs on, and how ("none", "ddp:N").
  int64_t worldSize = 1;
  std::string sharding = "none";
  /// Ranks along each mesh axis ({N} for ddp/fsdp, {R, S} for hsdp).
  llvm::SmallVector<int64_t, 2> meshShape{1};
};

/// Writes the C++ of `step` (a function marked step.train_step) for the
/// CPU: the step as a sequence of library-kernel calls and generated
/// elementwise loops over buffers at the offsets of `plan`, plus the
/// metadata table of the ABI (runtime/stepc_abi.h). Unsupported element
/// types are errors at the op.
mlir::FailureOr<std::string> emitCpuSource(mlir::func::FuncOp step,
                                           const MemoryPlan &plan,
                                           const ModuleSummary &summary);

} // namespace stepc

#endif // STEPC_COMPILER_CPUEMITTER_H
