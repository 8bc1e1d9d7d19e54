//===- CompiledModule.cpp - what a compiled module says about itself -----===//
//
// After buildStepcPipeline, the module holds everything the report and
// step.so's metadata state: the loss, training and eval steps, the memory
// plan step-plan-memory recorded, the mesh the sharding passes built. These
// read it there, so every tool reports the same module the same way.
//
//===----------------------------------------------------------------------===//

#include "stepc/Compiler/ArenaPlan.h"
#include "stepc/Compiler/Emitter.h"
#include "stepc/Compiler/BlockCalls.h"
#include "stepc/Compiler/Pipeline.h"
#include "stepc/Compiler/Report.h"
#include "stepc/Dialect/Step/IR/StepDialect.h"
#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Transforms/Passes.h"

#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

FailureOr<CompiledSteps> stepc::findCompiledSteps(ModuleOp module) {
  CompiledSteps steps;
  for (auto f : module.getOps<func::FuncOp>()) {
    if (f->hasAttr(StepDialect::kLossAttrName))
      steps.loss = f;
    if (f->hasAttr(StepDialect::kTrainStepAttrName))
      steps.train = f;
    if (f->hasAttr(StepDialect::kEvalStepAttrName))
      steps.eval = f;
    if (f->hasAttr(StepDialect::kSampleStepAttrName))
      steps.sample = f;
  }
  if (!steps.loss || !steps.train)
    return module.emitError() << "the pipeline built no training step";
  return steps;
}

SmallVector<ModuleOp> stepc::compiledStages(ModuleOp module) {
  SmallVector<std::pair<int64_t, ModuleOp>> ranked;
  for (auto nested : module.getOps<ModuleOp>())
    if (auto stage = nested->getAttrOfType<IntegerAttr>(StepDialect::kPpStageAttrName))
      ranked.push_back({stage.getInt(), nested});
  // In rank order, whatever order the modules are in: stage r's code is
  // what rank r loads.
  llvm::stable_sort(ranked, [](const auto &a, const auto &b) { return a.first < b.first; });
  SmallVector<ModuleOp> stages;
  for (auto &[rank, stage] : ranked)
    stages.push_back(stage);
  if (stages.empty())
    stages.push_back(module);
  return stages;
}

int64_t stepc::cudaLaunchesPerStep(func::FuncOp step) {
  int64_t launches = 0;
  for (Operation &op : step.getBody().front()) {
    // A block function's launches, per call.
    if (auto call = dyn_cast<func::CallOp>(op))
      if (func::FuncOp callee = blockFunctionOf(call)) {
        launches += cudaLaunchesPerStep(callee);
        continue;
      }
    if (isa<ReshapeOp, func::ReturnOp, mesh::AllGatherOp, mesh::AllReduceOp, mesh::AllSliceOp,
            mesh::AllToAllOp, mesh::ReduceScatterOp, mesh::SendOp, mesh::RecvOp>(op))
      continue;  // aliases, and the communicator's work (an all_slice copies)
    if (auto concat = dyn_cast<ConcatOp>(op))
      launches += concat.getInputs().size();  // one box copy per input
    else if (isa<PadOp>(op))
      launches += 2;  // a fill, then the box copy
    else
      ++launches;
  }
  return launches;
}

FailureOr<StepReport> stepc::reportCompiledModule(ModuleOp module,
                                                  const StepcPipelineOptions &options,
                                                  const CommModel &comm) {
  FailureOr<CompiledSteps> steps = findCompiledSteps(module);
  if (failed(steps))
    return failure();
  // The plan step-plan-memory recorded: the one emitted.
  FailureOr<MemoryPlan> plan = readMemoryPlan(steps->train);
  if (failed(plan))
    return failure();
  FailureOr<StepReport> report =
      buildReport(steps->loss, steps->train, *plan, options.target, comm);
  if (failed(report))
    return failure();
  if (steps->eval)
    report->evalArenaBytes = targetArenaBytes(steps->eval);
  if (steps->sample)
    report->sampleArenaBytes = targetArenaBytes(steps->sample);
  if (options.target == "cuda") {
    report->targetArenaBytes = targetArenaBytes(steps->train);
    report->targetPlannedPeakBytes = plannedPeakBytes(steps->train);
    report->targetLaunchesPerStep = cudaLaunchesPerStep(steps->train);
  }
  int64_t budget = 0;
  if (!options.memoryBudget.empty()) {
    FailureOr<int64_t> parsed = parseByteSize(options.memoryBudget);
    if (failed(parsed))
      return module.emitError() << "bad memory-budget '" << options.memoryBudget.getValue()
                                << "'";
    budget = *parsed;
  }
  if (budget > 0)
    report->memoryBudgetBytes = budget;
  // A pipeline's layout and predicted idle time, as step-pipeline-stages
  // recorded them on the mesh.
  if (auto mesh = dyn_cast_or_null<mesh::MeshOp>(module.lookupSymbol(kWorldMeshName)))
    if (auto pipeline = mesh->getAttrOfType<DictionaryAttr>(StepDialect::kPipelineAttrName))
      for (NamedAttribute entry : pipeline) {
        llvm::json::Value value = nullptr;
        Attribute a = entry.getValue();
        if (auto text = dyn_cast<StringAttr>(a))
          value = text.str();
        else if (auto n = dyn_cast<IntegerAttr>(a))
          value = n.getInt();
        else if (auto x = dyn_cast<FloatAttr>(a))
          value = x.getValueAsDouble();
        else if (auto ints = dyn_cast<DenseI64ArrayAttr>(a))
          value = llvm::json::Array(ints.asArrayRef());
        else if (auto reals = dyn_cast<DenseF64ArrayAttr>(a))
          value = llvm::json::Array(reals.asArrayRef());
        report->pipeline[entry.getName().strref()] = std::move(value);
      }
  // As the step was compiled: the remat mode in effect, not the option's
  // empty default.
  report->remat = options.remat.empty() ? (budget ? "auto" : "none") : options.remat.getValue();
  StepcPipelineOptions effective;
  effective.copyOptionValuesFrom(options);
  effective.remat = report->remat;
  llvm::raw_string_ostream os(report->compileOptions);
  effective.print(os);
  return report;
}

ModuleSummary stepc::summarizeCompiledModule(ModuleOp module, const StepReport &report,
                                             StringRef shard, StringRef precision) {
  ModuleSummary summary;
  {
    llvm::raw_string_ostream os(summary.reportJson);
    os << llvm::formatv("{0:2}", llvm::json::Value(report.toJson()));
  }
  summary.modelFlops = report.modelFlopsPerStep;
  summary.executedFlops = report.executedFlopsPerStep;
  summary.tokens = report.tokensPerStep;
  // The mesh the passes built (none: one rank) says how the step runs.
  if (auto mesh = dyn_cast_or_null<mesh::MeshOp>(module.lookupSymbol(kWorldMeshName))) {
    ArrayRef<int64_t> shape = mesh.getShape();
    summary.meshShape.assign(shape.begin(), shape.end());
    summary.worldSize = 1;
    for (int64_t n : shape)
      summary.worldSize *= n;
    if (auto tp = mesh->getAttrOfType<IntegerAttr>(StepDialect::kTpAxisAttrName);
        tp && tp.getInt() < int64_t(shape.size()))
      summary.tensorParallel = shape[tp.getInt()];
    if (auto pp = mesh->getAttrOfType<IntegerAttr>(StepDialect::kPpAxisAttrName);
        pp && pp.getInt() < int64_t(shape.size())) {
      summary.pipelineStages = shape[pp.getInt()];
      summary.pipelineAxis = pp.getInt();
    }
  // The model's FLOPs are the whole batch's; a pipeline stage's rank does
  // its share (MFU per rank).
  summary.modelFlops /= summary.pipelineStages;
  }
  summary.sharding = summary.worldSize > 1 ? shard.str() : "none";
  summary.precision = precision.str();
  return summary;
}
