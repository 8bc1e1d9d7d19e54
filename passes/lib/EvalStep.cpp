//===- EvalStep.cpp - the forward-only step (step-eval-step) --------------===//
//
// eval_step(args...) = loss(train_step(args...)): a copy of the training
// step that keeps only the ops its loss depends on. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "stepc/Dialect/Step/IR/StepDialect.h"
#include "stepc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/SetVector.h"

namespace stepc {
#define GEN_PASS_DEF_STEPEVALSTEP
#include "stepc/Transforms/Passes.h.inc"
} // namespace stepc

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

namespace {

/// The index of the training step's result named "loss".
std::optional<unsigned> lossResult(func::FuncOp step) {
  for (unsigned i = 0, e = step.getNumResults(); i < e; ++i)
    if (auto name = step.getResultAttrOfType<StringAttr>(i, StepDialect::kResultAttrName);
        name && name.getValue() == "loss")
      return i;
  return std::nullopt;
}

struct StepEvalStepPass : public stepc::impl::StepEvalStepBase<StepEvalStepPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    SmallVector<func::FuncOp> steps;
    for (auto f : module.getOps<func::FuncOp>())
      if (f->hasAttr(StepDialect::kTrainStepAttrName))
        steps.push_back(f);
    for (func::FuncOp step : steps) {
      std::optional<unsigned> loss = lossResult(step);
      if (!loss) {
        step.emitOpError() << "has no result named 'loss' to evaluate";
        return signalPassFailure();
      }
      auto eval = cast<func::FuncOp>(step->clone());
      StringRef base = step.getSymName();
      base.consume_back("_train_step");
      eval.setSymName((base + "_eval_step").str());
      eval->removeAttr(StepDialect::kTrainStepAttrName);
      eval->removeAttr(StepDialect::kRematAttrName);
      eval->setAttr(StepDialect::kEvalStepAttrName, UnitAttr::get(&getContext()));
      symbols.insert(eval, std::next(Block::iterator(step)));

      // The new return: the loss alone.
      Block &body = eval.getBody().front();
      auto ret = cast<func::ReturnOp>(body.getTerminator());
      Value lossValue = ret.getOperand(*loss);
      OpBuilder b(ret);
      b.create<func::ReturnOp>(ret.getLoc(), lossValue);
      ret.erase();
      eval.setFunctionType(
          FunctionType::get(&getContext(), eval.getArgumentTypes(), {lossValue.getType()}));
      SmallVector<DictionaryAttr> resultAttrs{b.getDictionaryAttr(
          b.getNamedAttr(StepDialect::kResultAttrName, b.getStringAttr("loss")))};
      eval.setAllResultAttrs(resultAttrs);

      // The backward slice of the loss; everything else goes, users first.
      llvm::SetVector<Operation *> slice;
      SmallVector<Value> work{lossValue};
      while (!work.empty()) {
        Operation *def = work.pop_back_val().getDefiningOp();
        if (!def || !slice.insert(def))
          continue;
        llvm::append_range(work, def->getOperands());
      }
      SmallVector<Operation *> dead;
      for (Operation &op : body.without_terminator())
        if (!slice.contains(&op))
          dead.push_back(&op);
      for (Operation *op : llvm::reverse(dead)) {
        if (!op->use_empty()) {
          op->emitOpError() << "is outside the loss's slice but still used (step-eval-step)";
          return signalPassFailure();
        }
        op->erase();
      }
    }
  }
};

} // namespace
