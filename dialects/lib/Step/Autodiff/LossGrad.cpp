//===- LossGrad.cpp - VJPs of cross_entropy and embedding -----------------===//

#include "GradBuilder.h"

using namespace mlir;
using namespace stepc::step;

// cross_entropy: dlogits = dloss · (softmax(logits) - onehot(targets)) / N
// (with the options: step.cross_entropy_grad's formula); the targets and
// the count are data, not functions of the parameters: no gradient.
LogicalResult CrossEntropyOp::buildVjp(OpBuilder &b, ValueRange dloss,
                                       SmallVectorImpl<Value> &grads) {
  grads.push_back(b.create<CrossEntropyGradOp>(getLoc(), dloss[0], getLogits(), getTargets(),
                                               getCount(), getIgnoreIndexAttr(),
                                               getLabelSmoothingAttr(), getZLossAttr()));
  grads.push_back(nullptr);
  if (getCount())
    grads.push_back(nullptr);
  return success();
}

// embedding: dtable[v] = Σ_{i: ids[i] = v} dy[i] (scatter-add, repeated ids
// accumulate); ids are integers: no gradient.
LogicalResult EmbeddingOp::buildVjp(OpBuilder &b, ValueRange dy, SmallVectorImpl<Value> &grads) {
  int64_t rows = getTable().getType().getDimSize(0);
  grads.push_back(b.create<EmbeddingGradOp>(getLoc(), dy[0], getIds(),
                                            b.getI64IntegerAttr(rows), getFirstRow(),
                                            getNumIdsAttr()));
  grads.push_back(nullptr);
  if (getFirstRow())
    grads.push_back(nullptr);
  return success();
}

// target_mask and token_count: functions of integers; no gradient reaches
// them.
LogicalResult TargetMaskOp::buildVjp(OpBuilder &, ValueRange, SmallVectorImpl<Value> &grads) {
  grads.push_back(nullptr);
  return success();
}

LogicalResult TokenCountOp::buildVjp(OpBuilder &, ValueRange, SmallVectorImpl<Value> &grads) {
  grads.push_back(nullptr);
  return success();
}
