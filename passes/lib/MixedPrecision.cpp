//===- MixedPrecision.cpp - bf16 GEMMs and attention, f32 elsewhere -------===//

#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace stepc {
#define GEN_PASS_DEF_STEPMIXEDPRECISION
#include "stepc/Transforms/Passes.h.inc"
} // namespace stepc

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

namespace {

RankedTensorType withElement(Type type, Type element) {
  return cast<RankedTensorType>(type).clone(element);
}

void narrow(func::FuncOp step) {
  OpBuilder b(step.getContext());
  Type bf16 = b.getBF16Type();
  // The bf16 copy of each f32 value, made at its first use.
  DenseMap<Value, Value> narrowed;
  SmallVector<Operation *> targets;
  step.walk([&](Operation *op) {
    if (isa<MatmulOp, BatchMatmulOp, AttentionOp, AttentionGradOp>(op))
      targets.push_back(op);
  });
  for (Operation *op : targets) {
    // An attention's mask stays f32 (a bias in bf16 would move the scores).
    Value mask;
    if (auto a = dyn_cast<AttentionOp>(op))
      mask = a.getMask();
    else if (auto g = dyn_cast<AttentionGradOp>(op))
      mask = g.getMask();
    for (OpOperand &operand : op->getOpOperands()) {
      Value v = operand.get();
      if (v == mask || !cast<RankedTensorType>(v.getType()).getElementType().isF32())
        continue;
      Value &copy = narrowed[v];
      // A value widened from bf16 (another GEMM's result) narrows for free.
      if (auto widened = v.getDefiningOp<ConvertOp>();
          !copy && widened &&
          cast<RankedTensorType>(widened.getInput().getType()).getElementType() == bf16)
        copy = widened.getInput();
      if (!copy) {
        b.setInsertionPoint(op);
        copy = b.create<ConvertOp>(op->getLoc(), withElement(v.getType(), bf16), v);
        copyPhase(op, copy.getDefiningOp());
      }
      operand.set(copy);
    }
    b.setInsertionPointAfter(op);
    for (Value r : op->getResults()) {
      Type wide = r.getType();
      r.setType(withElement(wide, bf16));
      auto back = b.create<ConvertOp>(op->getLoc(), wide, r);
      copyPhase(op, back);
      r.replaceAllUsesExcept(back, back);
    }
  }
}

struct StepMixedPrecisionPass
    : public stepc::impl::StepMixedPrecisionBase<StepMixedPrecisionPass> {
  void runOnOperation() override {
    bool found = false;
    for (auto f : getOperation().getOps<func::FuncOp>())
      if (f->hasAttr(StepDialect::kTrainStepAttrName)) {
        narrow(f);
        found = true;
      }
    if (!found) {
      getOperation().emitError() << "step-mixed-precision needs a training step (a function "
                                    "marked 'step.train_step': run step-optimizer first)";
      signalPassFailure();
    }
  }
};

} // namespace
