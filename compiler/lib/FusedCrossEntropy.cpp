//===- FusedCrossEntropy.cpp - the loss and its gradient in one pass ------===//
//
// The step's loss is a cross-entropy whose gradient follows at once:
// separately, the kernels read the logits twice ([B·T, V], the largest
// activation of a language model) and take every row's log-sum-exp twice.
// A cross_entropy and the cross_entropy_grad of the same logits and targets
// become one stepk.call "cross_entropy_fused"(logits, targets, dloss) with
// both results, at the forward's place: one read of each row, one exp per
// element for the gradient. On the CPU, the same rounding as the two
// kernels (bit-identical). A gradient only rounded to bf16 (for the output
// layer's GEMMs) is written so ("..._bf16"); on CUDA also with options, and
// logits that are a widened bf16 GEMM result (the classifier under bf16)
// are read as bf16 ("..._of_bf16"): the GEMM writes half the bytes and no
// f32 logits exist. The gradient's seed must exist there already: a
// constant (the step's 1) is moved up to it; another value is left alone.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"
#include "stepc/Dialect/Step/IR/StepOps.h"
#include "stepc/Dialect/StepK/IR/StepKOps.h"

#include "runtime/kernels/cuda/launch_config.h"

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

/// The widening whose only readers are `loss` and `grad` (bf16 logits
/// widened for them), or null.
ConvertOp wideningOnlyFor(CrossEntropyOp loss, CrossEntropyGradOp grad) {
  auto widening = loss.getLogits().getDefiningOp<ConvertOp>();
  if (!widening || widening->getBlock() != loss->getBlock() ||
      !cast<RankedTensorType>(widening.getInput().getType()).getElementType().isBF16())
    return nullptr;
  for (Operation *user : widening->getUsers())
    if (user != loss.getOperation() && user != grad.getOperation())
      return nullptr;
  return widening;
}

void fuse(CrossEntropyOp loss, CrossEntropyGradOp grad, bool cuda) {
  auto logits = cast<RankedTensorType>(loss.getLogits().getType());
  int64_t classes = logits.getShape().back(), rows = logits.getNumElements() / classes;
  OpBuilder b(loss);
  ConvertOp widening = cuda ? wideningOnlyFor(loss, grad) : nullptr;
  SmallVector<Value> inputs = {widening ? widening.getInput() : loss.getLogits(),
                               loss.getTargets()};
  SmallVector<Attribute> scalars = {b.getI64IntegerAttr(rows), b.getI64IntegerAttr(classes)};
  std::string callee = "cross_entropy_fused";
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
  if ((cuda || !loss.hasOptions()) && grad.getResult().hasOneUse())
    if (auto convert = dyn_cast<ConvertOp>(*grad.getResult().getUsers().begin());
        convert && convert->getBlock() == grad->getBlock() &&
        convert.getType().getElementType().isBF16())
      rounding = convert;
  Value gradOut = rounding ? rounding.getResult() : grad.getResult();
  if (widening)
    callee += "_of_bf16";
  if (rounding)
    callee += "_bf16";
  IntegerAttr scratch;
  if (cuda)  // the rows' losses, summed in a fixed order
    scratch = b.getI64IntegerAttr(cuda::CrossEntropyScratchFloats(rows) * 4);
  auto call = b.create<stepk::CallOp>(
      loss.getLoc(), TypeRange{loss.getType(), gradOut.getType()}, b.getStringAttr(callee),
      inputs, b.getArrayAttr(scalars), scratch, b.getStringAttr("target"),
      b.getI64IntegerAttr(1), b.getI64IntegerAttr(classes));
  copyPhase(loss, call);
  SmallVector<Operation *> body;
  if (widening)
    body.push_back(widening);
  body.append({loss, grad});
  if (rounding)
    body.push_back(rounding);
  fillCallBody(call, body, {loss.getResult(), gradOut});
  loss->replaceAllUsesWith(ValueRange{call.getResult(0)});
  gradOut.replaceAllUsesWith(call.getResult(1));
  if (rounding)
    rounding->erase();
  grad->erase();
  loss->erase();
  if (widening)
    widening->erase();
}

} // namespace

/// Gives every cross_entropy(_grad) with options a count operand: a
/// token_count of its targets when it ignores one, else the constant
/// number of positions; the loss and its gradient of the same targets share
/// one.
void stepc::explicitLossCounts(func::FuncOp step) {
  DenseMap<std::pair<Value, int64_t>, Value> counts;
  auto give = [&](Operation *op, Value targets, std::optional<int64_t> ignore,
                  MutableOperandRange count) {
    auto key = std::make_pair(targets, ignore.value_or(kNoIgnoredTarget));
    Value &made = counts[key];
    if (!made) {
      OpBuilder b(op);
      auto f32 = RankedTensorType::get({}, b.getF32Type());
      Operation *def =
          ignore ? b.create<TokenCountOp>(op->getLoc(), f32, targets, b.getI64IntegerAttr(*ignore))
                       .getOperation()
                 : b.create<ConstantOp>(
                        op->getLoc(),
                        DenseElementsAttr::get(
                            f32, b.getF32FloatAttr(static_cast<float>(
                                     cast<RankedTensorType>(targets.getType()).getNumElements()))))
                       .getOperation();
      step::copyPhase(op, def);
      made = def->getResult(0);
    }
    count.assign(made);
  };
  step.walk([&](Operation *op) {
    if (auto c = dyn_cast<CrossEntropyOp>(op); c && c.hasOptions() && !c.getCount())
      give(op, c.getTargets(), c.getIgnoreIndex(), c.getCountMutable());
    if (auto c = dyn_cast<CrossEntropyGradOp>(op); c && c.hasOptions() && !c.getCount())
      give(op, c.getTargets(), c.getIgnoreIndex(), c.getCountMutable());
  });
}

void stepc::lowerFusedCrossEntropy(func::FuncOp step, bool cuda) {
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
    fuse(loss, grad, cuda);
}
