//===- Report.h - what the compiler knows before anything runs ----*- C++ -*-===//

#ifndef STEPC_COMPILER_REPORT_H
#define STEPC_COMPILER_REPORT_H

#include "stepc/Analysis/MemoryPlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/JSON.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace stepc {

/// A link and compute rate to predict the exposed communication time with.
struct CommModel {
  /// Bus bandwidth per rank, GB/s; 0: no prediction.
  double linkGBps = 0;
  /// Sustained compute, GFLOP/s, for the work a collective can hide behind.
  double computeGflops = 100;
};

/// Everything `stepc --report` says about a step, filled once and
/// serialised at the end (`toJson`); the JSON keys are its fields in
/// snake_case.
struct StepReport {
  std::string function, target;
  /// Under pp:P: the schedule, the stages' first blocks, their predicted
  /// seconds per micro-batch, each rank's predicted idle fraction.
  llvm::json::Object pipeline;
  int64_t params = 0, paramBytes = 0, optimizerStateBytes = 0, inputBytes = 0;
  /// Of `params`, those the step holds but does not train (`frozen`).
  int64_t frozenParams = 0;
  /// The model's, as step-report counts them (its keys are this report's).
  int64_t paramTensors = 0, matmulParams = 0, forwardFlops = 0;
  int64_t modelFlopsPerStep = 0, executedFlopsPerStep = 0, tokensPerStep = 0;
  int64_t arenaBytes = 0, liveBytesPeak = 0;
  /// Arguments (parameters, optimizer state, inputs) + the arena.
  int64_t plannedPeakBytes = 0;
  int64_t savedActivationBytes = 0, savedActivationBytesPerBlock = 0;
  /// Forward dropouts, whose masks the backward draws again, and the bytes
  /// saving their masks would have held (a byte per element, as PyTorch's).
  int64_t dropoutsPerStep = 0, dropoutMaskBytesNotSaved = 0;
  /// Per transformer block ("outside blocks" for the rest).
  std::map<std::string, int64_t> savedActivationBytesByBlock;
  int64_t kernelsPerStep = 0, inPlaceBuffers = 0;
  /// Bytes the kernels without FLOPs (elementwise, norms, softmax, the
  /// loss, layout, the optimizer) read and write: what bounds their time.
  int64_t memoryBoundBytesPerStep = 0;
  /// How many kernels those bytes are spread over: each call has a fixed
  /// cost (a parallel region opened and joined) that a small model's
  /// tensors do not amortise.
  int64_t memoryBoundKernelsPerStep = 0;
  /// The step's GEMM calls by shape, as the CPU kernel takes them: "batch m
  /// n k transpose_a transpose_b shared_rhs" -> calls per step (a runtime
  /// calibrates its prediction per shape).
  std::map<std::string, int64_t> gemmCallsByShape;
  /// --precision=fp8: the GEMMs both of whose operands are fp8-rounded
  /// (step.quantize_fp8), and their FLOPs per step.
  int64_t fp8GemmsPerStep = 0, fp8FlopsPerStep = 0;
  /// Of those, the ones the CUDA step multiplies on fp8 tensor cores
  /// (stepk.gemm's fp8 formats; the others are bf16 GEMMs of fp8 values).
  int64_t fp8TensorCoreGemmsPerStep = 0, fp8TensorCoreFlopsPerStep = 0;
  /// The step's attention kernel calls by kernel and shape: "callee batch
  /// tq tk heads kv_heads head_dim causal" -> calls per step, and the
  /// executed FLOPs of one call (a runtime times each at its own rate).
  std::map<std::string, int64_t> attentionCallsByShape, attentionFlopsByShape;
  /// The mixture-of-experts products (stepk.call "grouped_matmul" and
  /// "grouped_matmul_weight_grad") by the kernel's arguments: "callee m k n
  /// experts blocks transpose_b" -> calls per step (the runtime probes the
  /// memory their primitives hold).
  std::map<std::string, int64_t> groupedCallsByShape;
  /// step-remat's copies: how many of each op (or library call), their FLOPs.
  std::map<std::string, int64_t> recomputedOpsByKind;
  int64_t recomputeFlopsPerStep = 0;
  int64_t collectivesPerStep = 0;
  /// Bytes each rank contributes, per collective kind and per set of mesh
  /// axes ("axis0", "axis1", "axis0+axis1", ...; with tp the last is tp).
  std::map<std::string, int64_t> collectiveBytesPerStep, collectiveBytesByAxes;
  /// Per set of mesh axes: the collectives, and the bytes each rank sends
  /// with ring algorithms (a runtime predicts their time from a probed link).
  std::map<std::string, int64_t> collectivesByAxes, collectiveWireBytesByAxes;
  /// The collectives in flight together (started, their result not yet
  /// read) where their buffers' bytes peak, as the runtime starts them:
  /// kind ("all_gather", ...), mesh axes key and floats per rank. A runtime
  /// replays them to measure what its collective library allocates under
  /// the step's own overlap.
  struct CollectiveCall {
    std::string kind, axes;
    int64_t count;
  };
  std::vector<CollectiveCall> collectivesInFlightPeak;
  /// The optimizer's share: its executed FLOPs (Muon's Newton-Schulz GEMMs
  /// above all) and the bytes of its collectives per kind (the clipping
  /// norm's all-reduce; Muon's gathers, or its owners' all-to-alls).
  int64_t optimizerFlopsPerStep = 0;
  /// The forward's, backward's and recomputation's executed FLOPs by the
  /// block they compute for ("outside blocks": the embedding, the head, the
  /// loss): what balances pipeline stages.
  std::map<std::string, int64_t> executedFlopsByBlock;
  /// The same attribution for memoryBoundBytesPerStep (an optimizer
  /// update: its parameter's block), and the bytes of each block's
  /// parameters and optimizer state: what a pipeline stage's time and
  /// memory are made of.
  std::map<std::string, int64_t> memoryBoundBytesByBlock, paramBytesByBlock,
      optimizerStateBytesByBlock;
  /// memoryBoundBytesPerStep by the kind of kernel that moves them (the
  /// names `stepc --profile` tables use: "fused convert+silu+mul+convert",
  /// "stepk.adamw_group"): where the step's memory traffic goes.
  std::map<std::string, int64_t> memoryBoundBytesByKind;
  std::map<std::string, int64_t> optimizerCollectiveBytesPerStep;
  /// Parameter bytes this rank holds of tp-split parameters (each 1/M of
  /// the whole) and of the others.
  int64_t tpSplitParamBytes = 0, replicatedParamBytes = 0;
  /// Set when a CommModel link rate is given; also per set of mesh axes.
  std::optional<double> linkGbps, computeGflops, predictedCommSeconds,
      predictedExposedCommSeconds;
  std::map<std::string, double> predictedCommSecondsByAxes, predictedExposedCommSecondsByAxes;
  /// Set by the driver: the remat mode and budget, and (cuda) the back
  /// end's own arena, peak and launches.
  std::string remat;
  /// The pipeline options the step was compiled with (its optimizer's
  /// hyperparameters among them): ranks check they agree before a step.
  std::string compileOptions;
  std::optional<int64_t> memoryBudgetBytes, targetArenaBytes, targetPlannedPeakBytes,
      targetLaunchesPerStep;
  /// The forward-only step's arena (its own plan, sharing the step's).
  std::optional<int64_t> evalArenaBytes;
  /// The sampling step's (step-sample-step), when there is one.
  std::optional<int64_t> sampleArenaBytes;

  double executedOverModelFlops() const {
    return modelFlopsPerStep > 0 ? double(executedFlopsPerStep) / double(modelFlopsPerStep)
                                 : 0.0;
  }
  llvm::json::Object toJson() const;
};

/// Fills a StepReport: `loss` is the model's loss function, `step` its
/// training step, `plan` the step's memory. An op without a FLOP rule, or a
/// sum beyond int64, is an error at the op.
mlir::FailureOr<StepReport> buildReport(mlir::func::FuncOp loss, mlir::func::FuncOp step,
                                        const MemoryPlan &plan, llvm::StringRef target,
                                        const CommModel &comm = {});

struct StepcPipelineOptions;

/// The functions of a module buildStepcPipeline compiled.
struct CompiledSteps {
  mlir::func::FuncOp loss, train, eval, sample;  // eval, sample: null without one
};
/// They, or an error at the module when it has no loss or training step.
mlir::FailureOr<CompiledSteps> findCompiledSteps(mlir::ModuleOp module);

/// The modules that each hold one rank's compiled step: under a pipeline
/// the stages step-pipeline-stages nested (in rank order), else `module`.
llvm::SmallVector<mlir::ModuleOp> compiledStages(mlir::ModuleOp module);

/// The report of `module` as buildStepcPipeline compiled it with `options`:
/// buildReport over the plan step-plan-memory recorded, with the eval
/// step's and the target's arenas, the budget and remat mode in effect and
/// the options themselves (what `stepc --report` writes; the CUDA launches
/// per step are known once the step is emitted).
mlir::FailureOr<StepReport> reportCompiledModule(mlir::ModuleOp module,
                                                 const StepcPipelineOptions &options,
                                                 const CommModel &comm = {});

/// The kind of kernel `op` is, as the profile and the report name it: a
/// library call's op, a fused loop's members ("fused add+gelu"), a GEMM's
/// transposes ("stepk.gemm NT").
std::string kernelKind(mlir::Operation *op);

} // namespace stepc

#endif // STEPC_COMPILER_REPORT_H
