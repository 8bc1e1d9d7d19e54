//===- Emitter.h - source code of a training step, per target ----*- C++ -*-===//

#ifndef STEPC_COMPILER_EMITTER_H
#define STEPC_COMPILER_EMITTER_H

#include "stepc/Analysis/MemoryPlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

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
  /// Ranks along each mesh axis ({N} for ddp/fsdp, {R, S} for hsdp, then
  /// M with tp).
  llvm::SmallVector<int64_t, 3> meshShape{1};
  /// Tensor-parallel ranks (the last mesh axis), 1 without.
  int64_t tensorParallel = 1;
  /// Pipeline stages (the mesh's pp axis), 1 without, and that axis.
  int64_t pipelineStages = 1, pipelineAxis = 0;
  /// The CPU target (stepc --cpu): its ISA and the features it needs.
  std::string cpuIsa, cpuFeatures;
  /// "fp32", or "bf16" (step-mixed-precision ran).
  std::string precision = "fp32";
};

struct StepReport;

/// step.so's metadata for a compiled `module`: the report's figures and
/// JSON, the mesh its passes built (`mesh.mesh @world`: world size, axes,
/// tensor-parallel ranks), the `--shard` spelling and the precision (the
/// CPU target's fields are the caller's).
ModuleSummary summarizeCompiledModule(mlir::ModuleOp module, const StepReport &report,
                                      llvm::StringRef shard, llvm::StringRef precision);

/// The kernel launches and library calls a CUDA `step` makes per step, read
/// from its kernel-level IR (one per op, a concat's per input, a pad's fill
/// and copy; reshapes and collectives launch nothing): the report's
/// target_launches_per_step, which the CUDA emitter checks against what it
/// writes.
int64_t cudaLaunchesPerStep(mlir::func::FuncOp step);

/// Writes the C++ of `step` (a function marked step.train_step) for the
/// CPU: the step as a sequence of library-kernel calls (runtime/kernels/cpu)
/// and generated elementwise loops (one per stepk.fused op or lone op)
/// over buffers at the offsets of its memory plan (step-plan-memory's, in
/// the IR), with the forward-only `evalStep` and the one-row `sampleStep`
/// (null: none) beside it, plus the metadata table of the ABI
/// (runtime/stepc_abi.h). Unsupported
/// element types are errors at the op. With `profile`, the step also times
/// its kernels by kind and writes the table when the library is unloaded
/// (to $STEPC_PROFILE, or stderr): stepc --profile.
mlir::FailureOr<std::string> emitCpuSource(mlir::func::FuncOp step,
                                           const ModuleSummary &summary,
                                           mlir::func::FuncOp evalStep,
                                           mlir::func::FuncOp sampleStep, bool profile = false);

/// Writes the CUDA C++ of `step` (and the forward-only `evalStep` and
/// one-row `sampleStep`, null: none): library kernels (runtime/kernels/cuda), cuBLASLt GEMMs,
/// generated elementwise kernels, a multi-tensor AdamW, all enqueued on one
/// stream, over the arena step-plan-memory laid out for CUDA (the plan's
/// buffers, the status word, cuBLASLt's workspace, the scratch). With `profile`, each kernel is followed by a CUDA event
/// on the stream, from which the runtime reads the kernels' intervals
/// (stepc --profile, stepc-run --trace).
mlir::FailureOr<std::string> emitCudaSource(mlir::func::FuncOp step,
                                            const ModuleSummary &summary,
                                            mlir::func::FuncOp evalStep,
                                            mlir::func::FuncOp sampleStep, bool profile = false);

} // namespace stepc

#endif // STEPC_COMPILER_EMITTER_H
