//===- AttentionGrad.cpp - VJPs of attention and rotary -------------------===//

#include "GradBuilder.h"

using namespace mlir;
using namespace stepc::step;

// attention: (dq, dk, dv) = attention_grad(dO, q, k, v), which recomputes
// P = softmax(scale·QKᵀ + mask) and returns
//   dV = Pᵀ dO, dS = P ∘ (dO Vᵀ - rowsum(dO ∘ O)), dQ = scale·dS K, dK = scale·dSᵀ Q.
// The mask is a constant of the step: no cotangent (step-autodiff refuses a
// mask computed from a parameter).
LogicalResult AttentionOp::buildVjp(OpBuilder &b, ValueRange dO, SmallVectorImpl<Value> &grads) {
  auto grad = b.create<AttentionGradOp>(
      getLoc(), dO[0], getQuery(), getKey(), getValue(), getMask(), getNumHeadsAttr(),
      getNumKvHeadsAttr(), getHeadDimAttr(), getCausalAttr(), getScaleAttr());
  grads.append({grad.getQueryGrad(), grad.getKeyGrad(), grad.getValueGrad()});
  if (getMask())
    grads.push_back(nullptr);
  return success();
}

// rotary: y = R(t)·x with R(t) a rotation, so dx = R(t)ᵀ·dy = R(-t)·dy:
// the same op with `inverse` flipped.
LogicalResult RotaryOp::buildVjp(OpBuilder &b, ValueRange dy, SmallVectorImpl<Value> &grads) {
  grads.push_back(b.create<RotaryOp>(getLoc(), dy[0], getHeadDimAttr(), getThetaAttr(),
                                     getInverse() ? nullptr : b.getUnitAttr()));
  return success();
}
