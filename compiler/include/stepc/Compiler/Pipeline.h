//===- Pipeline.h - the passes of a training step, as a library ---*- C++ -*-===//
//
// One definition of what `stepc` runs on a model, used by `stepc`,
// `stepc-interp` and, registered as `--stepc-pipeline="..."`, by
// `stepc-opt`: `stepc-opt --stepc-pipeline="target=cpu shard=fsdp:2"` runs
// exactly the IR passes `stepc --target=cpu --shard=fsdp:2` runs.
//
//===----------------------------------------------------------------------===//

#ifndef STEPC_COMPILER_PIPELINE_H
#define STEPC_COMPILER_PIPELINE_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

#include <string>

namespace stepc {

/// The most ranks a --shard may name (checked before any arithmetic on
/// them, so no product overflows).
constexpr int64_t kMaxRanks = int64_t{1} << 20;

/// A parsed --shard: none | ddp:N | fsdp:N | hsdp:RxS, optionally with
/// `,tp:M` (or tp:M alone): a mesh of the data axes then the tp axis, tp
/// innermost so a tp group is M consecutive ranks (one node's NVLink).
struct ShardSpec {
  enum class Kind { None, Ddp, Fsdp, Hsdp };
  Kind kind = Kind::None;
  /// R of hsdp (replica groups), else 1.
  int64_t replicas = 1;
  /// Ranks sharing one copy of the step's state: N, or S of hsdp.
  int64_t perGroup = 1;
  /// Tensor-parallel ranks (M of tp:M), 1 without.
  int64_t tp = 1;
  /// Pipeline ranks (P of pp:P), 1 without: each runs one stage.
  int64_t pp = 1;
  /// Expert-parallel ranks (E of ep:E), 1 without: data ranks that hold
  /// E/ep experts each.
  int64_t ep = 1;

  /// Data-parallel ranks: those that split the batch.
  int64_t ranks() const { return replicas * perGroup * ep; }
  /// Every rank: the data ranks times the tp ranks.
  int64_t world() const { return ranks() * tp * pp; }
  /// Whether parameters, gradients and optimizer state are sharded.
  bool shardsParameters() const { return kind == Kind::Fsdp || kind == Kind::Hsdp; }
  /// The mesh's shape: [N] | [R, S], then P with pp, then M with tp ([M]
  /// for tp alone, [P] or [P, M] without data axes; hsdp beside pp keeps
  /// both of its axes).
  llvm::SmallVector<int64_t> meshShape() const;
  /// The mesh axis tp runs along (the last), or -1.
  int64_t tpAxis() const { return tp > 1 ? int64_t(meshShape().size()) - 1 : -1; }
  /// The mesh axis of ep (the last data axis; the first under fsdp, the
  /// second under hsdp), or -1.
  int64_t epAxis() const {
    if (ep <= 1)
      return -1;
    if (kind == Kind::Hsdp)
      return 1;
    return kind == Kind::Fsdp || perGroup == 1 ? 0 : 1;
  }
  /// The mesh axis the pipeline's stages lie along (after the data axes),
  /// or -1.
  int64_t ppAxis() const {
    return pp > 1 ? int64_t(meshShape().size()) - 1 - (tp > 1 ? 1 : 0) : -1;
  }
};

/// Parses a --shard value; on failure `error` says what was expected.
mlir::FailureOr<ShardSpec> parseShardSpec(llvm::StringRef text, std::string &error);

/// Parses a byte count: digits with an optional unit, B, KB/MB/GB/TB
/// (powers of 1000) or KiB/MiB/GiB/TiB (powers of 1024), e.g. "512MB",
/// "2GiB"; fails on anything else or a count beyond int64.
mlir::FailureOr<int64_t> parseByteSize(llvm::StringRef text);

/// The options of the pipeline (stepc's flags of the same names).
struct StepcPipelineOptions : public mlir::PassPipelineOptions<StepcPipelineOptions> {
  // The options stepc's flags set (PipelineOptions.def).
#define STEPC_PIPELINE_OPTION(member, flag, type, byDefault, help)                                 \
  Option<type> member{*this, flag, llvm::cl::desc(help), llvm::cl::init(byDefault)};
#include "stepc/Compiler/PipelineOptions.def"
#undef STEPC_PIPELINE_OPTION
  Option<std::string> until{*this, "until",
                            llvm::cl::desc("Stop after: autodiff (the gradient function), "
                                           "train-step (the target-independent training "
                                           "step) or kernels (lowered for the target: the "
                                           "default)"),
                            llvm::cl::init("kernels")};
};

/// Checks `options` and appends the step's passes to `pm`:
///   [step-rebind-batch] → step-autodiff → [step-micro-batch] → [step-shard-data-parallel |
///   step-shard-fully] → step-optimizer → [step-schedule-collectives] →
///   [step-mixed-precision] → [step-remat] → step-eval-step → step-sample-step →
///   target lowering: [step-fuse-cuda-kernels (cuda)] → step-lower-library-calls →
///   [step-fuse-elementwise] → step-plan-memory (or step-fit-memory-budget
///   over that tail) → step-outline-blocks
/// (`until` stops after autodiff or before target lowering).
/// A bad option is reported through `emitError` and adds nothing.
mlir::LogicalResult
buildStepcPipeline(mlir::OpPassManager &pm, const StepcPipelineOptions &options,
                   llvm::function_ref<mlir::LogicalResult(const llvm::Twine &)> emitError);

/// step-remat in `remat` mode under `budget` (0: none), if either asks for
/// it, with the target's cost model.
void addStepRemat(mlir::OpPassManager &pm, llvm::StringRef target, llvm::StringRef remat,
                  int64_t budget);

/// The pipeline after the target-independent step: step-remat
/// (addStepRemat), the forward-only step, the target's lowering and
/// step-plan-memory, which checks `checkBudget` (0: none) on the plan.
void addTargetTail(mlir::OpPassManager &pm, llvm::StringRef target, bool fuseElementwise,
                   llvm::StringRef remat, int64_t rematBudget, int64_t checkBudget);

/// Registers `stepc-pipeline` (for stepc-opt).
void registerStepcPipeline();

} // namespace stepc

#endif // STEPC_COMPILER_PIPELINE_H
