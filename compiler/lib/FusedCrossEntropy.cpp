//===- FusedCrossEntropy.cpp - the loss and its gradient in one pass ------===//
//
// The step's loss is a cross-entropy whose gradient follows at once:
// separately, the kernels read the logits twice ([B·T, V], the largest
// activation of a language model) and take every row's log-sum-exp twice.
// On the CPU, a cross_entropy and the cross_entropy_grad of the same logits
// and targets become one stepk.call "cross_entropy_fused"(logits, targets,
// dloss) with both results, at the forward's place: one read of each row,
// one exp per element for the gradient, the same rounding as the two
// kernels (bit-identical); a gradient only rounded to bf16 is written so
// ("cross_entropy_fused_bf16"). The gradient's seed must exist there already: a
// constant (the step's 1) is moved up to it; another value is left alone.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"
#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Dialect/StepK/IR/StepKOps.h"

using namespace mlir;
using namespace stepc;
using namespace stepc::step;

namespace {

/// Whether `seed` is available at `at`: defined before it, or a constant
/// (moved just before it).
bool seedBefore(Value seed, Operation *at) {
  Operation *def = seed.getDefiningOp();
  if (!def)
    return true;  // a block argument
  if (def->getBlock() == at->getBlock() && def->isBeforeInBlock(at))
    return true;
  if (isa<ConstantOp>(def) && def->getBlock() == at->getBlock()) {
    def->moveBefore(at);
    return true;
  }
  return false;
}

/// Whether the loss and the gradient have the same options and count.
bool sameOptions(CrossEntropyOp loss, CrossEntropyGradOp grad) {
  return loss.getCount() == grad.getCount() && loss.getIgnoreIndex() == grad.getIgnoreIndex() &&
         loss.getLabelSmoothing() == grad.getLabelSmoothing() &&
         loss.getZLoss() == grad.getZLoss();
}

void fuse(CrossEntropyOp loss, CrossEntropyGradOp grad) {
  auto logits = cast<RankedTensorType>(loss.getLogits().getType());
  int64_t classes = logits.getShape().back(), rows = logits.getNumElements() / classes;
  OpBuilder b(loss);
  SmallVector<Value> inputs = {loss.getLogits(), loss.getTargets()};
  SmallVector<Attribute> scalars = {b.getI64IntegerAttr(rows), b.getI64IntegerAttr(classes)};
  StringRef callee = "cross_entropy_fused";
  if (loss.hasOptions()) {
    // (logits, targets, count, dloss; rows, V, ignore, smoothing, z_loss)
    callee = "cross_entropy_masked_fused";
    inputs.push_back(loss.getCount());
    auto value = [](std::optional<APFloat> v) { return v ? v->convertToDouble() : 0.0; };
    scalars.push_back(b.getI64IntegerAttr(loss.getIgnoreIndex().value_or(kNoIgnoredTarget)));
    scalars.push_back(b.getF64FloatAttr(value(loss.getLabelSmoothing())));
    scalars.push_back(b.getF64FloatAttr(value(loss.getZLoss())));
  }
  inputs.push_back(grad.getGrad());
  // Under bf16, a gradient only rounded (for the output layer's GEMMs) is
  // written rounded: one pass over the largest activation, not three.
  ConvertOp rounding;
  if (!loss.hasOptions() && grad.getResult().hasOneUse())
    if (auto convert = dyn_cast<ConvertOp>(*grad.getResult().getUsers().begin());
        convert && convert->getBlock() == grad->getBlock() &&
        convert.getType().getElementType().isBF16())
      rounding = convert;
  Value gradOut = rounding ? rounding.getResult() : grad.getResult();
  if (rounding)
    callee = "cross_entropy_fused_bf16";
  auto call = b.create<stepk::CallOp>(
      loss.getLoc(), TypeRange{loss.getType(), gradOut.getType()}, b.getStringAttr(callee),
      inputs, b.getArrayAttr(scalars), IntegerAttr(), b.getStringAttr("target"),
      b.getI64IntegerAttr(1), b.getI64IntegerAttr(classes));
  copyPhase(loss, call);
  SmallVector<Operation *> body = {loss, grad};
  if (rounding)
    body.push_back(rounding);
  fillCallBody(call, body, {loss.getResult(), gradOut});
  loss->replaceAllUsesWith(ValueRange{call.getResult(0)});
  gradOut.replaceAllUsesWith(call.getResult(1));
  if (rounding)
    rounding->erase();
  grad->erase();
  loss->erase();
}

} // namespace

void stepc::lowerFusedCrossEntropy(func::FuncOp step) {
  SmallVector<std::pair<CrossEntropyOp, CrossEntropyGradOp>> pairs;
  for (auto grad : step.getBody().front().getOps<CrossEntropyGradOp>()) {
    CrossEntropyOp loss;
    for (Operation *user : grad.getLogits().getUsers())
      if (auto l = dyn_cast<CrossEntropyOp>(user);
          l && l->getBlock() == grad->getBlock() && l.getTargets() == grad.getTargets() &&
          l->isBeforeInBlock(grad) && l.getType().getElementType().isF32() &&
          sameOptions(l, grad))
        loss = l;
    if (loss && seedBefore(grad.getGrad(), loss))
      pairs.push_back({loss, grad});
  }
  for (auto [loss, grad] : pairs)
    fuse(loss, grad);
}
