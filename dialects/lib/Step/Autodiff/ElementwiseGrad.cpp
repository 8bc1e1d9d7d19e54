//===- ElementwiseGrad.cpp - VJPs of elementwise ops ----------------------===//
//
// dy is the cotangent of the result y, dx (da, db) those of the operands.
//
//===----------------------------------------------------------------------===//

#include "GradBuilder.h"

#include <cmath>

using namespace mlir;
using namespace stepc::step;

// d(a + b) = (dz, dz)
LogicalResult AddOp::buildVjp(OpBuilder &b, ValueRange dz, SmallVectorImpl<Value> &grads) {
  grads.append({dz[0], dz[0]});
  return success();
}

// A mask is a step function of its operands: no gradient.
LogicalResult CompareOp::buildVjp(OpBuilder &, ValueRange, SmallVectorImpl<Value> &grads) {
  grads.append({nullptr, nullptr});
  return success();
}

// d select(m, x, y) = (none, select(m, dz, 0), select(m, 0, dz))
LogicalResult SelectOp::buildVjp(OpBuilder &b, ValueRange dz, SmallVectorImpl<Value> &grads) {
  grads.push_back(nullptr);
  if (!dz[0] || !isa<FloatType>(getType().getElementType())) {
    grads.append({nullptr, nullptr});
    return success();
  }
  Value zero = GradBuilder(b, getLoc()).splat(0.0, getType());
  grads.push_back(b.create<SelectOp>(getLoc(), getCondition(), dz[0], zero));
  grads.push_back(b.create<SelectOp>(getLoc(), getCondition(), zero, dz[0]));
  return success();
}

// d(a / b) = (dz / b, -dz · z / b)
LogicalResult DivOp::buildVjp(OpBuilder &b, ValueRange dz, SmallVectorImpl<Value> &grads) {
  GradBuilder g(b, getLoc());
  grads.push_back(g.div(dz[0], getRhs()));
  grads.push_back(g.neg(g.div(g.mul(dz[0], getResult()), getRhs())));
  return success();
}

// d dropout(x) = dropout(dy): the same mask and scale, drawn again from the
// same key and rows (nothing saved); the key and rows get no gradient.
LogicalResult DropoutOp::buildVjp(OpBuilder &b, ValueRange dy, SmallVectorImpl<Value> &grads) {
  auto dx = b.create<DropoutOp>(getLoc(), dy[0].getType(), dy[0], getSeed(), getStep(),
                                getFirstRow(), getRateAttr(), getStreamAttr());
  // Marks of a batch split still to apply apply alike (not the phase).
  for (StringRef mark : {StepDialect::kRankRowsAttrName, StepDialect::kMicroRowsAttrName})
    if (Attribute rows = (*this)->getAttr(mark))
      dx->setAttr(mark, rows);
  grads.push_back(dx);
  for (unsigned i = 1, e = getNumOperands(); i < e; ++i)
    grads.push_back(nullptr);
  return success();
}

// d x^p = dy · p · x^(p-1)
LogicalResult PowOp::buildVjp(OpBuilder &b, ValueRange dy, SmallVectorImpl<Value> &grads) {
  GradBuilder g(b, getLoc());
  double p = getExponent().convertToDouble();
  Value lower = b.create<PowOp>(getLoc(), getInput(), b.getF64FloatAttr(p - 1.0));
  grads.push_back(g.scale(g.mul(dy[0], lower), p));
  return success();
}

// d erf(x) = dy · 2/√π · exp(-x²)
LogicalResult ErfOp::buildVjp(OpBuilder &b, ValueRange dy, SmallVectorImpl<Value> &grads) {
  GradBuilder g(b, getLoc());
  Value x = getInput();
  Value gauss = g.exp(g.neg(g.mul(x, x)));
  grads.push_back(g.scale(g.mul(dy[0], gauss), 2.0 / std::sqrt(M_PI)));
  return success();
}

// d exp(x) = dy · y
LogicalResult ExpOp::buildVjp(OpBuilder &b, ValueRange dy, SmallVectorImpl<Value> &grads) {
  grads.push_back(GradBuilder(b, getLoc()).mul(dy[0], getResult()));
  return success();
}

// d gelu(x) = gelu_grad(dy, x), same approximation
LogicalResult GeluOp::buildVjp(OpBuilder &b, ValueRange dy, SmallVectorImpl<Value> &grads) {
  grads.push_back(b.create<GeluGradOp>(getLoc(), dy[0], getInput(), getApproximateAttr()));
  return success();
}

// d log(x) = dy / x
LogicalResult LogOp::buildVjp(OpBuilder &b, ValueRange dy, SmallVectorImpl<Value> &grads) {
  grads.push_back(GradBuilder(b, getLoc()).div(dy[0], getInput()));
  return success();
}

// max(a, b) = b + relu(a - b):  da = relu_grad(dz, a - b), db = dz - da
// (a tie sends the whole gradient to b).
LogicalResult MaximumOp::buildVjp(OpBuilder &b, ValueRange dz, SmallVectorImpl<Value> &grads) {
  GradBuilder g(b, getLoc());
  Value da = b.create<ReluGradOp>(getLoc(), dz[0], g.sub(getLhs(), getRhs()));
  grads.append({da, g.sub(dz[0], da)});
  return success();
}

// min(a, b) = a - relu(a - b):  db = relu_grad(dz, a - b), da = dz - db
LogicalResult MinimumOp::buildVjp(OpBuilder &b, ValueRange dz, SmallVectorImpl<Value> &grads) {
  GradBuilder g(b, getLoc());
  Value db = b.create<ReluGradOp>(getLoc(), dz[0], g.sub(getLhs(), getRhs()));
  grads.append({g.sub(dz[0], db), db});
  return success();
}

// d(a · b) = (dz · b, dz · a)
LogicalResult MulOp::buildVjp(OpBuilder &b, ValueRange dz, SmallVectorImpl<Value> &grads) {
  GradBuilder g(b, getLoc());
  grads.append({g.mul(dz[0], getRhs()), g.mul(dz[0], getLhs())});
  return success();
}

// d(-x) = -dy
LogicalResult NegOp::buildVjp(OpBuilder &b, ValueRange dy, SmallVectorImpl<Value> &grads) {
  grads.push_back(GradBuilder(b, getLoc()).neg(dy[0]));
  return success();
}

// stop_gradient: none (x's other uses still carry theirs)
LogicalResult StopGradientOp::buildVjp(OpBuilder &, ValueRange, SmallVectorImpl<Value> &grads) {
  grads.push_back(nullptr);
  return success();
}

// d relu(x) = dy · [x > 0]
LogicalResult ReluOp::buildVjp(OpBuilder &b, ValueRange dy, SmallVectorImpl<Value> &grads) {
  grads.push_back(b.create<ReluGradOp>(getLoc(), dy[0], getInput()));
  return success();
}

// d|x| = dy · sign(x) = relu_grad(dy, x) - relu_grad(dy, -x): 0 at x = 0,
// as torch.abs's sign(0)
LogicalResult AbsOp::buildVjp(OpBuilder &b, ValueRange dy, SmallVectorImpl<Value> &grads) {
  GradBuilder g(b, getLoc());
  Value up = b.create<ReluGradOp>(getLoc(), dy[0], getInput());
  Value down = b.create<ReluGradOp>(getLoc(), dy[0], g.neg(getInput()));
  grads.push_back(g.sub(up, down));
  return success();
}

// d x^(-1/2) = dy · (-1/2) · y³
LogicalResult RsqrtOp::buildVjp(OpBuilder &b, ValueRange dy, SmallVectorImpl<Value> &grads) {
  GradBuilder g(b, getLoc());
  Value y = getResult();
  grads.push_back(g.scale(g.mul(dy[0], g.mul(y, g.mul(y, y))), -0.5));
  return success();
}

// d sigmoid(x) = dy · y · (1 - y)
LogicalResult SigmoidOp::buildVjp(OpBuilder &b, ValueRange dy, SmallVectorImpl<Value> &grads) {
  GradBuilder g(b, getLoc());
  Value y = getResult();
  grads.push_back(g.mul(dy[0], g.mul(y, g.sub(g.splat(1.0, y.getType()), y))));
  return success();
}

// d silu(x) = silu_grad(dy, x) = dy · s · (1 + x · (1 - s)), s = sigmoid(x)
LogicalResult SiluOp::buildVjp(OpBuilder &b, ValueRange dy, SmallVectorImpl<Value> &grads) {
  grads.push_back(b.create<SiluGradOp>(getLoc(), dy[0], getInput()));
  return success();
}

// d softplus(x) = dy · sigmoid(x)
LogicalResult SoftplusOp::buildVjp(OpBuilder &b, ValueRange dy, SmallVectorImpl<Value> &grads) {
  Value s = b.create<SigmoidOp>(getLoc(), getInput());
  grads.push_back(GradBuilder(b, getLoc()).mul(dy[0], s));
  return success();
}

// d √x = dy / (2y)
LogicalResult SqrtOp::buildVjp(OpBuilder &b, ValueRange dy, SmallVectorImpl<Value> &grads) {
  GradBuilder g(b, getLoc());
  grads.push_back(g.div(dy[0], g.add(getResult(), getResult())));
  return success();
}

// d(a - b) = (dz, -dz)
LogicalResult SubOp::buildVjp(OpBuilder &b, ValueRange dz, SmallVectorImpl<Value> &grads) {
  grads.append({dz[0], GradBuilder(b, getLoc()).neg(dz[0])});
  return success();
}

// d tanh(x) = dy · (1 - y²)
LogicalResult TanhOp::buildVjp(OpBuilder &b, ValueRange dy, SmallVectorImpl<Value> &grads) {
  GradBuilder g(b, getLoc());
  Value y = getResult();
  grads.push_back(g.mul(dy[0], g.sub(g.splat(1.0, y.getType()), g.mul(y, y))));
  return success();
}

// round_fp8: straight through (dx = dy), as fp8 training differentiates its
// casts: the rounding's derivative is 0 almost everywhere, which would
// train nothing.
LogicalResult RoundFp8Op::buildVjp(OpBuilder &, ValueRange dy, SmallVectorImpl<Value> &grads) {
  grads.push_back(dy[0]);
  return success();
}

