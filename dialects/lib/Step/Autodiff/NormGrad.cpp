//===- NormGrad.cpp - VJPs of norms and line ops (softmax, cumsum) --------===//
//
// Composite backward ops; their math is in StepGradOps.td and the
// interpreter (dialects/lib/Step/Interpreter/EvalNorm.cpp).
//
//===----------------------------------------------------------------------===//

#include "GradBuilder.h"

using namespace mlir;
using namespace stepc::step;

// layer_norm: (dx, dweight, dbias) = layer_norm_grad(dy, x, weight)
LogicalResult LayerNormOp::buildVjp(OpBuilder &b, ValueRange dy, SmallVectorImpl<Value> &grads) {
  auto grad = b.create<LayerNormGradOp>(getLoc(), dy[0], getInput(), getWeight(),
                                        getEpsilonAttr());
  grads.append({grad.getInputGrad(), grad.getWeightGrad(), grad.getBiasGrad()});
  return success();
}

// rms_norm: (dx, dweight) = rms_norm_grad(dy, x, weight)
LogicalResult RmsNormOp::buildVjp(OpBuilder &b, ValueRange dy, SmallVectorImpl<Value> &grads) {
  auto grad = b.create<RmsNormGradOp>(getLoc(), dy[0], getInput(), getWeight(),
                                      getEpsilonAttr());
  grads.append({grad.getInputGrad(), grad.getWeightGrad()});
  return success();
}

// softmax: dx = y · (dy - sum(dy · y)) = softmax_grad(dy, y)
LogicalResult SoftmaxOp::buildVjp(OpBuilder &b, ValueRange dy, SmallVectorImpl<Value> &grads) {
  grads.push_back(b.create<SoftmaxGradOp>(getLoc(), dy[0], getResult(), getDimAttr()));
  return success();
}

// log_softmax: dx = dy - exp(y) · sum(dy) = log_softmax_grad(dy, y)
LogicalResult LogSoftmaxOp::buildVjp(OpBuilder &b, ValueRange dy,
                                     SmallVectorImpl<Value> &grads) {
  grads.push_back(b.create<LogSoftmaxGradOp>(getLoc(), dy[0], getResult(), getDimAttr()));
  return success();
}

// cumsum: dx = the reverse cumulative sum of dy = cumsum_grad(dy)
LogicalResult CumsumOp::buildVjp(OpBuilder &b, ValueRange dy, SmallVectorImpl<Value> &grads) {
  grads.push_back(b.create<CumsumGradOp>(getLoc(), dy[0], getDimAttr()));
  return success();
}
