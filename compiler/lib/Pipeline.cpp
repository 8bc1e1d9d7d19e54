//===- Pipeline.cpp - the passes of a training step -----------------------===//

#include "stepc/Compiler/Pipeline.h"
#include "stepc/Compiler/ArenaPlan.h"
#include "stepc/Compiler/Passes.h"
#include "stepc/Transforms/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/StringSwitch.h"

#include <limits>

using namespace mlir;
using namespace stepc;

FailureOr<ShardSpec> stepc::parseShardSpec(StringRef text, std::string &error) {
  ShardSpec spec;
  // One count: 1 <= n <= kMaxRanks (getAsInteger rejects what int64 cannot hold).
  auto count = [](StringRef digits, int64_t &n) {
    return !digits.getAsInteger(10, n) && n >= 1 && n <= kMaxRanks;
  };
  // A trailing `key` + count (",tp:M", ",pp:P"): parsed into n and cut
  // off `s`; true when absent.
  auto trailing = [&](StringRef &s, StringRef key, int64_t &n) {
    size_t at = s.find(key);
    if (at == StringRef::npos)
      return true;
    bool parsed = count(s.drop_front(at + key.size()), n);
    s = s.take_front(at);
    return parsed;
  };
  StringRef rest = text;
  bool ok = true;
  // ep:E alone or after ddp:N, fsdp:N or hsdp:RxS, optionally followed by
  // ,pp:P and ,tp:M (expert parallelism: the ep ranks split the batch and
  // hold E/ep experts each).
  if (size_t at = rest.find("ep:"); at != StringRef::npos && (at == 0 || rest[at - 1] == ',')) {
    StringRef data = rest.take_front(at);
    StringRef experts = rest.drop_front(at + 3);
    ShardSpec::Kind kind = data.starts_with("fsdp:")   ? ShardSpec::Kind::Fsdp
                           : data.starts_with("hsdp:") ? ShardSpec::Kind::Hsdp
                                                       : ShardSpec::Kind::Ddp;
    bool dataOk = data.empty() || data.consume_back(",");
    if (dataOk && !data.empty() && data.consume_front("hsdp:")) {
      auto [r, s] = data.split('x');
      dataOk = count(r, spec.replicas) && count(s, spec.perGroup) &&
               spec.replicas <= kMaxRanks / spec.perGroup;
    } else if (dataOk && !data.empty()) {
      dataOk = (data.consume_front("ddp:") || data.consume_front("fsdp:")) &&
               count(data, spec.perGroup);
    }
    if (!data.empty() && dataOk)
      spec.kind = kind;
    bool stagesOk = trailing(experts, ",tp:", spec.tp);
    bool staged = experts.contains(",pp:");
    stagesOk = trailing(experts, ",pp:", spec.pp) && stagesOk && (!staged || spec.pp >= 2);
    // (The ABI's mesh has 4 axes: hsdp's two, ep, then pp or tp.)
    bool axesOk = !(spec.kind == ShardSpec::Kind::Hsdp && spec.pp > 1 && spec.tp > 1);
    if (dataOk && stagesOk && axesOk && count(experts, spec.ep) && spec.ep >= 2 &&
        spec.replicas * spec.perGroup <= kMaxRanks / spec.ep / spec.pp / spec.tp)
      return spec;
    error = ("bad --shard '" + text +
             "' (expected ep:E, ddp:N,ep:E, fsdp:N,ep:E or hsdp:RxS,ep:E, optionally followed "
             "by ,pp:P and ,tp:M (not both beside hsdp), with E, P >= 2 and at most " +
             Twine(kMaxRanks) + " ranks)")
                .str();
    return failure();
  }
  // pp:P alone or after ddp:N, fsdp:N or hsdp:RxS, optionally followed by
  // ,tp:M.
  if (size_t at = rest.find("pp:"); at != StringRef::npos) {
    StringRef data = rest.take_front(at);
    StringRef stages = rest.drop_front(at + 3);
    bool alone = data.empty();
    bool dataOk = alone || data.consume_back(",");
    if (dataOk && data.consume_front("hsdp:")) {
      spec.kind = ShardSpec::Kind::Hsdp;
      auto [r, s] = data.split('x');
      dataOk = count(r, spec.replicas) && count(s, spec.perGroup);
    } else if (dataOk && !alone) {
      spec.kind = data.starts_with("fsdp:") ? ShardSpec::Kind::Fsdp : ShardSpec::Kind::Ddp;
      dataOk = (data.consume_front("ddp:") || data.consume_front("fsdp:")) &&
               count(data, spec.perGroup);
    }
    bool tpOk = trailing(stages, ",tp:", spec.tp);
    if (dataOk && tpOk && count(stages, spec.pp) && spec.pp >= 2 &&
        spec.replicas <= kMaxRanks / spec.perGroup &&
        spec.ranks() <= kMaxRanks / spec.pp / spec.tp)
      return spec;
    error = ("bad --shard '" + text +
             "' (pp:P, ddp:N,pp:P, fsdp:N,pp:P or hsdp:RxS,pp:P, each optionally followed by "
             ",tp:M, with P >= 2 and at most " +
             Twine(kMaxRanks) + " ranks)")
                .str();
    return failure();
  }
  // `,tp:M` after the data axes, or tp:M alone.
  if (size_t comma = rest.rfind(",tp:"); comma != StringRef::npos) {
    ok = count(rest.substr(comma + 4), spec.tp);
    rest = rest.take_front(comma);
  } else if (rest.consume_front("tp:")) {
    ok = count(rest, spec.tp);
    rest = "none";
  }
  if (!ok) {
  } else if (rest == "none") {
    ok = text == "none" || text.starts_with("tp:");
  } else if (rest.consume_front("hsdp:")) {
    spec.kind = ShardSpec::Kind::Hsdp;
    auto [r, s] = rest.split('x');
    ok = count(r, spec.replicas) && count(s, spec.perGroup) &&
         spec.replicas <= kMaxRanks / spec.perGroup;
  } else if (rest.consume_front("ddp:") || rest.consume_front("fsdp:")) {
    spec.kind = text.starts_with("ddp:") ? ShardSpec::Kind::Ddp : ShardSpec::Kind::Fsdp;
    ok = count(rest, spec.perGroup);
  } else {
    ok = false;
  }
  if (ok && spec.ranks() <= kMaxRanks / spec.tp)
    return spec;
  error = ("bad --shard '" + text +
           "' (expected none, ddp:N, fsdp:N or hsdp:RxS, each optionally followed by ,tp:M, "
           "or tp:M, with N, R, S, M >= 1 and at most " +
           Twine(kMaxRanks) + " ranks)")
              .str();
  return failure();
}

SmallVector<int64_t> ShardSpec::meshShape() const {
  SmallVector<int64_t> shape;
  // [N, E] or [E] (ep the last data axis), or [E, N] under fsdp and
  // [R, E, S] under hsdp (the shards along the last data axis, ep the axis
  // before); then P with pp.
  if (ep > 1) {
    if (kind == Kind::Fsdp) {
      shape.append({ep, perGroup});
    } else if (kind == Kind::Hsdp) {
      shape.append({replicas, ep, perGroup});
    } else {
      if (perGroup > 1)
        shape.push_back(perGroup);
      shape.push_back(ep);
    }
    if (pp > 1)
      shape.push_back(pp);
    if (tp > 1)
      shape.push_back(tp);
    return shape;
  }
  // Data ([R, S] under hsdp), then the pipeline's stages, then tp.
  if (pp > 1) {
    if (kind == Kind::Hsdp) {
      shape.push_back(replicas);
      shape.push_back(perGroup);
    } else if (ranks() > 1) {
      shape.push_back(ranks());
    }
    shape.push_back(pp);
    if (tp > 1)
      shape.push_back(tp);
    return shape;
  }
  if (replicas > 1)
    shape.push_back(replicas);
  if (ranks() > 1 || tp == 1)
    shape.push_back(perGroup);
  if (tp > 1)
    shape.push_back(tp);
  return shape;
}

FailureOr<int64_t> stepc::parseByteSize(StringRef text) {
  StringRef digits = text.take_while([](char c) { return c >= '0' && c <= '9'; });
  StringRef unit = text.drop_front(digits.size());
  uint64_t count = 0;
  if (digits.empty() || digits.getAsInteger(10, count))
    return failure();
  uint64_t scale = StringSwitch<uint64_t>(unit)
                       .Cases("", "B", 1)
                       .Case("KB", 1000)
                       .Case("MB", 1000 * 1000)
                       .Case("GB", 1000 * 1000 * 1000)
                       .Case("TB", uint64_t{1000} * 1000 * 1000 * 1000)
                       .Case("KiB", uint64_t{1} << 10)
                       .Case("MiB", uint64_t{1} << 20)
                       .Case("GiB", uint64_t{1} << 30)
                       .Case("TiB", uint64_t{1} << 40)
                       .Default(0);
  if (scale == 0 || count > uint64_t(std::numeric_limits<int64_t>::max()) / scale)
    return failure();
  return int64_t(count * scale);
}

namespace {

using ErrorFn = function_ref<LogicalResult(const Twine &)>;

/// What the options decide beyond their values: the memory budget in
/// bytes (0: none), the remat mode and the mesh.
struct Decided {
  int64_t budget = 0;
  std::string remat;
  ShardSpec shard;
};

FailureOr<Decided> decideOptions(const StepcPipelineOptions &options, ErrorFn emitError) {
  if (options.target != "cpu" && options.target != "cuda")
    return emitError("unknown target '" + options.target + "' (expected cuda or cpu)");
  if (options.precision != "fp32" && options.precision != "bf16" && options.precision != "fp8")
    return emitError("unknown precision '" + options.precision +
                     "' (expected fp32, bf16 or fp8)");
  if (options.until != "autodiff" && options.until != "train-step" && options.until != "kernels")
    return emitError("unknown until '" + options.until +
                     "' (expected autodiff, train-step or kernels)");
  if (options.optimizer != "adamw" && options.optimizer != "adam" && options.optimizer != "sgd" &&
      options.optimizer != "lion" && options.optimizer != "muon")
    return emitError("unknown optimizer '" + options.optimizer +
                     "' (expected adamw, adam, sgd, lion or muon)");
  if (options.batch < 0)
    return emitError("the batch must be >= 0 (0: the model's own), got " +
                     Twine(options.batch.getValue()));
  if (options.microBatches < 1)
    return emitError("--micro-batches must be >= 1, got " + Twine(options.microBatches.getValue()));
  Decided d;
  if (!options.memoryBudget.empty()) {
    FailureOr<int64_t> bytes = parseByteSize(options.memoryBudget);
    if (failed(bytes) || *bytes == 0)
      return emitError("bad memory budget '" + options.memoryBudget +
                       "' (expected a positive byte count such as 536870912, 512MB or 2GiB)");
    d.budget = *bytes;
  }
  d.remat = options.remat.empty() ? (d.budget ? "auto" : "none") : options.remat.getValue();
  if (d.remat != "none" && d.remat != "block" && d.remat != "selective" && d.remat != "auto")
    return emitError("unknown remat '" + d.remat + "' (expected none, block, selective or auto)");
  // auto chooses against a budget: without one it would silently do nothing.
  if (d.remat == "auto" && d.budget == 0)
    return emitError("remat 'auto' needs a memory budget (--memory-budget=BYTES); "
                     "block and selective need none");
  std::string error;
  FailureOr<ShardSpec> shard = parseShardSpec(options.shard, error);
  if (failed(shard))
    return emitError(error);
  if (options.sequenceParallel && shard->tp == 1)
    return emitError("--sequence-parallel needs tensor parallelism (--shard=...,tp:M)");
  if (options.fp8Scaling != "tile" && options.fp8Scaling != "matrix")
    return emitError("unknown --fp8-scaling '" + options.fp8Scaling +
                     "' (expected tile or matrix)");
  if (options.precision != "fp8" && options.fp8Scaling != "tile")
    return emitError("--fp8-scaling needs --precision=fp8");
  d.shard = *shard;
  return d;
}

/// Before autodiff: each rank's share of the batch, then the model itself
/// split (experts over ep, layers over tp: the backward follows), and fp8's
/// roundings.
void addModelPasses(OpPassManager &pm, const StepcPipelineOptions &options,
                    const ShardSpec &shard) {
  if (options.batch > 0 || shard.ranks() > 1)
    pm.addPass(createStepRebindBatch(StepRebindBatchOptions{options.batch, shard.ranks()}));
  // Expert parallelism: each rank's experts, tokens sent to them and back.
  if (shard.ep > 1) {
    StepShardExpertsOptions expertOptions;
    expertOptions.ep = shard.ep;
    expertOptions.axis = shard.epAxis();
    SmallVector<int64_t> mesh = shard.meshShape();
    expertOptions.meshShape = mesh;
    pm.addPass(createStepShardExperts(expertOptions));
  }
  // Tensor parallelism shards the model itself: the backward follows.
  if (shard.tp > 1) {
    StepShardTensorOptions tensorOptions;
    tensorOptions.tp = shard.tp;
    SmallVector<int64_t> mesh = shard.meshShape();
    tensorOptions.meshShape = mesh;
    tensorOptions.sequenceParallel = options.sequenceParallel;
    pm.addPass(createStepShardTensor(tensorOptions));
  }
  // fp8: the linear layers' products rounded by tiles, their gradients too.
  if (options.precision == "fp8")
    pm.addPass(createStepFp8(StepFp8Options{options.fp8Scaling.getValue()}));
}

/// Gradient accumulation, before the data-parallel mean (one all-reduce of
/// the accumulated gradients per step), and the pipeline's stages.
LogicalResult addAccumulationPasses(OpPassManager &pm, const StepcPipelineOptions &options,
                                    const ShardSpec &shard, ErrorFn emitError) {
  if (shard.pp <= 1) {
    if (options.microBatches > 1)
      pm.addPass(createStepMicroBatch(StepMicroBatchOptions{options.microBatches}));
    return success();
  }
  if (options.ppStage < 0 || options.ppStage >= shard.pp)
    return emitError("pp-stage must be in [0, " + Twine(shard.pp) + "), got " +
                     Twine(options.ppStage.getValue()));
  StepPipelineStagesOptions stageOptions;
  stageOptions.stages = shard.pp;
  stageOptions.axis = shard.ppAxis();
  SmallVector<int64_t> mesh = shard.meshShape();
  stageOptions.meshShape = mesh;
  stageOptions.scheduleName = options.ppSchedule.getValue();
  SmallVector<StringRef> texts;
  SmallVector<int64_t> firsts;
  if (!options.ppStages.empty())
    StringRef(options.ppStages).split(texts, ',');
  for (StringRef first : texts) {
    int64_t block;
    if (first.trim().getAsInteger(10, block))
      return emitError("bad --pp-stages '" + options.ppStages +
                       "' (expected the first block of each stage after the first, "
                       "comma-separated, e.g. 2,4,6)");
    firsts.push_back(block);
  }
  stageOptions.firsts = firsts;
  pm.addPass(createStepMicroBatch(StepMicroBatchOptions{options.microBatches, true}));
  pm.addPass(createStepPipelineStages(stageOptions));
  return success();
}

/// The data-parallel passes: the gradients' mean over the replicas, or
/// (fsdp, hsdp) parameters, gradients and state sharded. Under a memory
/// budget, keeping or re-gathering each parameter for the backward is
/// step-remat's decision, made with the activations'.
void addDataParallelPasses(OpPassManager &pm, const StepcPipelineOptions &options,
                           const ShardSpec &shard, int64_t budget) {
  if (shard.ranks() <= 1)
    return;
  if (!shard.shardsParameters()) {
    pm.addPass(createStepShardDataParallel(StepShardDataParallelOptions{shard.ranks()}));
    return;
  }
  // The data axes before the shards': hsdp's groups, then ep's.
  SmallVector<int64_t> replicaShape;
  if (shard.replicas > 1)
    replicaShape.push_back(shard.replicas);
  if (shard.ep > 1)
    replicaShape.push_back(shard.ep);
  StepShardFullyOptions fullyOptions;
  fullyOptions.ranks = shard.perGroup;
  fullyOptions.replicas = shard.replicas * shard.ep;
  fullyOptions.replicaShape = replicaShape;
  fullyOptions.reshard = options.fsdpReshard && budget == 0;
  pm.addPass(createStepShardFully(fullyOptions));
}

/// step-optimizer's options for the mesh: the algorithm, then where the
/// clipping norm's squares are summed.
std::string optimizerFlags(const StepcPipelineOptions &options, const ShardSpec &shard) {
  std::string flags = options.optimizerOptions;
  // The algorithm is its own flag (its hyperparameters are the options').
  flags += " algorithm=" + options.optimizer.getValue();
  // Sharded state is updated shard by shard; the clipping norm spans the mesh.
  bool shardedState = shard.ranks() > 1 && shard.shardsParameters();
  if (shardedState || shard.tp > 1)
    flags += (" mesh=" + kWorldMeshName).str();
  // Expert weights are split over ep (the axis their step.tp_shard names):
  // their squares are summed along it (a pipeline names the mesh below).
  bool epMesh = shard.ep > 1 && !shardedState && shard.pp == 1 && shard.tp == 1;
  if (epMesh)
    flags += (" mesh=" + kWorldMeshName).str();
  // (Sharded state: the shards' axis, after hsdp's groups and ep's.)
  const int shardAxis = (shard.replicas > 1 ? 1 : 0) + (shard.ep > 1 ? 1 : 0);
  flags += !shardedState ? (shard.tp > 1 || epMesh ? " mesh-axis=-1" : "")
                         : (" mesh-axis=" + Twine(shardAxis)).str();
  // ddp: every rank holds every matrix whole; Muon deals them out along the
  // data axis (the mesh's first).
  if (shard.kind == ShardSpec::Kind::Ddp && shard.ranks() > 1)
    flags += " replica-axis=0";
  // tp-split gradients are parts of one: their squares are summed over tp.
  if (shard.tp > 1)
    flags += (" tp-axis=" + Twine(shard.tpAxis())).str();
  // Each pipeline stage holds its own parameters: squares summed over pp
  // (and over the shards of each under fsdp).
  if (shard.pp > 1)
    flags += ((shardedState ? "" : " mesh=" + kWorldMeshName + " mesh-axis=-1") +
              " pp-axis=" + Twine(shard.ppAxis()))
                 .str();
  return flags;
}

/// What runs on each stage's step (the whole step without a pipeline):
/// data parallelism, the optimizer, collectives' schedule, precision, remat
/// and the target's kernels and plan, then the block functions.
LogicalResult addStagePasses(OpPassManager &pm, const StepcPipelineOptions &options,
                             const Decided &decided, ErrorFn emitError) {
  const ShardSpec &shard = decided.shard;
  const int64_t budget = decided.budget;
  const std::string &remat = decided.remat;
  addDataParallelPasses(pm, options, shard, budget);
  std::unique_ptr<Pass> optimizer = createStepOptimizer();
  if (failed(optimizer->initializeOptions(optimizerFlags(options, shard),
                                          [&](const Twine &message) {
                                            return emitError("bad optimizer-options: " +
                                                             message);
                                          })))
    return failure();
  pm.addPass(std::move(optimizer));
  if (shard.world() > 1)
    pm.addPass(createStepScheduleCollectives());
  if (options.precision == "bf16" || options.precision == "fp8")
    pm.addPass(createStepMixedPrecision());
  // The budget is a contract, checked on the plan that is emitted: under
  // remat=auto, met by recomputation until that plan fits.
  if (budget > 0 && remat == "auto" && options.until == "kernels") {
    pm.addPass(createStepFitMemoryBudget(
        StepFitMemoryBudgetOptions{options.target, budget, options.fuseElementwise}));
  } else if (options.until == "train-step") {
    addStepRemat(pm, options.target, remat, budget);
    return success();
  } else {
    addTargetTail(pm, options.target, options.fuseElementwise, remat, budget, budget);
  }
  // On the plan: which block runs share a function.
  pm.addPass(createStepOutlineBlocks());
  return success();
}

} // namespace

LogicalResult
stepc::buildStepcPipeline(OpPassManager &pm, const StepcPipelineOptions &options,
                          function_ref<LogicalResult(const Twine &)> emitError) {
  FailureOr<Decided> decided = decideOptions(options, emitError);
  if (failed(decided))
    return failure();
  const ShardSpec &shard = decided->shard;
  // The layers, from the front end's markers or read off the IR: remat,
  // outlining and the report need them, whatever the parameters' names.
  pm.addPass(createStepDeriveBlocks());
  addModelPasses(pm, options, shard);
  pm.addPass(createStepAutodiff());
  // fp8: the weight gradients' operands rounded along their tokens.
  if (options.precision == "fp8")
    pm.addPass(createStepFp8WeightGrads());
  if (failed(addAccumulationPasses(pm, options, shard, emitError)))
    return failure();
  if (options.until == "autodiff")
    return success();
  // A pipeline is one module nesting a module per stage: what follows runs
  // on each stage (in parallel where the context allows).
  return addStagePasses(shard.pp > 1 ? pm.nest<ModuleOp>() : pm, options, *decided, emitError);
}

void stepc::addStepRemat(OpPassManager &pm, StringRef target, StringRef remat, int64_t budget) {
  if (remat == "none" && budget == 0)
    return;
  StepRematOptions rematOptions;
  rematOptions.mode = remat.str();
  rematOptions.budget = budget;
  // The target's layout around the plan, before its kernels (and their
  // scratch) exist.
  rematOptions.extraBytes = target == "cuda" ? cudaArenaOverheadBytes() : 0;
  rematOptions.flopsPerByte = target == "cuda" ? 200.0 : 20.0;
  rematOptions.flopsPerCommByte = target == "cuda" ? 2000.0 : 200.0;
  pm.addPass(createStepRemat(rematOptions));
}

void stepc::addTargetTail(OpPassManager &pm, StringRef target, bool fuseElementwise,
                          StringRef remat, int64_t rematBudget, int64_t checkBudget) {
  addStepRemat(pm, target, remat, rematBudget);
  // The forward-only entry (evaluation), lowered with the step.
  pm.addPass(createStepEvalStep());
  // The sampler's one-row forward.
  pm.addPass(createStepSampleStep());
  // Target lowering: the kernels the back end launches.
  if (target == "cuda")
    pm.addPass(createStepFuseCudaKernels());
  else
    pm.addPass(createStepFoldWideningGemms());
  pm.addPass(createStepLowerLibraryCalls(StepLowerLibraryCallsOptions{target.str()}));
  if (fuseElementwise)
    pm.addPass(createStepFuseElementwise());
  // The plan the emitters print, checked against the budget.
  pm.addPass(createStepPlanMemory(StepPlanMemoryOptions{target.str(), checkBudget}));
}

void stepc::registerStepcPipeline() {
  registerPassPipeline(
      "stepc-pipeline",
      "The IR passes of stepc's training step (options as stepc's flags)",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> emitError) {
        StepcPipelineOptions options;
        if (failed(options.parseFromString(text)))
          return failure();
        return buildStepcPipeline(pm, options, emitError);
      },
      [](function_ref<void(const detail::PassOptions &)> printOptions) {
        printOptions(StepcPipelineOptions());
      });
}
