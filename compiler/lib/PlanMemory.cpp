//===- PlanMemory.cpp - the memory plan into the IR, and the budget ------===//
//
// step-plan-memory plans each step and records the plan in the IR
// (ArenaPlan.h); step-fit-memory-budget runs remat and the target lowering
// until the plan recorded there fits the budget. The budget is checked on
// the plan the emitters print, never on an estimate.
//
//===----------------------------------------------------------------------===//

#include "stepc/Analysis/StepStructure.h"
#include "stepc/Compiler/ArenaPlan.h"
#include "stepc/Compiler/Passes.h"
#include "stepc/Compiler/Pipeline.h"
#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Dialect/StepK/IR/StepKOps.h"
#include "stepc/Transforms/CollectiveSchedule.h"

#include "runtime/kernels/cuda/launch_config.h"

#include "mlir/IR/Builders.h"
#include "mlir/Pass/PassManager.h"

namespace stepc {
#define GEN_PASS_DEF_STEPPLANMEMORY
#define GEN_PASS_DEF_STEPFITMEMORYBUDGET
#include "stepc/Compiler/Passes.h.inc"
} // namespace stepc

using namespace mlir;
using namespace stepc;
using namespace stepc::step;
namespace lc = stepc::cuda;

namespace {

/// The scratch an fp8 GEMM packs its operands into (or unpacks packed ones
/// in, where it runs in bf16).
int64_t fp8GemmScratchBytes(stepk::GemmOp gemm) {
  auto out = cast<RankedTensorType>(gemm.getResult().getType());
  int64_t m = out.getDimSize(out.getRank() - 2), n = out.getShape().back();
  ArrayRef<int32_t> fp8 = *gemm.getFp8();
  return lc::Fp8GemmScratchBytes(out.getNumElements() / (m * n), m, n, gemm.getK(),
                                 gemm.getTransposeA(), gemm.getSharedRhs(), fp8[0], fp8[1],
                                 fp8[2], gemm.getLhsScales() ? 1 : 0,
                                 gemm.getRhsScales() ? 1 : 0);
}

/// The CUDA layout of `step`'s arena around `plan`: the largest scratch any
/// kernel needs.
CudaArenaLayout layoutForCuda(func::FuncOp step, const MemoryPlan &plan) {
  int64_t scratch = 0;
  auto attentionGrad = [&](Value query, Value key, Value queryGrad, int64_t heads,
                           int64_t kvHeads, int64_t headDim, bool saved) {
    auto q = cast<RankedTensorType>(query.getType());
    auto k = cast<RankedTensorType>(key.getType());
    auto dq = cast<RankedTensorType>(queryGrad.getType());
    scratch = std::max(scratch, lc::AttentionGradScratchBytesFor(
                                    q.getDimSize(0), q.getDimSize(1), k.getDimSize(1), heads,
                                    kvHeads, headDim, saved, q.getElementType().isBF16(),
                                    dq.getElementType().isF32()));
  };
  for (Operation &op : step.getBody().front()) {
    if (auto call = dyn_cast<stepk::CallOp>(op)) {
      if (std::optional<int64_t> bytes = call.getScratchBytes())
        scratch = std::max(scratch, *bytes);
    } else if (auto gemm = dyn_cast<stepk::GemmOp>(op); gemm && gemm.getFp8()) {
      scratch = std::max(scratch, fp8GemmScratchBytes(gemm));
    } else if (auto grad = dyn_cast<AttentionGradOp>(op)) {
      attentionGrad(grad.getQuery(), grad.getKey(), grad.getQueryGrad(), grad.getNumHeads(),
                    grad.getNumKvHeads(), grad.getHeadDim(), /*saved=*/false);
    } else if (auto kernel = dyn_cast<stepk::AttentionGradOp>(op)) {
      attentionGrad(kernel.getQuery(), kernel.getKey(), kernel.getGrads()[0],
                    kernel.getNumHeads(), kernel.getNumKvHeads(), kernel.getHeadDim(),
                    /*saved=*/kernel.getLse() != nullptr);
    }
  }
  return layoutCudaArena(plan.arenaBytes, scratch);
}

/// The module's training step, if any.
func::FuncOp trainingStep(ModuleOp module) {
  for (auto f : module.getOps<func::FuncOp>())
    if (f->hasAttr(StepDialect::kTrainStepAttrName))
      return f;
  return {};
}

struct StepPlanMemoryPass : public stepc::impl::StepPlanMemoryBase<StepPlanMemoryPass> {
  using StepPlanMemoryBase::StepPlanMemoryBase;
  void runOnOperation() override {
    if (target != "cpu" && target != "cuda") {
      getOperation().emitError() << "step-plan-memory: unknown target '" << target << "'";
      return signalPassFailure();
    }
    for (auto f : getOperation().getOps<func::FuncOp>()) {
      bool train = f->hasAttr(StepDialect::kTrainStepAttrName);
      if (!train && !f->hasAttr(StepDialect::kEvalStepAttrName) &&
          !f->hasAttr(StepDialect::kSampleStepAttrName))
        continue;
      // What a CUDA kernel computes besides its op is in the IR already
      // (step-fuse-cuda-kernels): the plan is the IR's.
      MemoryPlan plan = planMemory(f);
      std::optional<CudaArenaLayout> layout;
      if (target == "cuda")
        layout = layoutForCuda(f, plan);
      writeMemoryPlan(f, plan, layout);
      // Each collective's request slot, in order: its start fills it, its
      // wait (at its first reader) reads it.
      int64_t requests = 0;
      Builder b(f.getContext());
      for (Operation &op : f.getBody().front())
        if (communicates(&op))
          op.setAttr(StepDialect::kRequestAttrName, b.getI64IntegerAttr(requests++));
      int64_t peak = plannedPeakBytes(f).value_or(0);
      if (train && budget > 0 && peak > budget) {
        f.emitError() << "the " << target.getValue() << " back end's plan needs " << peak
                      << " bytes per rank" << onPipelineStage(f)
                      << ", over the memory budget of " << budget.getValue()
                      << " bytes (raise --memory-budget or choose another --remat)";
        return signalPassFailure();
      }
    }
  }
};

struct StepFitMemoryBudgetPass
    : public stepc::impl::StepFitMemoryBudgetBase<StepFitMemoryBudgetPass> {
  using StepFitMemoryBudgetBase::StepFitMemoryBudgetBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (budget <= 0 || attempts < 1) {
      module.emitError() << "step-fit-memory-budget needs a budget > 0 and attempts >= 1";
      return signalPassFailure();
    }
    int64_t rematBudget = budget;
    for (unsigned attempt = 1;; ++attempt) {
      // The candidate: a copy of the module as it is, nested in it (a
      // dynamic pipeline runs only on what the pass owns).
      OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
      auto candidate = b.create<ModuleOp>(module.getLoc());
      OpBuilder inside = OpBuilder::atBlockBegin(candidate.getBody());
      for (Operation &op : module.getBody()->getOperations())
        if (&op != candidate.getOperation())
          inside.clone(op);
      OpPassManager tail(ModuleOp::getOperationName());
      addTargetTail(tail, target, fuseElementwise, "auto", rematBudget, /*checkBudget=*/0);
      if (failed(runPipeline(tail, candidate))) {
        if (attempt > 1)
          emitRemark(module.getLoc())
              << "the " << target.getValue() << " back end's plan needs "
              << budget.getValue() - rematBudget << " bytes more than step-remat plans, so "
              << "step-remat was given " << rematBudget << " of the " << budget.getValue()
              << " bytes";
        candidate.erase();
        return signalPassFailure();
      }
      func::FuncOp step = trainingStep(candidate);
      std::optional<int64_t> peak = step ? plannedPeakBytes(step) : std::nullopt;
      if (!peak) {
        candidate.erase();
        module.emitError() << "step-fit-memory-budget: the pipeline left no planned training "
                              "step";
        return signalPassFailure();
      }
      if (*peak <= budget || attempt == attempts) {
        if (*peak > budget)
          step.emitError() << "the " << target.getValue() << " back end's plan needs " << *peak
                           << " bytes per rank" << onPipelineStage(module)
                           << ", over the memory budget of "
                           << budget.getValue()
                           << " bytes (raise --memory-budget or choose another --remat)";
        // The module becomes the candidate.
        for (Operation &op : llvm::make_early_inc_range(module.getBody()->getOperations()))
          if (&op != candidate.getOperation())
            op.erase();
        module.getBody()->getOperations().splice(module.getBody()->end(),
                                                 candidate.getBody()->getOperations());
        candidate.erase();
        if (*peak > budget)
          return signalPassFailure();
        return;
      }
      // Below what step-remat planned (not its budget: its plan may sit
      // under it), by the lowering's overshoot.
      int64_t planned = rematBudget;
      if (auto decision = step->getAttrOfType<DictionaryAttr>(StepDialect::kRematAttrName))
        if (auto p = dyn_cast_or_null<IntegerAttr>(decision.get("planned_peak")))
          planned = std::min(planned, p.getInt());
      rematBudget = planned - (*peak - budget);
      candidate.erase();
      if (rematBudget <= 0) {
        module.emitError() << "the " << target.getValue()
                           << " back end's plan cannot fit the memory budget of "
                           << budget.getValue() << " bytes" << onPipelineStage(module);
        return signalPassFailure();
      }
    }
  }
};

} // namespace
