//===- Fp8Grad.cpp - VJPs of the fp8 tile ops ------------------------------===//

#include "GradBuilder.h"

using namespace mlir;
using namespace stepc::step;

// quantize_fp8: straight through, as round_fp8.
LogicalResult QuantizeFp8Op::buildVjp(OpBuilder &, ValueRange dy,
                                      SmallVectorImpl<Value> &grads) {
  grads.push_back(dy[0]);
  return success();
}

// quantize_grad_fp8: the identity whose cotangent is rounded by tiles
// (step-autodiff then removes the op itself).
LogicalResult QuantizeGradFp8Op::buildVjp(OpBuilder &b, ValueRange dy,
                                          SmallVectorImpl<Value> &grads) {
  grads.push_back(b.create<QuantizeFp8Op>(getLoc(), dy[0], getFormatAttr(), getTileAttr()));
  return success();
}
