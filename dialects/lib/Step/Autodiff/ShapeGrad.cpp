//===- ShapeGrad.cpp - VJPs of constants, dtype, shape and reduction ops --===//

#include "GradBuilder.h"

using namespace mlir;
using namespace stepc::step;

// broadcast: dx = reshape(sum of dy over the broadcast dimensions): the
// leading dimensions the operand lacks and its size-1 dimensions that grew.
LogicalResult BroadcastOp::buildVjp(OpBuilder &b, ValueRange dy, SmallVectorImpl<Value> &grads) {
  GradBuilder g(b, getLoc());
  RankedTensorType input = getInput().getType(), result = getType();
  if (!isa<FloatType>(input.getElementType())) {
    grads.push_back(nullptr);
    return success();
  }
  int64_t offset = result.getRank() - input.getRank();
  SmallVector<int64_t> dims;
  for (int64_t i = 0; i < result.getRank(); ++i)
    if (i < offset || (input.getDimSize(i - offset) == 1 && result.getDimSize(i) != 1))
      dims.push_back(i);
  grads.push_back(g.reshape(g.reduceSum(dy[0], dims), input));
  return success();
}

// concat: dx_i = slice of dy at x_i's place along dim
LogicalResult ConcatOp::buildVjp(OpBuilder &b, ValueRange dy, SmallVectorImpl<Value> &grads) {
  GradBuilder g(b, getLoc());
  int64_t dim = getDim(), offset = 0;
  RankedTensorType result = getType();
  for (Value input : getInputs()) {
    RankedTensorType type = tensorType(input);
    SmallVector<int64_t> offsets(result.getRank(), 0);
    offsets[dim] = offset;
    offset += type.getDimSize(dim);
    grads.push_back(isa<FloatType>(type.getElementType())
                        ? g.slice(dy[0], offsets, type.getShape())
                        : Value());
  }
  return success();
}

// A constant has no operands.
LogicalResult ConstantOp::buildVjp(OpBuilder &, ValueRange, SmallVectorImpl<Value> &) {
  return success();
}

// convert: dx = convert(dy) back to x's element type; none to or from
// integers and masks (a step function, or no float to reach)
LogicalResult ConvertOp::buildVjp(OpBuilder &b, ValueRange dy, SmallVectorImpl<Value> &grads) {
  RankedTensorType input = getInput().getType();
  if (!isa<FloatType>(input.getElementType()) || !isa<FloatType>(getType().getElementType()) ||
      !dy[0]) {
    grads.push_back(nullptr);
    return success();
  }
  grads.push_back(input == dy[0].getType()
                      ? dy[0]
                      : b.create<ConvertOp>(getLoc(), input, dy[0]).getResult());
  return success();
}

// iota has no operands.
LogicalResult IotaOp::buildVjp(OpBuilder &, ValueRange, SmallVectorImpl<Value> &) {
  return success();
}

// argmax: an index, a step function of the input: no gradient.
LogicalResult ArgmaxOp::buildVjp(OpBuilder &, ValueRange, SmallVectorImpl<Value> &grads) {
  grads.push_back(nullptr);
  return success();
}

// gather: dx = gather_grad(dy, index) (a scatter-add into x's shape); none
// for the index
LogicalResult GatherOp::buildVjp(OpBuilder &b, ValueRange dy, SmallVectorImpl<Value> &grads) {
  int64_t size = getInput().getType().getDimSize(getDim());
  grads.push_back(b.create<GatherGradOp>(getLoc(), dy[0], getIndex(), getDimAttr(),
                                         b.getI64IntegerAttr(size)));
  grads.push_back(nullptr);
  return success();
}

// pad: dx = slice(dy, low, shape(x))
LogicalResult PadOp::buildVjp(OpBuilder &b, ValueRange dy, SmallVectorImpl<Value> &grads) {
  grads.push_back(GradBuilder(b, getLoc()).slice(dy[0], getLow(), getInput().getType().getShape()));
  return success();
}

/// dy of a reduction, with the reduced dimensions put back as size 1.
static Value keepDims(GradBuilder &g, Value dy, RankedTensorType input,
                      ArrayRef<int64_t> dims) {
  SmallVector<int64_t> shape(input.getShape());
  for (int64_t dim : dims)
    shape[dim] = 1;
  return g.reshape(dy, RankedTensorType::get(shape, input.getElementType()));
}

// reduce_max: dx = reduce_max_grad(dy, x) (ties share the gradient)
LogicalResult ReduceMaxOp::buildVjp(OpBuilder &b, ValueRange dy, SmallVectorImpl<Value> &grads) {
  grads.push_back(b.create<ReduceMaxGradOp>(getLoc(), dy[0], getInput(), getDimsAttr(),
                                            getKeepDimsAttr()));
  return success();
}

// reduce_mean: dx = broadcast(dy) / N, N the number of reduced elements
LogicalResult ReduceMeanOp::buildVjp(OpBuilder &b, ValueRange dy, SmallVectorImpl<Value> &grads) {
  GradBuilder g(b, getLoc());
  RankedTensorType input = getInput().getType();
  int64_t count = 1;
  for (int64_t dim : getDims())
    count *= input.getDimSize(dim);
  Value spread = g.broadcast(keepDims(g, dy[0], input, getDims()), input);
  grads.push_back(g.scale(spread, 1.0 / static_cast<double>(count)));
  return success();
}

// reduce_sum: dx = broadcast(dy)
LogicalResult ReduceSumOp::buildVjp(OpBuilder &b, ValueRange dy, SmallVectorImpl<Value> &grads) {
  GradBuilder g(b, getLoc());
  RankedTensorType input = getInput().getType();
  grads.push_back(g.broadcast(keepDims(g, dy[0], input, getDims()), input));
  return success();
}

// reshape: dx = reshape(dy) back
LogicalResult ReshapeOp::buildVjp(OpBuilder &b, ValueRange dy, SmallVectorImpl<Value> &grads) {
  RankedTensorType input = getInput().getType();
  grads.push_back(isa<FloatType>(input.getElementType())
                      ? GradBuilder(b, getLoc()).reshape(dy[0], input)
                      : Value());
  return success();
}

// slice: dx = pad(dy) with zeros around the slice
LogicalResult SliceOp::buildVjp(OpBuilder &b, ValueRange dy, SmallVectorImpl<Value> &grads) {
  RankedTensorType input = getInput().getType();
  if (!isa<FloatType>(input.getElementType())) {
    grads.push_back(nullptr);
    return success();
  }
  SmallVector<int64_t> high;
  for (int64_t i = 0; i < input.getRank(); ++i)
    high.push_back(input.getDimSize(i) - getOffsets()[i] - getSizes()[i]);
  grads.push_back(GradBuilder(b, getLoc()).pad(dy[0], getOffsets(), high));
  return success();
}

// transpose: dx = transpose(dy, inverse permutation)
LogicalResult TransposeOp::buildVjp(OpBuilder &b, ValueRange dy, SmallVectorImpl<Value> &grads) {
  RankedTensorType input = getInput().getType();
  if (!isa<FloatType>(input.getElementType())) {
    grads.push_back(nullptr);
    return success();
  }
  SmallVector<int64_t> inverse(getPermutation().size());
  for (auto [i, dim] : llvm::enumerate(getPermutation()))
    inverse[dim] = i;
  grads.push_back(GradBuilder(b, getLoc()).transpose(dy[0], inverse));
  return success();
}
