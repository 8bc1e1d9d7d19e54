//===- SampleStep.cpp - the one-row forward a sampler runs ----------------===//
//
// sample_step = eval_step with its inputs rebound to one row: a sampler
// reads one row's logits per token, and the eval step computes the whole
// batch's. See Passes.td (step-sample-step).
//
//===----------------------------------------------------------------------===//

#include "stepc/Dialect/Step/IR/StepDialect.h"
#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Transforms/LossFunctions.h"
#include "stepc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Mesh/IR/MeshOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/SetVector.h"

namespace stepc {
#define GEN_PASS_DEF_STEPSAMPLESTEP
#include "stepc/Transforms/Passes.h.inc"
} // namespace stepc

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

namespace {

/// The eval step's [batch, seq, vocab] logits, or null.
Value rowLogits(func::FuncOp eval) {
  std::optional<unsigned> index = findResult(eval, Role::Logits);
  if (!index)
    return Value();
  Value logits = eval.getBody().front().getTerminator()->getOperand(*index);
  return cast<RankedTensorType>(logits.getType()).getRank() == 3 ? logits : Value();
}

/// Whether the logits are computed row by row, as far as this checks: no
/// reduction they depend on runs over dimension 0 (a batch statistic would
/// make one row's logits depend on the others), and no stage boundary (a
/// pipeline stage's eval step sends or receives; the sampler runs those
/// whole).
bool computedRowByRow(Value logits) {
  llvm::SetVector<Operation *> seen;
  SmallVector<Value> work{logits};
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (!def || !seen.insert(def))
      continue;
    if (isa<mesh::SendOp, mesh::RecvOp>(def))
      return false;
    if (isa<ReduceSumOp, ReduceMeanOp, ReduceMaxOp>(def) &&
        llvm::is_contained(def->getAttrOfType<DenseI64ArrayAttr>("dims").asArrayRef(), 0))
      return false;
    llvm::append_range(work, def->getOperands());
  }
  for (Operation &op : *logits.getParentBlock())
    if (isa<mesh::SendOp, mesh::RecvOp>(op))
      return false;
  return true;
}

struct StepSampleStepPass : public stepc::impl::StepSampleStepBase<StepSampleStepPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    SmallVector<func::FuncOp> evals;
    for (auto f : module.getOps<func::FuncOp>())
      if (f->hasAttr(StepDialect::kEvalStepAttrName))
        evals.push_back(f);
    for (func::FuncOp eval : evals) {
      Value logits = rowLogits(eval);
      if (!logits || !computedRowByRow(logits))
        continue;
      // Inputs without one batch dimension (disagreeing, or a scalar), an
      // op whose shape does not follow the batch (no shape rule): the
      // sampler runs the eval step, and the model is no worse for it.
      ScopedDiagnosticHandler quiet(&getContext(), [](Diagnostic &) { return success(); });
      FailureOr<int64_t> batch = inputBatch(eval, "sample");
      if (failed(batch) || *batch == 1)
        continue; // (one row already: the eval step is the sampling step)
      auto sample = cast<func::FuncOp>(eval->clone());
      StringRef base = eval.getSymName();
      base.consume_back("_eval_step");
      sample.setSymName((base + "_sample_step").str());
      sample->removeAttr(StepDialect::kEvalStepAttrName);
      sample->removeAttr(StepDialect::kMemoryPlanAttrName);
      sample->setAttr(StepDialect::kSampleStepAttrName, UnitAttr::get(&getContext()));
      symbols.insert(sample, std::next(Block::iterator(eval)));
      if (failed(rebindBatch(sample, /*globalBatch=*/1, /*ranks=*/1)))
        sample.erase();
    }
  }
};

} // namespace
