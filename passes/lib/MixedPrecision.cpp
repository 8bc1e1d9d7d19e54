//===- MixedPrecision.cpp - bf16 GEMMs and attention, f32 elsewhere -------===//

#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

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
  // The bf16 copy of each f32 value, made at its first use. A reshape of
  // a value shares its source's copy (reshaped): the forward's GEMM and the
  // backward's weight gradient, which reads the same activation flattened,
  // round it once, and the bf16 copy is what lives across the step.
  DenseMap<Value, Value> narrowed;
  SetVector<Operation *> bypassed;
  auto narrowedCopy = [&](Value v, Operation *user) -> Value {
    SmallVector<ReshapeOp> reshapes;
    Value root = v;
    while (auto reshape = root.getDefiningOp<ReshapeOp>()) {
      reshapes.push_back(reshape);
      bypassed.insert(reshape);
      root = reshape.getInput();
    }
    Value &copy = narrowed[root];
    // A value widened from bf16 (another GEMM's result) narrows for free.
    if (auto widened = root.getDefiningOp<ConvertOp>();
        !copy && widened &&
        cast<RankedTensorType>(widened.getInput().getType()).getElementType() == bf16)
      copy = widened.getInput();
    if (!copy) {
      b.setInsertionPoint(user);
      copy = b.create<ConvertOp>(user->getLoc(), withElement(root.getType(), bf16), root);
      copyPhase(user, copy.getDefiningOp());
    }
    Value shaped = copy;
    for (ReshapeOp reshape : llvm::reverse(reshapes)) {
      Value &again = narrowed[reshape.getResult()];
      if (!again) {
        b.setInsertionPoint(user);
        again = b.create<ReshapeOp>(reshape.getLoc(), withElement(reshape.getType(), bf16),
                                    shaped);
        copyPhase(user, again.getDefiningOp());
      }
      shaped = again;
    }
    return shaped;
  };
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
      operand.set(narrowedCopy(v, op));
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
  // The f32 reshapes the bf16 ones replaced (users before their inputs).
  SmallVector<Operation *> reshapes = bypassed.takeVector();
  for (Operation *reshape : llvm::reverse(reshapes))
    if (reshape->use_empty())
      reshape->erase();
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
